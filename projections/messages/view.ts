/**
 * The message read model as a pure fold. The same reducer serves the batch projector (rows loaded,
 * folded in memory, written back) and the read-your-writes fallback (a message's own stream folded
 * with foldMessageView when the projection has not caught up yet).
 *
 * Every field is merged with an order-insensitive rule (earliest time for "first reached", latest
 * time for "latest reply", a total order for the outcome), so applying an event twice or late
 * changes nothing it should not: the fold is idempotent per event and tolerates out-of-order `at`s.
 * See docs/PROJECTIONS.md for the outcome collapse rule.
 */
import type {
  ComplaintReceived,
  DeliveryBounced,
  DeliveryDeferred,
  DeliveryFailed,
  DeliveryStarted,
  DeliverySucceeded,
  MessageAccepted,
} from '../../domain/events.js';
import { MESSAGE_EVENT_OUTCOME, MESSAGE_EVENT_TYPES, contentBytes, type MessageEventType } from '../../domain/message/message.js';

export const OUTCOMES = ['queued', 'processed', 'deferred', 'delivered', 'bounced', 'failed', 'complained'] as const;
export type Outcome = (typeof OUTCOMES)[number];
export const isOutcome = (s: string): s is Outcome => (OUTCOMES as readonly string[]).includes(s);

const TERMINAL: ReadonlySet<Outcome> = new Set<Outcome>(['delivered', 'bounced', 'failed', 'complained']);
export const isTerminalOutcome = (o: Outcome): boolean => TERMINAL.has(o);

/** The event types this read model folds and the outcome each one means (domain/message). */
export { MESSAGE_EVENT_OUTCOME, MESSAGE_EVENT_TYPES, type MessageEventType };

type RecipientEventData = DeliveryStarted | DeliverySucceeded | DeliveryDeferred | DeliveryBounced | DeliveryFailed | ComplaintReceived;

/** What the fold needs from an event: the recorded envelope is optional (pure tests pass `{type, data}`). */
export interface MessageEventInput {
  id?: string;
  type: string;
  data: unknown;
  createdAt?: Date;
  revision?: bigint;
}

export interface RecipientView {
  /** Address as addressed, with the domain part lower-cased. */
  recipient: string;
  domain: string;
  /** Order in the send's `to` list (recipients seen only in later events come after). */
  ordinal: number;
  outcome: Outcome;
  isTerminal: boolean;
  /** `at` of the event that set the current outcome. */
  outcomeAt: Date;
  attempts: number;
  smtpCode: string | null;
  enhancedCode: string | null;
  smtpResponse: string | null;
  mx: string | null;
  /** `at` of the event that carried the current smtp* fields. */
  replyAt: Date | null;
  lastEventAt: Date;
  /** Set while the outcome is deferred. */
  nextAttemptAt: Date | null;
}

export interface MessageView {
  id: string;
  /** False while only delivery events were seen (cannot happen in one stream; kept for safety). */
  accepted: boolean;
  motorBlockId: string | null;
  accountId: string | null;
  domainId: string | null;
  from: string | null;
  fromName: string | null;
  subject: string | null;
  /** Without angle brackets. */
  smtpMessageId: string | null;
  recipients: string[];
  recipientDomains: string[];
  expectedCount: number;
  currentOutcome: Outcome;
  isTerminal: boolean;
  queuedAt: Date;
  processedAt: Date | null;
  deliveredAt: Date | null;
  bouncedAt: Date | null;
  smtpCode: string | null;
  smtpResponse: string | null;
  smtpAt: Date | null;
  metadata: Record<string, string>;
  source: 'http' | 'smtp' | null;
  /**
   * UTF-8 bytes of the content (MessageAccepted.contentBytes; see contentBytesOf). For the delivery
   * sweeper's jobs only: no API answer shows it. Null when not known.
   */
  contentBytes: number | null;
  /** Latest recorded time (createdAt, else `at`) of the events folded in. */
  updatedAt: Date;
  recipientStates: RecipientView[];
}

export interface TimelineEntry {
  eventId: string;
  messageId: string;
  /** Null for MessageAccepted (the whole send). */
  recipient: string | null;
  type: MessageEventType;
  outcome: Outcome;
  at: Date;
  revision: bigint | null;
  attempt: number | null;
  smtpCode: string | null;
  enhancedCode: string | null;
  smtpResponse: string | null;
  mx: string | null;
  nextAttemptAt: Date | null;
  reason: string | null;
  feedbackType: string | null;
}

// ------------------------------------------------------------------------------------ helpers

