import type { EventStore } from '../../domain/eventStore.js';
import { PostgresEventStore } from './postgres/postgresEventStore.js';

export { PostgresEventStore, type PostgresEventStoreOptions } from './postgres/postgresEventStore.js';

export interface EventStoreOptions {
  databaseUrl: string;
  /** Set = KurrentDB/EventStoreDB (`kurrentdb://...` or `esdb://...`) instead of PostgreSQL. */
  eventstoreUrl: string | null;
  /** PostgreSQL pool size. */
  poolSize?: number;
  /**
   * PostgreSQL: the deadline of appends and reads (DATABASE_QUERY_TIMEOUT_MS; default
   * QUERY_TIMEOUT_MS). null: reads have none (`npm run replay`), appends keep the default.
   */
  queryTimeoutMs?: number | null;
}

/**
 * The configured event store, initialised (schema created / server reached). The KurrentDB adapter
 * is loaded only when it is configured: its gRPC client adds ~0.2 s to the start of every process
 * and ~8 MB to its heap.
 */
export async function createEventStore(opts: EventStoreOptions): Promise<EventStore> {
  const store = opts.eventstoreUrl
    ? new (await import('./kurrentdb/kurrentEventStore.js')).KurrentEventStore(opts.eventstoreUrl)
    : new PostgresEventStore(opts.databaseUrl, { poolSize: opts.poolSize, appendTimeoutMs: opts.queryTimeoutMs ?? undefined, readTimeoutMs: opts.queryTimeoutMs });
  try {
    await store.init();
  } catch (err) {
    await store.close().catch(() => undefined);
    throw err;
  }
  return store;
}
