import { createHash } from 'node:crypto';
import type { EventStore } from '../../domain/eventStore';
import { WrongExpectedRevisionError, streamName } from '../../domain/eventStore';
import { fail } from '../../domain/errors';
import { toEventData, type MessageAccepted } from '../../domain/events';
import { uuidV5, newId } from '../../domain/ids';
import { acceptMessage, initialMessageState } from '../../domain/message/message';
import { domainOf, validateSendRequest, type SendRequestBody, type ValidSendRequest } from '../../domain/message/sendRules';
import type { Config } from '../../infra/config';
import { ReputationCache, loadSendPolicy, type SendPolicy } from '../../projections/analytics/sendPolicy';
import type { BlockRecord, DomainRecord } from '../../projections/directory/queries';
import type { DirectoryCache } from '../directoryCache';
import { recipientCeiling, type QuotaDecision, type RecipientCeiling, type SendQuota } from '../quota/sendQuota';
import { checkRecipientPermissions } from '../sandbox/recipientRules';

/**
 * The AcceptMessage command handler shared by POST /v1/send and SMTP submission: the checks in
 * the order the spec lists them (block, request, sender domain, DNS), then the quota (first the
 * recipient count against the ceilings, then the charge), then one append. The caller gets success
 * only after MessageAccepted is committed.
 */

export const IDEMPOTENCY_WINDOW_MS = 24 * 3600 * 1000;

export interface SendDeps {
  store: EventStore;
  directory: DirectoryCache;
  quota: SendQuota;
  config: Pick<Config, 'defaultPlan' | 'enforceAccountLimit' | 'hostname' | 'plans' | 'accountFallback' | 'enforceWarmup'>;
  /** Reputation per block for the throttle; default: one cache per database, 30 s per block. */
  reputation?: ReputationCache;
}

const reputationCaches = new WeakMap<object, ReputationCache>();
function reputationCacheOf(deps: SendDeps): ReputationCache {
  if (deps.reputation) return deps.reputation;
  let cache = reputationCaches.get(deps.directory.db);
  if (!cache) {
    cache = new ReputationCache(deps.directory.db);
    reputationCaches.set(deps.directory.db, cache);
  }
  return cache;
}

const secondsToNextUtcDay = (now: Date): number => Math.max(1, Math.ceil((Math.floor(now.getTime() / 86_400_000 + 1) * 86_400_000 - now.getTime()) / 1000));

/** Longest Idempotency-Key (POST /v1/send header, the MCP send_email argument). */
export const MAX_IDEMPOTENCY_KEY = 255;

/** An Idempotency-Key is 1 to MAX_IDEMPOTENCY_KEY visible ASCII characters. */
export const isIdempotencyKey = (key: string): boolean => key.length > 0 && key.length <= MAX_IDEMPOTENCY_KEY && !/[^\x21-\x7e]/.test(key);

export interface SendCommand {
  motorBlockId: string;
  body: SendRequestBody;
  idempotencyKey: string | null;
  source: 'http' | 'smtp';
  now: Date;
  /** Event metadata actor of MessageAccepted; default `motorBlock:<id>` (an agent's send_email: `agent:<grantId>`). */
  actor?: string;
  /** SMTP: the submitted message and its Message-ID (the HTTP path builds its own). */
  raw?: string;
  smtpMessageId?: string;
  /** SMTP: MAIL FROM, kept as the envelope sender of the delivery when it differs from From. */
  envelopeFrom?: string;
  /** SMTP: the request was already validated from the envelope and headers. */
  validated?: ValidSendRequest;
}

export type SendResult =
  | { kind: 'validated'; request: ValidSendRequest; block: BlockRecord; domain: DomainRecord }
  | { kind: 'accepted'; messageId: string; request: ValidSendRequest; acceptedAt: Date; quota: QuotaDecision }
  | { kind: 'replayed'; messageId: string; accepted: MessageAccepted };

/** Loads the block and domain and applies every rule that does not need the quota. */
export function checkSend(deps: SendDeps, cmd: SendCommand): Promise<{ request: ValidSendRequest; block: BlockRecord; domain: DomainRecord }> {
  return checkSendFrom(deps, cmd, { allowMarketing: false });
}

/**
 * The rules of `checkSend`. `allowMarketing` is true only for the communications API's campaigns:
 * a marketing block sends through them and never through /v1/send or SMTP (use_comms_api).
 */
