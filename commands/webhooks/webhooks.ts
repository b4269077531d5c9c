import { randomBytes } from 'node:crypto';
import { isIP } from 'node:net';
import type { Knex } from 'knex';
import { streamName, type EventStore, type RecordedEvent } from '../../domain/eventStore';
import { fail } from '../../domain/errors';
import { toEventData, type DomainEvent, type WebhookEventName } from '../../domain/events';
import { newId, isUuid, type Clock } from '../../domain/ids';
import {
  MAX_WEBHOOKS_PER_BLOCK, deliveryIdOf, foldEndpoint, previousSecretWindow, rotateSecret, testEventPayload, webhookEvents, webhookUrl, type EndpointState,
} from '../../domain/webhooks/webhooks';
import type { KeyStore } from '../../infra/keys/keyStore';
import { WEBHOOKS_SCHEMA } from '../../projections/webhooks/projection';
import { isPublicAddress } from '../../infra/outboundAddress';
import { withTurn } from '../../infra/advisoryLock';
import { appendAndAwaitRow, awaitRows, type ReadYourWritesDeps } from '../readYourWrites';
import { requireSpanInsideRetention, windowStartOf } from '../../read-api/http/retention';
import { assertBlockTakesWrites } from '../blocks/deletionGuard';

/**
 * The webhook management routes (SPEC "Webhooks", docs/WEBHOOKS.md). Commands decide on the
 * endpoint's own stream `webhook-<id>`; reads come from the `rm_webhooks` read model, which each
 * command waits for before answering (read-your-writes). The signing secret is generated here,
 * shown once, and kept encrypted in the key store.
 *
 * Every change is refused once the block is deleted (404 motor_block_not_found) or its deletion is
 * queued (409 motor_block_delete_in_progress), read from the block's stream just before the append:
 * a bearer token minted before the deletion is still valid for up to 15 minutes, and a delivery
 * queued after the deletion job's scan would outlive the block's history (docs/BLOCKS.md).
 */

export interface WebhookDeps extends ReadYourWritesDeps {
  store: EventStore; keys: KeyStore; clock: Clock;
  /** WEBHOOK_ALLOW_PRIVATE_URLS: when false a URL naming a non-public address is refused at once. */
  allowPrivateAddresses: boolean;
  /** Longest wait of a create for its block's turn (default CREATE_TURN_WAIT_MS, 30 s). */
  createTurnWaitMs?: number;
}

/**
 * The worker checks every address a host resolves to on each attempt (the SSRF guard); a URL that
 * names a loopback or private address outright can be refused now, when the mistake is made.
 */
function endpointUrl(deps: WebhookDeps, value: unknown): string {
  const url = webhookUrl(value);
  const host = new URL(url).hostname.replace(/^\[(.*)\]$/, '$1');
  const named = isIP(host) ? host : host === 'localhost' || host.endsWith('.localhost') ? '127.0.0.1' : null;
  if (!deps.allowPrivateAddresses && named !== null && !isPublicAddress(named)) {
    throw fail('invalid_webhook_url', 400, 'url points to a loopback, private or reserved address', {
      details: { field: 'url' }, nextAction: 'Use a public address (WEBHOOK_ALLOW_PRIVATE_URLS lets an operator allow private ones)',
    });
  }
  return url;
}
export interface WebhookCaller { accountId: string; motorBlockId: string; actor: string }

export interface WebhookView {
  id: string; url: string; events: WebhookEventName[]; enabled: boolean;
  /** `failing`: the worker paused it, as its deliveries kept failing (docs/WEBHOOKS.md "Failing endpoints"); null otherwise. */
  disabledReason: 'failing' | null;
  /** With `disabledReason` `failing`: since when no attempt had succeeded (ISO 8601); null otherwise. */
  failingSince: string | null;
  createdAt: string; updatedAt: string;
}
export interface WebhookDeliveryView {
  id: string; event: string; messageId: string | null;
  status: 'queued' | 'delivered' | 'retrying' | 'failed';
  attempts: number; lastHttpStatus: number | null; lastError: string | null; lastResponseBody: string | null; lastDurationMs: number | null;
  queuedAt: string; lastAttemptAt: string | null; nextAttemptAt: string | null; completedAt: string | null;
}
export interface WebhookStats {
  hours: number; from: string; to: string;
  /** Deliveries queued in the window, by their current status. */
  delivered: number; failed: number; queued: number; retrying: number;
  /** failed ÷ (delivered + failed), percent; null when none has finished. */
  failureRate: number | null;
  /** Time each attempt of the window took until the endpoint answered (or failed), ms. */
  latency: { attempts: number; avgMs: number | null; p50Ms: number | null; p95Ms: number | null };
}

