import { hostname } from 'node:os';
import knex, { type Knex } from 'knex';
import PgClient from 'knex/lib/dialects/postgres/index.js';
import type pg from 'pg';
import type { Logger } from './logger';
import { within } from './within';

/**
 * Startup options of every Motor connection to PostgreSQL: JIT compilation off. Motor's statements
 * are index probes, upserts and rollup reads of a few thousand rows that run in well under a
 * millisecond to a few milliseconds; JIT triggers on the planner's cost estimate, which on a table
 * without statistics is inflated enough to compile a 0.2 ms lookup for ~90 ms (measured,
 * docs/PROJECTIONS.md). An `options` parameter in DATABASE_URL replaces this (pg lets the URL win).
 */
export const SESSION_OPTIONS = '-c jit=off';

/**
 * Longest wait, by default, for PostgreSQL to answer one statement, and for a connection to it
 * (DATABASE_QUERY_TIMEOUT_MS). Motor's statements answer in milliseconds; a server that stops
 * answering without closing the connection (a frozen host, a network black hole) would otherwise
 * keep the caller waiting for as long as the operating system keeps the connection: the request,
 * the loop, and the pooled connection it holds. docs/OPERATIONS.md "Database deadlines".
 */
export const QUERY_TIMEOUT_MS = 10_000;

/**
 * The deadline of background statements that are bounded but may take far longer than a request's
 * on a big or busy database: the deletes of a projection batch whose size is the data's, not the
 * batch's (every row of a deleted block, docs/BLOCKS.md; every contact of a deleted list:
 * withLongStatements), the retention sweep's deletes (up to RETENTION_SWEEP_BATCH rows each) and
 * the pages of an export (withQueryTimeout). Cut at 10 s, such a statement would be cut again on
 * every retry and the work would never get done; this only ends a hang.
 */
export const LONG_QUERY_TIMEOUT_MS = 30 * 60_000;

/**
 * TCP keepalive on every connection to PostgreSQL, first probe after 30 s of silence. The
 * statements that have no deadline (migrations and set-up, `npm run replay`) would otherwise wait
 * for ever on a server whose host died or was cut off by the network while they ran; with it, the
 * kernel ends such a connection once its probes go unanswered (Linux: 9 probes 75 s apart), the
 * statement fails and its caller reports it. It also keeps idle pooled connections known to the
 * NAT gateways and firewalls on the way. A server that is frozen but whose kernel still answers is
 * what the statement deadlines are for.
 */
export const TCP_KEEPALIVE = { keepAlive: true, keepAliveInitialDelayMillis: 30_000 } as const;

/** A knex configuration with the statement deadline of its instance (null: none). */
interface DeadlineConfig extends Knex.Config {
  queryTimeoutMs: number | null;
}

/**
 * Connections given up at a statement's deadline, with that deadline. node-postgres answers a
 * connection's statements in order, so one whose statement went unanswered cannot serve another:
 * it is ended at once (with a statement in flight, node-postgres destroys the socket), the pool
 * refuses it when it is next lent, and whatever its transaction still sends on it fails at once.
 */
const abandoned = new WeakMap<pg.Client, number>();

/** Connections whose statements have LONG_QUERY_TIMEOUT_MS for now (withLongStatements). */
const lengthened = new WeakSet<pg.Client>();

/** A statement PostgreSQL did not answer within its deadline; the connection it was sent on was dropped. */
export class QueryTimeoutError extends Error {
  /** `unsent`: this statement was refused because an earlier one on its connection went unanswered. */
  constructor(readonly timeoutMs: number, unsent = false) {
    super(unsent
      ? `Not sent: an earlier statement on its connection went unanswered for ${timeoutMs} ms, and the connection was dropped`
      : `PostgreSQL did not answer within ${timeoutMs} ms; the connection was dropped`);
    this.name = 'QueryTimeoutError';
  }
}

/**
 * Whether `err` is a wait for PostgreSQL given up: a statement past its deadline, or knex's own
 * timeouts (no pooled connection came free in time). The edges answer both with 503, as a
 * connection refused (read-api/http/errors.ts).
 */
export function isDatabaseTimeout(err: unknown): boolean {
  return err instanceof QueryTimeoutError || (err as { name?: unknown } | null)?.name === 'KnexTimeoutError';
}

/** knex's PostgreSQL client with a deadline on every statement, set per instance (withQueryTimeout). */
class PgClientWithDeadline extends PgClient {
  override _query(connection: pg.Client, obj: { sql: string; bindings?: unknown[] }): Promise<unknown> {
    const given = abandoned.get(connection);
    if (given !== undefined) {
      // The server rolls back the transaction of a connection that goes: the ROLLBACK is done, and
      // the transaction fails with the error of the statement that went unanswered, not with this.
      if (/^ROLLBACK\b/i.test(obj.sql)) return Promise.resolve(obj);
      return Promise.reject(new QueryTimeoutError(given, true));
    }
    const own = (this.config as DeadlineConfig).queryTimeoutMs;
    const ms = own !== null && lengthened.has(connection) ? Math.max(own, LONG_QUERY_TIMEOUT_MS) : own;
    const answer = super._query(connection, obj);
    if (ms === null) return answer;
    return within(ms, answer, () => {
      abandoned.set(connection, ms);
      connection.end().catch(() => undefined);
      return new QueryTimeoutError(ms);
    });
  }
}

/**
 * knex's own messages (`Acquire connection error`, `Connection Error: Connection ended
 * unexpectedly`, deprecations) as lines of the process's JSON log: knex writes them with
 * console.log otherwise, plain text in the middle of that log (and of a command's JSON output).
 */