async function checkSendFrom(deps: SendDeps, cmd: SendCommand, opts: { allowMarketing: boolean }): Promise<{ request: ValidSendRequest; block: BlockRecord; domain: DomainRecord }> {
  const block = await deps.directory.block(cmd.motorBlockId);
  if (!block) throw fail('invalid_api_key', 401, 'Invalid API key format');
  if (block.type === 'marketing' && !opts.allowMarketing) {
    throw fail('use_comms_api', 403, 'Marketing blocks send through the communications API, not /v1/send or SMTP', {
      nextAction: 'Use the communications API (campaigns) for marketing mail',
    });
  }
  assertBlockActive(block);
  const request = cmd.validated ?? validateSendRequest(cmd.body);
  const domain = await checkSenderDomain(deps.directory, block, request.from);
  // Sandbox allowlist and Free-plan recipients (docs/SANDBOX.md): before the quota, never charged.
  await checkRecipientPermissions(deps.directory, block, request.to);
  return { request, block, domain };
}

/** A deactivated block sends nothing (403 motor_block_inactive). */
export function assertBlockActive(block: BlockRecord): void {
  if (block.status !== 'active') {
    throw fail('motor_block_inactive', 403, 'This Motor Block is deactivated; sends are refused until it is reactivated', {
      nextAction: 'Reactivate the block: POST /api/public/v1/account/motor-blocks/{id}/reactivate',
    });
  }
}

/**
 * The sender rules of a send: `from` is an address of the block's domain (403 from_domain_mismatch)
 * and that domain's SPF and DKIM are in place (403 DOMAIN_DNS_INCOMPLETE). Shared by every send
 * and by the creation of a campaign, which must be able to send from its `from`.
 */
export async function checkSenderDomain(directory: DirectoryCache, block: BlockRecord, from: string): Promise<DomainRecord> {
  const domain = await directory.domain(block.domainId);
  if (!domain || domainOf(from) !== domain.name.toLowerCase()) {
    throw fail('from_domain_mismatch', 403, `From address domain does not match the block's domain${domain ? ` (${domain.name})` : ''}`, {
      nextAction: domain ? `Send from an address @${domain.name}` : 'Assign a verified domain to this block',
    });
  }
  if (!domain.spfConfigured || !domain.dkimConfigured) {
    const missing = [!domain.spfConfigured && 'SPF', !domain.dkimConfigured && 'DKIM'].filter(Boolean).join(' and ');
    throw fail('DOMAIN_DNS_INCOMPLETE', 403, `Domain DNS setup incomplete: ${missing} not configured for ${domain.name}`, {
      nextAction: `Publish the DNS records of ${domain.name}, then run check-dns`,
    });
  }
  return domain;
}

/** The id a (block, Idempotency-Key) pair maps to, generation n (a key reused after 24 h moves on). */
const idempotentMessageId = (motorBlockId: string, key: string, generation: number): string =>
  uuidV5(`send:${motorBlockId}:${createHash('sha256').update(key).digest('hex')}:${generation}`);

async function readAccepted(store: EventStore, messageId: string): Promise<MessageAccepted | null> {
  const events = await store.readStream(streamName('message', messageId), { maxCount: 1 });
  return events[0]?.type === 'MessageAccepted' ? (events[0].data as MessageAccepted) : null;
}

/**
 * The send a key maps to: the message of its latest generation when that one is inside the
 * replay window, else the id of the next generation. Generation g + 1 is created only once g is
 * outside the window, so the generations that exist are 0..L with only L possibly inside it: a
 * generation found inside the window is the latest. L is found by doubling, then halving (O(log L)
 * reads, one for a key never used or used within the day), so a key reused every day for years
 * does not cost a read per day it was used.
 */
async function latestGeneration(store: EventStore, motorBlockId: string, key: string, now: Date):
  Promise<{ replay: { messageId: string; accepted: MessageAccepted } | null; nextMessageId: string }> {
  const probe = async (generation: number) => {
    const messageId = idempotentMessageId(motorBlockId, key, generation);
    const accepted = await readAccepted(store, messageId);
    if (!accepted) return { state: 'missing' as const };
    if (now.getTime() - Date.parse(accepted.acceptedAt) < IDEMPOTENCY_WINDOW_MS) return { state: 'replay' as const, messageId, accepted };
    return { state: 'expired' as const };
  };
  let expired = -1; // the highest generation known to exist, outside the window
  let missing = 0; // the lowest generation known not to exist (once found)
  for (let g = 0; ; g = 2 * g + 1) {
    const p = await probe(g);
    if (p.state === 'replay') return { replay: p, nextMessageId: p.messageId };
    if (p.state === 'missing') { missing = g; break; }
    expired = g;
  }
  while (missing - expired > 1) {
    const mid = (expired + missing) >> 1;
    const p = await probe(mid);
    if (p.state === 'replay') return { replay: p, nextMessageId: p.messageId };
    if (p.state === 'missing') missing = mid;
    else expired = mid;
  }
  return { replay: null, nextMessageId: idempotentMessageId(motorBlockId, key, missing) };
}