const SECRET_ALGORITHM = 'webhook-hmac-sha256';
const stream = (webhookId: string) => streamName('webhook', webhookId);

const notFound = () => fail('webhook_not_found', 404, 'No such webhook on this Motor Block', { nextAction: 'List the block\'s webhooks with GET .../webhooks' });

/** The endpoint's state and revision, only when it is the caller's block's and not deleted. */
async function loadOwn(deps: WebhookDeps, caller: WebhookCaller, webhookId: string): Promise<{ state: EndpointState; revision: bigint }> {
  if (!isUuid(webhookId)) throw fail('invalid_id', 400, 'webhookId must be a uuid');
  const events = await deps.store.readStream(stream(webhookId));
  const state = foldEndpoint(events);
  if (!state || state.deleted || state.motorBlockId !== caller.motorBlockId) throw notFound();
  return { state, revision: events[events.length - 1].revision };
}

/** Longest wait of a create for its block's turn (each turn lasts until its row is shown, 10 s at most). */
const CREATE_TURN_WAIT_MS = 30_000;

/** 409 webhook_conflict: the block's other creates kept the turn for all of CREATE_TURN_WAIT_MS; nothing was created. */
const createBusy = () => fail('webhook_conflict', 409, 'Other webhook creates on this Motor Block kept it busy while this request waited; nothing was created', {
  nextAction: 'Retry the request',
});

const appendAndAwait = (deps: { store: EventStore } & ReadYourWritesDeps, wait: string, webhookId: string, event: DomainEvent, expected: bigint | 'no_stream', actor: string) =>
  appendAndAwaitRow(deps, { streamId: stream(webhookId), schema: WEBHOOKS_SCHEMA, table: 'endpoints', id: webhookId, what: 'webhook', wait }, event, expected, actor);

function objectBody(body: unknown): Record<string, unknown> {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) throw fail('validation_error', 400, 'The body must be a JSON object');
  return body as Record<string, unknown>;
}

export async function createWebhook(deps: WebhookDeps, caller: WebhookCaller, body: unknown): Promise<{ webhook: WebhookView; secret: string }> {
  const b = objectBody(body);
  const url = endpointUrl(deps, b.url);
  const events = webhookEvents(b.events);
  const full = async (db: Knex) => {
    const live = await db.withSchema(WEBHOOKS_SCHEMA).table('endpoints').where({ motor_block_id: caller.motorBlockId }).whereNull('deleted_at').count<{ n: string }[]>({ n: '*' });
    return Number(live[0].n) >= MAX_WEBHOOKS_PER_BLOCK;
  };
  const limitReached = () => fail('webhook_limit', 409, `A Motor Block has at most ${MAX_WEBHOOKS_PER_BLOCK} webhooks`, { nextAction: 'Delete one, or subscribe an existing one to more events' });
  if (await full(deps.db)) throw limitReached();
  const webhookId = newId();
  const secretKeyId = newId();
  const secret = await newSecret(deps.keys, secretKeyId);
  const now = deps.clock.now().toISOString();
  // Creates of one block take turns (withTurn: waiters hold no pooled connection), each holding
  // the turn until its new row is in the read model, awaited on the turn's own connection. Two
  // creates racing for the last place cannot both count nine and both succeed.
  try {
    await withTurn(deps.db, `motor.webhook-create:${caller.motorBlockId}`, { waitMs: deps.createTurnWaitMs ?? CREATE_TURN_WAIT_MS, busy: createBusy }, async (trx) => {
      if (await full(trx)) throw limitReached();
      await assertBlockTakesWrites(deps.store, caller.motorBlockId);
      await appendAndAwait({ ...deps, db: trx }, 'webhook.create', webhookId, {
        type: 'WebhookCreated',
        data: { webhookId, motorBlockId: caller.motorBlockId, accountId: caller.accountId, url, events, secretKeyId, createdAt: now },
      }, 'no_stream', caller.actor);
    });
  } catch (err) {
    // Refused (the limit, a block being deleted, no turn: 409 webhook_conflict) or the database
    // failed: the secret is nobody's unless the append got into the log before the failure.
    if (!(await keyInLog(deps.store, webhookId, secretKeyId))) await deps.keys.remove(secretKeyId).catch(() => undefined);
    throw err;
  }
  return { webhook: { id: webhookId, url, events, enabled: true, disabledReason: null, failingSince: null, createdAt: now, updatedAt: now }, secret };
}

