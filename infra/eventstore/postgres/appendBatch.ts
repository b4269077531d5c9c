import type pg from 'pg';
import {
  WrongExpectedRevisionError,
  type AppendResult,
  type EventData,
  type ExpectedRevision,
} from '../../../domain/eventStore.js';
import { NOTIFY_CHANNEL, notifyPayload } from './schema.js';

/** One append() call, validated; `ids` are the event ids lower-cased as PostgreSQL prints uuids. */
export interface AppendRequest {
  streamId: string;
  events: EventData[];
  ids: string[];
  expected: ExpectedRevision;
}

export type AppendOutcome =
  | { kind: 'ok'; result: AppendResult }
  | { kind: 'failed'; error: Error }
  /** Lost a race under 'any' / 'stream_exists' (someone else appended first): append again. */
  | { kind: 'retry' };

interface LandedRow { event_id: string; stream_id: string; stream_revision: string; tx_id: string; global_position: string }

// ON CONFLICT DO NOTHING covers both unique constraints: a taken (stream_id, stream_revision) is a
// concurrency conflict, a taken event_id is either a retried append or a conflict; verify() tells
// which. Rows are inserted in `i` order so global positions follow the order of each append.
const INSERT_SQL = `
INSERT INTO events (stream_id, stream_revision, event_id, type, version, data, metadata)
SELECT x.s, x.r, x.id, x.t, x.v, coalesce(x.d, 'null'::jsonb), coalesce(x.m, '{}'::jsonb)
FROM jsonb_to_recordset($1::jsonb) AS x(i int, s text, r bigint, id uuid, t text, v int, d jsonb, m jsonb)
ORDER BY x.i
ON CONFLICT DO NOTHING
RETURNING event_id::text, stream_id, stream_revision::text, tx_id::text, global_position::text`;

// Both lookups probe an index per key (LATERAL ... LIMIT is never flattened into a hash join), so
// they stay cheap on a log the planner has no statistics for.
export const CURRENT_SQL = `
SELECT k.id AS stream_id, c.revision::text AS revision
FROM unnest($1::text[]) AS k(id)
CROSS JOIN LATERAL (SELECT e.stream_revision AS revision FROM events e WHERE e.stream_id = k.id ORDER BY e.stream_revision DESC LIMIT 1) c`;

export const EXISTING_SQL = `
SELECT x.event_id::text, x.stream_id, x.stream_revision::text, x.tx_id::text, x.global_position::text
FROM unnest($1::uuid[]) AS k(id)
CROSS JOIN LATERAL (SELECT * FROM events e WHERE e.event_id = k.id LIMIT 1) x`;

const position = (row: { tx_id: string; global_position: string }): string => `${row.tx_id}:${row.global_position}`;
const rowKey = (streamId: string, revision: bigint): string => `${streamId}\u0000${revision}`;

/**
 * Appends several independent requests in ONE transaction (group commit): one multi-row INSERT
 * ... ON CONFLICT DO NOTHING, then each request is judged on its own rows, so a conflicting request
 * fails alone. Rows a failed request managed to insert are deleted before COMMIT, keeping every
 * append all-or-nothing. The caller must not put two requests for the same stream in one batch.
 * Outcomes are only valid once this resolves (i.e. after COMMIT).
 */