export async function sendMessage(deps: SendDeps, cmd: SendCommand): Promise<SendResult> {
  // Idempotency (SPEC "Send API" rule 3): a key that matches a send of the last 24 hours returns
  // that send, before any other check: the send happened, and a retry must not be told otherwise
  // because the block, its domain or the caller's quota changed since. The key decides the message
  // id, so the event store's optimistic concurrency guarantees one message per key however many
  // requests race. A dry run only validates.
  let messageId = newId();
  if (cmd.idempotencyKey !== null && cmd.body.dryRun !== true) {
    const found = await latestGeneration(deps.store, cmd.motorBlockId, cmd.idempotencyKey, cmd.now);
    if (found.replay) return { kind: 'replayed', messageId: found.replay.messageId, accepted: found.replay.accepted };
    messageId = found.nextMessageId;
  }

  const checked = await checkSend(deps, cmd);
  const limits = await sendLimitsOf(deps, checked, cmd.now);
  // A dry run answers it too: it is a rule about the send, not a charge.
  assertRecipientsFit(limits, checked.request.to.length);
  if (checked.request.dryRun) return { kind: 'validated', ...checked };
  return acceptChecked(deps, cmd, checked, limits, messageId, cmd.idempotencyKey !== null);
}

/** The ceilings that apply to a checked send right now, and whether the account's are enforced. */
interface SendLimits { policy: SendPolicy; enforceAccount: boolean }

/**
 * Effective ceilings: configured (else the account's plan), lowered by the reputation throttle
 * and, when ENFORCE_WARMUP is on, the warm-up cap of the domain read now, counted per domain across
 * its blocks (projections/analytics/sendPolicy.ts).
 */
async function sendLimitsOf(deps: SendDeps, checked: { block: BlockRecord; domain: DomainRecord }, now: Date): Promise<SendLimits> {
  const { block, domain } = checked;
  const account = await deps.directory.account(block.accountId);
  const policy = await loadSendPolicy(
    deps.directory.db, deps.config, { block, accountPlan: account?.plan ?? null, domainId: domain.id }, now, reputationCacheOf(deps),
  );
  // Always measured (every send charges the account counters); refused only behind the switch.
  return { policy, enforceAccount: deps.config.enforceAccountLimit && account !== null };
}

const ceilingOf = (limits: SendLimits): RecipientCeiling => recipientCeiling(limits.policy.blockQuota, limits.policy.account, limits.enforceAccount);

/**
 * The most recipients one send of the block can have right now (SMTP: per transaction, enforced at
 * RCPT TO). Same ceilings as the send path's.
 */
export async function recipientCeilingOf(deps: SendDeps, checked: { block: BlockRecord; domain: DomainRecord }, now: Date): Promise<RecipientCeiling> {
  return ceilingOf(await sendLimitsOf(deps, checked, now));
}

const PER: Record<RecipientCeiling['dimension'], string> = { burst: 'per minute', hourly: 'per hour', daily: 'per UTC day', acct_hourly: 'per hour', acct_daily: 'per UTC day' };

/**
 * More recipients than a ceiling's limit never fit that ceiling, in any window: a permanent 422
 * recipients_exceed_limit (SMTP 552 5.5.3), not a 429 the client would retry for ever. Nothing is
 * charged. The smallest exceeded limit is named: sends of at most that many fit every ceiling.
 */
function assertRecipientsFit(limits: SendLimits, count: number): void {
  const ceiling = ceilingOf(limits);
  if (count <= ceiling.limit) return;
  const accountWide = ceiling.dimension.startsWith('acct_');
  const { block } = limits.policy;
  const throttled = !accountWide && block.throttled && block.throttleReason !== 'domain_warmup';
  throw fail('recipients_exceed_limit', 422,
    `${count} recipients exceed the ${accountWide ? 'account-wide' : 'Motor Block'} ${ceiling.dimension} limit of ${ceiling.limit} ${PER[ceiling.dimension]}${throttled ? ` (lowered by ${block.throttleReason})` : ''}: this send can never fit it, retrying will not help`,
    {
      details: { dimension: ceiling.dimension, limit: ceiling.limit, recipientCount: count, ...(throttled ? { throttleReason: block.throttleReason } : {}) },
      nextAction: accountWide
        ? `Split the send into sends of at most ${ceiling.limit} recipients, or move the account to a plan with higher account-wide limits`
        : `Split the send into sends of at most ${ceiling.limit} recipients, or raise the block's limits${throttled ? ' (the reputation throttle lifts as the reputation recovers)' : ''}`,
    });
}

/**
 * A campaign message (workers/campaigns.ts): the checks, quota and append of a send, with a
 * marketing block allowed and the message id chosen by the caller (derived from the campaign and
 * the contact). A message that already exists is returned as `replayed` without any check or
 * charge, so a campaign page run again after a crash accepts nothing twice.
 */
