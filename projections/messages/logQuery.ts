/**
 * The logs filter language (`query` parameter of GET /motor-blocks/{id}/logs), parsed by a pure
 * function: whitespace-separated `key:value` terms, all ANDed.
 *
 *   recipient:<email>          the send was addressed to this recipient
 *   domain:<recipient_domain>  at least one recipient at this domain
 *   status:<outcome>           currentOutcome (queued … complained) or `sent`
 *   metadata.<key>:<value>     exact match on a metadata entry
 *
 * Values may be double-quoted (`metadata.note:"two words"`, `\"` and `\\` escape). Anything else
 * (free text, unknown keys, empty values) is an `invalid_query` DomainError (400).
 */
import { DomainError } from '../../domain/errors.js';
import { OUTCOMES, domainOf, isOutcome, normalizeAddress, type Outcome } from './view.js';

export type StatusFilter = Outcome | 'sent';
export const STATUS_FILTERS: readonly StatusFilter[] = [...OUTCOMES, 'sent'];

/**
 * `sent`: the message left the queue and Motor did not give up on it locally — currentOutcome is
 * processed, deferred, delivered, bounced or complained (not queued, not failed).
 */
export const SENT_OUTCOMES: readonly Outcome[] = ['processed', 'deferred', 'delivered', 'bounced', 'complained'];

export const outcomesOf = (s: StatusFilter): readonly Outcome[] => (s === 'sent' ? SENT_OUTCOMES : [s]);

export interface LogQuery {
  recipients: string[];
  domains: string[];
  statuses: StatusFilter[];
  metadata: Array<{ key: string; value: string }>;
}

const invalid = (message: string): DomainError =>
  new DomainError({
    code: 'invalid_query',
    status: 400,
    message,
    nextAction: 'Use recipient:<email>, domain:<domain>, status:<outcome> or metadata.<key>:<value> terms separated by spaces.',
  });

export function parseStatusFilter(value: string): StatusFilter {
  const v = value.trim().toLowerCase();
  if (isOutcome(v) || v === 'sent') return v;
  throw invalid(`Unknown status "${value}"; expected one of ${STATUS_FILTERS.join(', ')}`);
}

/** Splits on whitespace outside double quotes; quotes are kept for the term parser. */
function tokenize(q: string): string[] {
  const tokens: string[] = [];
  let cur = '';
  let quoted = false;
  for (let i = 0; i < q.length; i++) {
    const c = q[i];
    if (quoted && c === '\\' && i + 1 < q.length) {
      cur += c + q[++i];
      continue;
    }
    if (c === '"') quoted = !quoted;
    if (!quoted && /\s/.test(c)) {
      if (cur) tokens.push(cur);
      cur = '';
      continue;
    }
    cur += c;
  }
  if (quoted) throw invalid('Unterminated quote in query');
  if (cur) tokens.push(cur);
  return tokens;
}

function unquote(v: string): string {
  if (v.length >= 2 && v.startsWith('"') && v.endsWith('"')) return v.slice(1, -1).replace(/\\(.)/g, '$1');
  if (v.includes('"')) throw invalid(`Misplaced quote in "${v}"`);
  return v;
}

const EMAIL_RE = /^[^\s@]+@[^\s@]+$/;

export function parseLogQuery(q: string | null | undefined): LogQuery {
  const out: LogQuery = { recipients: [], domains: [], statuses: [], metadata: [] };
  if (!q) return out;
  for (const token of tokenize(q)) {
    const colon = token.indexOf(':');
    if (colon <= 0) throw invalid(`Free text is not supported ("${token}"): use key:value terms`);
    const key = token.slice(0, colon);
    const value = unquote(token.slice(colon + 1));
    if (value === '') throw invalid(`Empty value for "${key}"`);
    const lower = key.toLowerCase();
    if (lower === 'recipient') {
      if (!EMAIL_RE.test(value)) throw invalid(`recipient: needs an e-mail address (got "${value}")`);
      out.recipients.push(normalizeAddress(value));
    } else if (lower === 'domain') {
      const d = value.replace(/^@/, '').toLowerCase();
      if (d.includes('@') || /\s/.test(d) || d === '') throw invalid(`domain: needs a domain name (got "${value}")`);
      out.domains.push(domainOf(`x@${d}`));
    } else if (lower === 'status') {
      out.statuses.push(parseStatusFilter(value));
    } else if (lower.startsWith('metadata.')) {
      const mkey = key.slice('metadata.'.length);
      if (mkey === '') throw invalid('metadata.<key>: needs a key');
      out.metadata.push({ key: mkey, value });
    } else {
      throw invalid(`Unknown filter "${key}"`);
    }
  }
  return out;
}