export function normalizeAddress(address: string): string {
  const a = address.trim();
  const at = a.lastIndexOf('@');
  return at < 0 ? a : `${a.slice(0, at)}@${a.slice(at + 1).toLowerCase()}`;
}
export const domainOf = (address: string): string => {
  const at = address.lastIndexOf('@');
  return at < 0 ? '' : address.slice(at + 1).trim().toLowerCase();
};
export const stripAngleBrackets = (id: string): string => id.trim().replace(/^<+/, '').replace(/>+$/, '').trim();

const RANK: Record<Outcome, number> = { queued: 0, processed: 1, deferred: 2, delivered: 3, bounced: 4, failed: 5, complained: 6 };
const cls = (o: Outcome): number => (o === 'complained' ? 2 : TERMINAL.has(o) ? 1 : 0);

/**
 * Total order on (outcome, at) used to pick a recipient's outcome: complained beats everything,
 * any terminal beats any non-terminal, then the later `at`, then the further outcome. Taking the
 * maximum is associative, commutative and idempotent: replays, duplicates and late events agree.
 */
function outcomeWins(o: Outcome, at: Date, cur: Outcome, curAt: Date): boolean {
  if (cls(o) !== cls(cur)) return cls(o) > cls(cur);
  if (at.getTime() !== curAt.getTime()) return at.getTime() > curAt.getTime();
  return RANK[o] >= RANK[cur];
}

const minDate = (a: Date | null, b: Date): Date => (a === null || b.getTime() < a.getTime() ? b : a);
const maxDate = (a: Date | null, b: Date): Date => (a === null || b.getTime() > a.getTime() ? b : a);

const toDate = (iso: string | null | undefined): Date | null => {
  if (iso === null || iso === undefined) return null;
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? null : d;
};

/**
 * One row for the whole send: while any recipient is in flight, the least advanced in-flight state
 * (queued < processed < deferred); once all are terminal: complained if any complained, else
 * delivered if all delivered, else bounced if any bounced, else failed.
 */
export function collapseOutcome(recipients: readonly Pick<RecipientView, 'outcome'>[]): { outcome: Outcome; isTerminal: boolean } {
  if (recipients.length === 0) return { outcome: 'queued', isTerminal: false };
  let least: Outcome | null = null;
  for (const r of recipients) {
    if (!TERMINAL.has(r.outcome) && (least === null || RANK[r.outcome] < RANK[least])) least = r.outcome;
  }
  if (least !== null) return { outcome: least, isTerminal: false };
  const outs = recipients.map((r) => r.outcome);
  if (outs.includes('complained')) return { outcome: 'complained', isTerminal: true };
  if (outs.every((o) => o === 'delivered')) return { outcome: 'delivered', isTerminal: true };
  if (outs.includes('bounced')) return { outcome: 'bounced', isTerminal: true };
  return { outcome: 'failed', isTerminal: true };
}

function emptyView(id: string, at: Date): MessageView {
  return {
    id,
    accepted: false,
    motorBlockId: null,
    accountId: null,
    domainId: null,
    from: null,
    fromName: null,
    subject: null,
    smtpMessageId: null,
    recipients: [],
    recipientDomains: [],
    expectedCount: 0,
    currentOutcome: 'queued',
    isTerminal: false,
    queuedAt: at,
    processedAt: null,
    deliveredAt: null,
    bouncedAt: null,
    smtpCode: null,
    smtpResponse: null,
    smtpAt: null,
    metadata: {},
    source: null,
    contentBytes: null,
    updatedAt: at,
    recipientStates: [],
  };
}

interface Reply {
  smtpCode: string | null;
  smtpResponse: string | null;
  enhancedCode: string | null;
  mx: string | null;
}

function replyOf(type: MessageEventType, data: RecipientEventData): Reply | null {
  if (type === 'DeliveryStarted' || type === 'ComplaintReceived') return null;
  const d = data as DeliverySucceeded;
  if ((d.smtpCode ?? null) === null && (d.smtpResponse ?? null) === null) return null;
  return { smtpCode: d.smtpCode ?? null, smtpResponse: d.smtpResponse ?? null, enhancedCode: d.enhancedCode ?? null, mx: d.mx ?? null };
}

