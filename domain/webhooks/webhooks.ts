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
}

export function foldEndpoint(events: readonly RecordedEvent[]): EndpointState | null {
  let s: EndpointState | null = null;
  for (const e of events) {
    const event = e as unknown as DomainEvent;
    if (event.type === 'WebhookCreated') {
      const d = event.data;
      s = { motorBlockId: d.motorBlockId, accountId: d.accountId, url: d.url, events: d.events, enabled: true, deleted: false, secretKeyId: d.secretKeyId };
    } else if (s !== null && event.type === 'WebhookUpdated') {
      s = Object.assign(s, { url: event.data.url, events: event.data.events, enabled: event.data.enabled });
    } else if (s !== null && event.type === 'WebhookDeleted') {
      s.deleted = true;
    }
  }
  return s;
}
