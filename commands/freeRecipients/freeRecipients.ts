import { createHash, randomBytes } from 'node:crypto';
import type { EventStore } from '../../domain/eventStore';
import { streamName } from '../../domain/eventStore';
import { fail } from '../../domain/errors';
import { asDomainEvent } from '../../domain/events';
import {
  FREE_RECIPIENT_EVENTS, decideConfirm, decideRemove, decideRequest, fold, mailFailed, normalizeEmail,
  type FreeRecipientStatus, type FreeRecipientsState,
} from '../../domain/freeRecipients/freeRecipients';
import { isUuid, newId } from '../../domain/ids';
import type { Config } from '../../infra/config';
import { listFreeRecipients as listRows } from '../../projections/directory/queries';
import type { RequestLimiter } from '../quota/requestLimiter';
import { sendSystemMail, type SystemMailDeps } from '../auth/systemMail';
import { decideAndAppend, load, type Contention } from '../auth/streams';
import { awaitDirectoryRow, type ReadYourWritesDeps } from '../readYourWrites';

/**
 * Free recipients (SPEC "Free recipients", docs/SANDBOX.md): GET/POST/DELETE
 * /api/public/v1/account/free-recipients (scope recipients.manage) and the confirmation page
 * (commands/http/FreeRecipientConfirmController.ts). The confirmation mail is the service's own
 * mail, through the normal pipeline (commands/auth/systemMail.ts).
 *
 * The link's token is `fr_<account id, 32 hex>_<43 base64url chars>` (256 random bits): it names the
 * account's stream, where only its SHA-256 is recorded, so the page decides on the stream itself.
 */

export interface FreeRecipientDeps extends SystemMailDeps, ReadYourWritesDeps { limiter: RequestLimiter }

/** Every try lost to other changes of the account's list (docs/ERRORS.md "Any route: concurrent changes"). */
const LIST_CONTENTION: Contention = { code: 'free_recipients_conflict', subject: 'The free-recipient list' };
const stream = (accountId: string) => streamName('freeRecipients', accountId);
const sha256 = (s: string) => createHash('sha256').update(s, 'utf8').digest('hex');
const loadState = (store: EventStore, accountId: string) => load(store, stream(accountId), FREE_RECIPIENT_EVENTS, fold);

export const CONFIRM_PATH = '/free-recipients/confirm';

export function confirmationToken(accountId: string): string {
  return `fr_${accountId.replace(/-/g, '')}_${randomBytes(32).toString('base64url')}`;
}
export function parseConfirmationToken(value: unknown): { accountId: string; tokenHash: string } | null {
  if (typeof value !== 'string') return null;
  const m = /^fr_([0-9a-f]{32})_([A-Za-z0-9_-]{43})$/.exec(value);
  if (!m) return null;
  const h = m[1];
  return { accountId: `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`, tokenHash: sha256(value) };
}

export function limitsNote(config: Pick<Config, 'freeRecipients'>): string {
  const f = config.freeRecipients;
  const hours = Math.round(f.linkTtlSeconds / 3600);
  return `A Free account sends test mail only to its own address and to confirmed free recipients. Up to ${f.limit} addresses ` +
    `(pending and confirmed both count; DELETE one to make room). Each address confirms by opening the emailed link, valid ` +
    `${hours >= 24 ? `${Math.round(hours / 24)} days` : `${hours} hours`}; asking again within ${Math.round(f.resendCooldownSeconds / 60)} minutes sends no new mail. ` +
    `At most ${f.postsPerMinute} requests per minute per account.`;
}

export interface FreeRecipientList {
  recipients: { id: string; email: string; status: FreeRecipientStatus }[];
  limit: number;
  /** Addresses on the list (pending and confirmed), counted on the account's stream; null when it could not be read. */
  usage: number | null;
  limitsNote: string;
}

export async function listFreeRecipients(deps: Pick<FreeRecipientDeps, 'db' | 'store' | 'config'>, accountId: string): Promise<FreeRecipientList> {
  const rows = await listRows(deps.db, accountId);
  let usage: number | null = null;
  try {
    usage = (await loadState(deps.store, accountId)).state.recipients.length;
  } catch {
    usage = null;
  }
  return {
    recipients: rows.map((r) => ({ id: r.id, email: r.email, status: r.status })),
    limit: deps.config.freeRecipients.limit, usage, limitsNote: limitsNote(deps.config),
  };
}

async function ownEmail(store: EventStore, accountId: string): Promise<string> {
  const first = (await store.readStream(streamName('account', accountId), { maxCount: 1 })).map(asDomainEvent)[0];
  if (first?.type !== 'AccountCreated') throw fail('not_found', 404, 'No such account');
  return first.data.email;
}

async function awaitList(deps: Pick<FreeRecipientDeps, 'db' | 'store' | 'logger' | 'metrics'>, wait: string, accountId: string): Promise<void> {
  const events = await deps.store.readStream(stream(accountId));
  if (events.length > 0) await awaitDirectoryRow(deps, wait, 'free_recipient_lists', accountId, events[events.length - 1].revision);
}

const limiters = new WeakMap<RequestLimiter, RequestLimiter>();
async function applyPostLimit(deps: FreeRecipientDeps, accountId: string, now: Date): Promise<void> {
  let limiter = limiters.get(deps.limiter);
  if (!limiter) {
    limiter = deps.limiter.withLimit(deps.config.freeRecipients.postsPerMinute);
    limiters.set(deps.limiter, limiter);
  }
  const reading = await limiter.hit(`freeRecipients:${accountId}`, now);
  if (reading.kind === 'exceeded') {
    throw fail('rate_limited', 429, `At most ${reading.limit} free-recipient requests per minute per account`, {
      details: { retryAfterSeconds: reading.resetSeconds }, nextAction: `Retry after ${reading.resetSeconds} seconds`,
    });
  }
}

