import { Queue, UnrecoverableError, Worker, type Job } from 'bullmq';
import type { Knex } from 'knex';
import { WrongExpectedRevisionError, streamName, type EventData, type EventStore } from '../../domain/eventStore';
import { toEventData, type WebhookDeliveryAttempted } from '../../domain/events';
import type { Clock } from '../../domain/ids';
import {
  attemptEventIdOf, disableIfFailing, disabledEventIdOf, foldEndpoint, previousSecretAt, retryDelaySeconds, type EndpointState,
} from '../../domain/webhooks/webhooks';
import { WEBHOOKS_SCHEMA, webhooksProjection } from '../../projections/webhooks/projection';
import { awaitProjectionAtHead } from '../../commands/readYourWrites';
import { loadBlock } from '../../commands/blocks/grants';
import type { KeyStore } from '../../infra/keys/keyStore';
import type { Logger } from '../../infra/logger';
import type { Metrics } from '../../infra/metrics';
import { bullConnection } from '../../infra/redis';
import { postWebhook, signWebhookBody } from './post';

/**
 * Posts webhook deliveries (docs/WEBHOOKS.md). One BullMQ job per delivery, its id the delivery
 * id. Each attempt reads the endpoint from its own stream and the block from its (a URL changed, an
 * endpoint disabled or deleted, a block deleted a moment ago is seen), signs the payload, posts it, and appends WebhookDeliveryAttempted
 * with a stable id (delivery + attempt) at the revision it read the delivery's stream at, never
 * with 'any': a block deleted with its history during the POST takes the stream with it, and the
 * record must not bring it back. A failed attempt with attempts left throws, and BullMQ runs the
 * job again after the schedule's wait.
 */

export const WEBHOOK_QUEUE = 'motor-webhooks';

export interface WebhookJob {
  deliveryId: string; webhookId: string; motorBlockId: string; event: string;
  payload: Record<string, unknown>;
}

export interface WebhookSettings { retrySchedule: number[]; timeoutSeconds: number; concurrency: number; allowPrivateAddresses: boolean; disableAfterDays: number }
export interface WebhookWorkerDeps {
  store: EventStore; keys: KeyStore; clock: Clock; logger: Logger; metrics: Metrics; settings: WebhookSettings;
  /** The webhooks read model: an endpoint's last successful attempt (the failure clock). */
  db: Knex;
  /** How long a decision to pause waits for that read model to reach the log's head (default 30 s). */
  pauseWaitMs?: number;
}

export function createWebhookQueue(redisUrl: string, prefix = 'motor'): Queue<WebhookJob> {
  return new Queue<WebhookJob>(WEBHOOK_QUEUE, {
    connection: bullConnection(redisUrl),
    prefix,
    defaultJobOptions: {
      // Kept past the longest schedule so a replayed WebhookDeliveryQueued finds its job id taken.
      removeOnComplete: { age: 7 * 24 * 3600, count: 1_000_000 },
      removeOnFail: { age: 30 * 24 * 3600 },
    },
  });
}

/** Thrown to have BullMQ run the job again after the schedule's wait. */
class AttemptFailed extends Error {}

/**
 * One attempt of a delivery; exported for tests. Returns the outcome it recorded ('dropped': the
 * block is being deleted, or the delivery's stream is gone, before or during the POST; nothing
 * recorded, the job is not run again).
 *
 * `jobAttempt` is BullMQ's count; the attempt is numbered after the last one the delivery's stream
 * holds when that is higher. A worker that dies after recording attempt n but before BullMQ hears
 * of it runs the job again with the same count: numbered n again, its record would have attempt
 * n's event id and be dropped as a repeat, and a success then would leave the delivery
 * `retrying` for ever. It is attempt n + 1, as the receiver, which got a second POST, saw it.
 */
