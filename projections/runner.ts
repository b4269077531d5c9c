/**
 * The projection framework. Every read model is a `Projection`: its own PostgreSQL schema
 * `rm_<name>` (tables, knex migration bookkeeping and checkpoint all inside it, so renaming the
 * schema swaps all of them at once), the event types it handles, and a batch handler.
 *
 * A batch is applied in ONE transaction that (1) takes a transaction-scoped advisory lock keyed by
 * the projection's live schema name, (2) re-reads the checkpoint and compares it with
 * the position the events were read after (compare-and-set: a mismatch means another runner or a
 * rebuild moved it, the batch is dropped and reading restarts from the new checkpoint), (3) applies
 * the handled events, (4) writes the checkpoint = position of the batch's last event. Read-model
 * rows and checkpoint commit together, so a crash anywhere replays at most the uncommitted batch.
 *
 * The checkpoint is read without FOR UPDATE: the advisory lock already serialises every writer of
 * the schema, and a row lock would give the transaction a transaction id at its start. The
 * PostgreSQL event store shows readers only events below the oldest running transaction id
 * (docs/ARCHITECTURE.md), so a transaction id held while the batch is prepared in JavaScript would
 * hold back every subscriber of the log (delivery, the other projectors) for that long. Without it,
 * the id is taken at the batch's first write.
 *
 * See docs/PROJECTIONS.md.
 */
import type { Knex } from 'knex';
import type { EventStore, GlobalPosition, RecordedEvent } from '../domain/eventStore.js';
import { sleep } from '../infra/sleep.js';
import { awaitBatchInterval } from '../infra/eventstore/followLog.js';
import { withQueryTimeout, withSetupLock } from '../infra/db.js';
import { runAlone } from '../infra/lease.js';

/** One forward-only migration of a projection's schema; `schema` is where to create things. */
export interface ProjectionMigration {
  name: string;
  up(knex: Knex, schema: string): Promise<void>;
}

export interface Projection {
  /** Lower-case identifier: the schema is `rm_<name>`. */
  name: string;
  migrations: readonly ProjectionMigration[];
  /** Event types applyBatch receives; every other type is skipped and counted. */
  handles: readonly string[];
  /**
   * True for read models fed by every send (messages, analytics): the projector role spaces their
   * batches by PROJECTION_BATCH_INTERVAL_MS, so a steady stream of sends is applied in fewer,
   * larger transactions. Read models that a command waits on (directory) leave it unset.
   */
  followsMessageTraffic?: boolean;
  /** Top-level event data keys applyBatch never reads: a live runner's subscription leaves them out. */
  ignoresData?: readonly string[];
  /** Applies events (only handled types, in log order) inside the runner's transaction. */
  applyBatch(trx: Knex.Transaction, schema: string, events: RecordedEvent[]): Promise<void>;
}

/** pino-compatible subset. */
export interface ProjectionLogger {
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
  error(obj: object, msg?: string): void;
}

export interface BatchReport {
  projection: string;
  schema: string;
  /** Events handed to applyBatch. */
  applied: number;
  /** Events of types the projection does not handle. */
  skipped: number;
  /** True when the checkpoint moved under us and the batch was dropped. */
  conflict: boolean;
  durationMs: number;
  position: GlobalPosition | null;
  lastEventCreatedAt: Date | null;
}

export interface RunnerOptions {
  batchSize?: number;
  logger?: ProjectionLogger;
  /** Called after every batch transaction (metrics hook). */
  onBatch?: (report: BatchReport) => void;
  /** Defaults to `rm_<name>`; rebuild() points a runner at `rm_<name>__next`. */
  schema?: string;
  /** Delay before retrying after an error in run(). */
  retryDelayMs?: number;
  /**
   * `synchronous_commit = off` for batch transactions. Safe for consistency (rows and checkpoint are
   * lost or kept together, and lost batches are replayed); rebuild() uses it for its bulk replay.
   */
  asyncCommit?: boolean;
  /**
   * While following the log, start a batch transaction at most this often (ms): a batch that is
   * not full waits for the rest of the interval, so events arriving meanwhile join the next one.
   * 0 (the default) applies every batch as soon as it is read.
   */
  minBatchIntervalMs?: number;
}

