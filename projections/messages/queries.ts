/**
 * Read queries of the messages read model, free of HTTP: controllers authorize, call one of these,
 * mask (pii.ts) and shape the answer. Every function takes the schema last for tests and rebuilds;
 * the default is the live schema.
 */
import type { Knex } from 'knex';
import { DomainError } from '../../domain/errors.js';
import { schemaFor } from '../runner.js';
import { parseLogQuery, parseStatusFilter, outcomesOf, type StatusFilter } from './logQuery.js';
import { timelineFromRow, recipientFromRow, viewFromRows, type EventRow, type MessageRow, type RecipientRow } from './rows.js';
import { messageTimeline, stripAngleBrackets, type MessageView, type Outcome, type RecipientView, type TimelineEntry } from './view.js';

export { parseLogQuery, parseStatusFilter, SENT_OUTCOMES, STATUS_FILTERS, type LogQuery, type StatusFilter } from './logQuery.js';
export type { TimelineEntry } from './view.js';

export const MESSAGES_SCHEMA = schemaFor('messages');

/** One message, multi-recipient sends collapsed to one row. Addresses unmasked. */
export interface MessageRecord {
  id: string;
  motorBlockId: string | null;
  accountId: string | null;
  domainId: string | null;
  smtpMessageId: string | null;
  currentOutcome: Outcome;
  isTerminal: boolean;
  from: string | null;
  fromName: string | null;
  subject: string | null;
  recipients: string[];
  recipientDomains: string[];
  expectedCount: number;
  queuedAt: Date;
  processedAt: Date | null;
  deliveredAt: Date | null;
  bouncedAt: Date | null;
  smtpCode: string | null;
  smtpResponse: string | null;
  metadata: Record<string, string>;
  source: 'http' | 'smtp' | null;
  updatedAt: Date;
}

export interface RecipientRecord {
  recipient: string;
  domain: string;
  outcome: Outcome;
  isTerminal: boolean;
  attempts: number;
  smtpCode: string | null;
  enhancedCode: string | null;
  smtpResponse: string | null;
  mx: string | null;
  lastEventAt: Date;
  nextAttemptAt: Date | null;
}

export interface RecipientsRecord {
  messageId: string;
  expectedCount: number;
  allTerminal: boolean;
  recipients: RecipientRecord[];
}

/** Also used for the read-your-writes fallback: messageRecordOf(foldMessageView(stream)). */
export function messageRecordOf(v: MessageView): MessageRecord {
  return {
    id: v.id,
    motorBlockId: v.motorBlockId,
    accountId: v.accountId,
    domainId: v.domainId,
    smtpMessageId: v.smtpMessageId,
    currentOutcome: v.currentOutcome,
    isTerminal: v.isTerminal,
    from: v.from,
    fromName: v.fromName,
    subject: v.subject,
    recipients: v.recipients,
    recipientDomains: v.recipientDomains,
    expectedCount: v.expectedCount,
    queuedAt: v.queuedAt,
    processedAt: v.processedAt,
    deliveredAt: v.deliveredAt,
    bouncedAt: v.bouncedAt,
    smtpCode: v.smtpCode,
    smtpResponse: v.smtpResponse,
    metadata: v.metadata,
    source: v.source,
    updatedAt: v.updatedAt,
  };
}

const recipientRecordOf = (r: RecipientView): RecipientRecord => ({
  recipient: r.recipient,
  domain: r.domain,
  outcome: r.outcome,
  isTerminal: r.isTerminal,
  attempts: r.attempts,
  smtpCode: r.smtpCode,
  enhancedCode: r.enhancedCode,
  smtpResponse: r.smtpResponse,
  mx: r.mx,
  lastEventAt: r.lastEventAt,
  nextAttemptAt: r.nextAttemptAt,
});

/** Read-your-writes fallback for GET /messages/{id}/recipients. */
export function recipientsRecordOf(v: MessageView): RecipientsRecord {
  return {
    messageId: v.id,
    expectedCount: v.expectedCount,
    allTerminal: v.recipientStates.length > 0 && v.recipientStates.every((r) => r.isTerminal),
    recipients: v.recipientStates.map(recipientRecordOf),
  };
}

const messageFromRow = (m: MessageRow): MessageRecord => messageRecordOf(viewFromRows(m, []));

const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const t = (schema: string, table: string) => `"${schema}"."${table}"`;

