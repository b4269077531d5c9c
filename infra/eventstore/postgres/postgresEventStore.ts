import pg from 'pg';
import {
  assertStorable,
  EventStoreUnavailableError,
  WrongExpectedRevisionError,
  type AppendResult,
  type CountAfter,
  type CountAfterOptions,
  type EventData,
  type EventStore,
  type ExpectedRevision,
  type GlobalPosition,
  type LogBatch,
  type ReadAllOptions,
  type ReadStreamOptions,
  type RecordedEvent,
  type SubscribeOptions,
} from '../../../domain/eventStore.js';
import { appendBatch, executeBatch, type AppendOutcome, type AppendRequest } from './appendBatch.js';
import { isUnavailable, toStoreError } from './errors.js';
import { NOTIFY_CHANNEL, ensureSchema, typesOfPayload } from './schema.js';
import { WindowCache, compareCursors, covers, omitKeyOf, unionFilter, view, type Cursor, type Filter, type SharedWindow, type WindowView } from './sharedWindows.js';
import { QUERY_TIMEOUT_MS, SESSION_OPTIONS, TCP_KEEPALIVE } from '../../db.js';
import { within } from '../../within.js';

export interface PostgresEventStoreOptions {
  /** Connections in the store's own pool. Default 10. */
  poolSize?: number;
  applicationName?: string;
  /** Subscribers re-read at least this often when no NOTIFY arrives. Default 1000 ms. */
  pollIntervalMs?: number;
  /** Coalesce concurrent appends into one transaction. Default true. */
  groupCommit?: boolean;
  /** Most events in one group-commit transaction. Default 1000. */
  maxBatchEvents?: number;
  /**
   * Subscriptions at the head of the log share their reads (sharedWindows.ts). Default true; false
   * reads every subscription's window on its own (a test's baseline).
   */
  shareWindows?: boolean;
  /** Group-commit transactions running at once. Default 2: one batch fills while the other commits (measured 2026-11-24 evening: +15 % POST /v1/send at 50 connections, delivery unchanged). */
  maxInFlightBatches?: number;
  /**
   * Longest wait for PostgreSQL to answer a group-commit transaction. Default 10 s
   * (QUERY_TIMEOUT_MS; a batch of a thousand events commits in milliseconds). Past it the batch's
   * appends fail as unavailable (503 event_store_unavailable at the edges) and its connection is
   * dropped, instead of the callers waiting as long as the operating system keeps a connection to
   * a server that stopped answering (a network black hole, a stopped host): docs/ARCHITECTURE.md
   * "Crash safety".
   */
  appendTimeoutMs?: number;
  /**
   * The same for every read (readStream, readAll, countAfter, the subscriptions' reads, ping) and
   * for connecting (the pool's and the LISTEN connection's). Default 10 s (QUERY_TIMEOUT_MS). Past
   * it the read fails as unavailable and its connection is dropped (it is still busy with the
   * statement); a subscription retries. null: reads have no deadline (`npm run replay`, whose reads
   * of thousands of events on a loaded server must not be cut); connecting keeps 10 s.
   */
  readTimeoutMs?: number | null;
  /**
   * How often the LISTEN connection is asked `SELECT 1` (within the connect deadline). Default 30 s.
   * That connection only receives: without the check, one silently cut (a NAT or firewall that
   * forgets idle flows, a server restarted behind a load balancer) would keep every subscription of
   * the store on its poll, with no error, for as long as the process runs. The check also keeps such
   * idle flows alive.
   */
  listenerCheckMs?: number;
}

interface Pending {
  req: AppendRequest;
  attempts: number;
  resolve: (result: AppendResult) => void;
  reject: (err: unknown) => void;
}

interface PendingRead {
  streamId: string;
  from: bigint;
  maxCount: number | null;
  resolve: (events: RecordedEvent[]) => void;
  reject: (err: unknown) => void;
}

interface EventRow {
  event_id: string; type: string; version: number; data: unknown; metadata: Record<string, unknown>;
  stream_id: string; stream_revision: string; tx_id: string; global_position: string; created_at: Date;
}

/** A subscription between reads: what it wants, whether a NOTIFY concerned it since its last read. */
interface Sleeper extends Filter {
  woken: boolean;
  resolve: (() => void) | null;
  /** The store's NOTIFY count at the last NOTIFY that concerned it (its types). */
  lastWake: number;
}

/** One read of a subscription: the events delivered, how many log entries were examined, the last of them. */
interface Page {
  events: RecordedEvent[]; examined: number; last: Cursor | null; heldBack: boolean;
  /**
   * A window read for others: whether the store has more of the log at hand than the window
   * (it was full, or another read of the store has got past its end since). Own reads: undefined,
   * the window's fullness tells.
   */
  more?: boolean;
  /** A window read for others: the store's NOTIFY count when it was read. */
  notifications?: number;
}

// Selected as text (bigint and xid8 exceed JS numbers); ORDER BY must name the table's columns (e.),
// not these text output columns of the same names.
const COLUMNS = 'e.event_id::text, e.type, e.version, e.data, e.metadata, e.stream_id, e.stream_revision::text, e.tx_id::text, e.global_position::text, e.created_at';

/** Stored size (bytes, as pg_column_size reports it) above which a subscription's omitData applies. */
const OMIT_MIN_BYTES = 2048;