export interface RunnerStats {
  projection: string;
  schema: string;
  eventsApplied: number;
  eventsSkipped: number;
  batches: number;
  conflicts: number;
  errors: number;
  position: GlobalPosition | null;
  /** createdAt of the last event this runner committed (null before the first batch). */
  lastEventCreatedAt: Date | null;
  /** True when the last read from the store came back empty (caught up at that moment). */
  caughtUp: boolean;
}

export interface Lag {
  /** Events after the checkpoint (counted up to `max`). */
  eventsBehind: number;
  /** True when there are at least `max` events behind (eventsBehind is a lower bound). */
  capped: boolean;
  /** Age of the oldest event not yet applied, by its createdAt; 0 when caught up. */
  secondsBehind: number;
}

/**
 * The advisory lock of a projection's lease (runAlone): one projector process at a time per
 * projection. Not `motor.projection:rm_<name>`, the lock of every batch: that one stays the
 * correctness guarantee, taken by each batch whoever holds the lease, and by the rebuild's swap.
 */
export const projectionLeaseName = (projectionName: string): string => `motor.projector:${projectionName}`;

export interface LeaseOptions {
  /** How often a process without the lease tries to take it. Default LEASE_RETRY_MS (2 s, infra/lease.ts). */
  retryMs?: number;
  /** Told true when this process takes the projection's lease, false when it stands by (at start too). */
  leading?(held: boolean): void;
}

const quiet: ProjectionLogger = { info: () => undefined, warn: () => undefined, error: () => undefined };

export const schemaFor = (projectionName: string): string => {
  if (!/^[a-z][a-z0-9_]{0,40}$/.test(projectionName)) throw new Error(`Invalid projection name "${projectionName}"`);
  return `rm_${projectionName}`;
};

const CHECKPOINT_TABLE = 'projection_checkpoint';