/** Null when unknown (or not a uuid, or only delivery events were seen). */
export async function getMessage(db: Knex, id: string, schema = MESSAGES_SCHEMA): Promise<MessageRecord | null> {
  if (!UUID_RE.test(id)) return null;
  const r = await db.raw(`select * from ${t(schema, 'messages')} where id = ? and accepted`, [id]);
  return r.rows.length ? messageFromRow(r.rows[0] as MessageRow) : null;
}

export type SmtpIdScope = { motorBlockIds: readonly string[] } | { accountId: string };

/** Lookup by RFC 5322 Message-ID (with or without angle brackets) inside the caller's blocks or account; newest first. */
export async function getMessageBySmtpId(db: Knex, scope: SmtpIdScope, smtpMessageId: string, schema = MESSAGES_SCHEMA): Promise<MessageRecord | null> {
  const sid = stripAngleBrackets(smtpMessageId);
  if (sid === '') return null;
  const bindings: Knex.RawBinding[] = [sid];
  let where: string;
  if ('accountId' in scope) {
    if (!UUID_RE.test(scope.accountId)) return null;
    where = 'account_id = ?';
    bindings.push(scope.accountId);
  } else {
    const ids = scope.motorBlockIds.filter((x) => UUID_RE.test(x));
    if (ids.length === 0) return null;
    where = 'motor_block_id = any(?::uuid[])';
    bindings.push([...ids]);
  }
  const r = await db.raw(`select * from ${t(schema, 'messages')} where smtp_message_id = ? and ${where} and accepted order by queued_at desc, id desc limit 1`, bindings);
  return r.rows.length ? messageFromRow(r.rows[0] as MessageRow) : null;
}

/**
 * Lifecycle timeline, oldest first, one row per step of the message's collapsed outcome (never one
 * per recipient; view.ts messageTimeline); [] for an unknown message. The stored rows are per event;
 * they are folded here with the addressed recipients of the message row (one query: a message has a
 * handful of events).
 */
export async function getMessageEvents(db: Knex, id: string, schema = MESSAGES_SCHEMA): Promise<TimelineEntry[]> {
  if (!UUID_RE.test(id)) return [];
  const r = await db.raw(
    `select e.*, m.recipients as message_recipients from ${t(schema, 'message_events')} e
       left join ${t(schema, 'messages')} m on m.id = e.message_id
      where e.message_id = ? order by e.at, e.revision, e.event_id`,
    [id],
  );
  const rows = r.rows as Array<EventRow & { message_recipients: string[] | null }>;
  return messageTimeline(rows.map(timelineFromRow), rows[0]?.message_recipients ?? []);
}

export async function getRecipients(db: Knex, id: string, schema = MESSAGES_SCHEMA): Promise<RecipientsRecord | null> {
  if (!UUID_RE.test(id)) return null;
  const m = await db.raw(`select expected_count from ${t(schema, 'messages')} where id = ? and accepted`, [id]);
  if (m.rows.length === 0) return null;
  const r = await db.raw(`select * from ${t(schema, 'message_recipients')} where message_id = ? order by ordinal, recipient`, [id]);
  const recipients = (r.rows as RecipientRow[]).map(recipientFromRow);
  return {
    messageId: id,
    expectedCount: m.rows[0].expected_count as number,
    allTerminal: recipients.length > 0 && recipients.every((x) => x.isTerminal),
    recipients: recipients.map(recipientRecordOf),
  };
}

// ------------------------------------------------------------------------------------- logs

export interface LogSearch {
  motorBlockId: string;
  /** Inclusive lower bound on queuedAt (Date or ISO 8601). */
  from?: Date | string | null;
  /** Inclusive upper bound on queuedAt. */
  to?: Date | string | null;
  /** Filter language, see logQuery.ts. */
  query?: string | null;
  /** status / currentOutcome parameter: one value or a comma-separated list (ORed). */
  status?: string | null;
  /** 1..1000, default 100. */
  limit?: number | null;
  /** nextCursor of the previous page. */
  cursor?: string | null;
}

export interface LogPage {
  items: MessageRecord[];
  nextCursor: string | null;
}

export const LOGS_DEFAULT_LIMIT = 100;
export const LOGS_MAX_LIMIT = 1000;

/** `2026-11-24T08:56:23.050136+00:00`: a timestamptz as to_json renders it (µs optional). */
const CURSOR_TIME_RE = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.\d{1,6})?[+-](\d{2}):(\d{2})$/;

