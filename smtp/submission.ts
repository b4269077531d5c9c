import { domainToASCII } from 'node:url';
import { fromAndSubject } from './headerValues';
import { storableText } from '../domain/storableJson';
import { streamName } from '../domain/eventStore';
import { fail } from '../domain/errors';
import { toEventData, type DomainEvent } from '../domain/events';
import { newId } from '../domain/ids';
import { domainOf, isValidAddress, MAX_FROM_NAME, type ValidSendRequest } from '../domain/message/sendRules';
import { checkSend, recipientCeilingOf, sendMessage, type SendDeps } from '../commands/send/sendMessage';
import type { RecipientCeiling } from '../commands/quota/sendQuota';
import { deletionRefusal } from '../commands/blocks/deletionGuard';
import { checkRecipientPermissions } from '../commands/sandbox/recipientRules';
import { decodeMessage, normalizeLineEndings, prepareMessage, refuseLongLines } from './message';
import { formatReply, type SmtpReply } from './replies';

/**
 * The SMTP submission turned into the same AcceptMessage command as POST /v1/send
 * (commands/send/sendMessage.ts): same block, sender-domain, DNS and quota rules, one append, and
 * the 250 only once MessageAccepted is committed.
 */

export interface Envelope { mailFrom: string; rcptTo: string[] }

const ASCII = /^[\x00-\x7f]*$/;

/**
 * An address with its domain in A-labels (RFC 5890: `bücher.example` is `xn--bcher-kva.example`);
 * an ASCII domain is left as it is. `null` when the domain has no A-label form (`⒈.example`).
 *
 * SMTPUTF8 is not offered, so the envelope a client may send is ASCII: an internationalized domain
 * in A-labels. smtp-server hands such a domain to the hooks in U-labels (punycode.toUnicode), and
 * mailparser does the same for the From header; this gives back the form the client sent, the form
 * a block's domain is registered in (docs/DOMAINS.md) and the one the delivery worker puts on the
 * wire. A client that sent U-labels anyway gets them converted: the delivery is the same.
 */
export function withAsciiDomain(address: string): string | null {
  const at = address.lastIndexOf('@');
  const domain = address.slice(at + 1);
  if (at === -1 || ASCII.test(domain)) return address;
  const ascii = domainToASCII(domain);
  return ascii === '' ? null : `${address.slice(0, at)}@${ascii}`;
}

/**
 * An envelope address (MAIL FROM, RCPT TO) as the listener takes it, or why not. A non-ASCII local
 * part needs SMTPUTF8, which Motor does not offer (RFC 6531 section 3.5: 553 5.6.7); a domain is
 * taken in U-labels or A-labels and kept in A-labels (withAsciiDomain).
 */
export function envelopeAddress(address: string): { ok: true; address: string } | { ok: false; reason: 'non_ascii_local_part' | 'bad_domain' } {
  if (!ASCII.test(address.slice(0, Math.max(0, address.lastIndexOf('@'))))) return { ok: false, reason: 'non_ascii_local_part' };
  const ascii = withAsciiDomain(address);
  return ascii === null ? { ok: false, reason: 'bad_domain' } : { ok: true, address: ascii };
}

/**
 * MAIL FROM: the envelope sender must be an address of the block's domain, and the block must be
 * able to send (active, not marketing, DNS configured). The same checks as the send handler's,
 * asked early so the client learns before it transmits the message. Answers the most recipients
 * the transaction can have (the smallest send quota ceiling), which RCPT TO enforces. The address's
 * syntax is the listener's to check (553 5.1.7) before it asks.
 */
export async function checkEnvelopeSender(deps: SendDeps, motorBlockId: string, mailFrom: string, now: Date): Promise<RecipientCeiling> {
  if (mailFrom === '') throw fail('null_sender_not_allowed', 403, 'The null sender is not accepted for submission');
  const probe: ValidSendRequest = {
    from: mailFrom, fromName: null, to: [], subject: '', text: null, html: null, headers: {}, metadata: {}, dryRun: true, bodySize: 0,
  };
  const checked = await checkSend(deps, { motorBlockId, body: {}, idempotencyKey: null, source: 'smtp', now, validated: probe });
  return recipientCeilingOf(deps, checked, now);
}

/**
 * RCPT TO: the send path's recipient rules (sandbox allowlist, Free-plan recipients;
 * commands/sandbox/recipientRules.ts) for one recipient, so the client learns which recipient is
 * refused and the message can go to the others. The same DirectoryCache reads as DATA's check
 * (block, account, allowlist, confirmed free recipients): within the cache's lifetime a RCPT costs
 * no query, and never an event store read. DATA asks again for the whole envelope (checkSend): the
 * allowlist or the plan may change in between. A block gone since MAIL FROM is left to DATA,
 * which refuses it with its own code.
 */
