import { fail } from '../errors';
import { uuidV5 } from '../ids';
import type { DomainEvent, WebhookEventName } from '../events';
import type { RecordedEvent } from '../eventStore';
import { recipientOutcomeFacts } from '../message/message';

/**
 * Outgoing webhooks (SPEC "Webhooks", "Webhook events"; docs/WEBHOOKS.md): the rules an endpoint
 * must meet, which log event becomes which webhook event, and the payload receivers get.
 */

export const WEBHOOK_EVENTS: readonly WebhookEventName[] = [
  'message.processed', 'message.deferred', 'message.delivered', 'message.bounced', 'message.failed', 'message.complained',
];
/** Endpoints per Motor Block (each outcome is posted to every one of them). */
export const MAX_WEBHOOKS_PER_BLOCK = 10;
export const MAX_WEBHOOK_URL = 2048;

export interface WebhookInput { url: string; events: WebhookEventName[] }

/** An http(s) URL without credentials or fragment; refused with 400 invalid_webhook_url. */
export function webhookUrl(value: unknown): string {
  const refuse = (why: string) => fail('invalid_webhook_url', 400, `url ${why}`, { details: { field: 'url' } });
  if (typeof value !== 'string' || value.trim() === '') throw refuse('is required (an http or https URL)');
  const url = value.trim();
  if (url.length > MAX_WEBHOOK_URL) throw refuse(`must be at most ${MAX_WEBHOOK_URL} characters`);
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw refuse('is not a valid URL');
  }
  if (parsed.protocol !== 'https:' && parsed.protocol !== 'http:') throw refuse('must use http or https');
  if (parsed.username || parsed.password) throw refuse('must not carry credentials (verify the X-Service-Signature header instead)');
  // An empty fragment ("…#") has no `hash` but is one all the same: href keeps its "#".
  if (parsed.hash || parsed.href.includes('#')) throw refuse('must not carry a fragment');
  return parsed.toString();
}

/** A non-empty subset of the six names, deduplicated, in catalogue order; absent means all six. */
export function webhookEvents(value: unknown): WebhookEventName[] {
  if (value === undefined || value === null) return [...WEBHOOK_EVENTS];
  const refuse = (why: string) => fail('invalid_webhook_events', 400, `events ${why}`, {
    details: { field: 'events', allowed: WEBHOOK_EVENTS },
  });
  if (!Array.isArray(value)) throw refuse('must be an array of event names');
  if (value.length === 0) throw refuse('must name at least one event (omit it for all six)');
  const unknown = value.filter((v) => !WEBHOOK_EVENTS.includes(v as WebhookEventName));
  if (unknown.length > 0) throw refuse(`names unknown events: ${unknown.slice(0, 5).map((v) => JSON.stringify(v)).join(', ')}`);
  return WEBHOOK_EVENTS.filter((e) => value.includes(e));
}

/** Which webhook event a log event is, or null. `processed` is told once, on the first attempt. */
export function webhookEventOf(event: DomainEvent): WebhookEventName | null {
  const facts = recipientOutcomeFacts(event);
  if (!facts || (facts.status === 'processed' && facts.attempt !== 1)) return null;
  return `message.${facts.status}`;
}

/** One delivery per (endpoint, log event): the same inputs always give the same id, so a replay queues nothing twice. */
export const deliveryIdOf = (webhookId: string, sourceEventId: string): string => uuidV5(`webhook-delivery:${webhookId}:${sourceEventId}`);
/** The id of an attempt's event: a retried append of the same attempt is harmless. */
export const attemptEventIdOf = (deliveryId: string, attempt: number): string => uuidV5(`webhook-attempt:${deliveryId}:${attempt}`);

export interface MessageFacts { messageId: string; motorBlockId: string; smtpMessageId: string; metadata: Record<string, string> }

/**
 * The JSON body of a message event (docs/WEBHOOKS.md "Payload"). `id` is the delivery id: the same
 * on every attempt, so a receiver can drop repeats.
 */
export function messageEventPayload(deliveryId: string, name: WebhookEventName, event: DomainEvent, message: MessageFacts): Record<string, unknown> {
  const { messageId: _id, ...facts } = recipientOutcomeFacts(event)!;
  const data = { messageId: message.messageId, smtpMessageId: message.smtpMessageId, ...facts, metadata: message.metadata };
  return { id: deliveryId, event: name, createdAt: facts.timestamp, motorBlockId: message.motorBlockId, data };
}

/** The synthetic delivery of POST .../test. */
export function testEventPayload(deliveryId: string, motorBlockId: string, webhookId: string, at: string): Record<string, unknown> {
  return { id: deliveryId, event: 'webhook.test', createdAt: at, motorBlockId, data: { webhookId, message: 'Test delivery from Motor' } };
}

/**
 * Seconds to wait before attempt `attempt + 1`, or null when `attempt` was the last one. The
 * schedule lists the waits after attempts 1, 2, ...; its length + 1 is the number of attempts.
 */
export function retryDelaySeconds(schedule: readonly number[], attempt: number): number | null {
  return attempt >= 1 && attempt <= schedule.length ? schedule[attempt - 1] : null;
}

/** An endpoint as its own stream `webhook-<id>` says it is now (commands decide on it; the worker posts by it). */
export interface EndpointState {
  motorBlockId: string; accountId: string; url: string; events: WebhookEventName[]; enabled: boolean; deleted: boolean; secretKeyId: string;
  /** The secret a rotation replaced, still signing X-Service-Signature-Previous until `previousValidUntil`. */
  previousSecretKeyId: string | null; previousValidUntil: string | null;
  /** Why the endpoint is paused when the worker paused it (`failing`), and since when nothing had succeeded then. */
  disabledReason: 'failing' | null; failingSince: string | null;
  /** Where the failure clock starts at the latest: creation, or the last PUT that resumed a paused endpoint. */
  clockStartsAt: string;
}

