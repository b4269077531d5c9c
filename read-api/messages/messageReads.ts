import type { Knex } from 'knex';
import type { EventStore, RecordedEvent } from '../../domain/eventStore';
import { streamName } from '../../domain/eventStore';
import { isUuid } from '../../domain/ids';
import {
  foldMessageView, getMessage, getMessageBySmtpId, getMessageEvents, getRecipients, messageRecordOf, messageTimelineOf, recipientsRecordOf, stripAngleBrackets,
  type MessageRecord, type RecipientsRecord, type TimelineEntry,
} from '../../projections/messages';

/**
 * Message reads with read-your-writes: the read model answers when it has the message; a message
 * accepted a moment ago that the projector has not applied yet is folded from its own stream with
 * the same pure view code, so GET /messages/{id} never 404s right after a 200.
 */

async function stream(store: EventStore, id: string): Promise<RecordedEvent[]> {
  return store.readStream(streamName('message', id));
}

const asInputs = (events: RecordedEvent[]) => events.map((e) => ({ id: e.id, type: e.type, data: e.data, createdAt: e.createdAt, revision: e.revision }));

export async function readMessage(db: Knex, store: EventStore, id: string): Promise<MessageRecord | null> {
  if (!isUuid(id)) return null;
  const row = await getMessage(db, id);
  if (row) return row;
  const view = foldMessageView(asInputs(await stream(store, id)));
  return view && view.accepted ? messageRecordOf(view) : null;
}

/**
 * Lookup by RFC Message-ID inside one block. Motor's own Message-IDs are `<send id>@<domain>`, so a
 * message accepted a moment ago is found in its stream too.
 */
export async function readMessageBySmtpId(db: Knex, store: EventStore, motorBlockId: string, smtpMessageId: string): Promise<MessageRecord | null> {
  const row = await getMessageBySmtpId(db, { motorBlockIds: [motorBlockId] }, smtpMessageId);
  if (row) return row;
  const sid = stripAngleBrackets(smtpMessageId);
  const local = sid.slice(0, sid.lastIndexOf('@'));
  if (!isUuid(local)) return null;
  const m = await readMessage(db, store, local.toLowerCase());
  return m && m.motorBlockId === motorBlockId && m.smtpMessageId === sid ? m : null;
}

export async function readRecipients(db: Knex, store: EventStore, id: string): Promise<RecipientsRecord | null> {
  if (!isUuid(id)) return null;
  const row = await getRecipients(db, id);
  if (row) return row;
  const view = foldMessageView(asInputs(await stream(store, id)));
  return view && view.accepted ? recipientsRecordOf(view) : null;
}

/** The message-level timeline (one row per step of the collapsed outcome), from the read model or, before it has the message, from the stream with the same fold. */
export async function readTimeline(db: Knex, store: EventStore, id: string): Promise<TimelineEntry[]> {
  if (!isUuid(id)) return [];
  const rows = await getMessageEvents(db, id);
  if (rows.length > 0) return rows;
  return messageTimelineOf(asInputs(await stream(store, id)));
}