// The log after the cursor ($1, $2) in its order, up to $3 entries, of table alias `a`. Only
// transactions older than every running one are final: nothing can commit before them later.
const finalWindow = (a: string): string => `WHERE ${a}.tx_id < pg_snapshot_xmin(pg_current_snapshot()) AND (${a}.tx_id, ${a}.global_position) > ($1::xid8, $2::bigint)
ORDER BY ${a}.tx_id, ${a}.global_position
LIMIT $3`;

// Every committed entry, final or not yet (a transaction still held back): an upper bound of what readers have seen.
const HEAD_SQL = 'SELECT e.tx_id::text AS tx_id, e.global_position::text AS global_position FROM events e ORDER BY e.tx_id DESC, e.global_position DESC LIMIT 1';
// The last entry of some types: the log order's index read backwards, each entry's type checked,
// until one matches. Asked of frequent types (MessageAccepted), and only by rare decisions.
const HEAD_OF_TYPES_SQL = 'SELECT e.tx_id::text AS tx_id, e.global_position::text AS global_position FROM events e WHERE e.type = ANY($1::text[]) ORDER BY e.tx_id DESC, e.global_position DESC LIMIT 1';

const READ_ALL_SQL = `
SELECT ${COLUMNS} FROM events e
${finalWindow('e')}`;

// A subscription's read: READ_ALL_SQL over a window of up to $3 log entries, in order: a row for
// each entry whose type is wanted ($4; NULL = every type), with the event's columns, and one for
// the window's last entry if it is not wanted, with just its position, so the subscriber learns
// how far it got without receiving the entries it would drop (a projection that follows a few
// event types used to receive a row for every message event). `examined` (on every row) is the
// window's size. `held` (on every row, and on the single row of an empty window) tells whether
// committed events after the cursor are still held back by an older running transaction (such
// events sort after the whole window: their transaction ids are at or above the horizon), so a
// subscriber needs one round trip per wake-up. The data of an event stored larger than
// OMIT_MIN_BYTES leaves out the top-level keys in $5 (empty: none): a consumer that never reads
// message bodies does not receive them (nor does PostgreSQL print them). A smaller event is sent
// whole: rebuilding every small jsonb value costs PostgreSQL more than its few bytes cost the
// consumer (measured, bench:deliver).
export const SUBSCRIBE_SQL = `
SELECT h.held, w.examined::int AS examined, w.tx_id::text AS tx_id, w.global_position::text AS global_position,
  e.event_id::text, e.type, e.version,
  CASE WHEN cardinality($5::text[]) > 0 AND pg_column_size(e.data) > ${OMIT_MIN_BYTES} THEN e.data - $5::text[] ELSE e.data END AS data,
  e.metadata, e.stream_id, e.stream_revision::text, e.created_at
FROM (
  -- The first such entry in index order, not EXISTS: EXISTS drops ORDER BY/LIMIT, and without
  -- statistics on events it was planned as a sequential scan of the whole log on every wake-up.
  SELECT COALESCE((
    SELECT true FROM events y
    WHERE y.tx_id >= pg_snapshot_xmin(pg_current_snapshot()) AND (y.tx_id, y.global_position) > ($1::xid8, $2::bigint)
    ORDER BY y.tx_id, y.global_position
    LIMIT 1
  ), false) AS held
) h
LEFT JOIN (
  (SELECT v.tx_id, v.global_position, v.wanted, v.examined FROM (
     -- Numbered after the LIMIT (window functions run before a LIMIT of their own level).
     SELECT u.tx_id, u.global_position, ($4::text[] IS NULL OR u.type = ANY($4::text[])) AS wanted,
       row_number() OVER (ORDER BY u.tx_id, u.global_position) AS n, count(*) OVER () AS examined
     FROM (SELECT x.tx_id, x.global_position, x.type FROM events x
           ${finalWindow('x')}) u
   ) v
   WHERE v.wanted OR v.n = v.examined) w
  -- LATERAL with LIMIT (not flattened into a join): one primary-key lookup per wanted entry, never a table scan.
  LEFT JOIN LATERAL (SELECT * FROM events z WHERE w.wanted AND z.global_position = w.global_position LIMIT 1) e ON true
) ON true
ORDER BY w.tx_id, w.global_position`;

// A lag probe: READ_ALL_SQL's window, counted without the events' data.
const COUNT_AFTER_SQL = `
SELECT count(*)::int AS examined,
  count(*) FILTER (WHERE $4::text[] IS NULL OR w.type = ANY($4::text[]))::int AS matching,
  min(w.created_at) FILTER (WHERE $4::text[] IS NULL OR w.type = ANY($4::text[])) AS oldest
FROM (
  SELECT x.type, x.created_at FROM events x
  ${finalWindow('x')}
) w`;

// The rows of each stream found through (stream_id, stream_revision), then deleted by tuple id:
// "stream_id = ANY($1)" could plan a scan of the whole log on a table without statistics.
export const DELETE_STREAMS_SQL = `
DELETE FROM events WHERE ctid = ANY(ARRAY(
  SELECT x.ctid FROM unnest($1::text[]) AS k(id)
  CROSS JOIN LATERAL (SELECT e.ctid FROM events e WHERE e.stream_id = k.id OFFSET 0) x
))`;

