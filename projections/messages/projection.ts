/**
 * The messages projector: per batch, one query per table loads every affected row, the pure
 * reducer folds the batch in memory, and one statement per table writes the result back
 * (json_populate_recordset keeps it to a single bind parameter whatever the batch size).
 */
import type { Knex } from 'knex';
import type { RecordedEvent } from '../../domain/eventStore.js';
import { MESSAGE_CONTENT_FIELDS } from '../../domain/events.js';
import type { Projection } from '../runner.js';
import { messagesMigrations } from './migrations.js';
import {
  EVENT_COLUMNS,
  MESSAGE_COLUMNS,
  RECIPIENT_COLUMNS,
  eventRowOf,
  messageRowOf,
  recipientRowOf,
  viewFromRows,
  type MessageRow,
  type RecipientRow,
} from './rows.js';
import { MESSAGE_EVENT_TYPES, evolveMessageView, messageIdOf, timelineEntryOf, type MessageView, type RecipientView } from './view.js';
import { TOMBSTONE, withTombstones } from '../blockTombstone';
import { selectByIds } from '../lookup';

const q = (schema: string, table: string) => `"${schema}"."${table}"`;

async function upsert(
  trx: Knex.Transaction,
  schema: string,
  table: string,
  columns: readonly string[],
  conflict: readonly string[],
  rows: object[],
  onConflict: 'update' | 'nothing',
): Promise<void> {
  if (rows.length === 0) return;
  const cols = columns.map((c) => `"${c}"`).join(', ');
  const set = columns.filter((c) => !conflict.includes(c)).map((c) => `"${c}" = excluded."${c}"`).join(', ');
  const action = onConflict === 'update' ? `do update set ${set}` : 'do nothing';
  await trx.raw(
    `insert into ${q(schema, table)} (${cols}) select ${cols} from json_populate_recordset(null::${q(schema, table)}, ?::json) on conflict (${conflict.map((c) => `"${c}"`).join(', ')}) ${action}`,
    // Rows hold only JSON-native values and Dates (no bigint): the replacer-free stringify is the fast path.
    [JSON.stringify(rows)],
  );
}

export async function applyMessageEvents(trx: Knex.Transaction, schema: string, events: RecordedEvent[]): Promise<void> {
  const ids = [...new Set(events.map(messageIdOf).filter((id): id is string => id !== null))];
  if (ids.length === 0) return;

  // One index probe per id (projections/lookup.ts), never a scan of the table.
  const messageRows = await selectByIds<MessageRow>(trx, q(schema, 'messages'), 'id', ids);
  const recipientRows = await selectByIds<RecipientRow>(trx, q(schema, 'message_recipients'), 'message_id', ids);
  const recipientsBy = new Map<string, RecipientRow[]>();
  for (const r of recipientRows) {
    const list = recipientsBy.get(r.message_id);
    if (list) list.push(r);
    else recipientsBy.set(r.message_id, [r]);
  }
  const loaded = new Map<string, MessageView>();
  for (const m of messageRows) loaded.set(m.id, viewFromRows(m, recipientsBy.get(m.id) ?? []));

  const views = new Map<string, MessageView | null>(loaded);
  const timeline = [];
  for (const e of events) {
    const id = messageIdOf(e);
    if (id === null) continue;
    const next = evolveMessageView(views.get(id) ?? null, e);
    if (next) views.set(id, next);
    const entry = timelineEntryOf(e);
    if (entry) timeline.push(eventRowOf(entry));
  }

  const messages: MessageRow[] = [];
  const recipients: RecipientRow[] = [];
  for (const [id, view] of views) {
    if (!view) continue;
    const before = loaded.get(id);
    if (before === view) continue;
    messages.push(messageRowOf(view));
    const unchanged = new Set<RecipientView>(before?.recipientStates ?? []);
    for (const r of view.recipientStates) if (!unchanged.has(r)) recipients.push(recipientRowOf(id, r));
  }

  await upsert(trx, schema, 'messages', MESSAGE_COLUMNS, ['id'], messages, 'update');
  await upsert(trx, schema, 'message_recipients', RECIPIENT_COLUMNS, ['message_id', 'recipient'], recipients, 'update');
  await upsert(trx, schema, 'message_events', EVENT_COLUMNS, ['event_id'], timeline, 'nothing');
}

/** A deleted block's rows go with its history (projections/blockTombstone.ts, docs/BLOCKS.md). */
async function forgetBlockMessages(trx: Knex.Transaction, schema: string, motorBlockId: string): Promise<void> {
  const ids = `select id from ${q(schema, 'messages')} where motor_block_id = ?`;
  await trx.raw(`delete from ${q(schema, 'message_events')} where message_id in (${ids})`, [motorBlockId]);
  await trx.raw(`delete from ${q(schema, 'message_recipients')} where message_id in (${ids})`, [motorBlockId]);
  await trx.raw(`delete from ${q(schema, 'messages')} where motor_block_id = ?`, [motorBlockId]);
}

export const messagesProjection: Projection = {
  name: 'messages',
  migrations: messagesMigrations,
  handles: [...MESSAGE_EVENT_TYPES, TOMBSTONE],
  followsMessageTraffic: true,
  ignoresData: MESSAGE_CONTENT_FIELDS,
  applyBatch: withTombstones(applyMessageEvents, forgetBlockMessages),
};
