import type pg from 'pg';

/** Channel the append transaction notifies; LISTEN/NOTIFY is per database, so one name is enough. */
export const NOTIFY_CHANNEL = 'motor_events';

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