export async function executeBatch(client: pg.ClientBase, requests: AppendRequest[]): Promise<AppendOutcome[]> {
  const outcomes: Array<AppendOutcome | undefined> = new Array(requests.length);
  await client.query('BEGIN');
  try {
    const needCurrent = requests.filter((r) => r.expected !== 'no_stream').map((r) => r.streamId);
    const current = needCurrent.length > 0 ? await loadCurrent(client, needCurrent) : new Map<string, bigint>();
    const starts = requests.map((r) => startRevision(r.expected, current.get(r.streamId)));

    // Same stream order in every batch: two processes' batches lock index entries in one order and
    // cannot deadlock on each other.
    const order = requests.map((_, i) => i).filter((i) => starts[i] !== null)
      .sort((a, b) => (requests[a].streamId < requests[b].streamId ? -1 : requests[a].streamId > requests[b].streamId ? 1 : a - b));
    const rows: unknown[] = [];
    for (const i of order) {
      const { streamId, events, ids } = requests[i];
      events.forEach((e, k) => rows.push({
        i: rows.length, s: streamId, r: String(starts[i]! + BigInt(k)), id: ids[k], t: e.type, v: e.version,
        d: e.data ?? null, m: e.metadata ?? {},
      }));
    }
    const landed = new Map<string, LandedRow>();
    if (rows.length > 0) {
      const res = await client.query<LandedRow>({ name: 'motor_es_append', text: INSERT_SQL, values: [JSON.stringify(rows)] });
      for (const row of res.rows) landed.set(rowKey(row.stream_id, BigInt(row.stream_revision)), row);
    }

    const toVerify: number[] = [];
    requests.forEach((r, i) => {
      const own = ownRows(r, starts[i], landed);
      if (own.length === r.ids.length) {
        const last = own[own.length - 1];
        outcomes[i] = { kind: 'ok', result: { nextExpectedRevision: BigInt(last.stream_revision), position: position(last) } };
      } else {
        toVerify.push(i);
      }
    });
    let kept = landed.size;
    if (toVerify.length > 0) kept -= await verify(client, requests, starts, toVerify, landed, outcomes);
    if (kept > 0) {
      const types = requests.filter((_, i) => outcomes[i]?.kind === 'ok').flatMap((r) => r.events.map((e) => e.type));
      await client.query('SELECT pg_notify($1, $2)', [NOTIFY_CHANNEL, notifyPayload(types)]);
    }
    await client.query('COMMIT');
  } catch (err) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw err;
  }
  return outcomes as AppendOutcome[];
}

/** SQLSTATE motor_append_batch raises when a batch needs executeBatch's multi-statement path. */
const NEEDS_CAREFUL_PATH = 'MTR01';

interface FastOutcome { i: number; ok: boolean; rev: string; tx: string; gp: string }

/**
 * A batch in one round trip: motor_append_batch (schema.ts) inserts and commits when every request
 * lands whole, which is nearly always; when one does not (a conflict, a failed expectation, a
 * retried append) it rolls back and the batch goes through executeBatch, which judges each request.
 * Either way each request's outcome is the same as executeBatch alone would give.
 */
export async function appendBatch(client: pg.ClientBase, requests: AppendRequest[]): Promise<AppendOutcome[]> {
  const batch = requests.map((r) => ({
    s: r.streamId,
    x: String(r.expected),
    e: r.events.map((e, k) => ({ id: r.ids[k], t: e.type, v: e.version, d: e.data ?? null, m: e.metadata ?? {} })),
  }));
  let rows: FastOutcome[];
  try {
    const res = await client.query<{ r: FastOutcome[] }>({
      name: 'motor_es_append_fast',
      text: 'SELECT motor_append_batch($1::jsonb, $2::text) AS r',
      values: [JSON.stringify(batch), notifyPayload(requests.flatMap((r) => r.events.map((e) => e.type)))],
    });
    rows = res.rows[0].r;
  } catch (err) {
    if ((err as { code?: string }).code === NEEDS_CAREFUL_PATH) return executeBatch(client, requests);
    throw err;
  }
  return rows.map((o) => ({ kind: 'ok', result: { nextExpectedRevision: BigInt(o.rev), position: position({ tx_id: o.tx, global_position: o.gp }) } }));
}

async function loadCurrent(client: pg.ClientBase, streamIds: string[]): Promise<Map<string, bigint>> {
  const res = await client.query<{ stream_id: string; revision: string }>({ name: 'motor_es_current', text: CURRENT_SQL, values: [streamIds] });
  return new Map(res.rows.map((r) => [r.stream_id, BigInt(r.revision)]));
}