const READ_STREAM_SQL = `
SELECT ${COLUMNS} FROM events e
WHERE e.stream_id = $1 AND e.stream_revision >= $2
ORDER BY e.stream_revision
LIMIT $3`;

// Several streams in one statement (concurrent readStream calls, grouped): request k.i's rows,
// each stream through its (stream_id, stream_revision) index by a LATERAL probe.
export const READ_STREAMS_SQL = `
SELECT k.i::int AS req, ${COLUMNS}
FROM unnest($1::text[], $2::bigint[], $3::int[]) WITH ORDINALITY AS k(stream_id, from_rev, max_count, i)
CROSS JOIN LATERAL (
  SELECT * FROM events x WHERE x.stream_id = k.stream_id AND x.stream_revision >= k.from_rev
  ORDER BY x.stream_revision LIMIT k.max_count
) e
ORDER BY k.i, e.stream_revision`;

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const MAX_APPEND_ATTEMPTS = 20;
/** Stream reads running at once; the others wait and go together in one statement. */
const MAX_INFLIGHT_READS = 2;
const MAX_GROUPED_READS = 100;
const HELD_BACK_MIN_MS = 5;
const HELD_BACK_MAX_MS = 250;
/** A filtered subscription hands over the position past skipped entries at most this often. */
const SKIPPED_POSITION_MS = 1000;
const START: Cursor = { txId: '0', globalPosition: '0' };

/**
 * A group-commit batch's outcomes on `client`: one round trip for the batch (appendBatch), or, when
 * PostgreSQL refuses it for one request's sake (bad input, a deadlock), each request alone so that
 * it does not fail its neighbours. `broken`: the connection failed (it is dropped, not pooled).
 */
async function judgeBatch(client: pg.PoolClient, batch: Pending[]): Promise<{ outcomes: AppendOutcome[]; broken?: Error }> {
  try {
    return { outcomes: await appendBatch(client, batch.map((p) => p.req)) };
  } catch (err) {
    if (isUnavailable(err)) return { outcomes: batch.map(() => singleFailure(err)), broken: err as Error };
    if (batch.length === 1) return { outcomes: [singleFailure(err)] };
    const outcomes: AppendOutcome[] = [];
    let broken: Error | undefined;
    for (const p of batch) {
      if (broken) {
        outcomes.push({ kind: 'failed', error: broken });
        continue;
      }
      try {
        outcomes.push(...(await executeBatch(client, [p.req])));
      } catch (e) {
        if (isUnavailable(e)) broken = e as Error;
        outcomes.push(singleFailure(e));
      }
    }
    return { outcomes, broken };
  }
}

/**
 * The event store on PostgreSQL (table `events`, created by init()). Positions are
 * `<transaction id>:<global position>`; the global log is ordered by both, see READ_ALL_SQL.
 */
export class PostgresEventStore implements EventStore {
  private readonly pool: pg.Pool;
  private readonly pollIntervalMs: number;
  private readonly groupCommit: boolean;
  private readonly maxBatchEvents: number;
  private readonly maxInFlightBatches: number;
  private readonly appendTimeoutMs: number;
  private readonly readTimeoutMs: number | null;
  private readonly connectTimeoutMs: number;
  private readonly applicationName: string;

  private queue: Pending[] = [];
  private inFlightBatches = 0;
  private readonly inFlightStreams = new Set<string>();
  private drainWaiters: Array<() => void> = [];
  private readQueue: PendingRead[] = [];
  private inFlightReads = 0;

  private listener: pg.Client | null = null;
  private listenerConnecting: Promise<void> | null = null;
  private listenerRetryAt = 0;
  private listenerRetryTimer: NodeJS.Timeout | null = null;
  private readonly listenerCheckMs: number;
  private listenerTimer: NodeJS.Timeout | null = null;
  /** Subscriptions, each with its type filter: a NOTIFY wakes those its payload's types concern. */
  private readonly sleepers = new Set<Sleeper>();
  /** NOTIFYs received (and listener (re)connections): tells whether a window read for others predates one. */
  private notifications = 0;
  /** Windows read at the head for every subscription of this store (sharedWindows.ts). */
  private readonly windows = new WindowCache();
  /** Shared reads in flight, by cursor and window size: subscriptions arriving meanwhile wait for them. */
  private readonly sharedReads = new Map<string, { filter: Filter; notifications: number; read: Promise<{ window: SharedWindow | null; heldBack: boolean }> }>();
  private readonly shareWindows: boolean;
  /**
   * The furthest log entry any read of this store has reached. A batch from a window that ends
   * before it says `more` (LogBatch: the store had more of the log at hand): another subscription
   * of the store may already have handed over what came after the window (an event stream resume
   * relies on it), an event held back when the window was read included.
   */
  private headSeen: Cursor = START;

  private flushScheduled = false;
  private closed = false;
  private closing: Promise<void> | null = null;

