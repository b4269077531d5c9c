import type { EventStore } from '../../domain/eventStore.js';
import { KurrentEventStore } from './kurrentdb/kurrentEventStore.js';
import { PostgresEventStore } from './postgres/postgresEventStore.js';

export { KurrentEventStore } from './kurrentdb/kurrentEventStore.js';
export { PostgresEventStore, type PostgresEventStoreOptions } from './postgres/postgresEventStore.js';

export interface EventStoreOptions {
  databaseUrl: string;
  /** Set = KurrentDB/EventStoreDB (`kurrentdb://...` or `esdb://...`) instead of PostgreSQL. */
  eventstoreUrl: string | null;
  /** PostgreSQL pool size. */
  poolSize?: number;
}

/** The configured event store, initialised (schema created / server reached). */
export async function createEventStore(opts: EventStoreOptions): Promise<EventStore> {
  const store = opts.eventstoreUrl
    ? new KurrentEventStore(opts.eventstoreUrl)
    : new PostgresEventStore(opts.databaseUrl, { poolSize: opts.poolSize });
  try {
    await store.init();
  } catch (err) {
    await store.close().catch(() => undefined);
    throw err;
  }
  return store;
}
