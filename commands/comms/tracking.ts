import { streamName, type EventStore } from '../../domain/eventStore';
import { toEventData, type DomainEvent, type MessageAccepted } from '../../domain/events';
import { newId, type Clock } from '../../domain/ids';
import { storedUserAgent, truncateIp, type TrackingTarget } from '../../domain/comms/tracking';
import type { Logger } from '../../infra/logger';
import type { Metrics } from '../../infra/metrics';
import type { RequestLimiter } from '../quota/requestLimiter';
import { deletionRefusal } from '../blocks/deletionGuard';

/**
 * Recording an open or a click (docs/COMMUNICATIONS.md "Tracking"): one `EmailOpened` /
 * `LinkClicked` on the message's `tracking-<messageId>` stream (any revision: hits are independent
 * facts, nothing is decided on the stream).
 *
 * Only for a block of the token's tenant that is not deleted or being deleted: the directory,
 * cached, and for a block it shows inactive also the block's own stream, just before the append
 * (see below). The token names the message, not its recipient: the recipient recorded is the
 * single `to` of the message's `MessageAccepted` (the first event of `message-<messageId>`), which
 * must be of the token's tenant, block and campaign (`metadata.campaign_id`); a message stream that is gone (deleted with
 * its block's history, or never written) or not a single-recipient campaign message records
 * nothing (`skipped`). The reader's answer (the gif, the redirect) never depends on any of it: the
 * look-ups and the append are bounded by `timeoutMs`, and a failure or a timeout is logged and counted (`motor_tracking_hits_total`
 * outcome `not_recorded`) but not raised. The event id is fresh per request: a hit is not retried,
 * so a timed-out append that commits later is still one event.
 */

export interface TrackingDeps {
  store: EventStore; clock: Clock; logger: Logger; metrics: Metrics;
  /** The request limiter's counters (Redis): at most TRACKING_HITS_PER_MINUTE recorded hits per message and kind. */
  limiter: RequestLimiter;
  /** The directory (cached): a hit is recorded only for a block of the token's tenant that is not deleted or being deleted. */
  directory: { block(id: string): Promise<{ accountId: string; status: string } | null> };
}
export interface TrackingRequest { userAgent: string | undefined; ip: string | undefined }

/**
 * Recorded hits of one message, per kind, per minute. Past it a hit is answered as usual and only
 * counted (`limited`): a token holder reloading the pixel or the link in a loop cannot grow the log
 * without bound (at most this many events a minute per message and kind, whatever the request rate).
 */
export const TRACKING_HITS_PER_MINUTE = 10;

const limiters = new WeakMap<RequestLimiter, RequestLimiter>();
const hitLimiterOf = (limiter: RequestLimiter): RequestLimiter => {
  let l = limiters.get(limiter);
  if (!l) limiters.set(limiter, l = limiter.withLimit(TRACKING_HITS_PER_MINUTE));
  return l;
};

/** How long the reader's answer waits for the append at most. */
export const TRACKING_APPEND_TIMEOUT_MS = 1500;

export type RecordOutcome = 'recorded' | 'not_recorded' | 'skipped' | 'limited';

/**
 * The recipient of a tracked message: the single `to` of its `MessageAccepted`, when that is a
 * message of the token's tenant, block and campaign; null otherwise (no stream, several recipients,
 * another message).
 */
export async function trackedRecipient(store: EventStore, ctx: TrackingTarget['ctx']): Promise<string | null> {
  const [first] = await store.readStream(streamName('message', ctx.messageId), { maxCount: 1 });
  if (first === undefined || first.type !== 'MessageAccepted') return null;
  const m = first.data as MessageAccepted;
  if (m.accountId !== ctx.tenantId || m.motorBlockId !== ctx.motorBlockId || m.metadata?.campaign_id !== ctx.campaignId) return null;
  return Array.isArray(m.to) && m.to.length === 1 && typeof m.to[0] === 'string' ? m.to[0] : null;
}

export async function recordTrackingHit(deps: TrackingDeps, target: TrackingTarget, req: TrackingRequest, timeoutMs = TRACKING_APPEND_TIMEOUT_MS): Promise<RecordOutcome> {
  const { ctx } = target;
  const occurredAt = deps.clock.now().toISOString();
  const type = target.kind;
  let timer: NodeJS.Timeout | undefined;
  const append = (async (): Promise<'appended' | 'block_gone' | 'message_gone' | 'limited'> => {
    // A block deleted (or being deleted) keeps no new history: its mail's hits are not recorded.
    const block = await deps.directory.block(ctx.motorBlockId);
    if (block === null || block.accountId !== ctx.tenantId || block.status === 'deleted' || block.status === 'deletion_queued') return 'block_gone';
    // Redis unavailable: recorded (the limit protects the log, it does not gate the reader).
    const reading = await hitLimiterOf(deps.limiter).hit(`track:${target.kind}:${ctx.messageId}`, deps.clock.now());
    if (reading.kind === 'exceeded') return 'limited';
    // The recipient comes from the message, never from the URL (docs/COMMUNICATIONS.md "Tracking").
    const recipient = await trackedRecipient(deps.store, ctx);
    if (recipient === null) return 'message_gone';
    // The cache can be seconds behind a deletion request, and a tracking stream created after the
    // deletion job's scan would stay. A deletion is only ever requested for an inactive block, so
    // the block's stream is read (one more query) only when the cache shows it inactive; the hits of
    // active blocks, nearly all of them, cost nothing more. What this leaves: a block deactivated
    // and deleted within the cache's lifetime, whose job scanned the log within that time too.
    if (block.status !== 'active' && await deletionRefusal(deps.store, ctx.motorBlockId)) return 'block_gone';
    const hit = {
      tenantId: ctx.tenantId, motorBlockId: ctx.motorBlockId, campaignId: ctx.campaignId, messageId: ctx.messageId, recipient,
      userAgent: storedUserAgent(req.userAgent), ip: truncateIp(req.ip), occurredAt,
    };
    const event: DomainEvent = target.kind === 'open' ? { type: 'EmailOpened', data: hit } : { type: 'LinkClicked', data: { ...hit, url: target.url } };
    await deps.store.append(streamName('tracking', ctx.messageId), [toEventData(newId(), event, { actor: 'tracking' })], { expectedRevision: 'any' });
    return 'appended';
  })();
  const timeout = new Promise<'timeout'>((resolve) => { timer = setTimeout(() => resolve('timeout'), timeoutMs); });
  try {
    const r = await Promise.race([append, timeout]);
    if (r === 'timeout') {
      append.catch(() => undefined);
      deps.logger.warn({ type, messageId: ctx.messageId, timeoutMs }, 'tracking hit not recorded: the event store did not answer in time');
      deps.metrics.trackingHits.inc({ type, outcome: 'not_recorded' });
      return 'not_recorded';
    }
    const outcome = r === 'appended' ? 'recorded' : r === 'limited' ? 'limited' : 'skipped';
    deps.metrics.trackingHits.inc({ type, outcome });
    return outcome;
  } catch (err) {
    deps.logger.warn({ type, messageId: ctx.messageId, err: (err as Error).message }, 'tracking hit not recorded: the event store failed');
    deps.metrics.trackingHits.inc({ type, outcome: 'not_recorded' });
    return 'not_recorded';
  } finally {
    clearTimeout(timer);
  }
}
