import { randomUUID } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { expect } from 'chai';
import { simpleParser, type ParsedMail } from 'mailparser';
import { provisionSystemBlock, sendSystemMail, systemIds, type SystemMail, type SystemMailDeps } from '../../../commands/auth/systemMail';
import { createWebhook, updateWebhook, type WebhookDeps } from '../../../commands/webhooks/webhooks';
import { streamName, type RecordedEvent } from '../../../domain/eventStore';
import { toEventData } from '../../../domain/events';
import type { Clock } from '../../../domain/ids';
import { CHECKPOINTS } from '../../../workers/logEnqueuer';
import { WebhookPauseNotifier, pauseNoticeMail, type PauseNotifierDeps } from '../../../workers/webhooks/pauseNotices';
import { attemptDelivery, createWebhookQueue, type WebhookJob, type WebhookWorkerDeps } from '../../../workers/webhooks/worker';
import { eventually, startSandboxHarness, type SandboxHarness } from '../../sandbox/harness';

const DAY = 86_400_000;
const at = (ms: number): Clock => ({ now: () => new Date(ms) });

/**
 * The mail to the owner of an endpoint paused for failing (docs/WEBHOOKS.md "Failing endpoints"),
 * against a whole Motor whose system mail travels the pipeline to a loopback MX (test/sandbox/harness.ts):
 * the worker pauses an endpoint, the notifier (worker role) mails the owner once, a notifier run
 * again from an earlier checkpoint mails nothing more, and an owner's own pause mails nothing.
 */