export async function sendCampaignMessage(
  deps: SendDeps, cmd: { motorBlockId: string; body: SendRequestBody; messageId: string; now: Date; actor: string },
): Promise<SendResult> {
  const existing = await readAccepted(deps.store, cmd.messageId);
  if (existing) return { kind: 'replayed', messageId: cmd.messageId, accepted: existing };
  const send: SendCommand = { motorBlockId: cmd.motorBlockId, body: cmd.body, idempotencyKey: null, source: 'http', now: cmd.now, actor: cmd.actor };
  const checked = await checkSendFrom(deps, send, { allowMarketing: true });
  const limits = await sendLimitsOf(deps, checked, cmd.now);
  assertRecipientsFit(limits, checked.request.to.length);
  if (checked.request.dryRun) return { kind: 'validated', ...checked };
  return acceptChecked(deps, send, checked, limits, cmd.messageId, true);
}

/**
 * The quota charge and the append of a checked send (its recipients fit `limits`) under
 * `messageId`. `replayOnConflict`: the id is deterministic (Idempotency-Key, campaign), so losing
 * the append to a concurrent request with the same id returns the winner's message.
 */
async function acceptChecked(
  deps: SendDeps, cmd: SendCommand, checked: { request: ValidSendRequest; block: BlockRecord; domain: DomainRecord }, limits: SendLimits,
  messageId: string, replayOnConflict: boolean,
): Promise<SendResult> {
  const { request, block, domain } = checked;
  const { policy } = limits;
  const quota = await deps.quota.consume({
    motorBlockId: block.id,
    accountId: block.accountId,
    domainId: domain.id,
    count: request.to.length,
    block: policy.blockQuota,
    warmupCap: policy.warmupBinding && policy.warmup ? policy.warmup.dailyCap : null,
    account: policy.account,
    enforceAccount: limits.enforceAccount,
    now: cmd.now,
  });
  if (quota.kind === 'denied') {
    if (quota.dimension === 'warmup' && policy.warmup) {
      const retryAfterSeconds = secondsToNextUtcDay(cmd.now);
      // SPEC 429 contract: the warm-up refusal sets Retry-After only (no RateLimit-* headers).
      throw fail('rate_limited_warmup', 429,
        `Sending domain ${domain.name} is warming up (day ${policy.warmup.day}: ${policy.warmup.dailyCap} recipients per UTC day) and today's send buffer is full (${quota.used}/${quota.limit}). Retry in ${retryAfterSeconds}s.`,
        { details: { retryAfterSeconds, warmupDay: policy.warmup.day, dailyCap: policy.warmup.dailyCap }, nextAction: 'Retry after the UTC day rolls over; see docs/ANALYTICS.md for the warm-up schedule' },
      );
    }
    const accountWide = quota.dimension.startsWith('acct_');
    throw fail(accountWide ? 'rate_limited_account' : 'rate_limited_block', 429,
      `${accountWide ? 'Account-wide' : 'Motor Block'} send limit exceeded (${quota.dimension}): ${quota.used}/${quota.limit}. Retry in ${quota.retryAfterSeconds}s.`,
      { details: { retryAfterSeconds: quota.retryAfterSeconds, dimension: quota.dimension, ...(policy.block.throttled && policy.block.throttleReason !== 'domain_warmup' && !accountWide ? { throttleReason: policy.block.throttleReason } : {}), rateLimit: { limit: quota.limit, used: quota.used, remaining: 0, reset: quota.retryAfterSeconds } } },
    );
  }

  const smtpMessageId = cmd.smtpMessageId ?? `${messageId}@${domain.name}`;
  const events = acceptMessage(initialMessageState(), {
    messageId, request, motorBlockId: block.id, accountId: block.accountId, domainId: domain.id, smtpMessageId,
    idempotencyKey: cmd.idempotencyKey, source: cmd.source, raw: cmd.raw, envelopeFrom: cmd.envelopeFrom, now: cmd.now,
  });
  try {
    await deps.store.append(
      streamName('message', messageId),
      // One event id per request: a retry of this very append is harmless, while a concurrent
      // request with the same Idempotency-Key (same stream, other id) loses and replays the winner.
      events.map((e) => toEventData(newId(), e, { actor: cmd.actor ?? `motorBlock:${block.id}` })),
      { expectedRevision: 'no_stream' },
    );
  } catch (err) {
    if (quota.kind === 'allowed') await deps.quota.refund(block.id, block.accountId, request.to.length, cmd.now, domain.id);
    if (err instanceof WrongExpectedRevisionError && replayOnConflict) {
      const winner = await readAccepted(deps.store, messageId);
      if (winner) return { kind: 'replayed', messageId, accepted: winner };
    }
    throw err;
  }
  return { kind: 'accepted', messageId, request, acceptedAt: cmd.now, quota };
}