export function foldEndpoint(events: readonly RecordedEvent[]): EndpointState | null {
  let s: EndpointState | null = null;
  for (const e of events) s = evolveEndpoint(s, e as unknown as DomainEvent);
  return s;
}

export function evolveEndpoint(s: EndpointState | null, event: DomainEvent): EndpointState | null {
  if (event.type === 'WebhookCreated') {
    const d = event.data;
    return {
      motorBlockId: d.motorBlockId, accountId: d.accountId, url: d.url, events: d.events, enabled: true, deleted: false, secretKeyId: d.secretKeyId,
      previousSecretKeyId: null, previousValidUntil: null, disabledReason: null, failingSince: null, clockStartsAt: d.createdAt,
    };
  }
  if (s === null) return s;
  switch (event.type) {
    case 'WebhookUpdated': {
      const d = event.data;
      const resumed = d.enabled && !s.enabled;
      return {
        ...s, url: d.url, events: d.events, enabled: d.enabled,
        // Resuming is the owner's answer to the pause: the reason goes, and the clock starts again.
        ...(d.enabled ? { disabledReason: null, failingSince: null } : {}),
        ...(resumed ? { clockStartsAt: d.updatedAt } : {}),
      };
    }
    case 'WebhookSecretRotated':
      return { ...s, secretKeyId: event.data.secretKeyId, previousSecretKeyId: event.data.previousValidUntil === null ? null : event.data.previousSecretKeyId, previousValidUntil: event.data.previousValidUntil };
    case 'WebhookEndpointDisabled':
      return { ...s, enabled: false, disabledReason: event.data.reason, failingSince: event.data.since };
    case 'WebhookDeleted':
      return { ...s, deleted: true };
    default:
      return s;
  }
}

/** `previousSecretValidForSeconds` of a rotation: how long the replaced secret still signs (SPEC "Webhooks"; docs/WEBHOOKS.md). */
export const MAX_PREVIOUS_SECRET_SECONDS = 7 * 24 * 3600;
export const DEFAULT_PREVIOUS_SECRET_SECONDS = 24 * 3600;

/** 0 to 604,800 whole seconds, default 86,400; refused with 400 validation_error. */
export function previousSecretWindow(value: unknown): number {
  if (value === undefined) return DEFAULT_PREVIOUS_SECRET_SECONDS;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 0 || value > MAX_PREVIOUS_SECRET_SECONDS) {
    throw fail('validation_error', 400, `previousSecretValidForSeconds must be an integer from 0 to ${MAX_PREVIOUS_SECRET_SECONDS}`, { details: { field: 'previousSecretValidForSeconds' } });
  }
  return value;
}

/**
 * The rotation event: the current secret becomes the previous one until `now + windowSeconds`
 * (a zero window drops it at once). A previous secret still in its window is replaced: there is
 * only ever one.
 */
export function rotateSecret(state: EndpointState, input: { webhookId: string; secretKeyId: string; windowSeconds: number; now: Date }): DomainEvent<'WebhookSecretRotated'> {
  return {
    type: 'WebhookSecretRotated',
    data: {
      webhookId: input.webhookId, motorBlockId: state.motorBlockId, secretKeyId: input.secretKeyId, previousSecretKeyId: state.secretKeyId,
      previousValidUntil: input.windowSeconds === 0 ? null : new Date(input.now.getTime() + input.windowSeconds * 1000).toISOString(),
      rotatedAt: input.now.toISOString(),
    },
  };
}

/** The previous secret's key id while it still signs at `now`, else null. */
export function previousSecretAt(state: EndpointState, now: Date): string | null {
  return state.previousSecretKeyId !== null && state.previousValidUntil !== null && Date.parse(state.previousValidUntil) > now.getTime() ? state.previousSecretKeyId : null;
}

/**
 * Whether a delivery that just ended `failed` pauses its endpoint (docs/WEBHOOKS.md "Failing
 * endpoints"): the endpoint is enabled, no attempt has succeeded for at least `disableAfterDays`
 * (since the last success, or since its creation or last resume when later; 0 days: never), and the
 * delivery is not a test. Returns the event, or null.
 */
export function disableIfFailing(state: EndpointState, input: {
  webhookId: string; deliveryId: string; event: string; lastSuccessAt: Date | null; disableAfterDays: number; now: Date;
}): DomainEvent<'WebhookEndpointDisabled'> | null {
  if (input.disableAfterDays <= 0 || input.event === 'webhook.test' || state.deleted || !state.enabled) return null;
  const start = Date.parse(state.clockStartsAt);
  const since = input.lastSuccessAt && input.lastSuccessAt.getTime() > start ? input.lastSuccessAt.getTime() : start;
  if (input.now.getTime() - since < input.disableAfterDays * 86_400_000) return null;
  return {
    type: 'WebhookEndpointDisabled',
    data: { webhookId: input.webhookId, motorBlockId: state.motorBlockId, reason: 'failing', since: new Date(since).toISOString(), deliveryId: input.deliveryId, disabledAt: input.now.toISOString() },
  };
}

/** The id of a WebhookEndpointDisabled: one per endpoint revision it was decided at, so a repeated decision appends nothing new. */
export const disabledEventIdOf = (webhookId: string, revision: bigint): string => uuidV5(`webhook-disabled:${webhookId}:${revision}`);