/** A signing secret, kept encrypted in the key store under `keyId`: only the id goes into the log. */
async function newSecret(keys: KeyStore, keyId: string): Promise<string> {
  const secret = `whsec_${randomBytes(32).toString('base64url')}`;
  await keys.put(keyId, SECRET_ALGORITHM, secret);
  return secret;
}

/**
 * POST .../rotate-secret: a new secret signs X-Service-Signature from now on; the one it replaces
 * signs X-Service-Signature-Previous for `previousSecretValidForSeconds` (0 to 604,800, default
 * 86,400), so a receiver can accept either while it switches. A previous secret still in its window
 * is dropped (only one previous), and its key with it once the rotation is in the log.
 */
export async function rotateWebhookSecret(deps: WebhookDeps, caller: WebhookCaller, webhookId: string, body: unknown): Promise<{ webhook: WebhookView; secret: string }> {
  const b = body === undefined || body === null ? {} : objectBody(body);
  const windowSeconds = previousSecretWindow(b.previousSecretValidForSeconds);
  const { state, revision } = await loadOwn(deps, caller, webhookId);
  await assertBlockTakesWrites(deps.store, caller.motorBlockId);
  const secretKeyId = newId();
  const secret = await newSecret(deps.keys, secretKeyId);
  try {
    await appendAndAwait(deps, 'webhook.rotate_secret', webhookId, rotateSecret(state, { webhookId, secretKeyId, windowSeconds, now: deps.clock.now() }), revision, caller.actor);
  } catch (err) {
    // Not in the log (a concurrent change: 409 webhook_conflict): the new key is nobody's.
    if (!(await keyInLog(deps.store, webhookId, secretKeyId))) await deps.keys.remove(secretKeyId).catch(() => undefined);
    throw err;
  }
  // The replaced previous secret (in its window or not) signs nothing any more; a zero window drops the current one too.
  if (state.previousSecretKeyId) await deps.keys.remove(state.previousSecretKeyId);
  if (windowSeconds === 0) await deps.keys.remove(state.secretKeyId);
  return { webhook: (await listWebhooks(deps.db, caller.motorBlockId, webhookId))[0], secret };
}

/**
 * Whether an event naming `secretKeyId` (its WebhookCreated or WebhookSecretRotated) reached the
 * endpoint's stream: an append that failed after writing it. True when the stream cannot be read,
 * as the key may then be in use: a stray key costs a row, a missing one breaks the endpoint's signatures.
 */
async function keyInLog(store: EventStore, webhookId: string, secretKeyId: string): Promise<boolean> {
  let events: RecordedEvent[];
  try {
    events = await store.readStream(stream(webhookId));
  } catch {
    return true;
  }
  return events.some((e) => (e.data as { secretKeyId?: unknown } | null)?.secretKeyId === secretKeyId);
}

