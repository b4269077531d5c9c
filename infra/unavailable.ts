import { EventStoreUnavailableError } from '../domain/eventStore';
import { isDatabaseTimeout } from './db';
import { isUnavailable } from './eventstore/postgres/errors';

/**
 * The code of an error that says the database or the event store is away or did not answer in
 * time (infra/db.ts QUERY_TIMEOUT_MS), null for any other. With the default store the database IS
 * the event store: `event_store_unavailable`; with EVENTSTORE_URL a failure outside the store is
 * the read models' database: `database_unavailable`. The HTTP and agent-tool edges answer 503 with
 * it, the send refusal counters count it, and the operator CLI reports it in one line.
 */
export function unavailableCode(err: unknown, eventstoreUrl: string | null | undefined): 'event_store_unavailable' | 'database_unavailable' | null {
  if (err instanceof EventStoreUnavailableError) return 'event_store_unavailable';
  if (!isUnavailable(err) && !isDatabaseTimeout(err)) return null;
  return eventstoreUrl ? 'database_unavailable' : 'event_store_unavailable';
}