/** The framework's own first migration: the checkpoint row lives in the projection's schema. */
const checkpointMigration: ProjectionMigration = {
  name: '000_projection_checkpoint',
  async up(knex, schema) {
    await knex.schema.withSchema(schema).createTable(CHECKPOINT_TABLE, (t) => {
      t.smallint('id').primary();
      t.text('position');
      t.bigInteger('events_applied').notNullable().defaultTo(0);
      t.bigInteger('events_skipped').notNullable().defaultTo(0);
      t.timestamp('last_event_at', { useTz: true });
      t.timestamp('updated_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    });
    await knex.withSchema(schema).table(CHECKPOINT_TABLE).insert({ id: 1, position: null });
  },
};

const quoteIdent = (s: string): string => `"${s.replace(/"/g, '""')}"`;

async function schemaExists(db: Knex | Knex.Transaction, schema: string): Promise<boolean> {
  const r = await db.raw('select 1 from pg_namespace where nspname = ?', [schema]);
  return r.rows.length > 0;
}

/**
 * Creates the schema if needed and runs the projection's pending migrations (tracked inside the
 * schema). Safe to run from several processes at once: all of it happens in one transaction under
 * the schema's set-up lock (infra/db.ts withSetupLock). Without it, processes starting together on
 * an empty database raced on CREATE SCHEMA and on knex's own bookkeeping tables; two of them could
 * each insert a row into knex_migrations_lock, after which knex refuses every later migration run
 * of that schema ("Migration table is already locked") and no process could start again.
 */
export async function migrateProjection(db: Knex, projection: Projection, schema: string = schemaFor(projection.name)): Promise<void> {
  const all = [checkpointMigration, ...projection.migrations];
  const source: Knex.MigrationSource<ProjectionMigration> = {
    getMigrations: async () => all,
    getMigrationName: (m) => m.name,
    getMigration: async (m) => ({ up: (knex: Knex) => m.up(knex, schema), down: async () => {} }),
  };
  await withSetupLock(db, schema, async (trx) => {
    await trx.raw(`create schema if not exists ${quoteIdent(schema)}`);
    await repairKnexLockTable(trx, schema);
    // On the lock's transaction: knex runs the batch in a savepoint of it.
    await trx.migrate.latest({ migrationSource: source, schemaName: schema, tableName: 'knex_migrations' });
  });
}

/**
 * Leaves one row in knex's lock table. Earlier releases could leave two (see migrateProjection),
 * and knex then reports every run as locked. Both rows are unlocked ones: knex sets and clears its
 * lock inside the batch's transaction, so a committed lock row is never in use.
 */
async function repairKnexLockTable(trx: Knex.Transaction, schema: string): Promise<void> {
  const table = `${quoteIdent(schema)}.knex_migrations_lock`;
  if (!(await trx.schema.withSchema(schema).hasTable('knex_migrations_lock'))) return;
  await trx.raw(`delete from ${table} where "index" > (select min("index") from ${table})`);
}

/** The lock every writer of a projection's live schema takes (runners and the rebuild swap). */
const lockKey = (schema: string): string => `motor.projection:${schema}`;

async function lock(trx: Knex.Transaction, schema: string): Promise<void> {
  await trx.raw('select pg_advisory_xact_lock(hashtext(?))', [lockKey(schema)]);
}

async function readCheckpointRow(db: Knex | Knex.Transaction, schema: string, forUpdate: boolean) {
  let q = db.withSchema(schema).table(CHECKPOINT_TABLE).where({ id: 1 }).first('position');
  if (forUpdate) q = q.forUpdate();
  const row = (await q) as { position: string | null } | undefined;
  if (!row) throw new Error(`Checkpoint row missing in ${schema}`);
  return row.position;
}

/**
 * Where a read model is in the log: the checkpoint of its live schema (null before its first
 * batch), for a caller outside the runner that must not decide on rows older than some position.
 */
export function readCheckpoint(db: Knex, projectionName: string): Promise<GlobalPosition | null> {
  return readCheckpointRow(db, schemaFor(projectionName), false);
}

type ApplyResult = { ok: true; position: GlobalPosition } | { ok: false; position: GlobalPosition | null };

export class ProjectionRunner {
  readonly schema: string;
  private readonly batchSize: number;
  private readonly handled: ReadonlySet<string>;
  private readonly counters: RunnerStats;
  /** The schema whose lock this runner takes: rebuild's __next schema locks itself, the live one its own name. */
  private readonly lockSchema: string;

  constructor(
    private readonly db: Knex,
    private readonly store: EventStore,
    readonly projection: Projection,
    private readonly opts: RunnerOptions = {},
  ) {
    this.schema = opts.schema ?? schemaFor(projection.name);
    this.lockSchema = this.schema;
    this.batchSize = opts.batchSize ?? 500;
    this.handled = new Set(projection.handles);
    this.counters = {
      projection: projection.name,
      schema: this.schema,
      eventsApplied: 0,
      eventsSkipped: 0,
      batches: 0,
      conflicts: 0,
      errors: 0,
      position: null,
      lastEventCreatedAt: null,
      caughtUp: false,
    };
  }

  /** Creates the schema and runs pending migrations. Safe to call from several processes. */
  async init(): Promise<void> {
    await migrateProjection(this.db, this.projection, this.schema);
  }

  async checkpoint(): Promise<GlobalPosition | null> {
    return readCheckpointRow(this.db, this.schema, false);
  }

  /** Counters since this runner was created (for metrics). */
  stats(): RunnerStats {
    return { ...this.counters };
  }

  /**
   * Probes the store for the events after the checkpoint (reads up to `max` log entries). Only
   * events of handled types count: a live runner persists its position past skipped events lazily.
   */
  async lag(max = 10_000): Promise<Lag> {
    const after = await this.checkpoint();
    if (this.store.countAfter) {
      // Without the events' data: while a projector is behind, reading up to `max` whole events
      // every few seconds per projection cost more than applying them.
      const c = await this.store.countAfter({ after, maxCount: max, types: [...this.handled] });
      return {
        eventsBehind: c.matching,
        capped: c.examined >= max,
        secondsBehind: c.oldestMatching === null ? 0 : Math.max(0, (Date.now() - c.oldestMatching.getTime()) / 1000),
      };
    }
    const read = await this.store.readAll({ after, maxCount: max });
    const events = read.filter((e) => this.handled.has(e.type));
    return {
      eventsBehind: events.length,
      capped: read.length >= max,
      secondsBehind: events.length === 0 ? 0 : Math.max(0, (Date.now() - events[0].createdAt.getTime()) / 1000),
    };
  }

  /** Applies batches until the store has nothing after the checkpoint. Returns events consumed (applied + skipped). */
  async catchUp(): Promise<number> {
    let consumed = 0;
    let after = await this.checkpoint();
    // The next batch is read while the current one is applied (the store and the read models may
    // be different servers; on one server they still use two backends).
    const read = (from: GlobalPosition | null) => {
      const p = this.store.readAll({ after: from, maxCount: this.batchSize });
      p.catch(() => undefined); // awaited below; this only keeps an early rejection from being "unhandled"
      return p;
    };
    let pending = read(after);
    for (;;) {
      const events = await pending;
      if (events.length === 0) {
        this.counters.caughtUp = true;
        return consumed;
      }
      this.counters.caughtUp = false;
      pending = read(events[events.length - 1].position);
      const r = await this.applyEvents(after, events);
      if (r.ok) consumed += events.length;
      else pending = read(r.position);
      after = r.position;
    }
  }

  /**
   * Follows the log from the checkpoint until the signal aborts; retries after errors. The store
   * sends only the handled event types; past a stretch of other events it hands over a
   * position-only batch now and then (about once a second), which moves the checkpoint alone.
   * The schema must be migrated (init(); the runtime migrates every projection before it starts
   * them): migrations have no statement deadline (infra/db.ts withSetupLock), and the loop, which
   * retries after a database that stopped answering, must not wait on one.
   */
  async run(signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      try {
        let after = await this.checkpoint();
        const sub = this.store.subscribeToAll({ after, batchSize: this.batchSize, signal, types: this.projection.handles, omitData: this.projection.ignoresData });
        const interval = this.opts.minBatchIntervalMs ?? 0;
        for await (const batch of sub) {
          if (signal.aborted) break;
          const started = performance.now();
          const r = await this.applyEvents(after, batch.events, batch.position);
          // On conflict leave the subscription: it is positioned after events we did not apply.
          if (!r.ok) break;
          after = r.position;
          // Full batch, or a full window of the log behind a few handled events: the log is ahead of
          // us, read on. Otherwise let the next batch gather company.
          await awaitBatchInterval(batch, this.batchSize, interval, started, signal);
        }
        // Subscription left (conflict) or ended by the adapter: resubscribe from the checkpoint, without spinning.
        if (!signal.aborted) await sleep(20, signal);
      } catch (err) {
        if (signal.aborted) break;
        this.counters.errors++;
        this.opts.logger?.error({ err, projection: this.projection.name, schema: this.schema }, 'projection batch failed; retrying');
        await sleep(this.opts.retryDelayMs ?? 1000, signal);
      }
    }
  }

  /**
   * run() in one process at a time (the projector role's live loop): stands by until this process
   * holds the projection's lease (infra/lease.ts), projects while it does, and stands by again when
   * its lease session ends; until the signal aborts, then gives the lease up. Every projector
   * process starts every projection, and without the lease each read the whole log, the losers of
   * each batch's compare-and-set dropping their batch and reading it again. The lease only saves
   * that work: a batch under way when the lease is lost may still commit, and the batch lock and
   * compare-and-set keep that right, as they keep right a rebuild's swap (which does not take the
   * lease: its holder goes on, on the swapped-in schema).
   */
  runAlone(signal: AbortSignal, lease: LeaseOptions = {}): Promise<void> {
    if (this.schema !== schemaFor(this.projection.name)) throw new Error(`runAlone is the live loop of ${this.projection.name}, not of ${this.schema}`);
    return runAlone(this.db, this.opts.logger ?? quiet, {
      lock: projectionLeaseName(this.projection.name),
      log: { projection: this.projection.name },
      says: {
        took: 'took a projection\'s lease: it is projected in this process',
        lost: 'lost a projection\'s lease (its session ended): stopped projecting, standing by',
        unreachable: 'could not try to take a projection\'s lease; standing by',
      },
      retryMs: lease.retryMs,
      leading: lease.leading,
      run: (running) => this.run(running),
    }, signal);
  }

  /**
   * One batch in one transaction with the checkpoint compare-and-set. `expected` is the checkpoint
   * the events were read after; the new checkpoint is `position` (default: the last event's, which
   * it may pass when the store skipped unhandled events). Returns the checkpoint to continue from.
   */
  async applyEvents(expected: GlobalPosition | null, events: RecordedEvent[], position?: GlobalPosition): Promise<ApplyResult> {
    const last = events.length > 0 ? events[events.length - 1] : null;
    const to = position ?? last?.position;
    if (to === undefined) throw new Error('applyEvents needs events or a position');
    const started = performance.now();
    const result = events.length === 0
      ? await movePosition(this.db, this.schema, expected, to)
      : await this.db.transaction(async (trx) => {
        if (this.opts.asyncCommit) await trx.raw('set local synchronous_commit = off');
        return applyInTransaction(trx, this.schema, this.lockSchema, this.projection, this.handled, expected, events, to);
      });
    const durationMs = performance.now() - started;
    if (result.ok) {
      this.counters.batches++;
      this.counters.eventsApplied += result.applied;
      this.counters.eventsSkipped += result.skipped;
      this.counters.position = to;
      if (last) this.counters.lastEventCreatedAt = last.createdAt;
    } else {
      this.counters.conflicts++;
      this.opts.logger?.info({ projection: this.projection.name, expected, actual: result.position }, 'checkpoint moved (another runner or a rebuild): batch dropped');
    }
    this.opts.onBatch?.({
      projection: this.projection.name,
      schema: this.schema,
      applied: result.ok ? result.applied : 0,
      skipped: result.ok ? result.skipped : 0,
      conflict: !result.ok,
      durationMs,
      position: result.ok ? to : result.position,
      lastEventCreatedAt: result.ok ? last?.createdAt ?? null : null,
    });
    return result.ok ? { ok: true, position: to } : { ok: false, position: result.position };
  }
}

type TxResult = { ok: true; applied: number; skipped: number } | { ok: false; position: GlobalPosition | null };

/**
 * A batch without events (the store's position-only handover past other types, about once a
 * second per projection under traffic): the checkpoint's compare-and-set alone, one statement
 * instead of a transaction of five. A concurrent writer of the same row (another runner's batch)
 * holds its lock until it commits, and this one then finds the position moved: a conflict, as in
 * the transaction. A rebuild's swap renames the schemas under it: it either updates the old copy
 * just before (the new one's checkpoint differs, so the next batch conflicts), finds the new copy
 * at another position, or fails on the dropped table; the runner resubscribes from the
 * checkpoint in each case.
 */
async function movePosition(db: Knex, schema: string, expected: GlobalPosition | null, position: GlobalPosition): Promise<TxResult> {
  const moved = await db.withSchema(schema).table(CHECKPOINT_TABLE).where({ id: 1 })
    .andWhereRaw('position is not distinct from ?', [expected])
    .update({ position, updated_at: db.fn.now() });
  if (moved === 1) return { ok: true, applied: 0, skipped: 0 };
  return { ok: false, position: await readCheckpointRow(db, schema, false) };
}

async function applyInTransaction(
  trx: Knex.Transaction,
  schema: string,
  lockSchema: string,
  projection: Projection,
  handled: ReadonlySet<string>,
  expected: GlobalPosition | null,
  events: RecordedEvent[],
  position: GlobalPosition = events[events.length - 1].position,
): Promise<TxResult> {
  await lock(trx, lockSchema);
  const current = await readCheckpointRow(trx, schema, false);
  if (current !== expected) return { ok: false, position: current };
  const mine = events.filter((e) => handled.has(e.type));
  if (mine.length > 0) await projection.applyBatch(trx, schema, mine);
  const last = events.length > 0 ? events[events.length - 1] : null;
  await trx.withSchema(schema).table(CHECKPOINT_TABLE).where({ id: 1 }).update({
    position,
    events_applied: trx.raw('events_applied + ?', [mine.length]),
    events_skipped: trx.raw('events_skipped + ?', [events.length - mine.length]),
    ...(last ? { last_event_at: last.createdAt } : {}),
    updated_at: trx.fn.now(),
  });
  return { ok: true, applied: mine.length, skipped: events.length - mine.length };
}

// ---------------------------------------------------------------------------------- rebuild

/** Drops the non-unique indexes of a schema and returns their definitions (CREATE INDEX statements). */
async function dropSecondaryIndexes(db: Knex, schema: string): Promise<string[]> {
  const r = await db.raw(
    `select i.relname as name, pg_get_indexdef(x.indexrelid) as def
       from pg_index x join pg_class i on i.oid = x.indexrelid join pg_namespace n on n.oid = i.relnamespace
      where n.nspname = ? and not x.indisunique and not x.indisprimary`,
    [schema],
  );
  const rows = r.rows as Array<{ name: string; def: string }>;
  for (const { name } of rows) await db.raw(`drop index ${quoteIdent(schema)}.${quoteIdent(name)}`);
  return rows.map((x) => x.def);
}

export interface RebuildProgress {
  phase: 'replay' | 'swap' | 'done';
  /** Events consumed so far (applied + skipped). */
  done: number;
  /** Events in the log when known (an adapter exposing countAll()), else null. */
  total: number | null;
  eventsPerSecond: number;
  elapsedMs: number;
}

export interface RebuildOptions {
  batchSize?: number;
  onProgress?: (p: RebuildProgress) => void;
  logger?: ProjectionLogger;
}

export interface RebuildResult {
  events: number;
  applied: number;
  skipped: number;
  durationMs: number;
  position: GlobalPosition | null;
}

/** Optional adapter capability used only for the progress total. */
interface CountableStore {
  countAll?(): Promise<number>;
}

/**
 * Rebuilds a read model into `rm_<name>__next` from the start of the log, then swaps it in: one
 * transaction holding the live runners' lock applies the events appended meanwhile, renames
 * rm_<name> → rm_<name>__old and rm_<name>__next → rm_<name>, and drops the old schema. Readers keep
 * answering from the old schema until that transaction commits (schema renames are transactional).
 */
export async function rebuild(given: Knex, store: EventStore, projection: Projection, opts: RebuildOptions = {}): Promise<RebuildResult> {
  // Without a statement deadline (docs/OPERATIONS.md "Database deadlines"): index builds over
  // millions of rows, ANALYZE, and a swap that waits for the live runners' batch; cut, the whole
  // rebuild would be lost. `npm run replay` takes the store's reads off theirs as well.
  const db = withQueryTimeout(given, null);
  const live = schemaFor(projection.name);
  const next = `${live}__next`;
  const old = `${live}__old`;
  const batchSize = opts.batchSize ?? 5000;
  const started = performance.now();
  const countable = store as EventStore & CountableStore;
  const total = typeof countable.countAll === 'function' ? await countable.countAll() : null;

  // One rebuild per projection at a time: a session lock on a connection held for the whole run
  // (released by PostgreSQL if this process dies, so a crashed rebuild never blocks the next one).
  const guard = (await db.client.acquireConnection()) as { query(sql: string, params: unknown[]): Promise<{ rows: Array<{ ok: boolean }> }> };
  try {
    const { rows } = await guard.query('select pg_try_advisory_lock(hashtext($1)) as ok', [`motor.rebuild:${live}`]);
    if (!rows[0].ok) throw new Error(`Another rebuild of ${projection.name} is running`);
    try {
      return await rebuildLocked(db, store, projection, opts, { live, next, old, batchSize, started, total });
    } finally {
      await guard.query('select pg_advisory_unlock(hashtext($1)) as ok', [`motor.rebuild:${live}`]).catch(() => undefined);
    }
  } finally {
    await db.client.releaseConnection(guard);
  }
}

async function analyzeSchema(db: Knex, schema: string): Promise<void> {
  const { rows } = await db.raw('select tablename from pg_tables where schemaname = ?', [schema]);
  for (const { tablename } of rows as Array<{ tablename: string }>) await db.raw(`analyze ${quoteIdent(schema)}.${quoteIdent(tablename)}`);
}

async function rebuildLocked(
  db: Knex,
  store: EventStore,
  projection: Projection,
  opts: RebuildOptions,
  ctx: { live: string; next: string; old: string; batchSize: number; started: number; total: number | null },
): Promise<RebuildResult> {
  const { live, next, old, batchSize, started, total } = ctx;
  await db.raw(`drop schema if exists ${quoteIdent(next)} cascade`);
  await db.raw(`drop schema if exists ${quoteIdent(old)} cascade`);
  await migrateProjection(db, projection, next);

  let applied = 0;
  let skipped = 0;
  const progress = (phase: RebuildProgress['phase']) => {
    const elapsedMs = performance.now() - started;
    opts.onProgress?.({ phase, done: applied + skipped, total, eventsPerSecond: elapsedMs > 0 ? ((applied + skipped) * 1000) / elapsedMs : 0, elapsedMs });
  };
  const runner = new ProjectionRunner(db, store, projection, {
    batchSize,
    schema: next,
    asyncCommit: true,
    logger: opts.logger,
    onBatch: (b) => {
      applied += b.applied;
      skipped += b.skipped;
      progress('replay');
    },
  });
  // Secondary indexes are built once after the bulk load instead of row by row (much faster);
  // unique ones stay, upserts need them.
  const deferred = await dropSecondaryIndexes(db, next);
  // Two unlocked passes: the second one shortens what the locked swap has to apply.
  await runner.catchUp();
  await runner.catchUp();
  for (const def of deferred) await db.raw(def);
  // Planner statistics before the API reads the new copy: a bulk-loaded table is otherwise
  // planned from guesses until autovacuum gets to it (never, where autovacuum is off).
  await analyzeSchema(db, next);
  await runner.catchUp();
  progress('swap');

  const handled = new Set(projection.handles);
  const position = await db.transaction(async (trx) => {
    await lock(trx, live);
    let after = await readCheckpointRow(trx, next, true);
    for (;;) {
      const events = await store.readAll({ after, maxCount: batchSize });
      if (events.length === 0) break;
      const r = await applyInTransaction(trx, next, live, projection, handled, after, events);
      if (!r.ok) throw new Error(`Checkpoint of ${next} moved during rebuild`);
      applied += r.applied;
      skipped += r.skipped;
      after = events[events.length - 1].position;
    }
    if (await schemaExists(trx, live)) await trx.raw(`alter schema ${quoteIdent(live)} rename to ${quoteIdent(old)}`);
    await trx.raw(`alter schema ${quoteIdent(next)} rename to ${quoteIdent(live)}`);
    await trx.raw(`drop schema if exists ${quoteIdent(old)} cascade`);
    return after;
  });
  progress('done');
  return { events: applied + skipped, applied, skipped, durationMs: performance.now() - started, position };
}