export async function attemptDelivery(deps: WebhookWorkerDeps, job: WebhookJob, jobAttempt: number): Promise<WebhookDeliveryAttempted['outcome'] | 'dropped'> {
  const [endpoint, { state: block }, recorded] = await Promise.all([
    deps.store.readStream(streamName('webhook', job.webhookId)).then(foldEndpoint),
    loadBlock(deps.store, job.motorBlockId),
    deps.store.readStream(streamName('webhookDelivery', job.deliveryId)),
  ]);
  const attempt = recorded.reduce((n, e) => (e.type === 'WebhookDeliveryAttempted' ? Math.max(n, (e.data as WebhookDeliveryAttempted).attempt + 1) : n), jobAttempt);
  // A block on its way out (deletion queued or done) takes its endpoints with it. Nothing is
  // recorded: the deletion job may be removing this very stream, and an append would bring it back.
  // A stream that is gone (it always starts with WebhookDeliveryQueued) went with its block's history.
  if (!block || block.status === 'deleted' || block.status === 'deletion_queued' || recorded.length === 0) return 'dropped';
  let result: { ok: boolean; status: number | null; error: string | null; responseBody: string | null; durationMs: number };
  if (!endpoint || endpoint.deleted) {
    result = { ok: false, status: null, error: 'webhook_deleted', responseBody: null, durationMs: 0 };
  } else if (!endpoint.enabled && job.event !== 'webhook.test') {
    result = { ok: false, status: null, error: 'webhook_disabled', responseBody: null, durationMs: 0 };
  } else {
    const secrets = await signingSecrets(deps, job.webhookId, endpoint);
    const body = JSON.stringify(job.payload);
    result = await postWebhook({
      url: endpoint.url,
      body,
      headers: {
        'X-Service-Signature': signWebhookBody(secrets.current, body),
        ...(secrets.previous === null ? {} : { 'X-Service-Signature-Previous': signWebhookBody(secrets.previous, body) }),
        'X-Service-Event': job.event,
        'X-Service-Delivery': job.deliveryId,
        'X-Service-Attempt': String(attempt),
      },
      timeoutMs: deps.settings.timeoutSeconds * 1000,
      allowPrivateAddresses: deps.settings.allowPrivateAddresses,
    });
  }
  // A deleted or paused endpoint is not retried: it is final now.
  const final = result.error === 'webhook_deleted' || result.error === 'webhook_disabled';
  const wait = result.ok || final ? null : retryDelaySeconds(deps.settings.retrySchedule, attempt);
  const outcome = result.ok ? 'delivered' : wait === null ? 'failed' : 'retrying';
  const now = deps.clock.now();
  const data: WebhookDeliveryAttempted = {
    deliveryId: job.deliveryId, webhookId: job.webhookId, motorBlockId: job.motorBlockId, attempt, outcome,
    httpStatus: result.status, error: result.error, responseBody: result.responseBody, durationMs: result.durationMs,
    nextAttemptAt: wait === null ? null : new Date(now.getTime() + wait * 1000).toISOString(),
    attemptedAt: now.toISOString(),
    event: job.event as WebhookDeliveryAttempted['event'],
  };
  const record = toEventData(attemptEventIdOf(job.deliveryId, attempt), { type: 'WebhookDeliveryAttempted', data }, { actor: 'worker:webhooks' });
  if (!(await recordAttempt(deps.store, streamName('webhookDelivery', job.deliveryId), record, recorded[recorded.length - 1].revision))) {
    deps.logger.info({ deliveryId: job.deliveryId, motorBlockId: job.motorBlockId, attempt }, 'webhook delivery stream deleted during the attempt: not recorded');
    return 'dropped';
  }
  deps.metrics.webhookAttempts.inc({ outcome });
  // A delivery that failed at the endpoint (not one stopped by a pause or a deletion) may pause it.
  if (outcome === 'failed' && !final) await pauseIfFailing(deps, job, now);
  return outcome;
}