/** Applies one recipient-level outcome to a recipient (pure). */
function evolveRecipient(r: RecipientView, outcome: Outcome, at: Date, type: MessageEventType, data: RecipientEventData | null): RecipientView {
  const next: RecipientView = { ...r, lastEventAt: maxDate(r.lastEventAt, at) };
  if (outcomeWins(outcome, at, r.outcome, r.outcomeAt)) {
    next.outcome = outcome;
    next.outcomeAt = at;
    next.isTerminal = TERMINAL.has(outcome);
    next.nextAttemptAt = outcome === 'deferred' && data ? toDate((data as DeliveryDeferred).nextAttemptAt) : null;
  }
  if (data) {
    const attempt = (data as { attempt?: number }).attempt;
    if (typeof attempt === 'number' && attempt > next.attempts) next.attempts = attempt;
    const reply = replyOf(type, data);
    if (reply && (next.replyAt === null || at.getTime() >= next.replyAt.getTime())) {
      Object.assign(next, reply);
      next.replyAt = at;
    }
  }
  return next;
}

function newRecipient(address: string, ordinal: number, at: Date): RecipientView {
  const recipient = normalizeAddress(address);
  return {
    recipient,
    domain: domainOf(recipient),
    ordinal,
    outcome: 'queued',
    isTerminal: false,
    outcomeAt: at,
    attempts: 0,
    smtpCode: null,
    enhancedCode: null,
    smtpResponse: null,
    mx: null,
    replyAt: null,
    lastEventAt: at,
    nextAttemptAt: null,
  };
}

function withDerived(v: MessageView): MessageView {
  let states = v.recipientStates;
  for (let i = 1; i < states.length; i++) {
    if (states[i - 1].ordinal > states[i].ordinal) {
      states = [...states].sort((a, b) => a.ordinal - b.ordinal);
      break;
    }
  }
  const { outcome, isTerminal } = collapseOutcome(states);
  const domains = [...new Set(states.map((r) => r.domain).filter((d) => d !== ''))];
  return {
    ...v,
    recipientStates: states,
    recipients: states.map((r) => r.recipient),
    recipientDomains: domains,
    expectedCount: Math.max(v.expectedCount, states.length),
    currentOutcome: outcome,
    isTerminal,
  };
}

/**
 * The acceptance's content bytes: its `contentBytes`, else counted from the content like
 * acceptedContentBytes does (an acceptance older than the field). Null when neither is there: a live
 * subscription leaves the content of a large event out (the projection's ignoresData), and counting
 * what is left would give a size too small. Every MessageAccepted has `headers`, so its absence means
 * the content was left out. Missing text or html count as none rather than throw: a projector must
 * not stop on one odd event.
 */
function contentBytesOf(d: MessageAccepted): number | null {
  if (typeof d.contentBytes === 'number') return d.contentBytes;
  if (typeof d.headers !== 'object' || d.headers === null) return null;
  return contentBytes(d.text ?? null, d.html ?? null, d.raw ?? undefined, d.headers);
}

/** The message a recipient-level event belongs to, or null when the event is not one of ours. */
export function messageIdOf(event: MessageEventInput): string | null {
  if (!(event.type in MESSAGE_EVENT_OUTCOME)) return null;
  const id = (event.data as { messageId?: unknown } | null)?.messageId;
  return typeof id === 'string' ? id : null;
}

// ------------------------------------------------------------------------------------ reducer

