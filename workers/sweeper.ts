import type { Knex } from 'knex';
import type { Queue } from 'bullmq';
import type { Logger } from '../infra/logger';
import { findStalledMessageIds } from '../projections/messages/stalled';
import type { DeliveryJob } from './queue';

/**
 * The safety net under the enqueuer: if Redis lost jobs (restart without persistence, eviction)
 * or a job failed for good, the message would wait forever. Every few minutes the sweeper asks the
 * messages read model for recipients that should have moved on and queues a delivery round for
 * them (job id per message and sweep window, so sweeps do not pile up).
 */
export class DeliverySweeper {
  constructor(
    private readonly db: Knex,
    private readonly queue: Queue<DeliveryJob>,
    private readonly logger: Logger,
    private readonly opts: { everyMs: number; stalledAfterMs: number } = { everyMs: 5 * 60_000, stalledAfterMs: 15 * 60_000 },
  ) {}

  async sweepOnce(now = new Date()): Promise<number> {
    const ids = await findStalledMessageIds(this.db, now, this.opts.stalledAfterMs, 1000);
    if (ids.length === 0) return 0;
    const window = Math.floor(now.getTime() / this.opts.everyMs);
    await this.queue.addBulk(ids.map((messageId) => ({ name: 'deliver', data: { messageId }, opts: { jobId: `${messageId}-sweep-${window}` } })));
    this.logger.warn({ count: ids.length }, 'sweeper re-queued stalled messages');
    return ids.length;
  }

  async run(signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, this.opts.everyMs);
        signal.addEventListener('abort', () => { clearTimeout(t); resolve(); }, { once: true });
      });
      if (signal.aborted) return;
      try {
        await this.sweepOnce();
      } catch (err) {
        this.logger.error({ err }, 'delivery sweep failed');
      }
    }
  }
}