/**
 * The secrets an attempt signs with, read at the attempt (so a retry after a rotation is signed
 * with the new one): the current one, and the previous one while its window lasts. A rotation may
 * have removed a key (the previous one, or the current one with a zero window) since this attempt
 * read the endpoint: then the endpoint is read once more.
 */
async function signingSecrets(deps: WebhookWorkerDeps, webhookId: string, endpoint: EndpointState): Promise<{ current: string; previous: string | null }> {
  let state = endpoint;
  for (let tries = 1; ; tries++) {
    const previousId = previousSecretAt(state, deps.clock.now());
    const [current, previous] = await Promise.all([deps.keys.get(state.secretKeyId), previousId === null ? null : deps.keys.get(previousId)]);
    if (current) return { current: current.privateKeyPem, previous: previous?.privateKeyPem ?? null };
    const again = tries === 1 ? foldEndpoint(await deps.store.readStream(streamName('webhook', webhookId))) : null;
    if (!again || again.secretKeyId === state.secretKeyId) {
      throw new UnrecoverableError(`signing secret ${state.secretKeyId} of webhook ${webhookId} is missing from the key store`);
    }
    state = again;
  }
}

/**
 * After a delivery ended `failed`: pauses its endpoint when nothing has succeeded there for
 * WEBHOOK_DISABLE_AFTER_DAYS (domain/webhooks disableIfFailing). The last success is the read
 * model's (`rm_webhooks.endpoints.last_success_at`), which may not show a success recorded a
 * moment ago; so a decision to pause is only taken once the projection has reached the log's head
 * (readModelAtHead). The decision is appended to `webhook-<id>` at the revision it was made on,
 * with an id derived from that revision: a job run twice appends it once, and a PUT that lands
 * first (a resume resets the clock) makes this append conflict, after which it is decided again on
 * the new state. A failure here is logged, not thrown: the attempt is recorded, and the endpoint's
 * next failed delivery decides again.
 */
async function pauseIfFailing(deps: WebhookWorkerDeps, job: WebhookJob, now: Date): Promise<void> {
  const { disableAfterDays } = deps.settings;
  if (disableAfterDays <= 0 || job.event === 'webhook.test') return;
  const stream = streamName('webhook', job.webhookId);
  try {
    for (let tries = 1; tries <= 5; tries++) {
      const [events, lastSuccessAt] = await Promise.all([deps.store.readStream(stream), readLastSuccess(deps.db, job.webhookId)]);
      const state = foldEndpoint(events);
      if (!state) return;
      const decide = (last: Date | null) => disableIfFailing(state, { webhookId: job.webhookId, deliveryId: job.deliveryId, event: job.event, lastSuccessAt: last, disableAfterDays, now });
      // Healthy endpoints are decided on the first read and never wait: only a pause does.
      if (!decide(lastSuccessAt)) return;
      if (!(await readModelAtHead(deps, job))) return;
      const event = decide(await readLastSuccess(deps.db, job.webhookId));
      if (!event) return;
      const revision = events[events.length - 1].revision;
      try {
        await deps.store.append(stream, [toEventData(disabledEventIdOf(job.webhookId, revision), event, { actor: 'worker:webhooks' })], { expectedRevision: revision });
        deps.metrics.webhookEndpointsPaused.inc();
        deps.logger.info({ webhookId: job.webhookId, motorBlockId: job.motorBlockId, deliveryId: job.deliveryId, since: event.data.since }, 'webhook endpoint paused: its deliveries kept failing');
        return;
      } catch (err) {
        if (!(err instanceof WrongExpectedRevisionError)) throw err;
      }
    }
  } catch (err) {
    deps.logger.warn({ err, webhookId: job.webhookId, deliveryId: job.deliveryId }, 'could not decide whether to pause a failing webhook endpoint');
  }
}

/** The endpoint's last success as the webhooks read model has it (the failure clock). */
async function readLastSuccess(db: Knex, webhookId: string): Promise<Date | null> {
  const row = (await db.withSchema(WEBHOOKS_SCHEMA).table('endpoints').where({ id: webhookId }).first('last_success_at')) as { last_success_at: Date | null } | undefined;
  return row?.last_success_at ?? null;
}