function knexLog(logger: Logger): Knex.Config['log'] {
  return {
    warn: (message: unknown) => logger.warn({ knex: message }, 'knex warning'),
    error: (message: unknown) => logger.error({ knex: message }, 'knex error'),
    // Called with the one message knex composed ("x is deprecated, please use y"; knex/lib/logger.js), not as typed.
    deprecate: ((message: unknown) => logger.warn({ knex: message }, 'knex deprecation')) as unknown as (method: string, alternative: string) => void,
    debug: (message: unknown) => logger.debug({ knex: message }, 'knex debug'),
  };
}

/** PostgreSQL keeps this much of an application_name (NAMEDATALEN - 1 bytes) and cuts the rest. */
const APPLICATION_NAME_BYTES = 63;

/**
 * The application_name of a process's connections, `<label>@<host>:<pid>` (`motor-projector@db-2:4711`):
 * what pg_stat_activity, and with it `npm run cli -- status`, says of the session holding a lease,
 * so that an operator knows which process to look at or stop. Every process of a deployment
 * connects as the same user from hosts that may share an address (containers), so without it the
 * sessions of different processes could not be told apart. A long host name is shortened, never
 * the pid: PostgreSQL would cut the end.
 */
export function processApplicationName(label: string, host: string = hostname(), pid: number = process.pid): string {
  const tail = `:${pid}`;
  const room = APPLICATION_NAME_BYTES - Buffer.byteLength(`${label}@${tail}`);
  let h = host;
  while (Buffer.byteLength(h) > Math.max(0, room)) h = h.slice(0, -1);
  return `${label}@${h}${tail}`.slice(0, APPLICATION_NAME_BYTES);
}

/**
 * One knex pool per process; read models and (by default) the event store share the database.
 * Every statement has `queryTimeoutMs` to be answered (null: no deadline); waiting for a pooled
 * connection, or for a new one to connect, is bounded the same way (QUERY_TIMEOUT_MS without one).
 * knex's own messages go to `logger` (without one, to the console, as knex does).
 */
export function createDb(
  databaseUrl: string,
  options: { pool?: { min: number; max: number }; applicationName?: string; queryTimeoutMs?: number | null; logger?: Logger } = {},
): Knex {
  const queryTimeoutMs = options.queryTimeoutMs === undefined ? QUERY_TIMEOUT_MS : options.queryTimeoutMs;
  const waitMs = queryTimeoutMs ?? QUERY_TIMEOUT_MS;
  const config: DeadlineConfig = {
    client: PgClientWithDeadline,
    connection: {
      connectionString: databaseUrl, application_name: options.applicationName ?? 'motor', options: SESSION_OPTIONS,
      connectionTimeoutMillis: waitMs, ...TCP_KEEPALIVE,
    },
    pool: { ...(options.pool ?? { min: 0, max: 10 }), validate: (connection: pg.Client) => !abandoned.has(connection) },
    acquireConnectionTimeout: waitMs,
    queryTimeoutMs,
    ...(options.logger ? { log: knexLog(options.logger) } : {}),
  };
  return knex(config);
}

/**
 * `db` with another statement deadline (null: none), on the same pool, for work whose statements
 * are long by nature (withSetupLock; see LONG_QUERY_TIMEOUT_MS). Waiting for a connection stays
 * bounded by the pool's own wait.
 */
export function withQueryTimeout(db: Knex, queryTimeoutMs: number | null): Knex {
  const other = db.withUserParams({ ...db.userParams });
  (other.client.config as DeadlineConfig).queryTimeoutMs = queryTimeoutMs;
  return other;
}

/**
 * Runs `fn` with the statements `trx` sends meanwhile under LONG_QUERY_TIMEOUT_MS (none if its
 * instance has none). The transaction's BEGIN and COMMIT keep the instance's deadline: a pooled
 * connection whose server stopped answering (or forgot it) is found at BEGIN within seconds, and
 * not after the long deadline, when `fn` is what may take long.
 */
export async function withLongStatements<T>(trx: Knex.Transaction, fn: () => Promise<T>): Promise<T> {
  const connection = (await trx.client.acquireConnection()) as pg.Client;
  lengthened.add(connection);
  try {
    return await fn();
  } finally {
    lengthened.delete(connection);
  }
}

/**
 * Runs `fn` in a transaction that first takes the transaction-scoped advisory lock named `name`
 * (by convention the schema being set up). Start-up set-up (CREATE ... IF NOT EXISTS, projection
 * migrations) is not safe when several processes run it at once: two creators both find nothing
 * and one fails on a catalogue unique index ("pg_type_typname_nsp_index"). Under the lock the
 * later processes wait, then find everything made; the DDL commits as the lock is released. The
 * event store's schema does the same on its own connection (infra/eventstore/postgres/schema.ts).
 *
 * Without a statement deadline: a migration may build an index over millions of rows, and the
 * processes behind the lock wait for it; cut, it would fail again on every start.
 */
export function withSetupLock<T>(db: Knex, name: string, fn: (trx: Knex.Transaction) => Promise<T>): Promise<T> {
  return withQueryTimeout(db, null).transaction(async (trx) => {
    await trx.raw('SELECT pg_advisory_xact_lock(hashtextextended(?, 0))', [`motor.setup:${name}`]);
    // A backend reads its catalogue caches' invalidations at transaction start and when it first
    // locks a relation, not after waiting for an advisory lock: until then it can still hold a
    // cached "no such schema" from before the wait, and CREATE SCHEMA IF NOT EXISTS then fails on
    // pg_namespace_nspname_index. Reading pg_namespace (first lock of it here) brings it up to date.
    await trx.raw('SELECT FROM pg_catalog.pg_namespace LIMIT 0');
    return fn(trx);
  });
}