  constructor(private readonly connectionString: string, options: PostgresEventStoreOptions = {}) {
    this.applicationName = options.applicationName ?? 'motor-eventstore';
    this.pollIntervalMs = options.pollIntervalMs ?? 1000;
    this.groupCommit = options.groupCommit ?? true;
    this.maxBatchEvents = options.maxBatchEvents ?? 1000;
    this.maxInFlightBatches = options.maxInFlightBatches ?? 2;
    this.appendTimeoutMs = options.appendTimeoutMs ?? QUERY_TIMEOUT_MS;
    this.readTimeoutMs = options.readTimeoutMs === undefined ? QUERY_TIMEOUT_MS : options.readTimeoutMs;
    this.connectTimeoutMs = this.readTimeoutMs ?? QUERY_TIMEOUT_MS;
    this.shareWindows = options.shareWindows ?? true;
    this.listenerCheckMs = options.listenerCheckMs ?? 30_000;
    this.pool = new pg.Pool({
      connectionString,
      max: options.poolSize ?? 10,
      application_name: this.applicationName,
      options: SESSION_OPTIONS,
      // Also the longest wait for a pooled connection when all of them are busy.
      connectionTimeoutMillis: this.connectTimeoutMs,
      ...TCP_KEEPALIVE,
    });
    // An idle connection dropped by the server must not crash the process; the next query reports it.
    this.pool.on('error', () => undefined);
  }

  /** Creates the schema if needed (idempotent, safe from concurrent processes). */
  async init(): Promise<void> {
    try {
      const client = await this.pool.connect();
      try {
        await ensureSchema(client);
      } finally {
        client.release();
      }
    } catch (err) {
      throw toStoreError(err);
    }
  }

  append(streamId: string, events: EventData[], options: { expectedRevision?: ExpectedRevision } = {}): Promise<AppendResult> {
    const expected = options.expectedRevision ?? 'any';
    try {
      validateAppend(streamId, events, expected);
    } catch (err) {
      return Promise.reject(err);
    }
    if (this.closed) return Promise.reject(new EventStoreUnavailableError('The event store is closed'));
    return new Promise<AppendResult>((resolve, reject) => {
      this.submit({
        req: { streamId, events, ids: events.map((e) => e.id.toLowerCase()), expected },
        attempts: 0,
        resolve,
        reject,
      });
    });
  }

  /**
   * Up to MAX_INFLIGHT_READS reads run at once, each as its own statement; reads asked for while
   * they run wait and then go together, up to MAX_GROUPED_READS streams in one statement (the
   * delivery worker reads one message stream per job, 32 jobs at a time).
   */
  readStream(streamId: string, options: ReadStreamOptions = {}): Promise<RecordedEvent[]> {
    const from = options.fromRevision ?? 0n;
    if (from < 0n) return Promise.reject(new RangeError('fromRevision must be >= 0'));
    const maxCount = options.maxCount ?? null;
    if (maxCount !== null && (!Number.isInteger(maxCount) || maxCount < 0)) return Promise.reject(new RangeError('maxCount must be a non-negative integer'));
    return new Promise((resolve, reject) => {
      this.readQueue.push({ streamId, from, maxCount, resolve, reject });
      this.flushReads();
    });
  }

  private flushReads(): void {
    while (this.inFlightReads < MAX_INFLIGHT_READS && this.readQueue.length > 0) {
      const group = this.readQueue.splice(0, MAX_GROUPED_READS);
      this.inFlightReads++;
      void this.runReads(group).finally(() => {
        this.inFlightReads--;
        this.flushReads();
      });
    }
  }

  /** One statement for the group; settles every read in it, never throws. */
  private async runReads(group: PendingRead[]): Promise<void> {
    try {
      if (group.length === 1) {
        const r = group[0];
        const res = await this.query<EventRow>('motor_es_read_stream', READ_STREAM_SQL, [r.streamId, r.from.toString(), r.maxCount]);
        r.resolve(res.rows.map(toRecorded));
        return;
      }
      const res = await this.query<EventRow & { req: number }>('motor_es_read_streams', READ_STREAMS_SQL, [
        group.map((r) => r.streamId), group.map((r) => r.from.toString()), group.map((r) => r.maxCount),
      ]);
      const byRequest: RecordedEvent[][] = group.map(() => []);
      for (const row of res.rows) byRequest[row.req - 1].push(toRecorded(row));
      group.forEach((r, i) => r.resolve(byRequest[i]));
    } catch (err) {
      for (const r of group) r.reject(err);
    }
  }

  async readAll(options: ReadAllOptions): Promise<RecordedEvent[]> {
    checkMaxCount(options.maxCount);
    return this.readAfter(parsePosition(options.after), options.maxCount);
  }

  async countAfter(options: CountAfterOptions): Promise<CountAfter> {
    checkMaxCount(options.maxCount);
    const cursor = parsePosition(options.after);
    const res = await this.query<{ examined: number; matching: number; oldest: Date | null }>(
      'motor_es_count_after', COUNT_AFTER_SQL, [cursor.txId, cursor.globalPosition, options.maxCount, options.types ? [...options.types] : null],
    );
    const row = res.rows[0];
    return { examined: row.examined, matching: row.matching, oldestMatching: row.oldest };
  }

  async *subscribeToAll(options: SubscribeOptions): AsyncIterable<LogBatch> {
    const { signal } = options;
    const batchSize = options.batchSize ?? 500;
    const types = options.types ? [...options.types] : null;
    const omit = options.omitData ? [...options.omitData] : [];
    const me: Sleeper = { types: types ? new Set(types) : null, omit: new Set(omit), omitKey: omitKeyOf(omit), woken: false, resolve: null, lastWake: 0 };
    this.sleepers.add(me);
    try {
      yield* this.follow(me, parsePosition(options.after), batchSize, types, omit, signal);
    } finally {
      this.sleepers.delete(me);
    }
  }

