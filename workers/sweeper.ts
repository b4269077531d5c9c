import type { Knex } from 'knex';
import type { Queue } from 'bullmq';
import type { Logger } from '../infra/logger';
import { sleep } from '../infra/sleep';
import { findStalledMessages } from '../projections/messages/stalled';
import type { DeliveryJob } from './queue';

/**
 * The safety net under the enqueuer: if Redis lost jobs (restart without persistence, eviction)
 * or a job failed for good, the message would wait forever. Every few minutes the sweeper asks the
 * messages read model for recipients that should have moved on and queues a delivery round for
 * them (job id per message and sweep window, so sweeps do not pile up). The job carries the
 * message's contentBytes when the read model has it, as the enqueuer's do, so it waits for room in
 * the delivery memory budget before reading the message (docs/DELIVERY.md).
 *
 * The first sweep comes soon after start (firstSweepDelayMs), not a whole interval later: the
 * timer starts again with every worker process, so a worker restarted more often than `everyMs`
 * never swept (after a Redis wipe a message waited 24 minutes). Sweeping early is as safe as any
 * other moment: only recipients with no event for `stalledAfterMs` (15 min, past the 10 min an
 * attempt may stay in flight, IN_FLIGHT_STALE_MS) are picked, and the round a sweep queues folds
 * the stream and leaves an attempt still in flight alone (planDelivery waits for it).
 */
export interface SweeperOptions {
  everyMs: number;
  stalledAfterMs: number;
  /** Delay before the first sweep; firstSweepDelayMs() when absent. */
  firstSweepAfterMs?: number;
}

/** The first sweep's delay: 30 to 60 s (spread, so workers started together do not sweep together). */
export function firstSweepDelayMs(random: () => number = Math.random): number {
  return 30_000 + Math.floor(random() * 30_000);
}

export class DeliverySweeper {
  private readonly opts: Required<SweeperOptions>;

  constructor(
    private readonly db: Knex,
    private readonly queue: Queue<DeliveryJob>,
    private readonly logger: Logger,
    opts: SweeperOptions = { everyMs: 5 * 60_000, stalledAfterMs: 15 * 60_000 },
  ) {
    this.opts = { ...opts, firstSweepAfterMs: opts.firstSweepAfterMs ?? firstSweepDelayMs() };
  }

  async sweepOnce(now = new Date()): Promise<number> {
    const stalled = await findStalledMessages(this.db, now, this.opts.stalledAfterMs, 1000);
    if (stalled.length === 0) return 0;
    const window = Math.floor(now.getTime() / this.opts.everyMs);
    await this.queue.addBulk(stalled.map(({ messageId, contentBytes }) => ({
      name: 'deliver',
      data: contentBytes === null ? { messageId } : { messageId, contentBytes },
      opts: { jobId: `${messageId}-sweep-${window}` },
    })));
    this.logger.warn({ count: stalled.length }, 'sweeper re-queued stalled messages');
    return stalled.length;
  }

  async run(signal: AbortSignal): Promise<void> {
    let wait = this.opts.firstSweepAfterMs;
    while (!signal.aborted) {
      await sleep(wait, signal);
      if (signal.aborted) return;
      wait = this.opts.everyMs;
      try {
        await this.sweepOnce();
      } catch (err) {
        this.logger.error({ err }, 'delivery sweep failed');
      }
    }
  }
}