export async function checkEnvelopeRecipient(deps: Pick<SendDeps, 'directory'>, motorBlockId: string, rcptTo: string): Promise<void> {
  const block = await deps.directory.block(motorBlockId);
  if (block) await checkRecipientPermissions(deps.directory, block, [rcptTo]);
}

export interface Submitted { messageId: string; smtpMessageId: string }

/** DATA: the whole message (as received, dot-unstuffed) → MessageAccepted. Throws DomainError. */
export async function submitMessage(
  deps: SendDeps,
  input: { motorBlockId: string; envelope: Envelope; data: Buffer; now: Date },
): Promise<Submitted> {
  const data = normalizeLineEndings(input.data);
  refuseLongLines(data);
  const text = decodeMessage(data);
  const domain = domainOf(input.envelope.mailFrom);
  const prepared = prepareMessage(text, { now: input.now, newMessageId: () => `${newId()}@${domain}` });

  // Only From and Subject are decoded: the body goes through untouched.
  const parsed = fromAndSubject(prepared.fromField, prepared.subjectField);
  const mailboxes = parsed.from?.value ?? [];
  const named = mailboxes.length === 1 && !mailboxes[0].group ? mailboxes[0].address?.trim() ?? '' : '';
  // mailparser gives an A-label domain back in U-labels: compared with the block's domain in A-labels.
  const from = named && withAsciiDomain(named);
  if (!from || !isValidAddress(from)) throw fail('invalid_message', 554, 'The From header must name exactly one valid mailbox');

  const validated: ValidSendRequest = {
    from,
    fromName: mailboxes[0].name ? storableText([...mailboxes[0].name].slice(0, MAX_FROM_NAME).join('')) || null : null,
    to: input.envelope.rcptTo,
    subject: storableText(parsed.subject ?? '', 998),
    // The message is `raw`; text/html stay null instead of doubling the event's size.
    text: null,
    html: null,
    headers: {},
    metadata: {},
    dryRun: false,
    bodySize: Buffer.byteLength(prepared.raw),
  };
  const result = await sendMessage(deps, {
    motorBlockId: input.motorBlockId, body: {}, idempotencyKey: null, source: 'smtp', now: input.now,
    raw: prepared.raw, smtpMessageId: prepared.messageId, validated, envelopeFrom: input.envelope.mailFrom,
  });
  if (result.kind !== 'accepted') throw new Error(`unexpected send result ${result.kind}`);
  return { messageId: result.messageId, smtpMessageId: prepared.messageId };
}

/**
 * A refused submission of an authenticated client, as an event on `smtpSubmission-<block>`; nothing
 * when the block is deleted or its deletion is queued (false). A session that logged in before the
 * deletion request can still be refused after it, and the stream it would append to is one the
 * deletion job removes: appended after the job's scan, it would stay (docs/BLOCKS.md "Deletion").
 * The block's own stream says so the moment the request is appended (the directory may be behind).
 */
export async function recordRefusal(
  deps: Pick<SendDeps, 'store'>,
  r: { motorBlockId: string; code: string; reply: SmtpReply; envelopeFrom: string; recipientCount: number; remoteAddress: string; at: Date },
): Promise<boolean> {
  return appendUnlessDeleting(deps, r.motorBlockId, {
    type: 'SmtpSubmissionRefused',
    data: {
      motorBlockId: r.motorBlockId, code: r.code, reply: formatReply(r.reply), envelopeFrom: r.envelopeFrom.slice(0, 254),
      recipientCount: r.recipientCount, remoteAddress: r.remoteAddress, at: r.at.toISOString(),
    },
  });
}

/**
 * The block's refusals counted past the refusal event limit (smtp/refusalBudget.ts), as one event
 * on `smtpSubmission-<block>`; nothing once the block is deleted or being deleted, as recordRefusal.
 */
export async function recordRefusalsSummarized(
  deps: Pick<SendDeps, 'store'>,
  s: { motorBlockId: string; refusals: number; from: Date; to: Date; limit: number; windowSeconds: number },
): Promise<boolean> {
  return appendUnlessDeleting(deps, s.motorBlockId, {
    type: 'SmtpSubmissionRefusalsSummarized',
    data: {
      motorBlockId: s.motorBlockId, refusals: s.refusals, from: s.from.toISOString(), to: s.to.toISOString(), limit: s.limit, windowSeconds: s.windowSeconds,
    },
  });
}

async function appendUnlessDeleting(
  deps: Pick<SendDeps, 'store'>, motorBlockId: string, event: DomainEvent<'SmtpSubmissionRefused' | 'SmtpSubmissionRefusalsSummarized'>,
): Promise<boolean> {
  if (await deletionRefusal(deps.store, motorBlockId)) return false;
  await deps.store.append(streamName('smtpSubmission', motorBlockId), [toEventData(newId(), event, { actor: `motorBlock:${motorBlockId}` })], { expectedRevision: 'any' });
  return true;
}
