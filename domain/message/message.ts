import { fail } from '../errors';
import type { DomainEvent, Iso, MessageAccepted } from '../events';
import type { ValidSendRequest } from './sendRules';

/**
 * The message aggregate (stream `message-<uuid>`): one accepted send and the delivery outcome of
 * each of its recipients. `evolve` folds events into the state the deciders need; deciders are
 * pure and get time and ids as arguments.
 */

export type Outcome = 'queued' | 'processed' | 'deferred' | 'delivered' | 'bounced' | 'failed' | 'complained';

/** The events of a message's stream and the outcome each one means (read models, webhooks, the event stream). */
export const MESSAGE_EVENT_OUTCOME = {
  MessageAccepted: 'queued',
  DeliveryStarted: 'processed',
  DeliveryDeferred: 'deferred',
  DeliverySucceeded: 'delivered',
  DeliveryBounced: 'bounced',
  DeliveryFailed: 'failed',
  ComplaintReceived: 'complained',
} as const satisfies Record<string, Outcome>;
export type MessageEventType = keyof typeof MESSAGE_EVENT_OUTCOME;
export const MESSAGE_EVENT_TYPES = Object.keys(MESSAGE_EVENT_OUTCOME) as MessageEventType[];

/** What one recipient outcome event says, as webhooks and the event stream tell it. */
export interface RecipientOutcomeFacts {
  messageId: string;
  recipient: string;
  status: Exclude<Outcome, 'queued'>;
  timestamp: Iso;
  attempt?: number;
  smtpCode?: string | null;
  smtpResponse?: string | null;
  nextAttemptAt?: Iso;
  reason?: string;
  feedbackType?: string | null;
}

/** The facts of a recipient outcome event (every message event but MessageAccepted); null for others. */
export function recipientOutcomeFacts(event: DomainEvent): RecipientOutcomeFacts | null {
  if (event.type === 'MessageAccepted' || !(event.type in MESSAGE_EVENT_OUTCOME)) return null;
  const d = event.data as unknown as {
    messageId: string; recipient: string; at: Iso; attempt?: number; smtpCode?: string | null; smtpResponse?: string | null;
    nextAttemptAt?: Iso; reason?: string; feedbackType?: string | null;
  };
  const facts: RecipientOutcomeFacts = {
    messageId: d.messageId, recipient: d.recipient, status: MESSAGE_EVENT_OUTCOME[event.type as Exclude<MessageEventType, 'MessageAccepted'>], timestamp: d.at,
  };
  if (d.attempt !== undefined) facts.attempt = d.attempt;
  if ('smtpCode' in d) {
    facts.smtpCode = d.smtpCode ?? null;
    facts.smtpResponse = d.smtpResponse ?? null;
  }
  if (d.nextAttemptAt !== undefined) facts.nextAttemptAt = d.nextAttemptAt;
  if (d.reason !== undefined) facts.reason = d.reason;
  if ('feedbackType' in d) facts.feedbackType = d.feedbackType ?? null;
  return facts;
}

export const TERMINAL_OUTCOMES: ReadonlySet<Outcome> = new Set(['delivered', 'bounced', 'failed', 'complained']);

export interface RecipientState {
  outcome: Outcome;
  terminal: boolean;
  /** Attempts made so far (a DeliveryStarted increments it). */
  attempts: number;
  nextAttemptAt: Iso | null;
  /** When the attempt in flight started (outcome `processed`); null otherwise. */
  startedAt: Iso | null;
}

export type MessageState =
  | { status: 'none' }
  | {
      status: 'accepted';
      accepted: MessageAccepted;
      recipients: Record<string, RecipientState>;
    };

export type MessageEvent = Extract<
  DomainEvent,
  { type: 'MessageAccepted' | 'DeliveryStarted' | 'DeliverySucceeded' | 'DeliveryDeferred' | 'DeliveryBounced' | 'DeliveryFailed' | 'ComplaintReceived' }
>;

export const initialMessageState = (): MessageState => ({ status: 'none' });

const recipientKey = (addr: string): string => addr.toLowerCase();

export function evolve(state: MessageState, event: MessageEvent): MessageState {
  if (event.type === 'MessageAccepted') {
    if (state.status !== 'none') return state;
    const recipients: Record<string, RecipientState> = {};
    for (const r of event.data.to) recipients[recipientKey(r)] = { outcome: 'queued', terminal: false, attempts: 0, nextAttemptAt: null, startedAt: null };
    return { status: 'accepted', accepted: event.data, recipients };
  }
  if (state.status !== 'accepted') return state;
  const key = recipientKey(event.data.recipient);
  const current = state.recipients[key];
  if (!current) return state;
  const next = ((): RecipientState => {
    switch (event.type) {
      case 'DeliveryStarted':
        return current.terminal ? current : { ...current, outcome: 'processed', attempts: current.attempts + 1, nextAttemptAt: null, startedAt: event.data.at };
      case 'DeliveryDeferred':
        return current.terminal ? current : { ...current, outcome: 'deferred', nextAttemptAt: event.data.nextAttemptAt, startedAt: null };
      case 'DeliverySucceeded':
        return current.terminal ? current : { ...current, outcome: 'delivered', terminal: true, nextAttemptAt: null };
      case 'DeliveryBounced':
        // An asynchronous bounce (a DSN) comes after the MX or relay accepted the message, and undoes that delivery.
        return current.terminal && !(event.data.asynchronous && current.outcome === 'delivered')
          ? current : { ...current, outcome: 'bounced', terminal: true, nextAttemptAt: null };
      case 'DeliveryFailed':
        return current.terminal ? current : { ...current, outcome: 'failed', terminal: true, nextAttemptAt: null };
      case 'ComplaintReceived':
        // A complaint arrives after delivery and supersedes it.
        return { ...current, outcome: 'complained', terminal: true, nextAttemptAt: null };
    }
  })();
  return { ...state, recipients: { ...state.recipients, [key]: next } };
}