  private async *follow(me: Sleeper, from: Cursor, batchSize: number, types: string[] | null, omit: string[], signal: AbortSignal): AsyncIterable<LogBatch> {
    let cursor = from;
    // With a type filter, a stretch of skipped entries is handed over as a position-only batch at
    // most every SKIPPED_POSITION_MS: consumers can persist every batch they get.
    let unsent = false;
    let handedAt = performance.now();
    let heldBackDelay = HELD_BACK_MIN_MS;
    let errorDelay = 100;
    // At the head (the last read did not fill its window): reads are shared with the store's other
    // subscriptions (sharedWindows.ts). Behind, it reads only its own types, as fast as it can.
    let atHead = false;
    while (!signal.aborted && !this.closed) {
      this.ensureListener();
      me.woken = false;
      const seen = me.lastWake;
      let page: Page;
      try {
        const shared = this.shareWindows ? this.windows.find(cursor, batchSize, me, performance.now()) : null;
        if (shared) {
          page = this.pageOf(shared, batchSize);
        } else if (this.shareWindows && atHead) {
          page = await this.readShared(cursor, batchSize, me);
        } else {
          page = await this.readWindow(cursor, batchSize, types, omit);
        }
        atHead = page.examined < batchSize;
        errorDelay = 100;
      } catch (err) {
        if (signal.aborted || this.closed) return;
        if (!isUnavailable(err)) throw err;
        // The LISTEN connection only receives, so it cannot tell that its server stopped answering
        // or went away meanwhile: replaced, so that wake-ups come back with the database.
        void this.dropListener();
        await this.sleep(me, errorDelay, signal); // a subscription outlives a database restart
        errorDelay = Math.min(errorDelay * 2, 5000);
        continue;
      }
      if (page.last) {
        cursor = page.last;
        heldBackDelay = HELD_BACK_MIN_MS;
        unsent = true;
      }
      const sinceHanded = performance.now() - handedAt;
      const more = page.more ?? page.examined === batchSize;
      if (unsent && (page.events.length > 0 || sinceHanded >= SKIPPED_POSITION_MS)) {
        unsent = false;
        handedAt = performance.now();
        yield { events: page.events, position: formatCursor(cursor), more };
      }
      if (more) continue;
      // Woken since this read began, or handed a window read before a NOTIFY for its types that this
      // loop had already taken in (me.woken was reset after it): look at the log again at once
      // (when the consumer asks for its next batch) instead of sleeping until the next NOTIFY.
      if (me.woken || (page.notifications !== undefined && page.notifications < seen)) continue;
      const untilHandover = unsent ? Math.max(1, SKIPPED_POSITION_MS - sinceHanded) : Infinity;
      if (page.heldBack) {
        // A NOTIFY only says the writer committed; an older transaction still running (anywhere in
        // the cluster) keeps its events behind the horizon and may never notify: re-poll soon.
        await this.sleep(me, Math.min(heldBackDelay, untilHandover), signal);
        heldBackDelay = Math.min(heldBackDelay * 2, HELD_BACK_MAX_MS);
      } else {
        await this.sleep(me, Math.min(this.pollIntervalMs, untilHandover), signal);
      }
    }
  }

  /**
   * A window after `cursor` of every type the store's subscriptions want (sharedWindows.ts),
   * remembered for the others, and `me`'s view of it. One read per cursor and size at a time:
   * a subscription arriving while it runs waits for it, if it covers what that one wants.
   */
  private async readShared(cursor: Cursor, batchSize: number, me: Sleeper): Promise<Page> {
    const key = `${formatCursor(cursor)}/${batchSize}`;
    let flight = this.sharedReads.get(key);
    if (!flight || !covers(flight.filter, me)) {
      const filter = unionFilter(me, this.sleepers);
      const notifications = this.notifications;
      const entry = {
        filter,
        notifications,
        read: this.readWindow(cursor, batchSize, filter.types ? [...filter.types] : null, [...filter.omit]).then((page) => {
          if (!page.last) return { window: null, heldBack: page.heldBack };
          const window: SharedWindow = {
            ...filter, from: cursor, last: page.last, examined: page.examined, batchSize, heldBack: page.heldBack, notifications, readAt: performance.now(),
            entries: page.events.map((event) => ({ at: parsePosition(event.position), event })),
          };
          this.windows.remember(window);
          return { window, heldBack: page.heldBack };
        }).finally(() => {
          if (this.sharedReads.get(key) === entry) this.sharedReads.delete(key);
        }),
      };
      flight = entry;
      this.sharedReads.set(key, entry);
    }
    const { notifications } = flight;
    const { window, heldBack } = await flight.read;
    if (!window) return { events: [], examined: 0, last: null, heldBack, notifications };
    return this.pageOf(view(window, cursor, me), batchSize);
  }

  /** A subscription's page from windows read for others: `more` when the store has read past them. */
  private pageOf(v: WindowView, batchSize: number): Page {
    return {
      events: v.events, examined: v.full ? batchSize : v.examined, last: v.last, heldBack: v.heldBack,
      more: v.full || compareCursors(this.headSeen, v.last) > 0, notifications: v.notifications,
    };
  }