describe('webhook pause notices (integration)', function () {
  this.timeout(120_000);
  let h: SandboxHarness;
  let acct: Awaited<ReturnType<SandboxHarness['bootstrapAccount']>>;
  let receiver: Server;
  let receiverUrl: (path: string) => string;

  before(async () => {
    receiver = createServer((req, res) => { req.resume(); req.on('end', () => res.writeHead(503).end('down for maintenance')); });
    await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', () => r()));
    const port = (receiver.address() as AddressInfo).port;
    receiverUrl = (path) => `http://127.0.0.1:${port}${path}`;
    h = await startSandboxHarness({ WEBHOOK_ALLOW_PRIVATE_URLS: 'true' });
    acct = await h.bootstrapAccount(h.motor.config.defaultPlan.name);
  });
  after(async () => {
    await h?.close();
    await new Promise((r) => { receiver?.closeAllConnections(); receiver?.close(() => r(undefined)); });
  });

  const webhookDeps = (clock: Clock): WebhookDeps => ({
    store: h.motor.rt.store, db: h.motor.rt.db, logger: h.motor.rt.logger, metrics: h.motor.rt.metrics, keys: h.motor.rt.keys, clock, allowPrivateAddresses: true,
  } as WebhookDeps);
  const caller = (a: { accountId: string; motorBlockId: string } = acct) => ({ accountId: a.accountId, motorBlockId: a.motorBlockId, actor: 'test' });
  /** An endpoint made ten days ago (the failure clock runs in days), through the command with a clock that far behind. */
  const createdAgo = async (path: string, a: { accountId: string; motorBlockId: string } = acct) =>
    (await createWebhook(webhookDeps(at(Date.now() - 10 * DAY)), caller(a), { url: receiverUrl(path) })).webhook;
  /** A delivery whose attempt the test runs itself: its queue job is parked an hour, so the running worker never takes it. */
  const queueDelivery = async (webhookId: string, motorBlockId = acct.motorBlockId): Promise<WebhookJob> => {
    const deliveryId = randomUUID();
    const job: WebhookJob = { deliveryId, webhookId, motorBlockId, event: 'message.delivered', payload: { id: deliveryId, event: 'message.delivered' } };
    const queue = createWebhookQueue(h.motor.rt.redisUrl, h.motor.rt.queuePrefix);
    try {
      await queue.add('webhook', job, { jobId: deliveryId, delay: 3600_000 });
    } finally {
      await queue.close();
    }
    await h.motor.rt.store.append(streamName('webhookDelivery', deliveryId), [toEventData(deliveryId, {
      type: 'WebhookDeliveryQueued',
      data: { deliveryId, webhookId, motorBlockId, event: 'message.delivered', messageId: randomUUID(), payload: job.payload, queuedAt: new Date().toISOString() },
    }, { actor: 'test' })], { expectedRevision: 'no_stream' });
    return job;
  };
  const workerDeps = (clock = h.motor.rt.clock): WebhookWorkerDeps => ({
    store: h.motor.rt.store, db: h.motor.rt.db, keys: h.motor.rt.keys, clock, logger: h.motor.rt.logger, metrics: h.motor.rt.metrics,
    settings: { retrySchedule: [], timeoutSeconds: 5, concurrency: 1, allowPrivateAddresses: true, disableAfterDays: 3 },
  });
  /** Pauses the endpoint the way the worker does: a delivery failing for good, ten days into the failure clock. */
  const pauseForFailing = async (webhookId: string, motorBlockId = acct.motorBlockId, clock = h.motor.rt.clock): Promise<{ job: WebhookJob; paused: RecordedEvent }> => {
    const job = await queueDelivery(webhookId, motorBlockId);
    expect(await attemptDelivery(workerDeps(clock), job, 1)).to.equal('failed');
    const paused = (await h.motor.rt.store.readStream(streamName('webhook', webhookId))).filter((e) => e.type === 'WebhookEndpointDisabled').pop();
    expect(paused, 'the endpoint was paused').to.not.equal(undefined);
    return { job, paused: paused! };
  };
  const mailsAbout = async (url: string): Promise<ParsedMail[]> => {
    const parsed = await Promise.all(h.mailsTo(acct.email).map((raw) => simpleParser(raw)));
    return parsed.filter((m) => (m.text ?? '').includes(url));
  };
  const notifierDeps = (): PauseNotifierDeps => ({
    store: h.motor.rt.store, db: h.motor.rt.db, keys: h.motor.rt.keys, quota: h.motor.rt.quota, config: h.motor.config,
    logger: h.motor.rt.logger, metrics: h.motor.rt.metrics, clock: h.motor.rt.clock,
  });
  /**
   * Another notifier whose checkpoint starts at `from` (the position before the events to hand
   * over again), run until its checkpoint is past `until`, then stopped.
   */
  const runFrom = async (name: string, from: string, until: string, options: { send?: (d: SystemMailDeps, m: SystemMail, now: Date) => Promise<string>; retryDelaysMs?: number[] } = {}) => {
    const { db, store } = h.motor.rt;
    await db.table(CHECKPOINTS).insert({ name, position: from }).onConflict('name').merge();
    const abort = new AbortController();
    const running = new WebhookPauseNotifier(notifierDeps(), { name, ...options }).run(abort.signal);
    try {
      await eventually(async () => {
        const row = await db.table(CHECKPOINTS).where({ name }).first('position');
        return row?.position && store.comparePositions(row.position, until) >= 0;
      }, 30_000);
    } finally {
      abort.abort();
      await running;
    }
  };
  /** A position just before `e` in the log: the last event of its stream before it. */
  const positionBefore = async (e: RecordedEvent) => {
    const events = await h.motor.rt.store.readStream(e.streamId);
    return events[events.findIndex((x) => x.id === e.id) - 1].position;
  };

  let paused: { url: string; webhookId: string; event: RecordedEvent };

  it('an endpoint paused for failing: one mail from SYSTEM_MAIL_FROM to the owner, naming block and URL, since when, the last error and how to resume', async () => {
    const w = await createdAgo('/down?notice=1');
    const { job, paused: event } = await pauseForFailing(w.id);
    paused = { url: w.url, webhookId: w.id, event };
    const [mail] = await eventually(async () => {
      const found = await mailsAbout(w.url);
      return found.length > 0 ? found : null;
    }, 30_000);
    expect(mail.from?.value[0].address).to.equal(h.motor.config.systemMailFrom);
    expect(mail.to && !Array.isArray(mail.to) ? mail.to.value[0].address : null).to.equal(acct.email);
    expect(mail.subject).to.include('Webhook endpoint paused').and.include(w.url);
    const text = mail.text ?? '';
    const since = (event.data as { since: string }).since;
    expect(since).to.equal(w.createdAt);
    for (const part of [
      w.url, w.id, acct.motorBlockId, `since ${since}`, job.deliveryId, 'HTTP 503', 'down for maintenance',
      `/motor-blocks/${acct.motorBlockId}/webhooks/${w.id}/test`, `/webhooks/${w.id}/rotate-secret`, '{"enabled": true}',
    ]) expect(text, part).to.include(part);
    const metrics = await h.motor.rt.metrics.webhookPauseNotices.get();
    expect(metrics.values.find((v) => v.labels.outcome === 'sent')?.value).to.equal(1);
  });

  it('the subject names the block too', async () => {
    const [mail] = await mailsAbout(paused.url);
    const block = (await h.motor.rt.store.readStream(streamName('motorBlock', acct.motorBlockId)))[0].data as { name: string };
    expect(mail.subject).to.equal(pauseNoticeMail({
      webhookId: paused.webhookId, url: paused.url, motorBlockId: acct.motorBlockId, blockName: block.name, ownerEmail: acct.email,
      since: '', disabledAt: '', deliveryId: '', lastAttempt: null,
    }, h.motor.config.publicBaseUrl).subject);
    expect(mail.subject).to.include(`"${block.name}"`);
  });

  it('a long block name is cut whole: an emoji at the cut is not split into a lone surrogate', () => {
    const facts = { webhookId: randomUUID(), url: 'https://hooks.example.test/x', motorBlockId: randomUUID(), ownerEmail: 'o@example.test', since: '', disabledAt: '', deliveryId: '', lastAttempt: null };
    const { subject } = pauseNoticeMail({ ...facts, blockName: `${'a'.repeat(79)}😀 and more` }, 'https://motor.example.test');
    expect(subject.isWellFormed()).to.equal(true);
    expect(subject).to.include(`"${'a'.repeat(79)}…"`);
  });

  it('the same pause handed over again (a notifier restarted from an earlier checkpoint) mails nothing more', async () => {
    const replayedAt = Date.now();
    const sent: string[] = [];
    await runFrom('webhook-pause-notices-replay', await positionBefore(paused.event), paused.event.position, {
      send: async (deps, mail, now) => {
        const messageId = await sendSystemMail(deps, mail, now);
        sent.push(messageId);
        return messageId;
      },
    });
    // Handed to the send again, which answered the message accepted the first time.
    expect(sent).to.have.length(1);
    const accepted = (await h.motor.rt.store.readStream(streamName('message', sent[0])))[0];
    expect(accepted.type).to.equal('MessageAccepted');
    expect(Date.parse((accepted.data as { acceptedAt: string }).acceptedAt)).to.be.below(replayedAt);
    // Delivery to the loopback MX takes well under this.
    await new Promise((r) => setTimeout(r, 3000));
    expect(await mailsAbout(paused.url)).to.have.length(1);
  });

  it('an endpoint the owner paused (PUT enabled: false) gets no mail', async () => {
    const own = await createdAgo('/down?notice=owner');
    await updateWebhook(webhookDeps(h.motor.rt.clock), caller(), own.id, { enabled: false });
    // A pause for failing after it, mailed: the notifier, in log order, has passed the owner's pause.
    const w = await createdAgo('/down?notice=after-owner');
    await pauseForFailing(w.id);
    await eventually(async () => (await mailsAbout(w.url)).length > 0, 30_000);
    expect(await mailsAbout(own.url)).to.have.length(0);
    expect((await h.motor.rt.store.readStream(streamName('webhook', own.id))).map((e) => e.type)).to.deep.equal(['WebhookCreated', 'WebhookUpdated']);
  });

  it('a send that keeps failing is tried a few times, then given up; the notices after it still go out', async () => {
    const a = await createdAgo('/down?notice=fail-a');
    const b = await createdAgo('/down?notice=fail-b');
    const first = (await pauseForFailing(a.id)).paused;
    const second = (await pauseForFailing(b.id)).paused;
    const calls: string[] = [];
    await runFrom('webhook-pause-notices-failing', await positionBefore(first), second.position, {
      retryDelaysMs: [10, 10],
      send: async (deps, mail, now) => {
        calls.push(mail.idempotencyKey);
        if (mail.idempotencyKey.endsWith(first.id)) throw new Error('the system mail is down');
        return sendSystemMail(deps, mail, now);
      },
    });
    expect(calls).to.deep.equal([...Array(3).fill(`webhook-paused:${first.id}`), `webhook-paused:${second.id}`]);
    // The running notifier mailed both; the failing one added nothing, the second replayed the same message.
    await eventually(async () => (await mailsAbout(b.url)).length > 0, 30_000);
    await new Promise((r) => setTimeout(r, 2000));
    expect(await mailsAbout(b.url)).to.have.length(1);
  });

  it('a send refused for good (an owner address the send refuses) is not tried again: counted failed at once; the notices after it still go out', async () => {
    const a = await createdAgo('/down?notice=refused-a');
    const b = await createdAgo('/down?notice=refused-b');
    const first = (await pauseForFailing(a.id)).paused;
    const second = (await pauseForFailing(b.id)).paused;
    const failed = async () => (await h.motor.rt.metrics.webhookPauseNotices.get()).values.find((v) => v.labels.outcome === 'failed')?.value ?? 0;
    const failedBefore = await failed();
    const calls: string[] = [];
    await runFrom('webhook-pause-notices-refused', await positionBefore(first), second.position, {
      retryDelaysMs: [10, 10],
      // The real send, refusing the first notice's recipient as it would an owner address that is not
      // one. Under a key of its own: the running notifier may have sent it already, and its key would
      // replay that message before the recipient is looked at.
      send: async (deps, mail, now) => {
        calls.push(mail.idempotencyKey);
        const refused = { ...mail, to: 'not an address', idempotencyKey: `${mail.idempotencyKey}:refused` };
        return sendSystemMail(deps, mail.idempotencyKey.endsWith(first.id) ? refused : mail, now);
      },
    });
    expect(calls).to.deep.equal([`webhook-paused:${first.id}`, `webhook-paused:${second.id}`]);
    expect(await failed()).to.equal(failedBefore + 1);
  });

  it('the system account, a pause too old to mail once only, and a pause resumed since get nothing', async () => {
    const notifier = new WebhookPauseNotifier(notifierDeps());
    // The system block exists once a system mail went out; an endpoint on it has no owner to tell.
    const systemBlockId = await provisionSystemBlock(notifierDeps(), new Date());
    const system = { accountId: systemIds(h.motor.config.systemMailFrom).accountId, motorBlockId: systemBlockId };
    const s = await createdAgo('/down?notice=system', system);
    expect(await notifier.notify((await pauseForFailing(s.id, systemBlockId)).paused)).to.equal('skipped');

    const old = { ...paused.event, data: { ...(paused.event.data as object), disabledAt: new Date(Date.now() - 2 * DAY).toISOString() } };
    expect(await notifier.notify(old)).to.equal('skipped');

    const r = await createdAgo('/down?notice=resumed');
    const { paused: event } = await pauseForFailing(r.id);
    await updateWebhook(webhookDeps(h.motor.rt.clock), caller(), r.id, { enabled: true });
    expect(await notifier.notify(event)).to.equal('skipped');
    // Paused again (the clock restarted at the resume): the later pause is the one to tell, the earlier still nothing.
    const again = (await pauseForFailing(r.id, acct.motorBlockId, at(Date.now() + 4 * DAY))).paused;
    expect(again.id).to.not.equal(event.id);
    expect(await notifier.notify(event)).to.equal('skipped');
    expect(await notifier.notify(again)).to.equal('sent');
  });
});
