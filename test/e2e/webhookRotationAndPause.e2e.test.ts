import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import type { BootstrapResult } from '../../commands/admin/bootstrap';
import { createWebhook } from '../../commands/webhooks/webhooks';
import { streamName } from '../../domain/eventStore';
import { toEventData, type WebhookDeliveryAttempted } from '../../domain/events';
import { attemptEventIdOf } from '../../domain/webhooks/webhooks';
import type { Clock } from '../../domain/ids';
import { createLogger } from '../../infra/logger';
import { rebuild } from '../../projections/runner';
import { WEBHOOKS_SCHEMA, webhooksProjection } from '../../projections/webhooks/projection';
import { WEBHOOK_DISPATCH_SCHEMA } from '../../workers/webhooks/dispatcher';
import { attemptDelivery, createWebhookQueue, type WebhookJob, type WebhookWorkerDeps } from '../../workers/webhooks/worker';
import { eventually, getJson, holdProjection, postJson, startTestMotor, type TestMotor } from '../support/motor';
import { startWebhookReceiver, verifiesWebhook } from '../support/webhookReceiver';

const DAY = 86_400_000;
const at = (ms: number): Clock => ({ now: () => new Date(ms) });

/**
 * Secret rotation and the pause of an endpoint whose deliveries keep failing (docs/WEBHOOKS.md
 * "Rotating the secret", "Failing endpoints"), against a real Motor and an HTTP receiver on loopback.
 * The failure clock runs in days: the tests run attempts themselves (`attemptDelivery`) with a clock
 * that is days ahead, and make endpoints in the past through the command with a clock days behind.
 */