  /**
   * Physically deletes every event of these streams. Global positions of all other events are
   * unaffected (positions are never renumbered; a gap is invisible to readers and checkpoints).
   */
  async deleteStreams(streamIds: string[]): Promise<void> {
    if (streamIds.length === 0) return;
    await this.query('motor_es_delete_streams', DELETE_STREAMS_SQL, [streamIds]);
    this.windows.clear();
  }

  /** The log's last entry in readAll's order: a backward probe of the (tx_id, global_position) index. */
  async headPosition(options: { types?: readonly string[] } = {}): Promise<GlobalPosition | null> {
    const res = options.types
      ? await this.query<{ tx_id: string; global_position: string }>('motor_es_head_of_types', HEAD_OF_TYPES_SQL, [options.types])
      : await this.query<{ tx_id: string; global_position: string }>('motor_es_head', HEAD_SQL, []);
    const row = res.rows[0];
    return row ? formatCursor({ txId: row.tx_id, globalPosition: row.global_position }) : null;
  }

  async ping(): Promise<void> {
    await this.query(undefined, 'SELECT 1', []);
  }

  /** Events currently in the log (progress totals of a rebuild). */
  async countAll(): Promise<number> {
    const r = await this.query(undefined, 'SELECT count(*)::bigint AS n FROM events', []);
    return Number((r.rows[0] as { n: string }).n);
  }

  /**
   * `<tx_id>:<global_position>` with numbers the columns hold (xid8, bigint): a client's id with
   * more made the queries that read from it fail (a resumed event stream said `gap` instead of
   * 400 invalid_last_event_id).
   */
  isPosition(value: string): boolean {
    const m = /^(\d{1,20}):(\d{1,19})$/.exec(value);
    return m !== null && BigInt(m[1]) <= XID8_MAX && BigInt(m[2]) <= BIGINT_MAX;
  }

  /** (transaction id, position) order: the order readAll and subscribeToAll hand events over in. */
  comparePositions(a: GlobalPosition, b: GlobalPosition): number {
    const x = parsePosition(a);
    const y = parsePosition(b);
    const tx = BigInt(x.txId) - BigInt(y.txId);
    if (tx !== 0n) return tx < 0n ? -1 : 1;
    const pos = BigInt(x.globalPosition) - BigInt(y.globalPosition);
    return pos === 0n ? 0 : pos < 0n ? -1 : 1;
  }

  /** Lets queued appends finish, ends active subscriptions, the LISTEN connection and the pool. */
  close(): Promise<void> {
    if (!this.closing) {
      this.closed = true;
      this.wake();
      this.closing = (async () => {
        await new Promise<void>((resolve) => {
          if (this.queue.length === 0 && this.inFlightBatches === 0) resolve();
          else this.drainWaiters.push(resolve);
        });
        if (this.listenerConnecting) await this.listenerConnecting;
        if (this.listenerRetryTimer) clearTimeout(this.listenerRetryTimer);
        await this.dropListener();
        await this.pool.end();
      })();
    }
    return this.closing;
  }

  // ------------------------------------------------------------------ appends

  private submit(p: Pending): void {
    if (!this.groupCommit) {
      this.inFlightBatches++;
      void this.runBatch([p]).finally(() => this.batchDone([p]));
      return;
    }
    this.queue.push(p);
    if (!this.flushScheduled) {
      this.flushScheduled = true;
      setImmediate(() => {
        this.flushScheduled = false;
        this.flush();
      });
    }
  }

  /**
   * Starts batches while a slot is free, sharing what is queued evenly between the free slots.
   * Appends asked for in one turn of the event loop (e.g. the requests a Redis pipeline's reply
   * released together) wait for the end of that turn (submit's setImmediate) and leave as one
   * batch per free slot, which PostgreSQL runs side by side, rather than the first one alone and
   * all the others, in one batch, after it.
   */
  private flush(): void {
    while (this.inFlightBatches < this.maxInFlightBatches && this.queue.length > 0) {
      const batch = this.takeBatch(Math.ceil(this.queue.length / (this.maxInFlightBatches - this.inFlightBatches)));
      if (batch.length === 0) return; // everything queued waits for a stream already in flight
      this.inFlightBatches++;
      for (const p of batch) this.inFlightStreams.add(p.req.streamId);
      void this.runBatch(batch).finally(() => this.batchDone(batch));
    }
  }

  private batchDone(batch: Pending[]): void {
    this.inFlightBatches--;
    for (const p of batch) this.inFlightStreams.delete(p.req.streamId);
    this.flush();
    if (this.queue.length === 0 && this.inFlightBatches === 0) {
      const waiters = this.drainWaiters;
      this.drainWaiters = [];
      for (const w of waiters) w();
    }
  }

  /** Oldest first, at most one append per stream (executeBatch needs it), maxBatchEvents events and `maxRequests` appends. */
  private takeBatch(maxRequests: number): Pending[] {
    const batch: Pending[] = [];
    const rest: Pending[] = [];
    const streams = new Set<string>();
    let events = 0;
    for (const p of this.queue) {
      const n = p.req.events.length;
      const fits = batch.length === 0 || (events + n <= this.maxBatchEvents && batch.length < maxRequests);
      if (fits && !streams.has(p.req.streamId) && !this.inFlightStreams.has(p.req.streamId)) {
        batch.push(p);
        streams.add(p.req.streamId);
        events += n;
      } else {
        rest.push(p);
      }
    }
    this.queue = rest;
    return batch;
  }

