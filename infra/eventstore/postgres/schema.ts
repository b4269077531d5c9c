import type pg from 'pg';

/** Channel the append transaction notifies; LISTEN/NOTIFY is per database, so one name is enough. */
export const NOTIFY_CHANNEL = 'motor_events';
/** Longest NOTIFY payload sent (PostgreSQL's limit is 8,000 bytes); a longer type list sends ''. */
export const NOTIFY_PAYLOAD_MAX = 4000;

/**
 * The NOTIFY payload of a committed batch: its distinct event types, comma-separated, or '' when
 * that is too long or a type contains a comma ('' wakes every subscriber).
 */
export function notifyPayload(types: Iterable<string>): string {
  const distinct = [...new Set(types)];
  const payload = distinct.join(',');
  return distinct.some((t) => t.includes(',')) || Buffer.byteLength(payload) > NOTIFY_PAYLOAD_MAX ? '' : payload;
}

/** The types a NOTIFY payload names; null (everyone) for ''. */
export function typesOfPayload(payload: string | undefined): string[] | null {
  return payload ? payload.split(',') : null;
}

/** Arbitrary constant key ("motor-es" in ASCII) serialising schema creation across processes. */
const SCHEMA_LOCK_KEY = '7885649494554797427';

/**
 * `tx_id` is the id of the appending transaction. Readers of the global log only see rows whose
 * transaction is older than every still-running one (`pg_snapshot_xmin`), and order by
 * (tx_id, global_position): a transaction that took its sequence number early but commits late
 * can therefore never be overtaken by a checkpoint.
 */
const SCHEMA_SQL = `
CREATE TABLE IF NOT EXISTS events (
  global_position bigserial PRIMARY KEY,
  tx_id xid8 NOT NULL DEFAULT pg_current_xact_id(),
  stream_id text NOT NULL,
  stream_revision bigint NOT NULL CHECK (stream_revision >= 0),
  event_id uuid NOT NULL UNIQUE,
  type text NOT NULL,
  version int NOT NULL,
  data jsonb NOT NULL,
  metadata jsonb NOT NULL DEFAULT '{}',
  created_at timestamptz NOT NULL DEFAULT now(),
  UNIQUE (stream_id, stream_revision)
);
CREATE INDEX IF NOT EXISTS events_tx_order ON events (tx_id, global_position);

-- The common case of a group-commit batch in ONE round trip (appendBatch.ts): every request's
-- expectation holds and all its events insert cleanly. Called as a single statement outside an
-- explicit transaction, so it commits (and notifies) on return. Anything else (a conflict, a
-- failed expectation, a retried append) raises MTR01 and rolls the whole batch back; the caller
-- then runs the batch through the multi-statement path, which sorts those cases out. \`payload\` is
-- the NOTIFY payload (notifyPayload: the batch's event types). The one-argument version of the
-- previous release is left in place for its processes during an upgrade; this code never calls it.
CREATE OR REPLACE FUNCTION motor_append_batch(batch jsonb, payload text) RETURNS jsonb LANGUAGE plpgsql AS $fn$
DECLARE
  result jsonb;
BEGIN
  WITH req AS (
    SELECT (r.ord - 1)::int AS i, r.x->>'s' AS s, r.x->>'x' AS expected, r.x->'e' AS ev, jsonb_array_length(r.x->'e') AS n
    FROM jsonb_array_elements(batch) WITH ORDINALITY AS r(x, ord)
  ), cur AS (
    -- The last revision of each stream by a backward probe of (stream_id, stream_revision): as
    -- "stream_id IN (...) GROUP BY", a plan cached while events had no statistics scanned the log.
    SELECT q.s AS stream_id, c.rev
    FROM (SELECT DISTINCT req.s FROM req WHERE req.expected <> 'no_stream') q
    CROSS JOIN LATERAL (SELECT e.stream_revision AS rev FROM events e WHERE e.stream_id = q.s ORDER BY e.stream_revision DESC LIMIT 1) c
  ), plan AS (
    SELECT req.i, req.s, req.ev, req.n, CASE
      WHEN req.expected = 'no_stream' THEN 0::bigint
      WHEN req.expected = 'any' THEN coalesce(cur.rev + 1, 0)
      WHEN req.expected = 'stream_exists' THEN cur.rev + 1
      WHEN cur.rev = req.expected::bigint THEN cur.rev + 1
    END AS start
    FROM req LEFT JOIN cur ON cur.stream_id = req.s
  ), ins AS (
    -- Same stream order in every batch (no deadlock between two writers); within a request, event order.
    INSERT INTO events (stream_id, stream_revision, event_id, type, version, data, metadata)
    SELECT p.s, p.start + k.ord - 1, (k.v->>'id')::uuid, k.v->>'t', (k.v->>'v')::int, coalesce(k.v->'d', 'null'::jsonb), coalesce(k.v->'m', '{}'::jsonb)
    FROM plan p CROSS JOIN LATERAL jsonb_array_elements(p.ev) WITH ORDINALITY AS k(v, ord)
    WHERE p.start IS NOT NULL
    ORDER BY p.s, k.ord
    ON CONFLICT DO NOTHING
    RETURNING events.stream_id, events.stream_revision, events.tx_id, events.global_position
  ), landed AS (
    SELECT ins.stream_id, count(*) AS n, max(ins.stream_revision) AS rev, max(ins.tx_id) AS tx, max(ins.global_position) AS gp
    FROM ins GROUP BY ins.stream_id
  )
  SELECT jsonb_agg(jsonb_build_object('i', p.i, 'ok', p.start IS NOT NULL AND coalesce(l.n, 0) = p.n,
           'rev', l.rev::text, 'tx', l.tx::text, 'gp', l.gp::text) ORDER BY p.i)
  INTO result
  FROM plan p LEFT JOIN landed l ON l.stream_id = p.s;

  IF EXISTS (SELECT 1 FROM jsonb_array_elements(result) x WHERE NOT (x->>'ok')::boolean) THEN
    RAISE EXCEPTION 'append batch needs the multi-statement path' USING ERRCODE = 'MTR01';
  END IF;
  PERFORM pg_notify('${NOTIFY_CHANNEL}', payload);
  RETURN result;
END
$fn$;
`;

/** Creates the schema if missing. Safe to run from several processes at once. */
export async function ensureSchema(client: pg.ClientBase): Promise<void> {
  await client.query('BEGIN');
  try {
    await client.query(`SELECT pg_advisory_xact_lock(${SCHEMA_LOCK_KEY}::bigint)`);
    await client.query(SCHEMA_SQL);
    await client.query('COMMIT');
  } catch (err) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw err;
  }
}
