/**
 * The analytics read model's per-recipient state as a pure fold, and what each state contributes
 * to the rollup tables. The projector keeps one state row per (message, recipient), folds a batch
 * of events into it, and adds `contributions(new) − contributions(old)` to the rollups: replays,
 * duplicates and late or out-of-order outcomes change a rollup only when the recipient's counted
 * state changes, so nothing is counted twice and a rebuild from zero gives the same sums.
 *
 * Counting rules (docs/ANALYTICS.md):
 * - one unit per distinct recipient of an accepted send, attributed to the UTC hour of the send's
 *   acceptance (`acceptedAt`), whenever its outcome arrives;
 * - the recipient's outcome is the messages model's rule: complained above everything, any
 *   terminal above any in-flight state, then the later `at`, then the further outcome;
 * - provider: by the MX host that last answered for the recipient, else by the domain name;
 * - error code: the latest SMTP reply of a recipient whose outcome is bounced, failed or deferred.
 */
import type { MessageAccepted } from '../../domain/events';
import { MESSAGE_EVENT_OUTCOME } from '../../domain/message/message';
import { classifyProvider, type Provider } from '../../domain/analytics/providers';
import { domainOf, normalizeAddress } from '../messages/view';

export const ANALYTICS_EVENT_TYPES = [
  'MessageAccepted', 'DeliveryStarted', 'DeliveryDeferred', 'DeliverySucceeded', 'DeliveryBounced', 'DeliveryFailed', 'ComplaintReceived',
] as const;
type AnalyticsEventType = (typeof ANALYTICS_EVENT_TYPES)[number];

export type StatOutcome = 'queued' | 'processed' | 'deferred' | 'delivered' | 'bounced' | 'failed' | 'complained';
const OUTCOME_OF: Record<AnalyticsEventType, StatOutcome> = MESSAGE_EVENT_OUTCOME;
const RANK: Record<StatOutcome, number> = { queued: 0, processed: 1, deferred: 2, delivered: 3, bounced: 4, failed: 5, complained: 6 };
const cls = (o: StatOutcome): number => (o === 'complained' ? 2 : RANK[o] >= 3 ? 1 : 0);

export interface RecipientStat {
  messageId: string;
  recipient: string;
  /** Position in the send's `to` list; the recipient at 0 also counts the send itself. */
  ordinal: number;
  motorBlockId: string | null;
  accountId: string | null;
  /** Null until MessageAccepted is seen: a recipient contributes nothing before that. */
  acceptedAt: Date | null;
  domain: string;
  mx: string | null;
  mxAt: Date | null;
  outcome: StatOutcome;
  outcomeAt: Date;
  smtpCode: string | null;
  enhancedCode: string | null;
  replyAt: Date | null;
}

export interface StatEvent { type: string; data: unknown }

const toDate = (iso: unknown): Date | null => {
  if (typeof iso !== 'string') return null;
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? null : d;
};

const keyOf = (messageId: string, recipient: string) => `${messageId}\u0000${recipient}`;
export const statKey = (s: Pick<RecipientStat, 'messageId' | 'recipient'>) => keyOf(s.messageId, s.recipient);

function blank(messageId: string, recipient: string, ordinal: number): RecipientStat {
  return {
    messageId, recipient, ordinal, motorBlockId: null, accountId: null, acceptedAt: null, domain: domainOf(recipient),
    mx: null, mxAt: null, outcome: 'queued', outcomeAt: new Date(0), smtpCode: null, enhancedCode: null, replyAt: null,
  };
}

function wins(o: StatOutcome, at: Date, cur: StatOutcome, curAt: Date): boolean {
  if (cls(o) !== cls(cur)) return cls(o) > cls(cur);
  if (at.getTime() !== curAt.getTime()) return at.getTime() > curAt.getTime();
  return RANK[o] >= RANK[cur];
}

/**
 * Folds one event into the states of its message (`states` maps statKey → state and is updated in
 * place with new objects; unchanged states keep their identity). Other or malformed events: no-op.
 */
export function applyStatEvent(states: Map<string, RecipientStat>, event: StatEvent): void {
  if (!(ANALYTICS_EVENT_TYPES as readonly string[]).includes(event.type)) return;
  const type = event.type as AnalyticsEventType;
  const data = event.data as Record<string, unknown> | null;
  const messageId = data?.messageId;
  if (typeof messageId !== 'string') return;

  if (type === 'MessageAccepted') {
    const d = data as unknown as MessageAccepted;
    const at = toDate(d.acceptedAt);
    if (at === null || !Array.isArray(d.to)) return;
    const seen = new Set<string>();
    for (const address of d.to) {
      if (typeof address !== 'string') continue;
      const r = normalizeAddress(address);
      if (seen.has(r)) continue;
      const ordinal = seen.size;
      seen.add(r);
      const cur = states.get(keyOf(messageId, r)) ?? blank(messageId, r, ordinal);
      const next: RecipientStat = { ...cur, ordinal, motorBlockId: d.motorBlockId ?? null, accountId: d.accountId ?? null, acceptedAt: at };
      if (cur.outcome === 'queued' && cur.outcomeAt.getTime() < at.getTime()) next.outcomeAt = at;
      states.set(keyOf(messageId, r), next);
    }
    return;
  }

  const at = toDate(data?.at);
  if (at === null || typeof data?.recipient !== 'string') return;
  const r = normalizeAddress(data.recipient);
  const k = keyOf(messageId, r);
  // A recipient seen only in delivery events (never addressed) keeps a high ordinal: it never counts the send.
  const cur = states.get(k) ?? blank(messageId, r, 1_000_000);
  const next: RecipientStat = { ...cur };
  const outcome = OUTCOME_OF[type];
  if (wins(outcome, at, cur.outcome, cur.outcomeAt)) {
    next.outcome = outcome;
    next.outcomeAt = at;
  }
  const reply = data as { smtpCode?: string | null; smtpResponse?: string | null; enhancedCode?: string | null; mx?: string | null; asynchronous?: boolean };
  if (type !== 'DeliveryStarted' && type !== 'ComplaintReceived') {
    if (((reply.smtpCode ?? null) !== null || (reply.smtpResponse ?? null) !== null) && (cur.replyAt === null || at.getTime() >= cur.replyAt.getTime())) {
      next.smtpCode = reply.smtpCode || null;
      next.enhancedCode = reply.enhancedCode || null;
      next.replyAt = at;
    }
    // An asynchronous bounce names the report's Remote-MTA: a host downstream of the MX that took
    // the message (a forward, an internal relay), not the recipient's provider.
    if (reply.asynchronous !== true && typeof reply.mx === 'string' && reply.mx !== '' && (cur.mxAt === null || at.getTime() >= cur.mxAt.getTime())) {
      next.mx = reply.mx.toLowerCase();
      next.mxAt = at;
    }
  }
  states.set(k, next);
}