/** How long a decision to pause waits for the webhooks projection by default. */
const PAUSE_WAIT_MS = 30_000;

/**
 * Waits until the webhooks projection's checkpoint is at or past the last WebhookDeliveryAttempted
 * in the log as of now: every success recorded before this decision (by this worker or another) is
 * then in `last_success_at`.
 * False, with a warning, when it does not get there within the wait (the projector is stopped or far
 * behind): the endpoint is not paused, since pausing one that has just recovered on a stale read is
 * the worse mistake, and its next failed delivery decides again.
 */
async function readModelAtHead(deps: WebhookWorkerDeps, job: WebhookJob): Promise<boolean> {
  const { caughtUp, head, checkpoint, waitedMs } = await awaitProjectionAtHead(deps, {
    projection: webhooksProjection.name, types: ['WebhookDeliveryAttempted'], wait: 'webhook.pause', timeoutMs: deps.pauseWaitMs ?? PAUSE_WAIT_MS,
  });
  if (!caughtUp) {
    deps.logger.warn({ webhookId: job.webhookId, deliveryId: job.deliveryId, head, checkpoint, waitedMs }, 'webhooks projection behind the log: failing endpoint not paused, its next failed delivery decides again');
  }
  return caughtUp;
}

/**
 * Appends the attempt where the stream was read (`revision`); false when the stream is gone by then
 * (its block was deleted with its history during the POST: nothing is recorded, nothing retried).
 * Another run of the same job (its lock lapsed) may have appended meanwhile. Same attempt number:
 * same event id, and the store takes the repeat as this append done already (one record per
 * number, the first one's). Another number: this POST happened too, under the number the receiver
 * saw in X-Service-Attempt, so it is recorded at the new end of the stream (the projection never
 * lets a lower attempt undo a higher one).
 */
async function recordAttempt(store: EventStore, stream: string, record: EventData, revision: bigint): Promise<boolean> {
  let expected = revision;
  for (let tries = 1; ; tries++) {
    try {
      await store.append(stream, [record], { expectedRevision: expected });
      return true;
    } catch (err) {
      if (!(err instanceof WrongExpectedRevisionError) || tries >= 5) throw err;
      const now = await store.readStream(stream);
      if (now.length === 0) return false;
      if (now.some((e) => e.id.toLowerCase() === record.id.toLowerCase())) return true;
      expected = now[now.length - 1].revision;
    }
  }
}

export function startWebhookWorker(deps: WebhookWorkerDeps, redisUrl: string, prefix = 'motor'): Worker<WebhookJob> {
  const schedule = deps.settings.retrySchedule;
  const worker = new Worker<WebhookJob>(
    WEBHOOK_QUEUE,
    async (job: Job<WebhookJob>) => {
      const outcome = await attemptDelivery(deps, job.data, job.attemptsMade + 1);
      if (outcome === 'retrying') throw new AttemptFailed(`webhook delivery ${job.data.deliveryId}: attempt ${job.attemptsMade + 1} failed`);
      return outcome;
    },
    {
      connection: bullConnection(redisUrl),
      prefix,
      concurrency: deps.settings.concurrency,
      maxStalledCount: 50,
      // The wait after attempt n is the schedule's n-th entry.
      settings: { backoffStrategy: (attemptsMade: number) => (retryDelaySeconds(schedule, attemptsMade) ?? schedule[schedule.length - 1]) * 1000 },
    },
  );
  worker.on('failed', (job, err) => {
    if (!(err instanceof AttemptFailed)) deps.logger.warn({ err, deliveryId: job?.data.deliveryId, attemptsMade: job?.attemptsMade }, 'webhook job failed');
  });
  worker.on('error', (err) => deps.logger.error({ err }, 'webhook worker error'));
  return worker;
}