/** PUT: any of url, events, enabled; what is left out keeps its value. */
export async function updateWebhook(deps: WebhookDeps, caller: WebhookCaller, webhookId: string, body: unknown): Promise<WebhookView> {
  const b = objectBody(body);
  if (b.url === undefined && b.events === undefined && b.enabled === undefined) {
    throw fail('validation_error', 400, 'Give at least one of url, events, enabled');
  }
  if (b.enabled !== undefined && typeof b.enabled !== 'boolean') throw fail('validation_error', 400, 'enabled must be true or false', { details: { field: 'enabled' } });
  const url = b.url === undefined ? null : endpointUrl(deps, b.url);
  const events = b.events === undefined ? null : webhookEvents(b.events ?? []);
  const { state, revision } = await loadOwn(deps, caller, webhookId);
  const next = { url: url ?? state.url, events: events ?? state.events, enabled: (b.enabled as boolean | undefined) ?? state.enabled };
  await assertBlockTakesWrites(deps.store, caller.motorBlockId);
  await appendAndAwait(deps, 'webhook.update', webhookId, {
    type: 'WebhookUpdated', data: { webhookId, motorBlockId: caller.motorBlockId, ...next, updatedAt: deps.clock.now().toISOString() },
  }, revision, caller.actor);
  return (await listWebhooks(deps.db, caller.motorBlockId, webhookId))[0];
}

export async function deleteWebhook(deps: WebhookDeps, caller: WebhookCaller, webhookId: string): Promise<{ id: string; deleted: true }> {
  const { revision } = await loadOwn(deps, caller, webhookId);
  await assertBlockTakesWrites(deps.store, caller.motorBlockId);
  await appendAndAwait(deps, 'webhook.delete', webhookId, {
    type: 'WebhookDeleted', data: { webhookId, motorBlockId: caller.motorBlockId, deletedAt: deps.clock.now().toISOString() },
  }, revision, caller.actor);
  return { id: webhookId, deleted: true };
}

/** Queues a synthetic `webhook.test` delivery (sent even when the endpoint is disabled: it is how one checks it). */
export async function testWebhook(deps: WebhookDeps, caller: WebhookCaller, webhookId: string): Promise<{ deliveryId: string; status: 'queued' }> {
  await loadOwn(deps, caller, webhookId);
  await assertBlockTakesWrites(deps.store, caller.motorBlockId);
  const at = deps.clock.now().toISOString();
  const deliveryId = deliveryIdOf(webhookId, `test:${newId()}`);
  await deps.store.append(streamName('webhookDelivery', deliveryId), [toEventData(deliveryId, {
    type: 'WebhookDeliveryQueued',
    data: { deliveryId, webhookId, motorBlockId: caller.motorBlockId, event: 'webhook.test', messageId: null, payload: testEventPayload(deliveryId, caller.motorBlockId, webhookId, at), queuedAt: at },
  }, { actor: caller.actor })], { expectedRevision: 'no_stream' });
  // As every route here: answered once the read model shows it (the caller's next GET .../deliveries lists it).
  await awaitRows(deps, 'webhook.test', { schema: WEBHOOKS_SCHEMA, table: 'deliveries', rows: new Map([[deliveryId, null]]) }, 3000);
  return { deliveryId, status: 'queued' };
}

interface EndpointRow {
  id: string; url: string; events: WebhookEventName[]; enabled: boolean; disabled_reason: 'failing' | null; failing_since: Date | null; created_at: Date; updated_at: Date;
}

/** The block's live endpoints, oldest first (or the one named). */
export async function listWebhooks(db: Knex, motorBlockId: string, webhookId?: string): Promise<WebhookView[]> {
  const q = db.withSchema(WEBHOOKS_SCHEMA).table('endpoints').where({ motor_block_id: motorBlockId }).whereNull('deleted_at');
  if (webhookId) q.andWhere({ id: webhookId });
  const rows = (await q.orderBy([{ column: 'created_at' }, { column: 'id' }]).select('id', 'url', 'events', 'enabled', 'disabled_reason', 'failing_since', 'created_at', 'updated_at')) as EndpointRow[];
  return rows.map((r) => ({
    id: r.id, url: r.url, events: r.events, enabled: r.enabled, disabledReason: r.disabled_reason, failingSince: r.failing_since?.toISOString() ?? null,
    createdAt: r.created_at.toISOString(), updatedAt: r.updated_at.toISOString(),
  }));
}

