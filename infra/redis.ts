import { Redis } from 'ioredis';

/**
 * Redis connections. Quota and request-limit checks use a connection that fails fast (no offline
 * queue, short command timeout) so an unavailable Redis degrades to "unknown" instead of hanging a
 * send; BullMQ gets its own connections with maxRetriesPerRequest: null as it requires.
 */
export function createFastRedis(url: string): Redis {
  return new Redis(url, {
    enableOfflineQueue: false,
    commandTimeout: 250,
    maxRetriesPerRequest: 0,
    connectTimeout: 1000,
    retryStrategy: (times) => Math.min(times * 200, 2000),
    lazyConnect: false,
  });
}

export function createQueueRedis(url: string): Redis {
  return new Redis(url, { maxRetriesPerRequest: null, enableReadyCheck: true });
}

/** Connection options for BullMQ (it opens and owns its own connections from these). */
export function bullConnection(url: string): { url: string; maxRetriesPerRequest: null } {
  return { url, maxRetriesPerRequest: null };
}
