import { Queue } from 'bullmq';
import { bullConnection } from '../infra/redis';

/** The delivery queue: one job per message, and per retry time of its deferrals; job ids are stable (see jobIdFor). */
export const DELIVERY_QUEUE = 'motor-delivery';

export interface DeliveryJob {
  messageId: string;
  /**
   * The message's content bytes: MessageAccepted's on a first attempt's job, DeliveryDeferred's on
   * a retry's, the messages read model's on the sweeper's. With it the worker waits for room before
   * reading the message; absent on jobs from older events, and on the sweeper's when the read
   * model's row has no size (made before its content_bytes column, until a replay).
   */
  contentBytes?: number;
}

/** `prefix` namespaces the queue's Redis keys (one Redis can serve several Motor installations or test runs). */
export function createDeliveryQueue(redisUrl: string, prefix = 'motor'): Queue<DeliveryJob> {
  return new Queue<DeliveryJob>(DELIVERY_QUEUE, {
    connection: bullConnection(redisUrl),
    prefix,
    defaultJobOptions: {
      // A job that throws (store or DNS trouble, not a delivery outcome) is retried with backoff.
      attempts: 8,
      backoff: { type: 'exponential', delay: 2000 },
      // Kept for a week so a replayed event finds its job id taken and enqueues nothing twice.
      removeOnComplete: { age: 7 * 24 * 3600, count: 1_000_000 },
      removeOnFail: { age: 30 * 24 * 3600 },
    },
  });
}

/**
 * First attempt: the message id. A retry after a deferral: message id, attempt number and the
 * time it is due (ms), so the deferrals appended together (one domain, or one round's) share one
 * job, and a deferral appended later in the same round (another domain) gets its own.
 */
export const jobIdFor = (messageId: string, retry?: { attempt: number; nextAttemptAt: string }): string =>
  retry === undefined ? messageId : `${messageId}-retry-${retry.attempt}-${Date.parse(retry.nextAttemptAt)}`;
