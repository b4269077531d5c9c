import { isDomainError, type DomainError } from '../domain/errors';
import { InvalidEventDataError } from '../domain/eventStore';
import type { RecipientCeiling } from '../commands/quota/sendQuota';

/**
 * The SMTP edge's one mapping table: DomainError code → reply code + enhanced status code
 * (RFC 3463). The HTTP edge has its own (read-api/http/errors.ts); the domain never formats a
 * reply. Tests assert on code and enhanced code, never on the text, except for the quota replies,
 * whose text the spec fixes.
 */

export interface SmtpReply {
  code: number;
  enhanced: string;
  text: string;
}

interface Mapping { code: number; enhanced: string }

const TABLE: Record<string, Mapping> = {
  // Quota: temporary, the client retries (SPEC "SMTP submission over quota").
  rate_limited_block: { code: 451, enhanced: '4.7.1' },
  rate_limited_account: { code: 451, enhanced: '4.7.1' },
  rate_limited_warmup: { code: 451, enhanced: '4.7.1' },
  // More recipients than a quota ceiling ever allows: no retry of this envelope can pass (RFC 3463
  // 5.5.3 "too many recipients"). Normally the RCPT TO 452 (ceilingReply) keeps a transaction under
  // the limit; this is the DATA fallback when the limit fell after the RCPTs were accepted.
  recipients_exceed_limit: { code: 552, enhanced: '5.5.3' },
  // Sender not allowed for this block (Postfix: "553 5.7.1 Sender address rejected: not owned by user").
  from_domain_mismatch: { code: 553, enhanced: '5.7.1' },
  // MAIL FROM:<>: the null sender is for bounces (RFC 5321 §4.5.5), which Motor generates itself.
  null_sender_not_allowed: { code: 553, enhanced: '5.7.1' },
  // The block or its domain cannot send until someone fixes it: permanent for this message.
  DOMAIN_DNS_INCOMPLETE: { code: 554, enhanced: '5.7.1' },
  use_comms_api: { code: 554, enhanced: '5.7.1' },
  motor_block_inactive: { code: 554, enhanced: '5.7.1' },
  invalid_api_key: { code: 554, enhanced: '5.7.1' },
  recipient_not_allowed: { code: 550, enhanced: '5.7.1' },
  // The message itself.
  validation_error: { code: 554, enhanced: '5.6.0' },
  DISALLOWED_HEADERS: { code: 554, enhanced: '5.6.0' },
  invalid_message: { code: 554, enhanced: '5.6.0' },
  message_too_big: { code: 552, enhanced: '5.3.4' },
};

/** A failure that is not a DomainError (store or Redis down, a bug): the client keeps the message and retries. */
const TEMPORARY: Mapping = { code: 451, enhanced: '4.3.0' };

function quotaText(err: DomainError): string | null {
  const d = (err.details ?? {}) as { dimension?: string; retryAfterSeconds?: number; rateLimit?: { used?: number; limit?: number } };
  if (!d.dimension) return null;
  const numbers = `${d.rateLimit?.used ?? '?'}/${d.rateLimit?.limit ?? '?'}. Retry in ${d.retryAfterSeconds ?? 60}s.`;
  if (err.code === 'rate_limited_account') return `account-wide send limit exceeded (${d.dimension}): ${numbers}`;
  if (err.code === 'rate_limited_block') return `Rate limit exceeded (${d.dimension}): ${numbers}`;
  return null;
}

/** One line of reply text: no CR/LF (the library also strips control characters as a backstop). */
const oneLine = (s: string): string => s.replace(/[\r\n]+/g, ' ').slice(0, 400);

/**
 * The reply to the command `err` refused. The table's permanent refusals are DATA's `554`
 * ("transaction failed"); at MAIL FROM and RCPT TO they are `550` with the same enhanced code: RFC
 * 5321 section 4.3.2 gives neither command 554, and 550 is the one for "command rejected for policy
 * reasons" (a block that may not send, a domain without SPF and DKIM, a recipient outside the
 * sandbox allowlist or the Free plan's permitted recipients).
 */