/** A time PostgreSQL takes back: real calendar fields, an offset within ±15:59, and no earlier than 1970. */
function isCursorTime(t: string): boolean {
  const m = CURSOR_TIME_RE.exec(t);
  if (!m) return false;
  const [y, mo, d, h, mi, s, oh, om] = m.slice(1).map(Number);
  const daysInMonth = new Date(Date.UTC(y, mo, 0)).getUTCDate();
  return y >= 1970 && mo >= 1 && mo <= 12 && d >= 1 && d <= daysInMonth && h <= 23 && mi <= 59 && s <= 59 && oh <= 15 && om <= 59;
}

/** Opaque keyset cursor: base64url of JSON [queuedAt as PostgreSQL renders it (µs), id]. */
export function encodeCursor(queuedAt: string, id: string): string {
  return Buffer.from(JSON.stringify([queuedAt, id]), 'utf8').toString('base64url');
}

export function decodeCursor(cursor: string): { queuedAt: string; id: string } {
  const bad = () => new DomainError({ code: 'invalid_cursor', status: 400, message: 'cursor is not a nextCursor returned by this endpoint', nextAction: 'Restart without cursor.' });
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
  } catch {
    throw bad();
  }
  if (!Array.isArray(parsed) || parsed.length !== 2 || typeof parsed[0] !== 'string' || typeof parsed[1] !== 'string') throw bad();
  // Only the form to_json(timestamptz) renders (what encodeCursor is given): JavaScript's Date
  // parses much that PostgreSQL refuses ("0", "2026", years past 9999), and a crafted cursor must be
  // a 400, not a query error.
  if (!isCursorTime(parsed[0]) || !UUID_RE.test(parsed[1])) throw bad();
  return { queuedAt: parsed[0], id: parsed[1] };
}

function parseTime(name: string, v: Date | string): Date {
  const d = v instanceof Date ? v : new Date(v);
  if (Number.isNaN(d.getTime())) throw new DomainError({ code: 'invalid_query', status: 400, message: `${name} must be an ISO 8601 timestamp` });
  return d;
}

/** Newest first, keyset-paginated on (queued_at, id). */
export async function searchLogs(db: Knex, search: LogSearch, schema = MESSAGES_SCHEMA): Promise<LogPage> {
  const limit = search.limit ?? LOGS_DEFAULT_LIMIT;
  if (!Number.isInteger(limit) || limit < 1 || limit > LOGS_MAX_LIMIT) {
    throw new DomainError({ code: 'invalid_query', status: 400, message: `limit must be an integer between 1 and ${LOGS_MAX_LIMIT}` });
  }
  const filters = parseLogQuery(search.query);
  const statusParam: StatusFilter[] = search.status ? search.status.split(',').filter((s) => s.trim() !== '').map(parseStatusFilter) : [];
  const cursor = search.cursor ? decodeCursor(search.cursor) : null;
  if (!UUID_RE.test(search.motorBlockId)) return { items: [], nextCursor: null };

  const where: string[] = ['motor_block_id = ?', 'accepted'];
  const b: Knex.RawBinding[] = [search.motorBlockId];
  if (search.from) {
    where.push('queued_at >= ?');
    b.push(parseTime('from', search.from));
  }
  if (search.to) {
    where.push('queued_at <= ?');
    b.push(parseTime('to', search.to));
  }
  if (filters.recipients.length) {
    where.push('recipients @> ?::text[]');
    b.push(filters.recipients);
  }
  if (filters.domains.length) {
    where.push('recipient_domains @> ?::text[]');
    b.push(filters.domains);
  }
  if (statusParam.length) {
    where.push('current_outcome = any(?::text[])');
    b.push([...new Set(statusParam.flatMap(outcomesOf))]);
  }
  for (const s of filters.statuses) {
    where.push('current_outcome = any(?::text[])');
    b.push([...outcomesOf(s)]);
  }
  for (const m of filters.metadata) {
    where.push('metadata @> ?::jsonb');
    b.push(JSON.stringify({ [m.key]: m.value }));
  }
  if (cursor) {
    where.push('(queued_at, id) < (?::timestamptz, ?::uuid)');
    b.push(cursor.queuedAt, cursor.id);
  }
  b.push(limit + 1);
  const r = await db.raw(
    `select *, to_json(queued_at) #>> '{}' as cursor_at from ${t(schema, 'messages')} where ${where.join(' and ')} order by queued_at desc, id desc limit ?`,
    b,
  );
  const rows = r.rows as Array<MessageRow & { cursor_at: string }>;
  const page = rows.slice(0, limit);
  const last = page[page.length - 1];
  return {
    items: page.map(messageFromRow),
    nextCursor: rows.length > limit && last ? encodeCursor(last.cursor_at, last.id) : null,
  };
}