  /** Runs one transaction for the batch and settles every append in it; never throws. */
  private async runBatch(batch: Pending[]): Promise<void> {
    let client: pg.PoolClient;
    try {
      client = await this.pool.connect();
    } catch (err) {
      for (const p of batch) p.reject(toStoreError(err));
      return;
    }
    let judged: { outcomes: AppendOutcome[]; broken?: Error };
    try {
      judged = await within(this.appendTimeoutMs, judgeBatch(client, batch), () => new EventStoreUnavailableError(
        `PostgreSQL event store did not answer within ${this.appendTimeoutMs} ms; the outcome of the append is unknown (retry with the same Idempotency-Key)`,
      ));
    } catch (err) {
      // Past the deadline: the connection is dropped below (its transaction, if still open, is
      // rolled back by the server; one that committed meanwhile stays committed), and whatever the
      // abandoned judging still does on it fails and is ignored.
      judged = { outcomes: batch.map(() => ({ kind: 'failed', error: err as Error })), broken: err as Error };
    }
    client.release(judged.broken);
    const { outcomes } = judged;
    batch.forEach((p, i) => {
      const outcome = outcomes[i];
      if (outcome.kind === 'ok') p.resolve(outcome.result);
      else if (outcome.kind === 'failed') p.reject(toStoreError(outcome.error));
      else if (++p.attempts < MAX_APPEND_ATTEMPTS && !this.closed) this.requeue(p);
      else p.reject(new WrongExpectedRevisionError(p.req.streamId, p.req.expected, 'no_stream'));
    });
  }

  private requeue(p: Pending): void {
    if (this.groupCommit) {
      this.queue.unshift(p); // flushed by batchDone
    } else {
      this.submit(p);
    }
  }

  // ------------------------------------------------------------------ reads and wake-ups

  private async readAfter(cursor: Cursor, maxCount: number): Promise<RecordedEvent[]> {
    const res = await this.query<EventRow>('motor_es_read_all', READ_ALL_SQL, [cursor.txId, cursor.globalPosition, maxCount]);
    return res.rows.map(toRecorded);
  }

  private async readWindow(cursor: Cursor, maxCount: number, types: string[] | null, omit: string[]): Promise<Page> {
    const res = await this.query<EventRow & { held: boolean; examined: number | null }>('motor_es_subscribe', SUBSCRIBE_SQL, [cursor.txId, cursor.globalPosition, maxCount, types, omit]);
    const rows = res.rows.filter((row) => row.tx_id !== null); // an empty window is one row of nulls
    const events: RecordedEvent[] = [];
    for (const row of rows) if (row.event_id !== null) events.push(toRecorded(row));
    const tail = rows[rows.length - 1];
    if (tail) {
      const reached = { txId: tail.tx_id, globalPosition: tail.global_position };
      if (compareCursors(reached, this.headSeen) > 0) this.headSeen = reached;
    }
    return {
      events,
      examined: tail?.examined ?? 0,
      last: tail ? { txId: tail.tx_id, globalPosition: tail.global_position } : null,
      heldBack: res.rows[0]?.held === true,
    };
  }

  /**
   * One read statement on a pooled connection, within readTimeoutMs. A connection whose statement
   * went unanswered is dropped, not pooled: node-postgres answers a connection's statements in
   * order, so the next read lent it would wait behind this one.
   */
  private async query<R extends pg.QueryResultRow = pg.QueryResultRow>(name: string | undefined, text: string, values: unknown[]): Promise<pg.QueryResult<R>> {
    let client: pg.PoolClient;
    try {
      client = await this.pool.connect();
    } catch (err) {
      throw toStoreError(err);
    }
    let broken: Error | undefined;
    try {
      const answer = client.query<R>(name ? { name, text, values } : { text, values });
      if (this.readTimeoutMs === null) return await answer;
      return await within(this.readTimeoutMs, answer, () => new EventStoreUnavailableError(`PostgreSQL event store did not answer a read within ${this.readTimeoutMs} ms`));
    } catch (err) {
      if (isUnavailable(err)) broken = err as Error;
      throw toStoreError(err);
    } finally {
      client.release(broken);
    }
  }

