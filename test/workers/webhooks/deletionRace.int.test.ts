import { randomUUID } from 'node:crypto';
import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { expect } from 'chai';
import type { BootstrapResult } from '../../../commands/admin/bootstrap';
import { loadBlock } from '../../../commands/blocks/grants';
import { createWebhook, testWebhook } from '../../../commands/webhooks/webhooks';
import { streamName, type EventStore, type RecordedEvent } from '../../../domain/eventStore';
import { toEventData, type MessageAccepted, type MotorBlockDeleted, type WebhookDeliveryQueued } from '../../../domain/events';
import { newId } from '../../../domain/ids';
import { WEBHOOK_EVENTS, attemptEventIdOf, deliveryIdOf, testEventPayload } from '../../../domain/webhooks/webhooks';
import { FollowersBehindError, processBlockDeletion, type BlockDeletionDeps } from '../../../workers/blockDeletion';
import { CHECKPOINTS } from '../../../workers/logEnqueuer';
import { WEBHOOK_DISPATCH_SCHEMA, WEBHOOK_DISPATCHER, WebhookDispatcher } from '../../../workers/webhooks/dispatcher';
import { attemptDelivery, createWebhookQueue, type WebhookJob, type WebhookWorkerDeps } from '../../../workers/webhooks/worker';
import { addBlockKey, call, sendFrom } from '../../blocks/support';
import { senderDomainOf } from '../../read-api/publicApi';
import { eventually, startTestMotor, type TestMotor } from '../../support/motor';

