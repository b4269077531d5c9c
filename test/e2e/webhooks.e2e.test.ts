import { expect } from 'chai';
import type { BootstrapResult } from '../../commands/admin/bootstrap';
import { createWebhook, deleteWebhook } from '../../commands/webhooks/webhooks';
import { streamName } from '../../domain/eventStore';
import { toEventData } from '../../domain/events';
import { WebhookDispatcher, WEBHOOK_DISPATCH_SCHEMA } from '../../workers/webhooks/dispatcher';
import { attemptDelivery, createWebhookQueue } from '../../workers/webhooks/worker';
import { startDnsServer, type TestDnsServer } from '../support/dnsServer';
import { startSmtpSink, type SmtpSink } from '../support/smtpSink';
import { eventually, getJson, postJson, startTestMotor, type TestMotor } from '../support/motor';
import { startWebhookReceiver, verifiesWebhook } from '../support/webhookReceiver';

/**
 * Outgoing webhooks end to end (docs/WEBHOOKS.md): management routes with their scopes and errors,
 * then real sends whose outcomes reach an HTTP receiver on loopback, signed, retried on failure,
 * and readable in the deliveries and stats routes.
 */
describe('webhooks (e2e)', function () {
  this.timeout(90_000);
  let dns: TestDnsServer;
  let mx: SmtpSink;
  let motor: TestMotor;
  let receiver: Awaited<ReturnType<typeof startWebhookReceiver>>;
  let block: BootstrapResult;
  let senderDomain: string;
  let manage: string;

  before(async () => {
    dns = await startDnsServer({
      'rcpt.test': { MX: [{ exchange: 'mx.rcpt.test', priority: 10 }] },
      'mx.rcpt.test': { A: ['127.0.0.1'] },
    });
    mx = await startSmtpSink({ rcpt: (r) => (r.toLowerCase().startsWith('bounce') ? { code: 550, message: '5.1.1 no such user' } : 250) });
    receiver = await startWebhookReceiver();
    motor = await startTestMotor({
      env: {
        DNS_SERVERS: dns.address, MX_PORT: String(mx.port), DELIVERY_RETRY_SCHEDULE: '1,1,1',
        WEBHOOK_ALLOW_PRIVATE_URLS: 'true', WEBHOOK_RETRY_SCHEDULE: '1,1', WEBHOOK_TIMEOUT_SECONDS: '5',
      },
    });
    block = await motor.bootstrap({ trustDns: true });
    senderDomain = block.dnsRecords.find((r) => r.purpose === 'spf')!.name;
    for (const r of block.dnsRecords) dns.addRecords(r.name, { TXT: [r.value] });
    manage = await motor.token(block, ['webhooks.manage', 'logs.read']);
  });
  after(async () => {
    await motor?.close();
    await receiver?.close();
    await mx?.close();
    await dns?.close();
  });

  const api = (path: string) => `${motor.baseUrl}/api/public/v1/motor-blocks/${block.motorBlockId}${path}`;
  const auth = (token = manage) => ({ authorization: `Bearer ${token}` });
  const put = async (path: string, body: unknown, token = manage) => {
    const res = await fetch(api(path), { method: 'PUT', headers: { 'content-type': 'application/json', ...auth(token) }, body: JSON.stringify(body) });
    return { status: res.status, body: await res.json() as any }; // eslint-disable-line @typescript-eslint/no-explicit-any
  };
  const del = async (path: string) => {
    const res = await fetch(api(path), { method: 'DELETE', headers: auth() });
    return { status: res.status, body: await res.json() as any }; // eslint-disable-line @typescript-eslint/no-explicit-any
  };
  const create = async (url: string, events?: string[]) => {
    const r = await postJson(api('/webhooks'), { url, ...(events ? { events } : {}) }, auth());
    expect(r.status, JSON.stringify(r.body)).to.equal(201);
    return r.body.data as { id: string; secret: string; events: string[] };
  };
  const send = async (to: string, metadata: Record<string, string> = {}) => {
    const r = await postJson(`${motor.baseUrl}/v1/send`, { from: `app@${senderDomain}`, to, subject: 'Hi', text: 'Hello', metadata }, { 'X-Api-Key': block.apiKey });
    expect(r.status, JSON.stringify(r.body)).to.equal(200);
    return r.body.data.id as string;
  };
  /**
   * The WebhookDeliveryQueued a job comes from (an attempt appends after it; a delivery without one
   * is gone), for a test that runs the attempts itself: the queue's job is parked first (delayed an
   * hour, so the dispatcher's add is a no-op), and the running worker never takes it.
   */
  const queueDelivery = async (job: { deliveryId: string; webhookId: string; motorBlockId: string; event: 'webhook.test'; payload: Record<string, unknown> }) => {
    const queue = createWebhookQueue(motor.rt.redisUrl, motor.rt.queuePrefix);
    try {
      await queue.add('webhook', job, { jobId: job.deliveryId, delay: 3600_000 });
    } finally {
      await queue.close();
    }
    await motor.rt.store.append(streamName('webhookDelivery', job.deliveryId), [toEventData(job.deliveryId, {
      type: 'WebhookDeliveryQueued', data: { ...job, messageId: null, queuedAt: new Date().toISOString() },
    }, { actor: 'test' })], { expectedRevision: 'no_stream' });
  };
  const deliveries = async (webhookId: string) => (await getJson(api(`/webhooks/${webhookId}/deliveries`), auth())).body.data.deliveries as any[]; // eslint-disable-line @typescript-eslint/no-explicit-any

  describe('management', () => {
    it('creates with all six events by default, shows the secret once, lists, updates and deletes', async () => {
      const w = await create(receiver.url('/ok'));
      expect(w.secret).to.match(/^whsec_[A-Za-z0-9_-]{43}$/);
      expect(w.events).to.deep.equal(['message.processed', 'message.deferred', 'message.delivered', 'message.bounced', 'message.failed', 'message.complained']);

      const list = await getJson(api('/webhooks'), auth());
      expect(list.status).to.equal(200);
      const listed = list.body.data.find((x: { id: string }) => x.id === w.id);
      expect(listed).to.include({ url: receiver.url('/ok'), enabled: true });
      expect(JSON.stringify(list.body)).not.to.include(w.secret);

      const updated = await put(`/webhooks/${w.id}`, { events: ['message.bounced', 'message.delivered', 'message.bounced'], enabled: false });
      expect(updated.status).to.equal(200);
      expect(updated.body.data).to.include({ enabled: false, url: receiver.url('/ok') });
      expect(updated.body.data.events).to.deep.equal(['message.delivered', 'message.bounced']);

      expect((await del(`/webhooks/${w.id}`)).body.data).to.deep.equal({ id: w.id, deleted: true });
      expect((await getJson(api('/webhooks'), auth())).body.data.map((x: { id: string }) => x.id)).not.to.include(w.id);
      expect((await put(`/webhooks/${w.id}`, { enabled: true })).status).to.equal(404);
      expect((await del(`/webhooks/${w.id}`)).status).to.equal(404);
    });

    it('refuses bad urls, bad events and bad bodies with 400 and a code', async () => {
      for (const url of [undefined, '', 'ftp://x.test/hook', 'not a url', 'https://user:pw@x.test/hook', 'https://x.test/a#frag', 'https://x.test/a#', `https://x.test/${'a'.repeat(2100)}`, 42]) {
        const r = await postJson(api('/webhooks'), { url }, auth());
        expect(r.status, String(url)).to.equal(400);
        expect(r.body.code).to.equal('invalid_webhook_url');
      }
      for (const events of [[], ['message.opened'], 'message.delivered', [42]]) {
        const r = await postJson(api('/webhooks'), { url: receiver.url('/ok'), events }, auth());
        expect(r.status, JSON.stringify(events)).to.equal(400);
        expect(r.body.code).to.equal('invalid_webhook_events');
      }
      const w = await create(receiver.url('/ok'));
      expect((await put(`/webhooks/${w.id}`, {})).body.code).to.equal('validation_error');
      expect((await put(`/webhooks/${w.id}`, { enabled: 'yes' })).body.code).to.equal('validation_error');
      expect((await put('/webhooks/not-a-uuid', { enabled: true })).body.code).to.equal('invalid_id');
      expect((await getJson(api(`/webhooks/${w.id}/deliveries?limit=201`), auth())).status).to.equal(400);
      expect((await getJson(api(`/webhooks/${w.id}/stats?hours=0`), auth())).status).to.equal(400);
      // A number not written in decimal digits is malformed, as ?limit=abc is (it used to be read: 1e1 as 10, +1 as 1).
      for (const bad of ['limit=1e1', 'limit=%2B1', 'limit=1.0', 'limit=abc']) {
        const r = await getJson(api(`/webhooks/${w.id}/deliveries?${bad}`), auth());
        expect([r.status, r.body.code], bad).to.deep.equal([400, 'invalid_query']);
      }
      expect((await getJson(api(`/webhooks/${w.id}/stats?hours=2e1`), auth())).body.code).to.equal('invalid_query');
      expect((await getJson(api(`/webhooks/${w.id}/deliveries?limit=10`), auth())).status).to.equal(200);
      await del(`/webhooks/${w.id}`);
    });

    it('a body that is none, not a JSON object, or with a field other than url, events, enabled is 422 validation_error, as on the other public write routes', async () => {
      const w = await create(receiver.url('/ok'));
      const listed = async () => ((await getJson(api('/webhooks'), auth())).body.data as Array<{ id: string; url: string; updatedAt: string }>);
      const before = await listed();
      const raw = async (method: 'POST' | 'PUT', path: string, body?: string) => {
        const res = await fetch(api(path), { method, headers: { ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...auth() }, body });
        return [res.status, ((await res.json()) as { code: string }).code];
      };
      for (const [method, path] of [['POST', '/webhooks'], ['PUT', `/webhooks/${w.id}`]] as const) {
        for (const body of [undefined, '[]', `[${JSON.stringify({ url: receiver.url('/ok') })}]`, JSON.stringify({ url: receiver.url('/ok'), secret: 'mine' })]) {
          expect(await raw(method, path, body), `${method} ${body}`).to.deep.equal([422, 'validation_error']);
        }
      }
      expect(await listed(), 'nothing created or changed').to.deep.equal(before);
      await del(`/webhooks/${w.id}`);
    });

    it('takes the block id and the webhook id in capitals as the same block and endpoint (the block was 403 motor_block_forbidden, the endpoint 404 webhook_not_found)', async () => {
      const w = await create(receiver.url('/ok'));
      const caps = (path: string) => `${motor.baseUrl}/api/public/v1/motor-blocks/${block.motorBlockId.toUpperCase()}/webhooks${path}`;
      const call = async (method: string, path: string, body?: unknown) => {
        const res = await fetch(caps(path), { method, headers: { ...auth(), ...(body === undefined ? {} : { 'content-type': 'application/json' }) }, body: body === undefined ? undefined : JSON.stringify(body) });
        const answer = { status: res.status, body: await res.json() as any }; // eslint-disable-line @typescript-eslint/no-explicit-any
        return [answer.status, answer.body.code ?? null, answer] as const;
      };
      const id = w.id.toUpperCase();
      // The endpoint in capitals under the block as stored, then both in capitals.
      const paused = await put(`/webhooks/${id}`, { enabled: false });
      expect([paused.status, paused.body.code ?? null], JSON.stringify(paused.body)).to.deep.equal([200, null]);
      expect(paused.body.data).to.include({ id: w.id, enabled: false });
      const listed = await call('GET', '');
      expect(listed.slice(0, 2), JSON.stringify(listed[2].body)).to.deep.equal([200, null]);
      expect(listed[2].body.data.map((x: { id: string }) => x.id)).to.include(w.id);
      const updated = await call('PUT', `/${id}`, { enabled: true });
      expect(updated.slice(0, 2), JSON.stringify(updated[2].body)).to.deep.equal([200, null]);
      expect(updated[2].body.data).to.include({ id: w.id, enabled: true });
      expect((await call('POST', `/${id}/test`)).slice(0, 2)).to.deep.equal([202, null]);
      expect((await call('GET', `/${id}/deliveries`)).slice(0, 2)).to.deep.equal([200, null]);
      expect((await call('GET', `/${id}/stats`)).slice(0, 2)).to.deep.equal([200, null]);
      const removed = await call('DELETE', `/${id}`);
      expect(removed.slice(0, 2), JSON.stringify(removed[2].body)).to.deep.equal([200, null]);
      expect(removed[2].body.data).to.deep.equal({ id: w.id, deleted: true });
      expect((await getJson(api('/webhooks'), auth())).body.data.map((x: { id: string }) => x.id)).not.to.include(w.id);
    });

    it('checks scopes and the block: webhooks.read reads, only webhooks.manage changes, another block is 403', async () => {
      const reader = await motor.token(block, ['webhooks.read']);
      expect((await getJson(api('/webhooks'), auth(reader))).status).to.equal(200);
      const denied = await postJson(api('/webhooks'), { url: receiver.url('/ok') }, auth(reader));
      expect(denied.status).to.equal(403);
      const logsOnly = await motor.token(block, ['logs.read']);
      expect((await getJson(api('/webhooks'), auth(logsOnly))).status).to.equal(403);
      const other = await motor.bootstrap({ email: 'other@example.test' });
      const otherToken = await motor.token(other, ['webhooks.manage']);
      expect((await getJson(api('/webhooks'), auth(otherToken))).status).to.equal(403);
      expect((await getJson(api('/webhooks'))).status).to.equal(401);
    });

    it('with the SSRF guard on, refuses at once a URL that names a loopback or private address', async () => {
      const deps = { store: motor.rt.store, db: motor.rt.db, logger: motor.rt.logger, metrics: motor.rt.metrics, keys: motor.rt.keys, clock: motor.rt.clock, allowPrivateAddresses: false };
      const caller = { accountId: block.accountId, motorBlockId: block.motorBlockId, actor: 'test' };
      for (const url of ['http://127.0.0.1:9/x', 'https://[::1]/x', 'http://10.1.2.3/x', 'http://169.254.169.254/latest', 'http://localhost:8080/', 'http://a.localhost/', 'http://[::ffff:127.0.0.1]/']) {
        const err = await createWebhook(deps, caller, { url }).then(() => null, (e: { code: string }) => e);
        expect(err?.code, url).to.equal('invalid_webhook_url');
      }
      const ok = await createWebhook(deps, caller, { url: 'https://93.184.216.34/hook' });
      await deleteWebhook(deps, caller, ok.webhook.id);
    });

    it('keeps at most 10 webhooks per block (409 webhook_limit)', async () => {
      const ids: string[] = [];
      const live = (await getJson(api('/webhooks'), auth())).body.data.length as number;
      for (let i = live; i < 10; i++) ids.push((await create(receiver.url(`/ok?n=${i}`))).id);
      const r = await postJson(api('/webhooks'), { url: receiver.url('/ok') }, auth());
      expect(r.status).to.equal(409);
      expect(r.body.code).to.equal('webhook_limit');
      for (const id of ids) await del(`/webhooks/${id}`);
      for (const w of (await getJson(api('/webhooks'), auth())).body.data) await del(`/webhooks/${w.id}`);
    });

    it('holds the limit under concurrent creates: 12 at once on an empty block → ten 201, two 409, no stray secret', async () => {
      for (const w of (await getJson(api('/webhooks'), auth())).body.data) await del(`/webhooks/${w.id}`);
      const keysBefore = Number((await motor.rt.db.withSchema('motor_keys').table('private_keys').count<{ n: string }[]>({ n: '*' }))[0].n);
      const answers = await Promise.all(Array.from({ length: 12 }, (_, i) => postJson(api('/webhooks'), { url: receiver.url(`/ok?race=${i}`) }, auth())));
      const statuses = answers.map((a) => a.status).sort();
      expect(statuses).to.deep.equal([...Array(10).fill(201), 409, 409]);
      expect(answers.filter((a) => a.status === 409).every((a) => a.body.code === 'webhook_limit')).to.equal(true);
      expect((await getJson(api('/webhooks'), auth())).body.data).to.have.length(10);
      const keysAfter = Number((await motor.rt.db.withSchema('motor_keys').table('private_keys').count<{ n: string }[]>({ n: '*' }))[0].n);
      expect(keysAfter - keysBefore).to.equal(10);
      for (const w of (await getJson(api('/webhooks'), auth())).body.data) await del(`/webhooks/${w.id}`);
    });

    it('a create that gets no turn in time: 409 webhook_conflict, nothing appended, no stray secret', async () => {
      const keyCount = async () => Number((await motor.rt.db.withSchema('motor_keys').table('private_keys').count<{ n: string }[]>({ n: '*' }))[0].n);
      const keysBefore = await keyCount();
      const deps = { store: motor.rt.store, db: motor.rt.db, logger: motor.rt.logger, metrics: motor.rt.metrics, keys: motor.rt.keys, clock: motor.rt.clock, allowPrivateAddresses: true, createTurnWaitMs: 300 };
      const caller = { accountId: block.accountId, motorBlockId: block.motorBlockId, actor: 'test' };
      const holder = await motor.rt.db.transaction();
      try {
        // Another create holding the block's turn for longer than this one waits.
        await holder.raw('SELECT pg_advisory_xact_lock(hashtextextended(?, 0))', [`motor.webhook-create:${block.motorBlockId}`]);
        const err = await createWebhook(deps, caller, { url: receiver.url('/ok?busy=1') }).then(() => null, (e: { status: number; code: string }) => e);
        expect([err?.status, err?.code]).to.deep.equal([409, 'webhook_conflict']);
      } finally {
        await holder.rollback();
      }
      expect(await keyCount(), 'the secret made for it is removed').to.equal(keysBefore);
      expect((await getJson(api('/webhooks'), auth())).body.data.map((w: { url: string }) => w.url)).to.not.include(receiver.url('/ok?busy=1'));
    });
  });

  describe('deliveries', () => {
    let all: { id: string; secret: string };
    let bouncesOnly: { id: string; secret: string };

    before(async () => {
      all = await create(receiver.url('/ok'));
      bouncesOnly = await create(receiver.url('/ok?only=bounced'), ['message.bounced']);
    });

    it('posts processed and delivered, signed with the secret, with the message facts', async () => {
      const messageId = await send('user@rcpt.test', { order: 'A-1' });
      const got = await eventually(async () => {
        const mine = receiver.received.filter((r) => r.body.data?.messageId === messageId && r.path === '/ok');
        return mine.length >= 2 ? mine : null;
      }, 30_000);
      expect(got.map((r) => r.body.event).sort()).to.deep.equal(['message.delivered', 'message.processed']);
      for (const r of got) {
        expect(verifiesWebhook(all.secret, r), 'signature').to.equal(true);
        expect(r.headers['content-type']).to.equal('application/json');
        expect(r.headers['x-service-event']).to.equal(r.body.event);
        expect(r.headers['x-service-delivery']).to.equal(r.body.id);
        expect(r.body).to.include({ motorBlockId: block.motorBlockId });
        expect(r.body.data).to.include({ messageId, recipient: 'user@rcpt.test' });
        expect(r.body.data.metadata).to.deep.equal({ order: 'A-1' });
      }
      const delivered = got.find((r) => r.body.event === 'message.delivered')!;
      expect(delivered.body.data.smtpCode).to.equal('250');
      expect(verifiesWebhook(bouncesOnly.secret, delivered), 'another endpoint\'s secret does not verify').to.equal(false);
      expect(receiver.received.filter((r) => r.path === '/ok?only=bounced' && r.body.data?.messageId === messageId)).to.have.length(0);

      const list = await eventually(async () => {
        const d = (await deliveries(all.id)).filter((x) => x.messageId === messageId);
        return d.length === 2 && d.every((x) => x.status === 'delivered') ? d : null;
      });
      expect(list[0]).to.include({ attempts: 1, lastHttpStatus: 200, lastError: null });
      expect(list[0].completedAt).to.be.a('string');
      const stats = (await getJson(api(`/webhooks/${all.id}/stats?hours=1`), auth())).body.data;
      expect(stats).to.include({ hours: 1, failed: 0, failureRate: 0 });
      expect(stats.delivered).to.be.at.least(2);
      expect(stats.latency.attempts).to.be.at.least(2);
      expect(stats.latency.p50Ms).to.be.a('number');
    });

    it('a bounce reaches the endpoint subscribed to bounces only', async () => {
      const messageId = await send('bounce-me@rcpt.test');
      const got = await eventually(async () => receiver.received.find((r) => r.path === '/ok?only=bounced' && r.body.data?.messageId === messageId), 30_000);
      expect(got.body.event).to.equal('message.bounced');
      expect(got.body.data).to.include({ status: 'bounced', smtpCode: '550' });
      expect(verifiesWebhook(bouncesOnly.secret, got)).to.equal(true);
    });

    it('retries a failed attempt with the same delivery id and body until it is delivered', async () => {
      const flaky = await create(receiver.url('/flaky'), ['message.delivered']);
      const messageId = await send('user@rcpt.test');
      const [d] = await eventually(async () => {
        const list = (await deliveries(flaky.id)).filter((x) => x.messageId === messageId);
        return list.length === 1 && list[0].status === 'delivered' ? list : null;
      }, 30_000);
      expect(d).to.include({ attempts: 2, lastHttpStatus: 200 });
      const posts = receiver.received.filter((r) => r.path === '/flaky' && r.body.id === d.id);
      expect(posts.map((p) => p.headers['x-service-attempt'])).to.deep.equal(['1', '2']);
      expect(posts[0].raw).to.equal(posts[1].raw);
      await del(`/webhooks/${flaky.id}`);
    });

    it('gives up after the last scheduled attempt: failed, with the last answer, in the stats', async () => {
      const down = await create(receiver.url('/down'), ['message.delivered']);
      const messageId = await send('user@rcpt.test');
      const [d] = await eventually(async () => {
        const list = (await deliveries(down.id)).filter((x) => x.messageId === messageId);
        return list.length === 1 && list[0].status === 'failed' ? list : null;
      }, 30_000);
      expect(d).to.include({ attempts: 3, lastHttpStatus: 503, lastError: 'http_503', lastResponseBody: 'maintenance', nextAttemptAt: null });
      const stats = (await getJson(api(`/webhooks/${down.id}/stats`), auth())).body.data;
      expect(stats).to.include({ hours: 24, delivered: 0, failed: 1, failureRate: 100 });
      expect(stats.latency.attempts).to.equal(3);
      await del(`/webhooks/${down.id}`);
    });

    it('POST .../test queues a signed webhook.test delivery (202), also to a disabled endpoint', async () => {
      const w = await create(receiver.url('/ok?test=1'));
      expect((await put(`/webhooks/${w.id}`, { enabled: false })).status).to.equal(200);
      const r = await postJson(api(`/webhooks/${w.id}/test`), {}, auth());
      expect(r.status).to.equal(202);
      // Answered once the read model shows it: the next GET lists the delivery.
      expect((await deliveries(w.id)).map((x) => x.id), 'listed at once').to.include(r.body.data.deliveryId);
      const got = await eventually(async () => receiver.received.find((x) => x.body.id === r.body.data.deliveryId), 20_000);
      expect(got.body).to.include({ event: 'webhook.test', motorBlockId: block.motorBlockId });
      expect(verifiesWebhook(w.secret, got)).to.equal(true);
      const d = await eventually(async () => (await deliveries(w.id)).find((x) => x.status === 'delivered'));
      expect(d).to.include({ id: r.body.data.deliveryId, event: 'webhook.test' });
      await del(`/webhooks/${w.id}`);
    });

    it('a disabled endpoint gets nothing; re-enabled, it gets the next message', async () => {
      const w = await create(receiver.url('/ok?paused=1'), ['message.delivered']);
      await put(`/webhooks/${w.id}`, { enabled: false });
      const before = await send('user@rcpt.test');
      // The endpoint subscribed to everything hears of the delivery: the dispatcher is past it.
      await eventually(async () => receiver.received.find((r) => r.path === '/ok' && r.body.data?.messageId === before && r.body.event === 'message.delivered'), 30_000);
      await put(`/webhooks/${w.id}`, { enabled: true });
      const after = await send('user@rcpt.test');
      await eventually(async () => receiver.received.find((r) => r.path === '/ok?paused=1' && r.body.data?.messageId === after), 30_000);
      expect(receiver.received.filter((r) => r.path === '/ok?paused=1' && r.body.data?.messageId === before)).to.have.length(0);
      await del(`/webhooks/${w.id}`);
    });

    it('a second dispatcher replaying the log from zero queues and posts nothing new', async () => {
      const count = async () => Number((await motor.rt.db.raw('SELECT count(*) AS n FROM rm_webhooks.deliveries')).rows[0].n);
      const posts = receiver.received.length;
      const rows = await count();
      const queue = createWebhookQueue(motor.rt.redisUrl, motor.rt.queuePrefix);
      const abort = new AbortController();
      const replay = new WebhookDispatcher(motor.rt.db, motor.rt.store, queue, motor.rt.logger, { name: 'webhook-replay-test', jobOptions: { attempts: 3 } });
      await motor.rt.db.withSchema(WEBHOOK_DISPATCH_SCHEMA).table('targets').delete();
      const run = replay.run(abort.signal);
      await eventually(async () => {
        const row = await motor.rt.db.table('motor_workers.checkpoints').where({ name: 'webhook-replay-test' }).first('position');
        const head = await motor.rt.db.table('motor_workers.checkpoints').where({ name: 'webhook-dispatcher' }).first('position');
        return row && head && row.position === head.position;
      }, 20_000);
      abort.abort();
      await run;
      await queue.close();
      await new Promise((r) => setTimeout(r, 1500));
      expect(await count()).to.equal(rows);
      expect(receiver.received.length).to.equal(posts);
    });

    it('a job run again after its worker died past recording an attempt numbers the next one after it (its record is not dropped as a repeat)', async () => {
      const w = await create(receiver.url('/flaky'));
      const deps = {
        store: motor.rt.store, db: motor.rt.db, keys: motor.rt.keys, clock: motor.rt.clock, logger: motor.rt.logger, metrics: motor.rt.metrics,
        settings: { retrySchedule: [60], timeoutSeconds: 2, concurrency: 1, allowPrivateAddresses: true, disableAfterDays: 0 },
      };
      const job = { deliveryId: '0194b3c0-0000-7000-8000-000000000002', webhookId: w.id, motorBlockId: block.motorBlockId, event: 'webhook.test' as const, payload: { id: 'y' } };
      await queueDelivery(job);
      expect(await attemptDelivery(deps, job, 1), 'the 500 of the first POST').to.equal('retrying');
      // The worker died before BullMQ heard of it: the job runs again with the same attempt count.
      expect(await attemptDelivery(deps, job, 1)).to.equal('delivered');
      const posts = receiver.received.filter((r) => r.headers['x-service-delivery'] === job.deliveryId);
      expect(posts.map((r) => r.headers['x-service-attempt'])).to.deep.equal(['1', '2']);
      const attempts = (await motor.rt.store.readStream(`webhookDelivery-${job.deliveryId}`)).slice(1).map((e) => e.data as { attempt: number; outcome: string });
      expect(attempts.map((a) => [a.attempt, a.outcome])).to.deep.equal([[1, 'retrying'], [2, 'delivered']]);
      await del(`/webhooks/${w.id}`);
    });

    it('refuses loopback destinations when private addresses are not allowed (SSRF guard)', async () => {
      const w = await create(receiver.url('/ok?ssrf=1'));
      const posts = receiver.received.length;
      const job = { deliveryId: '0194b3c0-0000-7000-8000-000000000001', webhookId: w.id, motorBlockId: block.motorBlockId, event: 'webhook.test' as const, payload: { id: 'x' } };
      await queueDelivery(job);
      const outcome = await attemptDelivery({
        store: motor.rt.store, db: motor.rt.db, keys: motor.rt.keys, clock: motor.rt.clock, logger: motor.rt.logger, metrics: motor.rt.metrics,
        settings: { retrySchedule: [], timeoutSeconds: 2, concurrency: 1, allowPrivateAddresses: false, disableAfterDays: 0 },
      }, job, 1);
      expect(outcome).to.equal('failed');
      expect(receiver.received.length).to.equal(posts);
      const events = (await motor.rt.store.readStream('webhookDelivery-0194b3c0-0000-7000-8000-000000000001')).slice(1);
      expect(events.map((e) => (e.data as { error: string }).error)).to.deep.equal(['blocked_address']);
      await del(`/webhooks/${w.id}`);
    });
  });
});
