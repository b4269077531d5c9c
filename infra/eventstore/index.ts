import type { EventStore } from '../../domain/eventStore.js';
import { PostgresEventStore } from './postgres/postgresEventStore.js';

export { PostgresEventStore, type PostgresEventStoreOptions } from './postgres/postgresEventStore.js';

export interface EventStoreOptions {
  databaseUrl: string;
  /** Set = KurrentDB/EventStoreDB (`kurrentdb://...` or `esdb://...`) instead of PostgreSQL. */
  eventstoreUrl: string | null;
  /** PostgreSQL pool size. */
  poolSize?: number;
}

/**
 * The configured event store, initialised (schema created / server reached). The KurrentDB adapter
 * is loaded only when it is configured: its gRPC client adds ~0.2 s to the start of every process
 * and ~8 MB to its heap.
 */
export async function createEventStore(opts: EventStoreOptions): Promise<EventStore> {
  const store = opts.eventstoreUrl
    ? new (await import('./kurrentdb/kurrentEventStore.js')).KurrentEventStore(opts.eventstoreUrl)
    : new PostgresEventStore(opts.databaseUrl, { poolSize: opts.poolSize });
  try {
    await store.init();
  } catch (err) {
    await store.close().catch(() => undefined);
    throw err;
  }
  return store;
}