export function replyFor(err: unknown, command: 'MAIL' | 'RCPT' | 'DATA' = 'DATA'): SmtpReply {
  const r = replyForData(err);
  return command !== 'DATA' && r.code === 554 ? { ...r, code: 550 } : r;
}

function replyForData(err: unknown): SmtpReply {
  // The message holds something the store can never keep: a retry would fail the same way.
  if (err instanceof InvalidEventDataError) return { code: 554, enhanced: '5.6.0', text: 'Message content cannot be stored' };
  if (!isDomainError(err)) return { ...TEMPORARY, text: 'Temporary local problem, please try again later' };
  const mapped = TABLE[err.code]
    // A code not in the table: its HTTP-ish status decides temporary versus permanent.
    ?? (err.status === 429 ? { code: 451, enhanced: '4.7.1' } : err.status >= 500 ? TEMPORARY : { code: 554, enhanced: '5.7.1' });
  return { ...mapped, text: oneLine(quotaText(err) ?? err.message) };
}

/** `451 4.7.1 Rate limit exceeded (burst): 3/3. Retry in 42s.` */
export const formatReply = (r: SmtpReply): string => `${r.code} ${r.enhanced} ${r.text}`;

/**
 * The error an smtp-server handler callback takes. Its message starts with the enhanced code; the
 * listener's reply hook (smtp/server.ts) sends such a message as is instead of letting the
 * library prepend its generic code (it would turn 451 into 451 4.3.0).
 */
export function smtpError(r: SmtpReply): Error & { responseCode: number } {
  const e = new Error(`${r.enhanced} ${r.text}`) as Error & { responseCode: number };
  e.responseCode = r.code;
  return e;
}

export const reply = (code: number, enhanced: string, text: string): SmtpReply => ({ code, enhanced, text });

/**
 * The process holds as many message bytes as SMTP_MAX_BUFFERED_BYTES allows (smtp/dataBudget.ts):
 * a temporary refusal (RFC 3463 4.3.1 "mail system full", RFC 5321 452), so the client keeps the
 * message and tries again; Postfix's smtpd says the same when its queue is short of space.
 */
export const INSUFFICIENT_STORAGE: SmtpReply = { code: 452, enhanced: '4.3.1', text: 'Insufficient system storage' };

/** Messages that already carry an enhanced status code (`4.7.1 ...`). */
export const STARTS_WITH_ENHANCED = /^[245]\.\d{1,3}\.\d{1,3} /;

/**
 * RCPT TO once a transaction holds as many recipients as the smallest quota ceiling allows (RFC
 * 5321 §4.5.3.1.10: the client sends the rest in a later transaction), as the library does at
 * SMTP_MAX_RECIPIENTS.
 */
export const ceilingReply = (c: RecipientCeiling): SmtpReply => reply(452, '4.5.3',
  `Too many recipients: the ${c.dimension.startsWith('acct_') ? 'account-wide' : 'Motor Block'} ${c.dimension} limit is ${c.limit}; send the rest in another transaction`);

/** The deadlines of a session (smtp/server.ts): the session as a whole, and a message from its 354 to its final dot. */
export type Deadline = 'session' | 'data';

/**
 * The 421 of a session cut at one of its deadlines. 4.4.2 ("bad connection"), as smtp-server's
 * own idle timeout and Postfix's `421 4.4.2 <host> Error: timeout exceeded`; a 421 tells the client
 * to try again, so a message cut off is retried on a new connection.
 */
export const deadlineReply = (deadline: Deadline, hostname: string, seconds: number): SmtpReply => reply(421, '4.4.2', deadline === 'data'
  ? `${hostname} Error: timeout exceeded: the message did not arrive within ${seconds}s of the 354; closing connection`
  : `${hostname} Error: timeout exceeded: a session lasts at most ${seconds}s; closing connection, connect again to go on`);