  /**
   * One LISTEN connection per store, shared by its subscriptions; (re)connected lazily by the
   * subscriptions' loops, and by itself a second after it is lost. Connecting and LISTEN have the
   * store's connect deadline: a listener that never connects would never be tried again (and
   * close() would wait for it). Every listenerCheckMs it must answer `SELECT 1` within that deadline,
   * else it is replaced: a connection that only receives cannot otherwise tell it was cut.
   */
  private ensureListener(): void {
    if (this.closed || this.listener || this.listenerConnecting) return;
    const wait = this.listenerRetryAt - Date.now();
    if (wait > 0) return this.retryListenerIn(wait);
    const client = new pg.Client({
      connectionString: this.connectionString, application_name: `${this.applicationName}-listen`, connectionTimeoutMillis: this.connectTimeoutMs,
      ...TCP_KEEPALIVE,
    });
    let dropped = false;
    const drop = (): void => {
      if (dropped) return;
      dropped = true;
      if (this.listener === client) void this.dropListener();
      else client.end().catch(() => undefined);
      this.listenerRetryAt = Date.now() + 1000;
      this.retryListenerIn(1000);
    };
    client.on('error', drop);
    client.on('notification', (n) => this.wake(typesOfPayload(n.payload)));
    this.listenerConnecting = (async () => {
      try {
        await client.connect();
        await within(this.connectTimeoutMs, client.query(`LISTEN ${NOTIFY_CHANNEL}`), () => new Error('LISTEN unanswered'));
        if (this.closed) {
          await client.end();
          return;
        }
        this.listener = client;
        client.on('end', drop);
        this.listenerTimer = setInterval(() => {
          within(this.connectTimeoutMs, client.query('SELECT 1'), () => new Error('listener check unanswered')).catch(drop);
        }, this.listenerCheckMs).unref();
        this.wake(); // appends made while nobody listened
      } catch {
        drop();
      } finally {
        this.listenerConnecting = null;
      }
    })();
  }

  /**
   * The subscriptions may all be asleep on their poll: the listener is retried without waiting for
   * them. The timer looks again rather than connecting outright: a timer can fire a millisecond
   * before Date.now() reaches its due time, and a connect may still be under way.
   */
  private retryListenerIn(ms: number): void {
    if (this.closed || this.listenerRetryTimer || this.sleepers.size === 0) return;
    this.listenerRetryTimer = setTimeout(() => {
      this.listenerRetryTimer = null;
      this.ensureListener();
    }, ms).unref();
  }

  private dropListener(): Promise<void> {
    const listener = this.listener;
    this.listener = null;
    if (this.listenerTimer) clearInterval(this.listenerTimer);
    this.listenerTimer = null;
    return listener ? listener.end().catch(() => undefined) : Promise.resolve();
  }

  /** Wakes the subscriptions that want any of `types` (every one when null). */
  private wake(types: string[] | null = null): void {
    this.notifications++;
    for (const s of this.sleepers) {
      if (types !== null && s.types !== null && !types.some((t) => s.types!.has(t))) continue;
      s.woken = true;
      s.lastWake = this.notifications;
      s.resolve?.();
    }
  }

  /** Waits `ms`, or less when a NOTIFY for this subscription arrives, the signal aborts or the store closes. */
  private sleep(me: Sleeper, ms: number, signal: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      if (signal.aborted || this.closed || me.woken) return resolve();
      const done = (): void => {
        clearTimeout(timer);
        signal.removeEventListener('abort', done);
        me.resolve = null;
        resolve();
      };
      const timer = setTimeout(done, ms);
      signal.addEventListener('abort', done);
      me.resolve = done;
    });
  }
}

function singleFailure(err: unknown): AppendOutcome {
  const code = (err as { code?: unknown }).code;
  if (code === '40P01' || code === '40001') return { kind: 'retry' }; // deadlock / serialization: try again
  return { kind: 'failed', error: err as Error };
}

function validateAppend(streamId: string, events: EventData[], expected: ExpectedRevision): void {
  if (typeof streamId !== 'string' || streamId.length === 0) throw new TypeError('streamId must be a non-empty string');
  if (!Array.isArray(events) || events.length === 0) throw new TypeError('append needs at least one event');
  for (const e of events) {
    if (typeof e.id !== 'string' || !UUID.test(e.id)) throw new TypeError(`Event id must be a UUID: ${String(e.id)}`);
    if (typeof e.type !== 'string' || e.type.length === 0) throw new TypeError('Event type must be a non-empty string');
    if (!Number.isInteger(e.version)) throw new TypeError('Event version must be an integer');
  }
  assertStorable(streamId, events);
  if (typeof expected === 'bigint' ? expected < 0n : !['any', 'no_stream', 'stream_exists'].includes(expected)) {
    throw new TypeError(`Invalid expected revision: ${String(expected)}`);
  }
}

/** The largest values of the log's position columns: tx_id (xid8, unsigned 64 bits) and global_position (bigint). */
const XID8_MAX = 2n ** 64n - 1n;
const BIGINT_MAX = 2n ** 63n - 1n;

function parsePosition(position: GlobalPosition | null | undefined): Cursor {
  if (position === null || position === undefined) return START;
  const m = /^(\d+):(\d+)$/.exec(position);
  if (!m) throw new TypeError(`Not a PostgreSQL event store position: ${position}`);
  return { txId: m[1], globalPosition: m[2] };
}

function checkMaxCount(maxCount: number): void {
  if (!Number.isInteger(maxCount) || maxCount < 1) throw new RangeError('maxCount must be a positive integer');
}

const formatCursor = (c: Cursor): GlobalPosition => `${c.txId}:${c.globalPosition}`;

function toRecorded(row: EventRow): RecordedEvent {
  return {
    id: row.event_id,
    type: row.type,
    version: row.version,
    data: row.data,
    metadata: row.metadata,
    streamId: row.stream_id,
    revision: BigInt(row.stream_revision),
    position: formatCursor({ txId: row.tx_id, globalPosition: row.global_position }),
    createdAt: row.created_at,
  };
}