// ------------------------------------------------------------------------ rollup contributions

export const COUNTERS = ['messages', 'total', 'delivered', 'bounced', 'complained', 'failed', 'deferred'] as const;
export type Counter = (typeof COUNTERS)[number];
export const DOMAIN_COUNTERS = ['total', 'delivered', 'bounced', 'complained', 'failed', 'deferred'] as const;

export type RollupTable = 'block_hourly' | 'domain_hourly' | 'domain_daily' | 'code_hourly';

export interface Contribution {
  table: RollupTable;
  /** Key columns of the rollup row (bucket as ISO text). */
  key: Record<string, string>;
  /** Non-key columns written on insert only. */
  attrs?: Record<string, string | null>;
  counters: Partial<Record<Counter | 'count', number>>;
  /** table + key as one string (the accumulation key), when the producer already built it. */
  id?: string;
}

const HOUR_MS = 3_600_000;
const DAY_MS = 86_400_000;
export const hourOf = (d: Date): Date => new Date(Math.floor(d.getTime() / HOUR_MS) * HOUR_MS);
export const dayOf = (d: Date): Date => new Date(Math.floor(d.getTime() / DAY_MS) * DAY_MS);

export function providerOfStat(s: Pick<RecipientStat, 'domain' | 'mx'>): Provider {
  return classifyProvider(s.domain, s.mx);
}

const COUNTED: Partial<Record<StatOutcome, Counter>> = {
  delivered: 'delivered', bounced: 'bounced', complained: 'complained', failed: 'failed', deferred: 'deferred',
};

// ISO text of hour/day buckets: a batch has few distinct buckets and many recipients.
const isoCache = new Map<number, string>();
function isoOf(ms: number): string {
  let iso = isoCache.get(ms);
  if (iso === undefined) {
    if (isoCache.size > 100_000) isoCache.clear();
    iso = new Date(ms).toISOString();
    isoCache.set(ms, iso);
  }
  return iso;
}

export function contributions(s: RecipientStat | undefined): Contribution[] {
  if (!s || s.acceptedAt === null || s.motorBlockId === null) return [];
  const block = s.motorBlockId;
  const at = s.acceptedAt.getTime();
  const hour = isoOf(Math.floor(at / HOUR_MS) * HOUR_MS);
  const day = isoOf(Math.floor(at / DAY_MS) * DAY_MS);
  const counted = COUNTED[s.outcome];
  const c: Partial<Record<Counter, number>> = { total: 1 };
  if (counted) c[counted] = 1;
  const domainC = { ...c };
  if (s.ordinal === 0) c.messages = 1;
  const provider = providerOfStat(s);
  const Z = '\u0000';
  const out: Contribution[] = [
    { table: 'block_hourly', key: { motor_block_id: block, hour }, attrs: { account_id: s.accountId }, counters: c, id: `block_hourly|${block}${Z}${hour}` },
    { table: 'domain_hourly', key: { motor_block_id: block, hour, domain: s.domain, provider }, counters: domainC, id: `domain_hourly|${block}${Z}${hour}${Z}${s.domain}${Z}${provider}` },
    { table: 'domain_daily', key: { motor_block_id: block, day, domain: s.domain, provider }, counters: domainC, id: `domain_daily|${block}${Z}${day}${Z}${s.domain}${Z}${provider}` },
  ];
  if (s.outcome === 'bounced' || s.outcome === 'failed' || s.outcome === 'deferred') {
    const smtp = s.smtpCode ?? '';
    const enhanced = s.enhancedCode ?? '';
    out.push({
      table: 'code_hourly', key: { motor_block_id: block, hour, smtp_code: smtp, enhanced_code: enhanced, outcome: s.outcome }, counters: { count: 1 },
      id: `code_hourly|${block}${Z}${hour}${Z}${smtp}${Z}${enhanced}${Z}${s.outcome}`,
    });
  }
  return out;
}

/** Accumulates `sign × contributions` into `acc` (keyed by table + key). */
export function addContributions(acc: Map<string, Contribution>, list: Contribution[], sign: 1 | -1): void {
  for (const c of list) {
    const k = c.id ?? `${c.table}|${Object.values(c.key).join('\u0000')}`;
    let cur = acc.get(k);
    if (!cur) {
      cur = { table: c.table, key: c.key, attrs: c.attrs, counters: {} };
      acc.set(k, cur);
    }
    const counters = c.counters as Record<string, number>;
    const into = cur.counters as Record<string, number>;
    for (const name in counters) into[name] = (into[name] ?? 0) + sign * counters[name];
  }
}