describe('webhook secret rotation and failing endpoints (e2e)', function () {
  this.timeout(90_000);
  let motor: TestMotor;
  let receiver: Awaited<ReturnType<typeof startWebhookReceiver>>;
  let block: BootstrapResult;
  let manage: string;

  before(async () => {
    receiver = await startWebhookReceiver();
    motor = await startTestMotor({ env: { WEBHOOK_ALLOW_PRIVATE_URLS: 'true', WEBHOOK_RETRY_SCHEDULE: '1,1', WEBHOOK_TIMEOUT_SECONDS: '5' } });
    block = await motor.bootstrap();
    manage = await motor.token(block, ['webhooks.manage']);
  });
  after(async () => {
    await motor?.close();
    await receiver?.close();
  });

  const api = (path: string, motorBlockId = block.motorBlockId) => `${motor.baseUrl}/api/public/v1/motor-blocks/${motorBlockId}${path}`;
  const auth = (token = manage) => ({ authorization: `Bearer ${token}` });
  const put = async (path: string, body: unknown) => {
    const res = await fetch(api(path), { method: 'PUT', headers: { 'content-type': 'application/json', ...auth() }, body: JSON.stringify(body) });
    return { status: res.status, body: await res.json() as any }; // eslint-disable-line @typescript-eslint/no-explicit-any
  };
  const create = async (url: string) => {
    const r = await postJson(api('/webhooks'), { url }, auth());
    expect(r.status, JSON.stringify(r.body)).to.equal(201);
    return r.body.data as { id: string; secret: string; createdAt: string };
  };
  const rotate = (webhookId: string, body?: unknown, token = manage, motorBlockId = block.motorBlockId) =>
    fetch(api(`/webhooks/${webhookId}/rotate-secret`, motorBlockId), {
      method: 'POST', headers: { ...auth(token), ...(body === undefined ? {} : { 'content-type': 'application/json' }) }, body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
    }).then(async (res) => ({ status: res.status, body: await res.json() as any })); // eslint-disable-line @typescript-eslint/no-explicit-any
  const rotated = async (webhookId: string, body?: unknown) => {
    const r = await rotate(webhookId, body);
    expect(r.status, JSON.stringify(r.body)).to.equal(200);
    return r.body.data as { id: string; secret: string };
  };
  /** The endpoint as GET lists it once the projector has applied its stream's last event (the worker's append is not awaited). */
  const listed = async (webhookId: string) => {
    await eventually(async () => {
      const events = await motor.rt.store.readStream(streamName('webhook', webhookId));
      const row = await motor.rt.db.withSchema('rm_webhooks').table('endpoints').where({ id: webhookId }).first('revision');
      return row && BigInt(row.revision) === events[events.length - 1].revision;
    });
    return listedNow(webhookId);
  };
  const listedNow = async (webhookId: string) => ((await getJson(api('/webhooks'), auth())).body.data as Array<Record<string, unknown>>).find((w) => w.id === webhookId);
  /** A test delivery through the real dispatcher and worker, as the receiver got it. */
  const testDelivery = async (webhookId: string) => {
    const r = await postJson(api(`/webhooks/${webhookId}/test`), {}, auth());
    expect(r.status).to.equal(202);
    return eventually(async () => receiver.received.find((x) => x.body.id === r.body.data.deliveryId), 20_000);
  };
  /** A delivery whose attempts the test runs itself: its queue job is parked an hour, so the running worker never takes it. */
  const queueDelivery = async (webhookId: string, event: WebhookJob['event'] = 'message.delivered'): Promise<WebhookJob> => {
    const deliveryId = randomUUID();
    const job: WebhookJob = { deliveryId, webhookId, motorBlockId: block.motorBlockId, event, payload: { id: deliveryId, event } };
    const queue = createWebhookQueue(motor.rt.redisUrl, motor.rt.queuePrefix);
    try {
      await queue.add('webhook', job, { jobId: deliveryId, delay: 3600_000 });
    } finally {
      await queue.close();
    }
    await motor.rt.store.append(streamName('webhookDelivery', deliveryId), [toEventData(deliveryId, {
      type: 'WebhookDeliveryQueued',
      data: { deliveryId, webhookId, motorBlockId: block.motorBlockId, event: event as 'message.delivered', messageId: event === 'webhook.test' ? null : randomUUID(), payload: job.payload, queuedAt: new Date().toISOString() },
    }, { actor: 'test' })], { expectedRevision: 'no_stream' });
    return job;
  };
  const workerDeps = (clock: Clock, over: Partial<WebhookWorkerDeps['settings']> = {}): WebhookWorkerDeps => ({
    store: motor.rt.store, db: motor.rt.db, keys: motor.rt.keys, clock, logger: motor.rt.logger, metrics: motor.rt.metrics,
    settings: { retrySchedule: [], timeoutSeconds: 5, concurrency: 1, allowPrivateAddresses: true, disableAfterDays: 3, ...over },
  });
  const endpointEvents = async (webhookId: string) => (await motor.rt.store.readStream(streamName('webhook', webhookId))).map((e) => e.type);

  // At most 10 live endpoints a block: each test leaves none (the read model keeps the deleted ones, for the rebuild below).
  afterEach(async () => {
    for (const w of (await getJson(api('/webhooks'), auth())).body.data as Array<{ id: string }>) {
      expect((await fetch(api(`/webhooks/${w.id}`), { method: 'DELETE', headers: auth() })).status).to.equal(200);
    }
  });

  describe('rotating the secret', () => {
    it('answers the new secret once; deliveries carry the new signature and, during the window, the previous one; after it, none', async () => {
      const w = await create(receiver.url('/ok?rot=1'));
      const r = await rotated(w.id, { previousSecretValidForSeconds: 3 });
      expect(r.secret).to.match(/^whsec_[A-Za-z0-9_-]{43}$/).and.not.equal(w.secret);
      expect(r).to.include({ id: w.id, url: receiver.url('/ok?rot=1'), enabled: true, disabledReason: null, failingSince: null });
      const list = JSON.stringify((await getJson(api('/webhooks'), auth())).body);
      expect(list).not.to.include(r.secret);
      expect(list).not.to.include(w.secret);
      expect(await endpointEvents(w.id)).to.deep.equal(['WebhookCreated', 'WebhookSecretRotated']);

      const during = await testDelivery(w.id);
      expect(verifiesWebhook(r.secret, during), 'new secret: X-Service-Signature').to.equal(true);
      expect(verifiesWebhook(w.secret, during), 'old secret no longer signs X-Service-Signature').to.equal(false);
      expect(verifiesWebhook(w.secret, during, 'x-service-signature-previous'), 'old secret: X-Service-Signature-Previous').to.equal(true);

      await new Promise((res) => setTimeout(res, 3100));
      const after = await testDelivery(w.id);
      expect(verifiesWebhook(r.secret, after)).to.equal(true);
      expect(after.headers).not.to.have.property('x-service-signature-previous');
    });

    it('keeps one previous secret: a rotation inside the window replaces it; a zero window drops it at once; no body means one day', async () => {
      const w = await create(receiver.url('/ok?rot=2'));
      const second = await rotated(w.id); // default window: a day
      const third = await rotated(w.id, { previousSecretValidForSeconds: 0 });
      const dropped = await testDelivery(w.id);
      expect(verifiesWebhook(third.secret, dropped)).to.equal(true);
      expect(dropped.headers, 'a zero window: no previous signature').not.to.have.property('x-service-signature-previous');
      const fourth = await rotated(w.id, {});
      const d = await testDelivery(w.id);
      expect(verifiesWebhook(fourth.secret, d)).to.equal(true);
      expect(verifiesWebhook(third.secret, d, 'x-service-signature-previous'), 'the previous is the one just replaced').to.equal(true);
      for (const s of [w.secret, second.secret]) expect(verifiesWebhook(s, d, 'x-service-signature-previous')).to.equal(false);
      // The replaced keys are gone from the key store; the current and the previous one are there.
      const rotations = (await motor.rt.store.readStream(streamName('webhook', w.id))).filter((e) => e.type === 'WebhookSecretRotated').map((e) => e.data as { secretKeyId: string; previousSecretKeyId: string });
      const last = rotations[rotations.length - 1];
      expect(await motor.rt.keys.get(last.secretKeyId)).to.have.property('privateKeyPem', fourth.secret);
      expect(await motor.rt.keys.get(last.previousSecretKeyId)).to.have.property('privateKeyPem', third.secret);
      expect(await motor.rt.keys.get(rotations[0].previousSecretKeyId), 'the first secret').to.equal(null);
      expect(await motor.rt.keys.get(rotations[0].secretKeyId), 'the second secret').to.equal(null);
    });

    it('refuses a bad window with 400 validation_error, other fields and non-objects with 422, bad ids with 400/404, and other blocks and scopes with 403', async () => {
      const w = await create(receiver.url('/ok?rot=3'));
      for (const v of [-1, 604801, 1.5, '60', true, null]) {
        const r = await rotate(w.id, { previousSecretValidForSeconds: v });
        expect([r.status, r.body.code], JSON.stringify(v)).to.deep.equal([400, 'validation_error']);
      }
      expect((await rotate(w.id, { previousSecretValidForSeconds: 604800 })).status).to.equal(200);
      for (const body of [{ secret: 'mine' }, { previousSecretValidForSeconds: 60, url: 'https://x.test/' }, '[]']) {
        const r = await rotate(w.id, body);
        expect([r.status, r.body.code], JSON.stringify(body)).to.deep.equal([422, 'validation_error']);
      }
      expect((await rotate('not-a-uuid')).body.code).to.equal('invalid_id');
      expect((await rotate(randomUUID())).body.code).to.equal('webhook_not_found');

      const reader = await motor.token(block, ['webhooks.read']);
      expect((await rotate(w.id, undefined, reader)).status).to.equal(403);
      const other = await motor.bootstrap({ email: 'other-rotation@example.test' });
      const otherToken = await motor.token(other, ['webhooks.manage']);
      const foreign = await rotate(w.id, undefined, otherToken);
      expect([foreign.status, foreign.body.code]).to.deep.equal([403, 'motor_block_forbidden']);
      // The other block's own token on its own block: this endpoint is not there (its existence is not told).
      const notTheirs = await rotate(w.id, undefined, otherToken, other.motorBlockId);
      expect([notTheirs.status, notTheirs.body.code]).to.deep.equal([404, 'webhook_not_found']);
      expect(await endpointEvents(w.id), 'only the one accepted rotation').to.deep.equal(['WebhookCreated', 'WebhookSecretRotated']);
    });

    it('a retry after a rotation is signed with the new secret (the worker reads the secret at each attempt)', async () => {
      const w = await create(receiver.url('/flaky?rot=4'));
      const job = await queueDelivery(w.id, 'webhook.test');
      const deps = workerDeps(motor.rt.clock, { retrySchedule: [60] });
      expect(await attemptDelivery(deps, job, 1)).to.equal('retrying');
      const r = await rotated(w.id, { previousSecretValidForSeconds: 0 });
      expect(await attemptDelivery(deps, job, 2)).to.equal('delivered');
      const posts = receiver.received.filter((x) => x.headers['x-service-delivery'] === job.deliveryId);
      expect(posts.map((p) => p.headers['x-service-attempt'])).to.deep.equal(['1', '2']);
      expect([verifiesWebhook(w.secret, posts[0]), verifiesWebhook(r.secret, posts[1]), verifiesWebhook(w.secret, posts[1])]).to.deep.equal([true, true, false]);
    });
  });

  describe('pausing an endpoint that keeps failing', () => {
    /** An endpoint made `daysAgo` days ago, through the command with a clock that far behind. */
    const createdAgo = async (path: string, daysAgo: number) => {
      const deps = { store: motor.rt.store, db: motor.rt.db, logger: motor.rt.logger, metrics: motor.rt.metrics, keys: motor.rt.keys, clock: at(Date.now() - daysAgo * DAY), allowPrivateAddresses: true };
      const { webhook } = await createWebhook(deps, { accountId: block.accountId, motorBlockId: block.motorBlockId, actor: 'test' }, { url: receiver.url(path) });
      return webhook;
    };
    const lastSuccessShown = (webhookId: string, ms: number) => eventually(async () => {
      const row = await motor.rt.db.withSchema('rm_webhooks').table('endpoints').where({ id: webhookId }).first('last_success_at');
      return row?.last_success_at?.getTime() === ms;
    });

    it('a delivery failing past the threshold pauses the endpoint with reason and time, once; nothing is queued for it then', async () => {
      const w = await create(receiver.url('/down?pause=1'));
      const job = await queueDelivery(w.id);
      const fourDaysOn = workerDeps(at(Date.now() + 4 * DAY));
      const paused = async () => (await motor.rt.metrics.webhookEndpointsPaused.get()).values[0]?.value ?? 0;
      const pausedBefore = await paused();
      expect(await attemptDelivery(fourDaysOn, job, 1)).to.equal('failed');
      expect(await paused(), 'motor_webhook_endpoints_paused_total').to.equal(pausedBefore + 1);
      const shown = await listed(w.id);
      expect(shown).to.include({ enabled: false, disabledReason: 'failing', failingSince: w.createdAt });
      const events = await motor.rt.store.readStream(streamName('webhook', w.id));
      expect(events.map((e) => e.type)).to.deep.equal(['WebhookCreated', 'WebhookEndpointDisabled']);
      expect(events[1].data).to.include({ reason: 'failing', since: w.createdAt, deliveryId: job.deliveryId });
      expect((events[1].metadata as { actor: string }).actor).to.equal('worker:webhooks');

      // The same job run again, and another delivery failing: the endpoint is paused already, nothing more is appended.
      expect(await attemptDelivery(fourDaysOn, job, 1)).to.equal('failed');
      expect(await attemptDelivery(fourDaysOn, await queueDelivery(w.id), 1)).to.equal('failed');
      expect(await endpointEvents(w.id)).to.deep.equal(['WebhookCreated', 'WebhookEndpointDisabled']);
      // The dispatcher holds it as paused, exactly as after a PUT enabled: false.
      await eventually(async () => (await motor.rt.db.withSchema(WEBHOOK_DISPATCH_SCHEMA).table('targets').where({ webhook_id: w.id }).first('enabled'))?.enabled === false);
    });

    it('under the threshold, with the setting at 0, or for a test delivery, nothing is paused', async () => {
      const w = await create(receiver.url('/down?pause=2'));
      expect(await attemptDelivery(workerDeps(at(Date.now() + 2 * DAY)), await queueDelivery(w.id), 1)).to.equal('failed');
      expect(await attemptDelivery(workerDeps(at(Date.now() + 40 * DAY), { disableAfterDays: 0 }), await queueDelivery(w.id), 1)).to.equal('failed');
      expect(await attemptDelivery(workerDeps(at(Date.now() + 40 * DAY)), await queueDelivery(w.id, 'webhook.test'), 1)).to.equal('failed');
      expect(await listed(w.id)).to.include({ enabled: true, disabledReason: null, failingSince: null });
      expect(await endpointEvents(w.id)).to.deep.equal(['WebhookCreated']);
    });

    it('a success in between restarts the clock; a successful test delivery does not', async () => {
      const w = await createdAgo('/ok?pause=3', 10);
      const successAt = Date.now() - DAY;
      expect(await attemptDelivery(workerDeps(at(successAt)), await queueDelivery(w.id), 1)).to.equal('delivered');
      await lastSuccessShown(w.id, successAt);
      // A test delivery succeeding later is no sign that the endpoint takes events.
      expect(await attemptDelivery(workerDeps(motor.rt.clock), await queueDelivery(w.id, 'webhook.test'), 1)).to.equal('delivered');
      expect((await put(`/webhooks/${w.id}`, { url: receiver.url('/down?pause=3') })).status).to.equal(200);
      expect(await attemptDelivery(workerDeps(motor.rt.clock), await queueDelivery(w.id), 1)).to.equal('failed');
      expect(await listed(w.id), 'a day since the last success').to.include({ enabled: true, disabledReason: null });
      expect(await attemptDelivery(workerDeps(at(Date.now() + 2.5 * DAY)), await queueDelivery(w.id), 1)).to.equal('failed');
      expect(await listed(w.id)).to.include({ enabled: false, disabledReason: 'failing', failingSince: new Date(successAt).toISOString() });

      const t = await createdAgo('/ok?pause=4', 10);
      expect(await attemptDelivery(workerDeps(motor.rt.clock), await queueDelivery(t.id, 'webhook.test'), 1)).to.equal('delivered');
      expect((await put(`/webhooks/${t.id}`, { url: receiver.url('/down?pause=4') })).status).to.equal(200);
      expect(await attemptDelivery(workerDeps(motor.rt.clock), await queueDelivery(t.id), 1)).to.equal('failed');
      expect(await listed(t.id)).to.include({ enabled: false, disabledReason: 'failing', failingSince: t.createdAt });
    });

    it('PUT enabled: true resumes it, clears the reason and restarts the clock', async () => {
      const w = await createdAgo('/down?pause=5', 10);
      expect(await attemptDelivery(workerDeps(motor.rt.clock), await queueDelivery(w.id), 1)).to.equal('failed');
      expect(await listed(w.id)).to.include({ enabled: false, disabledReason: 'failing', failingSince: w.createdAt });
      // Paused by the worker, a queued delivery ends without a request, as for an owner's pause.
      const posts = receiver.received.length;
      const queued = await queueDelivery(w.id);
      expect(await attemptDelivery(workerDeps(motor.rt.clock), queued, 1)).to.equal('failed');
      expect(receiver.received.length).to.equal(posts);

      const resumed = await put(`/webhooks/${w.id}`, { enabled: true });
      expect(resumed.status).to.equal(200);
      expect(resumed.body.data).to.include({ enabled: true, disabledReason: null, failingSince: null });
      expect(await listed(w.id)).to.include({ enabled: true, disabledReason: null, failingSince: null });
      const resumedAt = Date.parse(resumed.body.data.updatedAt);
      expect(await attemptDelivery(workerDeps(at(resumedAt + DAY)), await queueDelivery(w.id), 1)).to.equal('failed');
      expect(await listed(w.id), 'a day after resuming').to.include({ enabled: true });
      expect(await attemptDelivery(workerDeps(at(resumedAt + 3 * DAY + 1000)), await queueDelivery(w.id), 1)).to.equal('failed');
      expect(await listed(w.id)).to.include({ enabled: false, disabledReason: 'failing', failingSince: new Date(resumedAt).toISOString() });
    });

    it('a PUT that lands between the decision\'s read and its append wins; the decision is made again on the new state', async () => {
      /** A failing delivery whose decision reads the endpoint, then the owner's PUTs land, then it appends. */
      const race = async (path: string, puts: unknown[]) => {
        const w = await createdAgo(path, 10);
        const job = await queueDelivery(w.id);
        let held = false;
        const store = Object.create(motor.rt.store) as typeof motor.rt.store;
        store.readStream = async (name: string, ...rest: unknown[]) => {
          const events = await (motor.rt.store.readStream as (n: string, ...r: unknown[]) => ReturnType<typeof motor.rt.store.readStream>)(name, ...rest);
          // The decision's read: after the attempt is recorded.
          if (name === streamName('webhook', w.id) && !held && (await motor.rt.store.readStream(streamName('webhookDelivery', job.deliveryId))).length === 2) {
            held = true;
            for (const body of puts) expect((await put(`/webhooks/${w.id}`, body)).status).to.equal(200);
          }
          return events;
        };
        expect(await attemptDelivery({ ...workerDeps(motor.rt.clock), store }, job, 1)).to.equal('failed');
        expect(held, 'the race was run').to.equal(true);
        return { w, events: await endpointEvents(w.id) };
      };
      // Another change: still failing on the new state, so paused after it (not dropped by the conflict).
      const changed = await race('/down?pause=6', [{ events: ['message.delivered'] }]);
      expect(changed.events).to.deep.equal(['WebhookCreated', 'WebhookUpdated', 'WebhookEndpointDisabled']);
      expect(await listed(changed.w.id)).to.include({ enabled: false, disabledReason: 'failing', failingSince: changed.w.createdAt });
      // A pause and resume: the clock restarted just now, so nothing is paused.
      const resumed = await race('/down?pause=7', [{ enabled: false }, { enabled: true }]);
      expect(resumed.events).to.deep.equal(['WebhookCreated', 'WebhookUpdated', 'WebhookUpdated']);
      expect(await listed(resumed.w.id)).to.include({ enabled: true, disabledReason: null });
    });

    describe('with the webhooks projector behind the log', () => {
      /** A delivery of the endpoint that succeeded at `atMs`, as the worker records it: in the log only, while the projector is held. */
      const recordSuccess = async (webhookId: string, atMs: number) => {
        const { deliveryId } = await queueDelivery(webhookId);
        const data: WebhookDeliveryAttempted = {
          deliveryId, webhookId, motorBlockId: block.motorBlockId, attempt: 1, outcome: 'delivered', httpStatus: 200, error: null, responseBody: 'ok',
          durationMs: 12, nextAttemptAt: null, attemptedAt: new Date(atMs).toISOString(), event: 'message.delivered',
        };
        await motor.rt.store.append(streamName('webhookDelivery', deliveryId), [toEventData(attemptEventIdOf(deliveryId, 1), { type: 'WebhookDeliveryAttempted', data }, { actor: 'worker:webhooks' })]);
      };
      /** The deps with a store that counts the head reads (the wait's first step). */
      const countingHeadReads = (deps: WebhookWorkerDeps) => {
        const store = Object.create(motor.rt.store) as typeof motor.rt.store;
        const counted = { headReads: 0 };
        store.headPosition = () => { counted.headReads++; return motor.rt.store.headPosition(); };
        return { deps: { ...deps, store }, counted };
      };

      it('a success not applied yet is waited for: the endpoint that just recovered is not paused', async () => {
        const w = await createdAgo('/down?pause=8', 10);
        const job = await queueDelivery(w.id);
        const release = await holdProjection(motor, WEBHOOKS_SCHEMA);
        try {
          await recordSuccess(w.id, Date.now() - DAY);
          let decided = false;
          const attempt = attemptDelivery(workerDeps(motor.rt.clock), job, 1).finally(() => { decided = true; });
          // The read model still says ten days without a success: the decision waits for the projector.
          await new Promise((r) => setTimeout(r, 1000));
          expect(decided, 'the decision waits while the projector is held').to.equal(false);
          expect(await endpointEvents(w.id)).to.deep.equal(['WebhookCreated']);
          await release();
          expect(await attempt).to.equal('failed');
        } finally {
          await release();
        }
        expect(await endpointEvents(w.id), 'a day since the success: not paused').to.deep.equal(['WebhookCreated']);
        expect(await listed(w.id)).to.include({ enabled: true, disabledReason: null });
      });

      it('a projector that does not get there in time: not paused, a warning; caught up, a failure past the threshold pauses as before', async () => {
        const w = await createdAgo('/down?pause=9', 10);
        const successAt = Date.now() - DAY;
        const lines: string[] = [];
        const logger = createLogger('warn', {}, { write: (line: string) => { lines.push(line); } });
        const gaveUp = async () => (await motor.rt.metrics.projectionHeadWaitTimeouts.get()).values.find((v) => v.labels.wait === 'webhook.pause' && v.labels.projection === 'webhooks')?.value ?? 0;
        const gaveUpBefore = await gaveUp();
        const release = await holdProjection(motor, WEBHOOKS_SCHEMA);
        try {
          await recordSuccess(w.id, successAt);
          const started = Date.now();
          expect(await attemptDelivery({ ...workerDeps(motor.rt.clock), logger, pauseWaitMs: 1000 }, await queueDelivery(w.id), 1)).to.equal('failed');
          expect(Date.now() - started, 'waited for the projector').to.be.at.least(900);
        } finally {
          await release();
        }
        expect(await endpointEvents(w.id), 'not paused on the stale read').to.deep.equal(['WebhookCreated']);
        const warned = lines.map((l) => JSON.parse(l) as { webhookId?: string; msg: string }).filter((l) => l.webhookId === w.id);
        expect(warned.map((l) => l.msg)).to.deep.equal(['webhooks projection behind the log: failing endpoint not paused, its next failed delivery decides again']);
        expect(await gaveUp() - gaveUpBefore, 'motor_projection_head_wait_timeouts_total{webhooks, webhook.pause}').to.equal(1);

        await lastSuccessShown(w.id, successAt);
        expect(await attemptDelivery(workerDeps(motor.rt.clock), await queueDelivery(w.id), 1)).to.equal('failed');
        expect(await endpointEvents(w.id), 'a day since the success').to.deep.equal(['WebhookCreated']);
        expect(await attemptDelivery(workerDeps(at(Date.now() + 2.5 * DAY)), await queueDelivery(w.id), 1)).to.equal('failed');
        expect(await listed(w.id)).to.include({ enabled: false, disabledReason: 'failing', failingSince: new Date(successAt).toISOString() });
      });

      it('a failure the read model already says is under the threshold never waits for the projector', async () => {
        const w = await create(receiver.url('/down?pause=10'));
        const release = await holdProjection(motor, WEBHOOKS_SCHEMA);
        try {
          const { deps, counted } = countingHeadReads(workerDeps(at(Date.now() + DAY)));
          expect(await attemptDelivery(deps, await queueDelivery(w.id), 1)).to.equal('failed');
          expect(counted.headReads, 'no wait').to.equal(0);
        } finally {
          await release();
        }
        expect(await endpointEvents(w.id)).to.deep.equal(['WebhookCreated']);
      });
    });

    it('a rebuild of the webhooks projection from the log gives the same endpoint rows', async () => {
      const snapshot = async () => motor.rt.db.withSchema('rm_webhooks').table('endpoints').orderBy('id').select();
      const live = await eventually(async () => {
        const rows = await snapshot();
        const revisions = await Promise.all(rows.map(async (r) => {
          const events = await motor.rt.store.readStream(streamName('webhook', r.id));
          return BigInt(r.revision) === events[events.length - 1].revision;
        }));
        return revisions.every(Boolean) ? rows : null;
      });
      expect(live.some((r) => r.disabled_reason === 'failing') && live.some((r) => r.previous_secret_key_id !== null) && live.some((r) => r.last_success_at !== null)).to.equal(true);
      await rebuild(motor.rt.db, motor.rt.store, webhooksProjection);
      expect(await snapshot()).to.deep.equal(live);
    });
  });
});