/** Folds one event into the view. Events of other types (or malformed ones) return the view unchanged. */
export function evolveMessageView(view: MessageView | null, event: MessageEventInput): MessageView | null {
  const messageId = messageIdOf(event);
  if (messageId === null || (view !== null && view.id !== messageId)) return view;
  const type = event.type as MessageEventType;

  if (type === 'MessageAccepted') {
    const d = event.data as MessageAccepted;
    const at = toDate(d.acceptedAt) ?? event.createdAt ?? new Date(0);
    const base = view ?? emptyView(messageId, at);
    const states = [...base.recipientStates];
    const distinct = new Set<string>();
    const index = new Map(states.map((r, i) => [r.recipient, i]));
    for (const address of d.to ?? []) {
      const key = normalizeAddress(address);
      if (distinct.has(key)) continue;
      const ordinal = distinct.size;
      distinct.add(key);
      const i = index.get(key);
      if (i === undefined) states.push(newRecipient(key, ordinal, at));
      else states[i] = evolveRecipient({ ...states[i], ordinal }, 'queued', at, type, null);
    }
    // Recipients seen before acceptance (not in `to`) keep their place after the addressed ones.
    if (!base.accepted) {
      for (let i = 0; i < states.length; i++) {
        if (!distinct.has(states[i].recipient)) states[i] = { ...states[i], ordinal: distinct.size + states[i].ordinal };
      }
    }
    return withDerived({
      ...base,
      accepted: true,
      motorBlockId: d.motorBlockId,
      accountId: d.accountId,
      domainId: d.domainId ?? null,
      from: d.from,
      fromName: d.fromName ?? null,
      subject: d.subject,
      smtpMessageId: d.smtpMessageId ? stripAngleBrackets(d.smtpMessageId) : null,
      metadata: { ...(d.metadata ?? {}) },
      source: d.source ?? null,
      // A copy of the acceptance read without its content does not forget a size counted before.
      contentBytes: contentBytesOf(d) ?? base.contentBytes,
      expectedCount: distinct.size,
      queuedAt: at,
      updatedAt: maxDate(base.updatedAt, event.createdAt ?? at),
      recipientStates: states,
    });
  }

  const d = event.data as RecipientEventData;
  const at = toDate(d.at);
  if (at === null || typeof d.recipient !== 'string') return view;
  const outcome: Outcome = MESSAGE_EVENT_OUTCOME[type];
  const base = view ?? emptyView(messageId, at);
  const key = normalizeAddress(d.recipient);
  const states = [...base.recipientStates];
  let i = states.findIndex((r) => r.recipient === key);
  if (i < 0) {
    states.push(newRecipient(key, states.length === 0 ? 0 : Math.max(...states.map((r) => r.ordinal)) + 1, base.accepted ? base.queuedAt : at));
    i = states.length - 1;
  }
  states[i] = evolveRecipient(states[i], outcome, at, type, d);

  const next: MessageView = { ...base, recipientStates: states, updatedAt: maxDate(base.updatedAt, event.createdAt ?? at) };
  if (type === 'DeliveryStarted') next.processedAt = minDate(base.processedAt, at);
  if (type === 'DeliverySucceeded') next.deliveredAt = minDate(base.deliveredAt, at);
  if (type === 'DeliveryBounced') next.bouncedAt = minDate(base.bouncedAt, at);
  const reply = replyOf(type, d);
  if (reply && (base.smtpAt === null || at.getTime() >= base.smtpAt.getTime())) {
    next.smtpCode = reply.smtpCode;
    next.smtpResponse = reply.smtpResponse;
    next.smtpAt = at;
  }
  return withDerived(next);
}

/** Folds a message's own stream (read-your-writes fallback). Null when the stream holds no MessageAccepted-or-delivery event. */
export function foldMessageView(events: Iterable<MessageEventInput>): MessageView | null {
  let view: MessageView | null = null;
  for (const e of events) view = evolveMessageView(view, e);
  return view;
}

/** The timeline row an event contributes (null for events this read model ignores). */
export function timelineEntryOf(event: MessageEventInput & { id: string }): TimelineEntry | null {
  const messageId = messageIdOf(event);
  if (messageId === null) return null;
  const type = event.type as MessageEventType;
  const outcome = MESSAGE_EVENT_OUTCOME[type];
  if (type === 'MessageAccepted') {
    const d = event.data as MessageAccepted;
    return {
      eventId: event.id, messageId, recipient: null, type, outcome,
      at: toDate(d.acceptedAt) ?? event.createdAt ?? new Date(0), revision: event.revision ?? null,
      attempt: null, smtpCode: null, enhancedCode: null, smtpResponse: null, mx: null, nextAttemptAt: null, reason: null, feedbackType: null,
    };
  }
  const d = event.data as RecipientEventData;
  const at = toDate(d.at);
  if (at === null || typeof d.recipient !== 'string') return null;
  const reply = replyOf(type, d);
  return {
    eventId: event.id,
    messageId,
    recipient: normalizeAddress(d.recipient),
    type,
    outcome,
    at,
    revision: event.revision ?? null,
    attempt: typeof (d as { attempt?: number }).attempt === 'number' ? (d as { attempt: number }).attempt : null,
    smtpCode: reply?.smtpCode ?? null,
    enhancedCode: reply?.enhancedCode ?? null,
    smtpResponse: reply?.smtpResponse ?? null,
    mx: reply?.mx ?? null,
    nextAttemptAt: type === 'DeliveryDeferred' ? toDate((d as DeliveryDeferred).nextAttemptAt) : null,
    reason: type === 'DeliveryFailed' ? (d as DeliveryFailed).reason ?? null : null,
    feedbackType: type === 'ComplaintReceived' ? (d as ComplaintReceived).feedbackType ?? null : null,
  };
}

/** Timeline order: by time, then log order within the message stream. */
export function compareTimeline(a: TimelineEntry, b: TimelineEntry): number {
  const t = a.at.getTime() - b.at.getTime();
  if (t !== 0) return t;
  if (a.revision !== null && b.revision !== null && a.revision !== b.revision) return a.revision < b.revision ? -1 : 1;
  return a.eventId < b.eventId ? -1 : a.eventId > b.eventId ? 1 : 0;
}