export const fold = (events: Iterable<MessageEvent>, from: MessageState = initialMessageState()): MessageState => {
  let s = from;
  for (const e of events) s = evolve(s, e);
  return s;
};

// ------------------------------------------------------------------------------------ commands

export interface AcceptMessage {
  messageId: string;
  request: ValidSendRequest;
  motorBlockId: string;
  accountId: string;
  domainId: string;
  smtpMessageId: string;
  idempotencyKey: string | null;
  source: 'http' | 'smtp';
  raw?: string;
  envelopeFrom?: string;
  now: Date;
}

export function acceptMessage(state: MessageState, cmd: AcceptMessage): [DomainEvent<'MessageAccepted'>] {
  if (state.status !== 'none') throw fail('message_exists', 409, `Message ${cmd.messageId} already exists`);
  const r = cmd.request;
  return [{
    type: 'MessageAccepted',
    data: {
      messageId: cmd.messageId, motorBlockId: cmd.motorBlockId, accountId: cmd.accountId, domainId: cmd.domainId,
      from: r.from, fromName: r.fromName, to: r.to, subject: r.subject, text: r.text, html: r.html,
      headers: r.headers, smtpMessageId: cmd.smtpMessageId, idempotencyKey: cmd.idempotencyKey,
      source: cmd.source, metadata: r.metadata, ...(cmd.raw !== undefined ? { raw: cmd.raw } : {}),
      ...(cmd.envelopeFrom !== undefined && cmd.envelopeFrom.toLowerCase() !== r.from.toLowerCase() ? { envelopeFrom: cmd.envelopeFrom } : {}),
      contentBytes: contentBytes(r.text, r.html, cmd.raw, r.headers),
      acceptedAt: cmd.now.toISOString(),
    },
  }];
}

/** MessageAccepted's `contentBytes`: the UTF-8 bytes of the content a delivery builds the message from. */
export function contentBytes(text: string | null, html: string | null, raw: string | undefined, headers: Record<string, string>): number {
  let n = (text === null ? 0 : Buffer.byteLength(text)) + (html === null ? 0 : Buffer.byteLength(html)) + (raw === undefined ? 0 : Buffer.byteLength(raw));
  for (const [name, value] of Object.entries(headers)) n += Buffer.byteLength(name) + Buffer.byteLength(value);
  return n;
}

/** The bytes a delivery of the message holds: its `contentBytes`, counted from the content for an acceptance older than the field. */
export function acceptedContentBytes(a: MessageAccepted): number {
  return a.contentBytes ?? contentBytes(a.text, a.html, a.raw, a.headers);
}

/**
 * How long an attempt may stay in flight (`processed` without an outcome) before it is presumed
 * lost with a crashed worker and taken again. Longer than any attempt of a live worker: a round
 * stops talking to MX hosts at its deadline (ATTEMPT_DEADLINE_MAX_MS at most), then records.
 */
export const IN_FLIGHT_STALE_MS = 10 * 60 * 1000;

/**
 * The longest attempt deadline (DELIVERY_ATTEMPT_DEADLINE_SECONDS, and its default): 2 minutes
 * inside IN_FLIGHT_STALE_MS, left for appending the outcomes (tried for about 12 s while the store
 * is away) and for clocks of workers that disagree, so no round takes recipients as stale while
 * the round that started them is still talking to their MX.
 */
export const ATTEMPT_DEADLINE_MAX_MS = IN_FLIGHT_STALE_MS - 2 * 60 * 1000;

/** What a delivery round should do now. */
export type DuePlan =
  | { kind: 'due'; recipients: string[] }
  /** Nothing due yet; the earliest recipient becomes due at `at` (a deferral, or an in-flight attempt going stale). */
  | { kind: 'wait'; at: Date }
  | { kind: 'done' };