async function requireEndpoint(db: Knex, motorBlockId: string, webhookId: string): Promise<void> {
  if (!isUuid(webhookId)) throw fail('invalid_id', 400, 'webhookId must be a uuid');
  if ((await listWebhooks(db, motorBlockId, webhookId)).length === 0) throw notFound();
}

const iso = (d: Date | null): string | null => (d ? d.toISOString() : null);

/** The plan's retention window a read is answered within: its length and "now". */
export interface RetentionWindow { retentionDays: number; now: Date }

/**
 * Newest first; `limit` 1 to 200 (SPEC "Constants"). Only deliveries queued inside the plan's
 * retention window, as the logs list messages: the read model may still hold older ones (the sweeper
 * keeps up to a day more; a replay brings them back), and the answer must not depend on that.
 */
export async function listDeliveries(db: Knex, motorBlockId: string, webhookId: string, limit: number, window: RetentionWindow): Promise<WebhookDeliveryView[]> {
  await requireEndpoint(db, motorBlockId, webhookId);
  const rows = await db.withSchema(WEBHOOKS_SCHEMA).table('deliveries').where({ webhook_id: webhookId, motor_block_id: motorBlockId })
    .andWhere('queued_at', '>=', windowStartOf(window.retentionDays, window.now))
    .orderBy([{ column: 'queued_at', order: 'desc' }, { column: 'id', order: 'desc' }]).limit(limit);
  return rows.map((r) => ({
    id: r.id, event: r.event, messageId: r.message_id, status: r.status, attempts: r.attempts,
    lastHttpStatus: r.last_http_status, lastError: r.last_error, lastResponseBody: r.last_response_body, lastDurationMs: r.last_duration_ms,
    queuedAt: r.queued_at.toISOString(), lastAttemptAt: iso(r.last_attempt_at), nextAttemptAt: iso(r.next_attempt_at), completedAt: iso(r.completed_at),
  }));
}

/**
 * Deliveries queued and attempts made in the last `hours` (1 to 168); more hours than the plan's
 * retention window holds is 400 outside_retention_window (as daily-summary `days`), so the stats never
 * count a row the sweeper may or may not have deleted yet.
 */
export async function webhookStats(db: Knex, motorBlockId: string, webhookId: string, hours: number, window: RetentionWindow): Promise<WebhookStats> {
  const { now } = window;
  await requireEndpoint(db, motorBlockId, webhookId);
  requireSpanInsideRetention('hours', hours, 3600_000, window.retentionDays);
  const from = new Date(now.getTime() - hours * 3600_000);
  const s = db.withSchema(WEBHOOKS_SCHEMA);
  const byStatus = await s.clone().table('deliveries').where({ webhook_id: webhookId }).andWhere('queued_at', '>=', from)
    .select('status').count<{ status: string; n: string }[]>({ n: '*' }).groupBy('status');
  const count = (status: string) => Number(byStatus.find((r) => r.status === status)?.n ?? 0);
  const lat = (await db.raw(
    `SELECT count(*)::int AS n, avg(duration_ms)::float AS avg,
            percentile_cont(0.5) WITHIN GROUP (ORDER BY duration_ms)::float AS p50,
            percentile_cont(0.95) WITHIN GROUP (ORDER BY duration_ms)::float AS p95
     FROM ${WEBHOOKS_SCHEMA}.attempts WHERE webhook_id = ? AND attempted_at >= ?`, [webhookId, from],
  )).rows[0] as { n: number; avg: number | null; p50: number | null; p95: number | null };
  const delivered = count('delivered');
  const failed = count('failed');
  const round = (v: number | null) => (v === null ? null : Math.round(v));
  return {
    hours, from: from.toISOString(), to: now.toISOString(),
    delivered, failed, queued: count('queued'), retrying: count('retrying'),
    failureRate: delivered + failed === 0 ? null : Math.round((failed / (delivered + failed)) * 10000) / 100,
    latency: { attempts: lat.n, avgMs: round(lat.avg), p50Ms: round(lat.p50), p95Ms: round(lat.p95) },
  };
}
