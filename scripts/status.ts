import type { Knex } from 'knex';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import type { EventStore } from '../domain/eventStore';
import { allProjections } from '../projections';
import { ProjectionRunner, projectionLeaseName } from '../projections/runner';
import { leaseHolders, type LeaseHolder } from '../infra/lease';
import { followerLockName } from '../infra/eventstore/followerLease';
import { LOG_FOLLOWERS } from '../workers/followers';
import { bullConnection } from '../infra/redis';
import { DELIVERY_QUEUE } from '../workers/queue';
import { WEBHOOK_QUEUE } from '../workers/webhooks/worker';
import { EXPORT_QUEUE } from '../workers/exports';
import { CAMPAIGN_QUEUE } from '../workers/campaigns';
import { BLOCK_DELETION_QUEUE } from '../workers/blockDeletion';
import { CHECKPOINTS } from '../workers/logEnqueuer';

/**
 * What an operator looks at first (`npm run cli -- status`): can the event store and Redis be
 * reached, how far behind the log each read model is, how many jobs each queue holds in each
 * state (a growing `failed` or `waiting` is where an incident shows), and which process holds each
 * lease (which worker process follows the log for a queue, which projector process applies a
 * read model). Reads only.
 */

export interface ProjectionStatus {
  name: string;
  /** The last log position applied; null before the first event. */
  checkpoint: string | null;
  /** Events of the types it handles not applied yet (counted up to 10,000: `capped` past that). */
  eventsBehind: number;
  capped: boolean;
  /** Age of the oldest event not applied yet; 0 when caught up. */
  secondsBehind: number;
  /** Set when its read model could not be read (e.g. never migrated: no projector has run it yet). */
  error?: string;
}

/** A log follower that feeds a queue (the enqueuers, the webhook dispatcher): where it is in the log, and when it last moved. */
export interface ConsumerStatus { name: string; checkpoint: string | null; updatedAt: string }

/**
 * A lease (infra/lease.ts): a log follower's, held by one worker process, or a projection's, held
 * by one projector process. Not held: no process runs that work now (none of that role is
 * running, or the moment of a takeover).
 */
export interface LeaseStatus {
  kind: 'follower' | 'projection';
  /** The follower's or the projection's name. */
  name: string;
  /** The advisory lock (`motor.follower:<name>`, `motor.projector:<name>`), keyed by hashtextextended(lock, 0). */
  lock: string;
  held: boolean;
  holder: LeaseHolder | null;
}

export type QueueCounts = Record<'waiting' | 'active' | 'delayed' | 'prioritized' | 'waiting-children' | 'failed' | 'completed', number>;

export interface SystemStatus {
  /** Store and Redis reachable, every read model readable. Lag is reported, not judged. */
  ok: boolean;
  store: { ok: boolean; error?: string };
  projections: ProjectionStatus[];
  /** Empty before a worker role first ran. */
  consumers: ConsumerStatus[];
  redis: { ok: boolean; error?: string };
  /** Per queue (by its name); empty when Redis cannot be reached. */
  queues: Record<string, QueueCounts>;
  /** Every follower's lease, then every projection's. Reported, not judged (`ok` does not look at them). */
  leases: LeaseStatus[];
}

export const QUEUE_NAMES = [DELIVERY_QUEUE, WEBHOOK_QUEUE, EXPORT_QUEUE, CAMPAIGN_QUEUE, BLOCK_DELETION_QUEUE] as const;
const STATES = ['waiting', 'active', 'delayed', 'prioritized', 'waiting-children', 'failed', 'completed'] as const;
/** A Redis that does not answer within this is reported down (the CLI must not hang on it). */
const REDIS_TIMEOUT_MS = 2000;

const message = (err: unknown): string => (err instanceof Error ? err.message : String(err));

export async function systemStatus(deps: { db: Knex; store: EventStore; redisUrl: string; queuePrefix: string }): Promise<SystemStatus> {
  const store = await deps.store.ping().then(() => ({ ok: true }), (err: unknown) => ({ ok: false, error: message(err) }));
  const projections: ProjectionStatus[] = [];
  for (const p of allProjections()) {
    const runner = new ProjectionRunner(deps.db, deps.store, p);
    try {
      const checkpoint = await runner.checkpoint();
      const lag = await runner.lag();
      projections.push({ name: p.name, checkpoint, eventsBehind: lag.eventsBehind, capped: lag.capped, secondsBehind: Math.round(lag.secondsBehind) });
    } catch (err) {
      // 42P01: its schema was never created, i.e. no projector has run on this database yet.
      const error = (err as { code?: string }).code === '42P01' ? 'read model not created: no projector has run it on this database yet' : message(err);
      projections.push({ name: p.name, checkpoint: null, eventsBehind: 0, capped: false, secondsBehind: 0, error });
    }
  }
  const consumers = await consumerStatus(deps.db);
  const { redis, queues } = await queueStatus(deps.redisUrl, deps.queuePrefix);
  const leases = await leaseStatus(deps.db);
  return { ok: store.ok && redis.ok && projections.every((p) => p.error === undefined), store, projections, consumers, redis, queues, leases };
}

async function leaseStatus(db: Knex): Promise<LeaseStatus[]> {
  const wanted = [
    ...LOG_FOLLOWERS.map((name) => ({ kind: 'follower' as const, name, lock: followerLockName(name) })),
    ...allProjections().map((p) => ({ kind: 'projection' as const, name: p.name, lock: projectionLeaseName(p.name) })),
  ];
  const holders = await leaseHolders(db, wanted.map((w) => w.lock));
  return wanted.map((w) => {
    const holder = holders.get(w.lock) ?? null;
    return { ...w, held: holder !== null, holder };
  });
}

async function consumerStatus(db: Knex): Promise<ConsumerStatus[]> {
  try {
    const rows = await db.table(CHECKPOINTS).orderBy('name').select('name', 'position', 'updated_at') as Array<{ name: string; position: string | null; updated_at: Date }>;
    return rows.map((r) => ({ name: r.name, checkpoint: r.position, updatedAt: r.updated_at.toISOString() }));
  } catch (err) {
    if ((err as { code?: string }).code === '42P01') return []; // no worker role has run on this database yet
    throw err;
  }
}

async function queueStatus(redisUrl: string, prefix: string): Promise<Pick<SystemStatus, 'redis' | 'queues'>> {
  // A plain connection first, failing fast: BullMQ's own connections retry for ever.
  const probe = new Redis(redisUrl, { lazyConnect: true, enableOfflineQueue: false, maxRetriesPerRequest: 0, connectTimeout: REDIS_TIMEOUT_MS, commandTimeout: REDIS_TIMEOUT_MS, retryStrategy: () => null });
  probe.on('error', () => undefined);
  try {
    await probe.connect();
    await probe.ping();
  } catch (err) {
    return { redis: { ok: false, error: message(err) }, queues: {} };
  } finally {
    probe.disconnect();
  }
  const queues: Record<string, QueueCounts> = {};
  for (const name of QUEUE_NAMES) {
    const queue = new Queue(name, { connection: bullConnection(redisUrl), prefix });
    try {
      const counts = await queue.getJobCounts(...STATES);
      queues[name] = Object.fromEntries(STATES.map((s) => [s, counts[s] ?? 0])) as QueueCounts;
    } finally {
      await queue.close();
    }
  }
  return { redis: { ok: true }, queues };
}
