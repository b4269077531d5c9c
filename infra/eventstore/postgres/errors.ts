import { EventStoreUnavailableError } from '../../../domain/eventStore.js';

const NETWORK_CODES = new Set([
  'ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'ENOTFOUND', 'EHOSTUNREACH', 'ENETUNREACH', 'EAI_AGAIN',
]);
/** SQLSTATEs meaning "the server is not there for us right now" rather than "your request is wrong". */
const UNAVAILABLE_SQLSTATES = new Set(['57P01', '57P02', '57P03', '53300', '53400']);
// `timeout expired`: node-postgres's own connect timeout (connectionTimeoutMillis), as knex's pool,
// which connects its clients itself, passes it on (pg-pool words it "Connection terminated ...").
const UNAVAILABLE_MESSAGES = /Connection terminated|timeout exceeded when trying to connect|^timeout expired$|Cannot use a pool after calling end|Client has encountered a connection error|Client was closed|connection is closed|not queryable/i;

export function isUnavailable(err: unknown): boolean {
  if (err instanceof EventStoreUnavailableError) return true;
  if (!(err instanceof Error)) return false;
  const code = (err as { code?: unknown }).code;
  if (typeof code === 'string') {
    if (NETWORK_CODES.has(code) || UNAVAILABLE_SQLSTATES.has(code)) return true;
    // Class 08: connection exception.
    if (/^08[0-9A-Z]{3}$/.test(code)) return true;
  }
  return UNAVAILABLE_MESSAGES.test(err.message);
}

/** Connection failures become EventStoreUnavailableError (503 at the edges); anything else is kept. */
export function toStoreError(err: unknown): unknown {
  if (err instanceof EventStoreUnavailableError) return err;
  if (isUnavailable(err)) return new EventStoreUnavailableError(`PostgreSQL event store unavailable: ${(err as Error).message}`, err);
  return err;
}