/** Recipients a delivery attempt should handle now: not terminal, and queued, due for retry, or stale in flight. */
export function planDelivery(state: MessageState, now: Date): DuePlan {
  if (state.status !== 'accepted') return { kind: 'done' };
  const due: string[] = [];
  let wait = Infinity;
  for (const addr of state.accepted.to) {
    const r = state.recipients[recipientKey(addr)];
    if (!r || r.terminal) continue;
    const dueAt =
      r.outcome === 'processed' && r.startedAt !== null ? Date.parse(r.startedAt) + IN_FLIGHT_STALE_MS
      : r.nextAttemptAt !== null ? Date.parse(r.nextAttemptAt)
      : -Infinity;
    if (dueAt <= now.getTime()) due.push(addr);
    else wait = Math.min(wait, dueAt);
  }
  if (due.length > 0) return { kind: 'due', recipients: due };
  return Number.isFinite(wait) ? { kind: 'wait', at: new Date(wait) } : { kind: 'done' };
}

/**
 * When the earliest attempt in flight goes stale (IN_FLIGHT_STALE_MS after it started), or null
 * when no attempt is in flight. Nothing but the job of a round that died wakes the message then;
 * a deferral's next attempt has a job of its own (workers/enqueuer.ts).
 */
export function inFlightStaleAt(state: MessageState): Date | null {
  if (state.status !== 'accepted') return null;
  let at = Infinity;
  for (const r of Object.values(state.recipients)) {
    if (!r.terminal && r.outcome === 'processed' && r.startedAt !== null) at = Math.min(at, Date.parse(r.startedAt) + IN_FLIGHT_STALE_MS);
  }
  return Number.isFinite(at) ? new Date(at) : null;
}

export function startDelivery(state: MessageState, cmd: { recipients: string[]; now: Date }): DomainEvent<'DeliveryStarted'>[] {
  if (state.status !== 'accepted') throw fail('message_not_found', 404, 'No such message');
  const at = cmd.now.toISOString();
  return cmd.recipients
    .filter((addr) => state.recipients[recipientKey(addr)] && !state.recipients[recipientKey(addr)].terminal)
    .map((recipient) => ({
      type: 'DeliveryStarted' as const,
      data: { messageId: state.accepted.messageId, recipient, at, attempt: state.recipients[recipientKey(recipient)].attempts + 1 },
    }));
}

export interface AttemptResult {
  recipient: string;
  outcome: 'delivered' | 'deferred' | 'bounced' | 'failed';
  smtpCode: string | null;
  enhancedCode: string | null;
  smtpResponse: string | null;
  mx: string | null;
  /** Why a `failed` result failed (no_mx, null_mx, ...). */
  reason?: string;
}

export interface RecordAttempt {
  results: AttemptResult[];
  now: Date;
  /** Give up on deferrals once this many seconds have passed since acceptance. */
  lifetimeSeconds: number;
  /** Delay before the next attempt, given the attempt number just made (1-based). */
  retryDelaySeconds: (attempt: number) => number;
}

type OutcomeEvent = DomainEvent<'DeliverySucceeded' | 'DeliveryDeferred' | 'DeliveryBounced' | 'DeliveryFailed'>;

/** Turns one attempt's per-recipient results into outcome events; a deferral past the lifetime fails. */
export function recordAttempt(state: MessageState, cmd: RecordAttempt): OutcomeEvent[] {
  if (state.status !== 'accepted') throw fail('message_not_found', 404, 'No such message');
  const at = cmd.now.toISOString();
  const messageId = state.accepted.messageId;
  const events: OutcomeEvent[] = [];
  for (const r of cmd.results) {
    const current = state.recipients[recipientKey(r.recipient)];
    if (!current || current.terminal) continue;
    const attempt = Math.max(current.attempts, 1);
    const reply = { smtpCode: r.smtpCode, smtpResponse: r.smtpResponse, enhancedCode: r.enhancedCode, mx: r.mx, attempt };
    const base = { messageId, recipient: r.recipient, at, ...reply };
    switch (r.outcome) {
      case 'delivered':
        events.push({ type: 'DeliverySucceeded', data: base });
        break;
      case 'bounced':
        events.push({ type: 'DeliveryBounced', data: base });
        break;
      case 'failed':
        events.push({ type: 'DeliveryFailed', data: { ...base, reason: r.reason ?? 'permanent_failure' } });
        break;
      case 'deferred': {
        // Past the lifetime the deferral becomes a failure; otherwise the next attempt is due after
        // the retry delay, but never later than the end of the lifetime (a last try at the deadline).
        const deadline = Date.parse(state.accepted.acceptedAt) + cmd.lifetimeSeconds * 1000;
        if (cmd.now.getTime() >= deadline) {
          events.push({ type: 'DeliveryFailed', data: { ...base, reason: 'lifetime_exceeded' } });
        } else {
          const nextAt = new Date(Math.min(cmd.now.getTime() + cmd.retryDelaySeconds(attempt) * 1000, deadline));
          // The size goes with the deferral so that its retry job can wait for room before reading the message.
          events.push({ type: 'DeliveryDeferred', data: { ...base, nextAttemptAt: nextAt.toISOString(), contentBytes: acceptedContentBytes(state.accepted) } });
        }
        break;
      }
    }
  }
  return events;
}