/**
 * POST: answers `{ email, status }`, the same whether a confirmation mail was sent or withheld
 * (cooldown, already confirmed). 502 email_send_failed when the mail could not be handed to the
 * pipeline; that request is then void (the address is not on the list).
 */
export async function requestFreeRecipient(
  deps: FreeRecipientDeps, a: { accountId: string; actor: string }, body: { email?: unknown }, now: Date,
): Promise<{ email: string; status: FreeRecipientStatus }> {
  await applyPostLimit(deps, a.accountId, now);
  const email = normalizeEmail(body.email);
  const own = await ownEmail(deps.store, a.accountId);
  const token = confirmationToken(a.accountId);
  const tokenHash = sha256(token);
  const f = deps.config.freeRecipients;
  const decision = await decideAndAppend(deps.store, stream(a.accountId), FREE_RECIPIENT_EVENTS, fold, (s: FreeRecipientsState) => {
    const d = decideRequest(s, {
      accountId: a.accountId, ownEmail: own, email, limit: f.limit, cooldownMs: f.resendCooldownSeconds * 1000, linkTtlMs: f.linkTtlSeconds * 1000,
      newRecipientId: newId(), tokenHash, now,
    });
    return { events: d.events, result: d };
  }, a.actor, LIST_CONTENTION);
  if (decision.mail) {
    const link = `${deps.config.publicBaseUrl}${CONFIRM_PATH}?token=${encodeURIComponent(token)}`;
    const days = Math.round(f.linkTtlSeconds / 86400);
    try {
      await sendSystemMail(deps, {
        to: email,
        subject: 'Confirm that you want to receive test mail',
        text:
          `The Motor account of ${own} asked to send test mail to this address.\n\n` +
          `If that is fine with you, open this link and confirm:\n${link}\n\n` +
          `The link works once and expires in ${days >= 1 ? `${days} days` : 'a few hours'}. If you did not expect this, ignore this mail: nothing will be sent to you.\n`,
        purpose: 'free_recipient_confirmation',
        idempotencyKey: `free-recipient:${tokenHash}`,
      }, now);
    } catch (err) {
      await decideAndAppend(deps.store, stream(a.accountId), FREE_RECIPIENT_EVENTS, fold, (s) => ({
        events: mailFailed(s, { accountId: a.accountId, recipientId: decision.recipient.recipientId, tokenHash, now }), result: undefined,
      }), a.actor, LIST_CONTENTION);
      await awaitList(deps, 'free_recipient.request', a.accountId);
      throw err;
    }
  }
  await awaitList(deps, 'free_recipient.request', a.accountId);
  return { email: decision.recipient.email, status: decision.recipient.status };
}

export async function removeFreeRecipient(
  deps: Pick<FreeRecipientDeps, 'db' | 'store' | 'logger' | 'metrics'>, a: { accountId: string; actor: string }, id: string, now: Date,
): Promise<{ id: string; email: string; removed: true }> {
  if (!isUuid(id)) throw fail('invalid_id', 400, 'The free-recipient id must be a uuid from the list', { nextAction: 'GET /api/public/v1/account/free-recipients' });
  const email = await decideAndAppend(deps.store, stream(a.accountId), FREE_RECIPIENT_EVENTS, fold, (s) => {
    const events = decideRemove(s, { accountId: a.accountId, recipientId: id.toLowerCase(), now });
    return { events, result: events[0].type === 'FreeRecipientRemoved' ? events[0].data.email : '' };
  }, a.actor, LIST_CONTENTION);
  await awaitList(deps, 'free_recipient.remove', a.accountId);
  return { id: id.toLowerCase(), email, removed: true };
}

export type ConfirmPage =
  | { kind: 'confirm'; email: string }
  | { kind: 'confirmed'; email: string }
  | { kind: 'already_used'; email: string }
  | { kind: 'expired' | 'invalid' };

/** GET of the page: what the token is good for, without changing anything (link scanners may fetch it). */
export async function inspectConfirmation(store: EventStore, token: unknown, now: Date): Promise<ConfirmPage> {
  const t = parseConfirmationToken(token);
  if (!t) return { kind: 'invalid' };
  const { state } = await loadState(store, t.accountId);
  const o = decideConfirm(state, { accountId: t.accountId, tokenHash: t.tokenHash, now });
  if (o.kind === 'confirmed') return { kind: 'confirm', email: o.recipient.email };
  if (o.kind === 'already_used') return { kind: 'already_used', email: o.recipient.email };
  return { kind: o.kind };
}

/** The page's form POST: confirms, once, with the token from the emailed link. */
export async function confirmFreeRecipient(deps: Pick<FreeRecipientDeps, 'db' | 'store' | 'logger' | 'metrics'>, token: unknown, now: Date): Promise<ConfirmPage> {
  const t = parseConfirmationToken(token);
  if (!t) return { kind: 'invalid' };
  const outcome = await decideAndAppend(deps.store, stream(t.accountId), FREE_RECIPIENT_EVENTS, fold, (s) => {
    const o = decideConfirm(s, { accountId: t.accountId, tokenHash: t.tokenHash, now });
    return { events: o.kind === 'confirmed' ? o.events : [], result: o };
  }, 'recipient', LIST_CONTENTION);
  if (outcome.kind === 'confirmed') {
    await awaitList(deps, 'free_recipient.confirm', t.accountId);
    return { kind: 'confirmed', email: outcome.recipient.email };
  }
  if (outcome.kind === 'already_used') return { kind: 'already_used', email: outcome.recipient.email };
  return { kind: outcome.kind };
}