/** Revision of the request's first event, or null when the expectation already fails. */
function startRevision(expected: ExpectedRevision, current: bigint | undefined): bigint | null {
  if (expected === 'no_stream') return 0n; // a taken revision 0 is caught by the unique constraint
  if (expected === 'any') return current === undefined ? 0n : current + 1n;
  if (expected === 'stream_exists') return current === undefined ? null : current + 1n;
  // Checked here, not only by the constraint: an expected revision beyond the end would leave a gap.
  return current === expected ? expected + 1n : null;
}

/** The rows of this request that this batch inserted, in order (fewer than its events if some clashed). */
function ownRows(r: AppendRequest, start: bigint | null, landed: Map<string, LandedRow>): LandedRow[] {
  if (start === null) return [];
  const own: LandedRow[] = [];
  r.ids.forEach((id, k) => {
    const row = landed.get(rowKey(r.streamId, start + BigInt(k)));
    if (row && row.event_id === id) own.push(row);
  });
  return own;
}

/**
 * Judges the requests that did not land whole: a retried append (all ids already stored, in this
 * stream, consecutively, where the expectation put them) succeeds with the original result; a race
 * under 'any'/'stream_exists' is retried; anything else is a WrongExpectedRevisionError. Deletes
 * the partial rows of failed requests and returns how many it deleted.
 */
async function verify(
  client: pg.ClientBase,
  requests: AppendRequest[],
  starts: Array<bigint | null>,
  indexes: number[],
  landed: Map<string, LandedRow>,
  outcomes: Array<AppendOutcome | undefined>,
): Promise<number> {
  const ids = indexes.flatMap((i) => requests[i].ids);
  const res = await client.query<LandedRow>({ name: 'motor_es_existing', text: EXISTING_SQL, values: [ids] });
  const insertedHere = new Set([...landed.values()].map((r) => r.global_position));
  const existing = new Map(res.rows.filter((r) => !insertedHere.has(r.global_position)).map((r) => [r.event_id, r]));

  const toDelete: string[] = [];
  const failed: number[] = [];
  for (const i of indexes) {
    const r = requests[i];
    const own = ownRows(r, starts[i], landed);
    const retried = own.length === 0 ? retriedResult(r, existing) : null;
    if (retried) {
      outcomes[i] = { kind: 'ok', result: retried };
      continue;
    }
    toDelete.push(...own.map((row) => row.global_position));
    const idsTaken = r.ids.some((id) => existing.has(id));
    if ((r.expected === 'any' || r.expected === 'stream_exists') && starts[i] !== null && !idsTaken) {
      outcomes[i] = { kind: 'retry' };
    } else {
      failed.push(i);
    }
  }
  if (toDelete.length > 0) await client.query('DELETE FROM events WHERE global_position = ANY($1::bigint[])', [toDelete]);
  if (failed.length > 0) {
    const current = await loadCurrent(client, failed.map((i) => requests[i].streamId));
    for (const i of failed) {
      const r = requests[i];
      outcomes[i] = { kind: 'failed', error: new WrongExpectedRevisionError(r.streamId, r.expected, current.get(r.streamId) ?? 'no_stream') };
    }
  }
  return toDelete.length;
}

function retriedResult(r: AppendRequest, existing: Map<string, LandedRow>): AppendResult | null {
  const rows = r.ids.map((id) => existing.get(id));
  if (rows.some((row) => row === undefined || row.stream_id !== r.streamId)) return null;
  const first = BigInt(rows[0]!.stream_revision);
  if (!rows.every((row, k) => BigInt(row!.stream_revision) === first + BigInt(k))) return null;
  if (r.expected === 'no_stream' && first !== 0n) return null;
  if (typeof r.expected === 'bigint' && first !== r.expected + 1n) return null;
  const last = rows[rows.length - 1]!;
  return { nextExpectedRevision: BigInt(last.stream_revision), position: position(last) };
}