/** An HTTP receiver that holds every POST open until the test releases it (then answers 200). */
async function startHoldingReceiver() {
  const held: Array<{ delivery: string; res: ServerResponse }> = [];
  const server: Server = createServer((req, res) => {
    req.resume();
    req.on('end', () => held.push({ delivery: String(req.headers['x-service-delivery']), res }));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}/hook`,
    /** Resolves once a POST of this delivery is being held. */
    holding: (deliveryId: string) => eventually(async () => held.some((h) => h.delivery === deliveryId), 10_000),
    release: () => { for (const h of held.splice(0)) h.res.writeHead(200).end('ok'); },
    close: () => new Promise<void>((r) => { server.closeAllConnections(); server.close(() => r()); }),
  };
}

/**
 * The races between deleting a block with its history (workers/blockDeletion.ts) and outgoing
 * webhooks (docs/BLOCKS.md "Deletion", docs/WEBHOOKS.md): an attempt whose POST outlasts the
 * deletion must not re-create its delivery's stream, and a dispatcher running behind must not queue
 * deliveries of the block after the deletion looked for them. No worker role runs: the test drives
 * the dispatcher, the attempt and the deletion job itself, in the order each race needs.
 */
describe('block deletion and webhooks: races (int)', function () {
  this.timeout(120_000);
  let motor: TestMotor;
  let a: BootstrapResult;
  let manage: string;
  let receiver: Awaited<ReturnType<typeof startHoldingReceiver>>;

  before(async () => {
    motor = await startTestMotor({ roles: ['api', 'projector'] });
    a = await motor.bootstrap();
    manage = await motor.token(a, ['config.manage']);
    receiver = await startHoldingReceiver();
  });
  after(async () => {
    receiver?.release();
    await receiver?.close();
    await motor?.close();
  });

  const webhookDeps = () => ({ store: motor.rt.store, db: motor.rt.db, logger: motor.rt.logger, metrics: motor.rt.metrics, keys: motor.rt.keys, clock: motor.rt.clock, allowPrivateAddresses: true });
  const workerDeps = (): WebhookWorkerDeps => ({
    store: motor.rt.store, db: motor.rt.db, keys: motor.rt.keys, clock: motor.rt.clock, logger: motor.rt.logger, metrics: motor.rt.metrics,
    settings: { retrySchedule: [60], timeoutSeconds: 30, concurrency: 1, allowPrivateAddresses: true, disableAfterDays: 0 },
  });
  const deletionDeps = (followers?: BlockDeletionDeps['followers']): BlockDeletionDeps => ({
    // The test's directory has no cache (TTL 0): nothing to wait out after its row shows the request.
    store: motor.rt.store, db: motor.rt.db, clock: motor.rt.clock, logger: motor.rt.logger, directoryCacheTtlMs: 0, ...(followers ? { followers } : {}),
  });
  const caller = (motorBlockId: string) => ({ accountId: a.accountId, motorBlockId, actor: 'test' });

  const createBlock = async (name: string) => {
    const r = await call(motor, 'POST', '/account/motor-blocks', manage, { name, domainId: a.domainId }, { 'Idempotency-Key': randomUUID() });
    expect(r.status, JSON.stringify(r.body)).to.equal(201);
    return r.body.data.id as string;
  };
  const deactivate = async (id: string) => {
    expect((await call(motor, 'POST', `/account/motor-blocks/${id}/deactivate`, manage, { confirm: true })).status).to.equal(200);
  };
  /** Deactivates and deletes with history; returns the deletion's jobId (no worker role: the job is not run). */
  const requestDeletion = async (id: string) => {
    await deactivate(id);
    const r = await call(motor, 'DELETE', `/account/motor-blocks/${id}`, manage, { confirm: true, deleteHistory: true });
    expect(r.status, JSON.stringify(r.body)).to.equal(202);
    return r.body.data.jobId as string;
  };
  const requestPosition = async (id: string) => (await motor.rt.store.readStream(streamName('motorBlock', id))).find((e) => e.type === 'MotorBlockDeletionRequested')!.position;
  /** Every event in the log (the whole log: a stream re-created after a deletion would show here). */
  const wholeLog = async () => {
    const all: RecordedEvent[] = [];
    for (let after: string | null = null; ;) {
      const page = await motor.rt.store.readAll({ after, maxCount: 1000 });
      all.push(...page);
      if (page.length < 1000) return all;
      after = page[page.length - 1].position;
    }
  };
  /**
   * What POST .../webhooks/{id}/test appends, appended straight to the store: a test request that
   * checked the block a moment before its deletion request and appends after it (the route
   * refuses one that checks after it: docs/BLOCKS.md "Writers that race the scan").
   */
  const lateTestDelivery = async (webhookId: string, motorBlockId: string) => {
    const at = new Date().toISOString();
    const deliveryId = deliveryIdOf(webhookId, `test:${newId()}`);
    await motor.rt.store.append(streamName('webhookDelivery', deliveryId), [toEventData(deliveryId, {
      type: 'WebhookDeliveryQueued',
      data: { deliveryId, webhookId, motorBlockId, event: 'webhook.test', messageId: null, payload: testEventPayload(deliveryId, motorBlockId, webhookId, at), queuedAt: at },
    }, { actor: 'test' })], { expectedRevision: 'no_stream' });
    return { deliveryId };
  };
  const deliveriesOf = async (motorBlockId: string) => (await wholeLog())
    .filter((e) => e.streamId.startsWith('webhookDelivery-') && (e.data as { motorBlockId?: string }).motorBlockId === motorBlockId);

  const startDispatcher = (store: EventStore = motor.rt.store) => {
    const queue = createWebhookQueue(motor.rt.redisUrl, motor.rt.queuePrefix);
    const abort = new AbortController();
    const run = new WebhookDispatcher(motor.rt.db, store, queue, motor.rt.logger, { jobOptions: { attempts: 2 } }).run(abort.signal);
    return { stop: async () => { abort.abort(); await run; await queue.close(); } };
  };
  const dispatcherAt = async () => (await motor.rt.db.table(CHECKPOINTS).where({ name: WEBHOOK_DISPATCHER }).first('position'))?.position as string | undefined;
  const dispatcherPast = (position: string) => eventually(async () => {
    const at = await dispatcherAt();
    return at !== undefined && motor.rt.store.comparePositions(at, position) >= 0;
  }, 20_000);
  /** A block with an endpoint and one message the dispatcher knows of (it ran past its MessageAccepted, then stopped). */
  const blockWithMessage = async (name: string) => {
    const id = await createBlock(name);
    const key = await addBlockKey(motor, a.accountId, id);
    const { webhook } = await createWebhook(webhookDeps(), caller(id), { url: receiver.url });
    const dispatcher = startDispatcher();
    const sent = await sendFrom(motor, senderDomainOf(a), key);
    expect(sent.status, JSON.stringify(sent.body)).to.equal(200);
    const messageId = sent.body.data.id as string;
    await eventually(async () => (await motor.rt.db.withSchema(WEBHOOK_DISPATCH_SCHEMA).table('messages').where({ message_id: messageId }).first()) !== undefined, 20_000);
    await dispatcher.stop();
    return { id, webhookId: webhook.id, messageId };
  };
  /** An outcome of the message, as a delivery round records it; its event id and position. */
  const delivered = async (messageId: string) => {
    const eventId = newId();
    const r = await motor.rt.store.append(streamName('message', messageId), [toEventData(eventId, {
      type: 'DeliverySucceeded',
      data: { messageId, recipient: 'user@rcpt.test', at: new Date().toISOString(), smtpCode: '250', smtpResponse: '250 2.0.0 ok', attempt: 1 },
    }, { actor: 'test' })], { expectedRevision: 'any' });
    return { eventId, position: r.position };
  };

  describe('an attempt whose POST outlasts the deletion', () => {
    const queuedJob = async (webhookId: string, motorBlockId: string): Promise<WebhookJob> => {
      const { deliveryId } = await testWebhook(webhookDeps(), caller(motorBlockId), webhookId);
      const [queued] = await motor.rt.store.readStream(streamName('webhookDelivery', deliveryId));
      const d = queued.data as WebhookDeliveryQueued;
      return { deliveryId, webhookId, motorBlockId, event: d.event, payload: d.payload };
    };

    it('does not bring back the delivery stream the deletion removed meanwhile (dropped, nothing recorded)', async () => {
      const id = await createBlock('Deleted during a POST');
      const { webhook } = await createWebhook(webhookDeps(), caller(id), { url: receiver.url });
      const job = await queuedJob(webhook.id, id);
      // Inactive, not yet being deleted: the attempt's status check passes.
      await deactivate(id);
      const attempt = attemptDelivery(workerDeps(), job, 1);
      await receiver.holding(job.deliveryId);

      const jobId = await requestDeletion(id);
      // No dispatcher in this test: the job is not to wait for one.
      expect(await processBlockDeletion(deletionDeps({ names: [] }), { motorBlockId: id, jobId })).to.equal('completed');
      expect(await motor.rt.store.readStream(streamName('webhookDelivery', job.deliveryId))).to.deep.equal([]);

      receiver.release();
      expect(await attempt).to.equal('dropped');
      expect((await wholeLog()).filter((e) => e.streamId === streamName('webhookDelivery', job.deliveryId))).to.deep.equal([]);
    });

    it('records its attempt after the one another run of the same job recorded meanwhile', async () => {
      const id = await createBlock('Two runs of one job');
      const { webhook } = await createWebhook(webhookDeps(), caller(id), { url: receiver.url });
      const job = await queuedJob(webhook.id, id);
      const attempt = attemptDelivery(workerDeps(), job, 1);
      await receiver.holding(job.deliveryId);
      // The other run (this one's lock lapsed) was numbered 2 and recorded first.
      const stream = streamName('webhookDelivery', job.deliveryId);
      await motor.rt.store.append(stream, [toEventData(attemptEventIdOf(job.deliveryId, 2), {
        type: 'WebhookDeliveryAttempted',
        data: {
          deliveryId: job.deliveryId, webhookId: webhook.id, motorBlockId: id, attempt: 2, outcome: 'delivered', httpStatus: 200, error: null,
          responseBody: 'ok', durationMs: 5, nextAttemptAt: null, attemptedAt: new Date().toISOString(),
        },
      }, { actor: 'test' })], { expectedRevision: 0n });

      receiver.release();
      expect(await attempt).to.equal('delivered');
      const events = await motor.rt.store.readStream(stream);
      expect(events.map((e) => [e.type, (e.data as { attempt?: number }).attempt])).to.deep.equal([
        ['WebhookDeliveryQueued', undefined], ['WebhookDeliveryAttempted', 2], ['WebhookDeliveryAttempted', 1],
      ]);
    });
  });

  describe('the history scan', () => {
    it('reads the log up to the deletion\'s start even while an older transaction holds the log back', async () => {
      const id = await createBlock('Scan held back');
      const { webhook } = await createWebhook(webhookDeps(), caller(id), { url: receiver.url });
      const jobId = await requestDeletion(id);
      // A transaction with an id, still running: readAll hands over nothing that sorts after it.
      const trx = await motor.rt.db.transaction();
      try {
        await trx.raw('SELECT pg_current_xact_id()');
        const { deliveryId } = await lateTestDelivery(webhook.id, id);
        let settled = false;
        const job = processBlockDeletion(deletionDeps({ names: [] }), { motorBlockId: id, jobId }).finally(() => { settled = true; });
        await new Promise((r) => setTimeout(r, 1000));
        expect(settled, 'the scan waits for the log to be readable up to the job\'s start').to.equal(false);
        await trx.rollback();
        expect(await job).to.equal('completed');
        expect(await motor.rt.store.readStream(streamName('webhookDelivery', deliveryId))).to.deep.equal([]);
      } finally {
        if (!trx.isCompleted()) await trx.rollback();
      }
    });
  });

  describe('a webhook dispatcher running behind', () => {
    /**
     * The event store, but an append to a `webhookDelivery-*` stream waits until the test releases
     * it: a dispatcher that read a batch of outcome events is still handling it.
     */
    const holdingDeliveryAppends = () => {
      let release!: () => void;
      const released = new Promise<void>((r) => { release = r; });
      let held = false;
      const store = new Proxy(motor.rt.store, {
        get(target, prop) {
          if (prop === 'append') {
            return async (streamId: string, ...rest: Parameters<EventStore['append']> extends [string, ...infer R] ? R : never) => {
              if (streamId.startsWith('webhookDelivery-')) {
                held = true;
                await released;
              }
              return target.append(streamId, ...rest);
            };
          }
          const v = Reflect.get(target, prop, target);
          return typeof v === 'function' ? v.bind(target) : v;
        },
      });
      return { store, holding: () => eventually(async () => held, 20_000), release };
    };

    it('the deletion job waits until it passed the request, then removes the deliveries it queued', async () => {
      const { id, webhookId, messageId } = await blockWithMessage('Dispatcher behind');
      // While the dispatcher is stopped: the message's outcome, then the deletion request.
      const outcome = await delivered(messageId);
      const jobId = await requestDeletion(id);
      const requestedAt = await requestPosition(id);
      expect(motor.rt.store.comparePositions(outcome.position, requestedAt)).to.be.lessThan(0);

      // The dispatcher reads outcome and request in one batch and is queuing the outcome's delivery
      // (not appended yet) as the deletion job starts. Once the job has removed the message's stream
      // a dispatcher further behind never sees the outcome on PostgreSQL; on KurrentDB (soft
      // deletion, events stay in $all) it would.
      const hold = holdingDeliveryAppends();
      const dispatcher = startDispatcher(hold.store);
      try {
        await hold.holding();
        let settled = false;
        const job = processBlockDeletion(deletionDeps({ names: [WEBHOOK_DISPATCHER], timeoutMs: 30_000 }), { motorBlockId: id, jobId })
          .finally(() => { settled = true; });
        await new Promise((r) => setTimeout(r, 1500));
        expect(settled, 'the job waits for the dispatcher').to.equal(false);
        expect((await loadBlock(motor.rt.store, id)).state?.status).to.equal('deletion_queued');

        hold.release();
        expect(await job).to.equal('completed');
        // The dispatcher did queue the outcome (it came before the request): the job found it (the
        // message's stream and the delivery's) and removed it.
        const tombstone = (await motor.rt.store.readStream(streamName('motorBlock', id))).find((e) => e.type === 'MotorBlockDeleted')!;
        expect(tombstone.data as MotorBlockDeleted).to.include({ messagesDeleted: 1, streamsDeleted: 2 });
        await dispatcherPast(tombstone.position);
      } finally {
        hold.release();
        await dispatcher.stop();
      }
      expect(await motor.rt.store.readStream(streamName('webhookDelivery', deliveryIdOf(webhookId, outcome.eventId)))).to.deep.equal([]);
      expect(await deliveriesOf(id)).to.deep.equal([]);
    });

    it('a job whose dispatcher does not get there fails the attempt (BullMQ runs it again later)', async () => {
      const id = await createBlock('No dispatcher');
      const jobId = await requestDeletion(id);
      // The checkpoint row is before the request (the dispatcher stopped earlier in this suite, or never ran).
      const err = await processBlockDeletion(deletionDeps({ names: [WEBHOOK_DISPATCHER], timeoutMs: 300 }), { motorBlockId: id, jobId }).then(() => null, (e) => e);
      expect(err).to.be.instanceOf(FollowersBehindError);
      expect((err as FollowersBehindError).behind).to.deep.equal([WEBHOOK_DISPATCHER]);
      expect((await loadBlock(motor.rt.store, id)).state?.status).to.equal('deletion_queued');
    });

    it('from the request on (in log order), queues nothing more for the block, also after a restart and for a new endpoint', async () => {
      const { id, messageId } = await blockWithMessage('Outcome after the request');
      await requestDeletion(id);
      let dispatcher = startDispatcher();
      await dispatcherPast(await requestPosition(id));
      // Restarted: it remembers the block from its tables, not from memory.
      await dispatcher.stop();
      dispatcher = startDispatcher();
      try {
        // An outcome of a delivery round still in flight; an endpoint created for the block now, and
        // a message of a send that checked the block's status before it was deactivated, with its outcome.
        await delivered(messageId);
        // (appended straight to the store: the route refuses a create after the request, but one
        // that checked the block a moment before it can still append after it).
        const lateHook = newId();
        await motor.rt.store.append(streamName('webhook', lateHook), [toEventData(newId(), {
          type: 'WebhookCreated',
          data: { webhookId: lateHook, motorBlockId: id, accountId: a.accountId, url: `${receiver.url}?late=1`, events: [...WEBHOOK_EVENTS], secretKeyId: newId(), createdAt: new Date().toISOString() },
        }, { actor: 'test' })], { expectedRevision: 'no_stream' });
        const [accepted] = await motor.rt.store.readStream(streamName('message', messageId));
        const lateId = newId();
        await motor.rt.store.append(streamName('message', lateId), [toEventData(newId(), {
          type: 'MessageAccepted', data: { ...(accepted.data as MessageAccepted), messageId: lateId },
        }, { actor: 'test' })], { expectedRevision: 'no_stream' });
        const outcome = await delivered(lateId);
        await dispatcherPast(outcome.position);
      } finally {
        await dispatcher.stop();
      }
      expect(await deliveriesOf(id)).to.deep.equal([]);
      // What it knew of the block's messages (metadata included) is forgotten.
      expect(await motor.rt.db.withSchema(WEBHOOK_DISPATCH_SCHEMA).table('messages').where({ motor_block_id: id })).to.deep.equal([]);
    });
  });
});
