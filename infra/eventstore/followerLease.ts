import type { Knex } from 'knex';
import type { EventStore } from '../../domain/eventStore';
import { runAlone } from '../lease';
import type { Logger } from '../logger';
import type { Metrics } from '../metrics';
import { followLog, type LogFollower } from './followLog';

/**
 * One process at a time per log follower (the enqueuers, the webhook dispatcher, the pause
 * notices): every worker process runs them all, and without a lease each read the whole log and
 * did its work once per process, kept correct only by idempotency (stable job ids, Idempotency-Keys).
 *
 * The lease of follower `x` is the session advisory lock `motor.follower:x` (infra/lease.ts, which
 * the projections' leases share; infra/db.ts names its locks the same way). A process standing by
 * takes over from the shared checkpoint row: at least once, as after a restart. A batch under way
 * when the lease is lost may still finish while the next holder starts, which the followers'
 * idempotency covers.
 */

/** The advisory lock of a follower's lease. */
export const followerLockName = (follower: string): string => `motor.follower:${follower}`;

export type FollowerMetrics = Pick<Metrics, 'logFollowerLeader'>;

export interface LeaseDeps {
  /** The pool whose connection holds the leases. */
  db: Knex;
  store: EventStore;
  logger: Logger;
  /** motor_log_follower_leader; tests may go without. */
  metrics?: FollowerMetrics;
}

/**
 * followLog in one process at a time: stands by until it holds the follower's lease, follows the
 * log while it does, and stands by again when it loses it. Runs until `signal` aborts, then gives
 * the lease up (the next holder need not wait for this process's session to end).
 */
export function followLogAlone(deps: LeaseDeps, follower: LogFollower, signal: AbortSignal): Promise<void> {
  const log = { follower: follower.name };
  const { stopped } = follower;
  return runAlone(deps.db, deps.logger, {
    lock: followerLockName(follower.name),
    log,
    says: {
      took: 'took a log follower\'s lease: it follows the log in this process',
      lost: 'lost a log follower\'s lease (its session ended): stopped following, standing by',
      unreachable: 'could not try to take a log follower\'s lease; standing by',
    },
    retryMs: follower.leaseRetryMs,
    leading: (held) => deps.metrics?.logFollowerLeader.set(log, held ? 1 : 0),
    run: (running) => followLog(deps.store, deps.logger, follower, running),
    stopped: stopped && (() => stopped().catch((err) => deps.logger.warn({ err, ...log }, 'a log follower could not write its checkpoint as it stopped'))),
  }, signal);
}