// ------------------------------------------------------------------------------ message timeline

/** What the fold needs from a timeline entry, with the addressed recipients given to the acceptance. */
function foldInputOf(e: TimelineEntry, recipients: readonly string[]): MessageEventInput {
  if (e.type === 'MessageAccepted') {
    return { id: e.eventId, type: e.type, data: { messageId: e.messageId, to: [...recipients], acceptedAt: e.at.toISOString() }, revision: e.revision ?? undefined };
  }
  return {
    id: e.eventId,
    type: e.type,
    data: {
      messageId: e.messageId, recipient: e.recipient, at: e.at.toISOString(), attempt: e.attempt ?? undefined,
      smtpCode: e.smtpCode, enhancedCode: e.enhancedCode, smtpResponse: e.smtpResponse, mx: e.mx, nextAttemptAt: e.nextAttemptAt?.toISOString() ?? null,
    },
    revision: e.revision ?? undefined,
  };
}

/**
 * The timeline of GET /messages/{id}/events: the steps of the message's collapsed outcome, one row
 * per step, never one per recipient (SPEC "Per-recipient outcomes"; docs/PROJECTIONS.md "The
 * timeline"). `entries` are the message's per-event rows (message_events, or timelineEntryOf over its
 * stream), `recipients` the addressed recipients in order (the view's `recipients`).
 *
 * The entries are replayed in timeline order through evolveMessageView, the fold of the message
 * view, and a row is emitted for the event after which the message's `currentOutcome` differs from
 * before (the acceptance gives the first row, queued), and for a DeliveryStarted that begins a
 * higher attempt than any before while the message is processed (an attempt lost in flight and
 * taken again leaves the outcome processed; one recipient's lifecycle thus comes out event for
 * event, as before). A row carries:
 * - `eventId`, `revision`, `at`: the event that moved the message there, and when;
 * - `outcome`: the message's outcome after it;
 * - `type`, `attempt`, the reply fields, `nextAttemptAt`, `reason`, `feedbackType`: those of the
 *   latest event that brought a recipient to that outcome. That is the same event unless the message
 *   got there because another recipient finished (one bounced, then the other was delivered: the row
 *   is bounced, at the delivery, with the bounce's type and 550), so a row's type and reply always
 *   match its outcome;
 * - `recipient`: null on a MessageAccepted row, else the message's first recipient, as the
 *   single-message lookup shows it; never the recipient of the event.
 */
export function messageTimeline(entries: readonly TimelineEntry[], recipients: readonly string[]): TimelineEntry[] {
  const sorted = [...entries].sort(compareTimeline);
  const shown = recipients[0] ?? null;
  /** Per recipient, the entry that set its current outcome. */
  const setBy = new Map<string, TimelineEntry>();
  const rows: TimelineEntry[] = [];
  let view: MessageView | null = null;
  let attempt = 0;
  for (const e of sorted) {
    const before: MessageView | null = view;
    view = evolveMessageView(view, foldInputOf(e, recipients));
    if (view === null || view === before) continue;
    for (const r of view.recipientStates) {
      if ((e.type === 'MessageAccepted' || r.recipient === e.recipient) && r.outcome === e.outcome && r.outcomeAt.getTime() === e.at.getTime()) setBy.set(r.recipient, e);
    }
    const retry = e.type === 'DeliveryStarted' && view.currentOutcome === 'processed' && (e.attempt ?? 0) > attempt;
    if (e.type === 'DeliveryStarted') attempt = Math.max(attempt, e.attempt ?? 0);
    if (before !== null && before.currentOutcome === view.currentOutcome && !retry) continue;
    let source = e;
    let latest: TimelineEntry | null = null;
    for (const r of view.recipientStates) {
      const s = r.outcome === view.currentOutcome ? setBy.get(r.recipient) : undefined;
      if (s && (latest === null || compareTimeline(s, latest) > 0)) latest = s;
    }
    if (latest) source = latest;
    rows.push({
      ...source,
      eventId: e.eventId,
      messageId: e.messageId,
      revision: e.revision,
      at: e.at,
      outcome: view.currentOutcome,
      recipient: source.type === 'MessageAccepted' ? null : shown,
    });
  }
  return rows;
}

/** messageTimeline over a message's own stream (read-your-writes), from the same entries the projector stores. */
export function messageTimelineOf(events: Iterable<MessageEventInput & { id: string }>): TimelineEntry[] {
  const list = [...events];
  const entries = list.map(timelineEntryOf).filter((e): e is TimelineEntry => e !== null);
  return messageTimeline(entries, foldMessageView(list)?.recipients ?? []);
}
