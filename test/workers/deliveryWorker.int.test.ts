import { createServer, type Server, type Socket } from 'node:net';
import { expect } from 'chai';
import type { DirectoryCache } from '../../commands/directoryCache.js';
import { streamName } from '../../domain/eventStore.js';
import { toEventData, type DeliveryDeferred, type MessageAccepted } from '../../domain/events.js';
import { IN_FLIGHT_STALE_MS } from '../../domain/message/message.js';
import { newId } from '../../domain/ids.js';
import type { KeyStore } from '../../infra/keys/keyStore.js';
import { createLogger } from '../../infra/logger.js';
import { createMetrics } from '../../infra/metrics.js';
import { generateDkimKey } from '../../workers/delivery/dkim.js';
import { createResolver } from '../../workers/delivery/dns.js';
import { createMtaStsPolicies, deliverRound, startDeliveryWorker, type DeliveryDeps } from '../../workers/deliveryWorker.js';
import { jobsFor } from '../../workers/enqueuer.js';
import { createDeliveryQueue } from '../../workers/queue.js';
import { WaitingByteBudget } from '../../infra/byteBudget.js';
import { startDnsServer, type TestDnsServer } from '../support/dnsServer.js';
import { createEventStore } from '../../infra/eventstore/index.js';
import type { EventStore } from '../../domain/eventStore.js';
import { createTestDatabase, TEST_REDIS_URL } from '../support/db.js';
import { startSmtpSink, type SinkReply, type SmtpSink } from '../support/smtpSink.js';
import { startPolicyServer } from '../support/mtaStsServer.js';
import { issuedCertificate, testCa } from '../support/testCa.js';
import { startUnansweredListener, type UnansweredListener } from '../support/unansweredListener.js';
import { SMTPServer } from 'smtp-server';

/** deliverRound (workers/deliveryWorker.ts) on the PostgreSQL event store, against a loopback DNS server and SMTP sink. */
describe('delivery round (int)', function () {
  this.timeout(20_000);

  let dns: TestDnsServer;
  let sink: SmtpSink;
  let reply: (recipient: string) => SinkReply = () => 250;
  /** The sink's reply to the end of a message (it records the message either way). */
  let dataReply: (recipients: string[]) => SinkReply | Promise<SinkReply> = () => 250;
  let deps: DeliveryDeps;
  let clock: Date;
  let store: EventStore;
  let dropDb: () => Promise<void>;
  /** An MX on 127.0.0.2 (same port as the sink) that accepts connections and never greets. */
  let silent: Server;
  const silentSockets = new Set<Socket>();
  /** An MX on 127.0.0.3 (same port as the sink) where the TCP handshake never completes. */
  let unanswered: UnansweredListener;

  before(async () => {
    const t = await createTestDatabase('deliveryround');
    dropDb = t.drop;
    store = await createEventStore({ databaseUrl: t.url, eventstoreUrl: null });
    dns = await startDnsServer({
      'rcpt.test': { MX: [{ exchange: 'mx.rcpt.test', priority: 10 }] }, 'mx.rcpt.test': { A: ['127.0.0.1'] },
      'slow.test': { MX: [{ exchange: 'mx.slow.test', priority: 10 }] }, 'mx.slow.test': { A: ['127.0.0.2'] },
      'unanswered.test': { MX: [{ exchange: 'mx.unanswered.test', priority: 10 }] }, 'mx.unanswered.test': { A: ['127.0.0.3'] },
      'fast.test': { MX: [{ exchange: 'mx.fast.test', priority: 10 }] }, 'mx.fast.test': { A: ['127.0.0.4'] },
    });
    sink = await startSmtpSink({ starttls: false, rcpt: (r) => reply(r), data: (m) => dataReply(m.envelope.rcptTo) });
    silent = createServer((socket) => {
      silentSockets.add(socket);
      socket.on('close', () => silentSockets.delete(socket));
      socket.on('error', () => undefined);
    });
    await new Promise<void>((resolve) => silent.listen(sink.port, '127.0.0.2', resolve));
    unanswered = await startUnansweredListener({ host: '127.0.0.3', port: sink.port });
    const key = await generateDkimKey('rsa-sha256');
    const directory = { domain: async () => ({ name: 'sender.test', dkimSelector: 's1', dkimAlgorithm: 'rsa-sha256', dkimKeyId: 'k1' }) } as unknown as DirectoryCache;
    const keys = { get: async () => ({ id: 'k1', algorithm: 'rsa-sha256', privateKeyPem: key.privateKeyPem }) } as unknown as KeyStore;
    let draws = 0;
    deps = {
      store, directory, keys, resolver: createResolver([dns.address], { timeoutMs: 500, tries: 1 }),
      logger: createLogger('silent'), metrics: createMetrics(),
      settings: { mxPort: sink.port, allowPrivateAddresses: true, relayUrl: null, hostname: 'out.motor.test', lifetimeSeconds: 3600, timeouts: { connectMs: 2000, greetingMs: 2000, socketMs: 5000 } },
      now: () => clock,
      // The extremes of the jitter, in turn.
      random: () => (draws++ % 2 === 0 ? 0 : 0.999),
    };
  });
  after(async () => {
    for (const socket of silentSockets) socket.destroy();
    await new Promise((r) => silent.close(r));
    await unanswered?.close();
    await sink.close();
    await dns.close();
    await store.close();
    await dropDb();
  });
  beforeEach(() => {
    clock = new Date('2026-11-24T12:00:00.000Z');
    reply = () => 250;
    dataReply = () => 250;
  });

  const received = (messageId: string) => sink.messages.filter((m) => m.raw.toString().includes(`Message-ID: <${messageId}@sender.test>`)).length;

  async function accept(to: string[], content: { text?: string; contentBytes?: number } = {}): Promise<string> {
    const messageId = newId();
    const data: MessageAccepted = {
      messageId, motorBlockId: newId(), accountId: newId(), domainId: newId(), from: 'news@sender.test', fromName: null, to, subject: 'Hi',
      text: content.text ?? 'Hello', html: null, headers: {}, smtpMessageId: `${messageId}@sender.test`, idempotencyKey: null, source: 'http', metadata: {},
      ...(content.contentBytes !== undefined ? { contentBytes: content.contentBytes } : {}),
      acceptedAt: clock.toISOString(),
    };
    await store.append(streamName('message', messageId), [toEventData(newId(), { type: 'MessageAccepted', data })], { expectedRevision: 'no_stream' });
    return messageId;
  }

  /** Holds the sink's reply to the end of every message until the returned function (or `withWorker`'s end) opens it. */
  let openHeld: (() => void) | null = null;
  function holdDataReplies(): () => void {
    let open!: () => void;
    const gate = new Promise<void>((r) => { open = r; });
    dataReply = async (): Promise<SinkReply> => { await gate; return 250; };
    openHeld = open;
    return open;
  }
  const until = async (what: () => Promise<boolean> | boolean) => {
    for (let i = 0; i < 200 && !(await what()); i++) await new Promise((r) => setTimeout(r, 25));
    expect(await what()).to.equal(true);
  };
  /** The store, with the streams read through it listed in `reads`. */
  function countingReads() {
    const reads: string[] = [];
    // A Proxy, not Object.create: every other method runs on the store itself (its state stays its own).
    const counting = new Proxy(store, {
      get: (target, name) => {
        if (name === 'readStream') return (stream: string, o?: Parameters<EventStore['readStream']>[1]) => { reads.push(stream); return target.readStream(stream, o); };
        const v = Reflect.get(target, name, target);
        return typeof v === 'function' ? v.bind(target) : v;
      },
    });
    return { reads, counting };
  }
  const metricValue = async (metrics: ReturnType<typeof createMetrics>, name: string) =>
    Number(/ (\d+)$/m.exec(await metrics.registry.getSingleMetricAsString(name))![1]);
  /**
   * A real BullMQ delivery worker on the real clock, with its own queue prefix and metrics, for
   * `body`; afterwards held replies are let go, the worker closed and its queue removed.
   */
  async function withWorker(
    opts: { store?: EventStore; concurrency: number; settings: Partial<DeliveryDeps['settings']> },
    body: (w: { queue: ReturnType<typeof createDeliveryQueue>; metrics: ReturnType<typeof createMetrics> }) => Promise<void>,
  ): Promise<void> {
    const prefix = `worktest-${newId()}`;
    const queue = createDeliveryQueue(TEST_REDIS_URL, prefix);
    const metrics = createMetrics();
    const worker = startDeliveryWorker({ ...deps, store: opts.store ?? store, metrics, now: () => new Date(), settings: { ...deps.settings, ...opts.settings } }, TEST_REDIS_URL, opts.concurrency, prefix);
    try {
      await body({ queue, metrics });
    } finally {
      openHeld?.();
      await worker.close();
      await queue.obliterate({ force: true }).catch(() => undefined);
      await queue.close();
    }
  }
  /** The first events (MessageAccepted) of the messages, as the enqueuer reads them. */
  const firstEvents = (ids: string[]) => Promise.all(ids.map(async (id) => (await store.readStream(streamName('message', id)))[0]));

  describe('memory for messages being delivered (DELIVERY_MAX_BUFFERED_BYTES)', () => {
    const started = async (messageId: string) => (await store.readStream(streamName('message', messageId))).some((e) => e.type === 'DeliveryStarted');
    it('a round whose message does not fit waits before DeliveryStarted (the size read from the stream); one larger than the budget goes alone', async () => {
      const heldOverTime: number[] = [];
      const memory = new WaitingByteBudget(15_000, (held) => heldOverTime.push(held));
      const withMemory = { ...deps, memory };
      const open = holdDataReplies();
      try {
        const first = await accept(['one@rcpt.test'], { text: 'a'.repeat(10_000) });
        const second = await accept(['two@rcpt.test'], { text: 'b'.repeat(10_000) });
        const huge = await accept(['three@rcpt.test'], { text: 'c'.repeat(40_000) });
        const rounds = [deliverRound(withMemory, first)];
        await until(() => started(first));
        // One after the other: each reads its stream before it waits, so two started together could line up either way.
        rounds.push(deliverRound(withMemory, second));
        await until(() => memory.waitingCount === 1);
        rounds.push(deliverRound(withMemory, huge));
        await until(() => memory.waitingCount === 2);
        expect(memory.held).to.equal(10_000);
        expect(await started(second)).to.equal(false);
        expect(await started(huge)).to.equal(false);
        open();
        expect((await Promise.all(rounds)).map((r) => r.kind)).to.deep.equal(['attempted', 'attempted', 'attempted']);
        expect([received(first), received(second), received(huge)]).to.deep.equal([1, 1, 1]);
        // In turn, each alone: the second did not fit beside the first, the large one goes by itself.
        expect(heldOverTime).to.deep.equal([10_000, 0, 10_000, 0, 40_000, 0]);
      } finally {
        open();
      }
    });

    it('the worker waits for room before it reads a first attempt whose job carries contentBytes, and gives it back after', async () => {
      const { reads, counting } = countingReads();
      await withWorker({ store: counting, concurrency: 4, settings: { maxBufferedBytes: 1_000 } }, async ({ queue, metrics }) => {
        const gauge = (name: string) => metricValue(metrics, name);
        const open = holdDataReplies();
        const ids = [await accept(['m1@rcpt.test'], { contentBytes: 800 }), await accept(['m2@rcpt.test'], { contentBytes: 800 })];
        await queue.addBulk(jobsFor(await firstEvents(ids), new Date()));
        await until(async () => (await gauge('motor_delivery_buffered_bytes')) === 800 && (await gauge('motor_delivery_buffer_waits_total')) === 1);
        await until(async () => (await Promise.all(ids.map(started))).some(Boolean));
        // One round holds its 800 bytes; the other job waits with its message unread.
        const unread = ids.filter((id) => !reads.includes(streamName('message', id)));
        expect(unread).to.have.length(1);
        expect(await started(unread[0])).to.equal(false);
        open();
        await until(async () => (await Promise.all(ids.map(started))).every(Boolean) && ids.every((id) => received(id) === 1));
        await until(async () => (await gauge('motor_delivery_buffered_bytes')) === 0);
      });
    });

    it('the worker waits for room before it reads a retry whose job carries the deferral\'s contentBytes', async () => {
      // Accepted and deferred two hours ago (within its lifetime then): the retries are due now.
      clock = new Date(Date.now() - 2 * 3600_000);
      reply = () => ({ code: 450, message: '4.2.0 Greylisted, come back later' });
      const ids = [await accept(['r1@rcpt.test'], { contentBytes: 800 }), await accept(['r2@rcpt.test'], { contentBytes: 800 })];
      for (const id of ids) expect(await deliverRound(deps, id)).to.deep.equal({ kind: 'attempted' });
      reply = () => 250;
      const deferrals = (await Promise.all(ids.map((id) => store.readStream(streamName('message', id))))).flat().filter((e) => e.type === 'DeliveryDeferred');
      expect(deferrals.map((e) => (e.data as DeliveryDeferred).contentBytes)).to.deep.equal([800, 800]);

      const { reads, counting } = countingReads();
      const retried = async (id: string) => (await store.readStream(streamName('message', id))).filter((e) => e.type === 'DeliveryStarted').length === 2;
      await withWorker({ store: counting, concurrency: 4, settings: { maxBufferedBytes: 1_000 } }, async ({ queue, metrics }) => {
        const gauge = (name: string) => metricValue(metrics, name);
        const open = holdDataReplies();
        await queue.addBulk(jobsFor(deferrals, new Date()));
        await until(async () => (await gauge('motor_delivery_buffered_bytes')) === 800 && (await gauge('motor_delivery_buffer_waits_total')) === 1);
        await until(async () => (await Promise.all(ids.map(retried))).some(Boolean));
        // One retry holds its 800 bytes; the other job waits with its message unread.
        const unread = ids.filter((id) => !reads.includes(streamName('message', id)));
        expect(unread).to.have.length(1);
        expect(await retried(unread[0])).to.equal(false);
        open();
        await until(async () => (await Promise.all(ids.map(retried))).every(Boolean) && ids.every((id) => received(id) === 1));
        await until(async () => (await gauge('motor_delivery_buffered_bytes')) === 0);
      });
    });
  });

  it('a stuck receiver does not take the worker\'s slots: messages for it give up on the full address, other destinations go on', async () => {
    // A second MX on 127.0.0.4 (same port as the sink) that takes everything at once.
    const fastReceived: string[] = [];
    const fast = new SMTPServer({
      authOptional: true, disabledCommands: ['STARTTLS'], logger: false,
      onData(stream, session, done) {
        stream.resume();
        stream.on('end', () => { fastReceived.push(session.envelope.rcptTo[0].address); done(); });
      },
    });
    await new Promise<void>((r) => fast.listen(sink.port, '127.0.0.4', r));
    try {
      // Three slots, one connection per address, one second without a free session = stuck.
      await withWorker({ concurrency: 3, settings: { maxConnectionsPerAddress: 1, maxAddressWaitSeconds: 1 } }, async ({ queue, metrics }) => {
        const open = holdDataReplies();
        // Accepted now: the worker runs on the real clock (a message accepted at the fixed clock would be past its lifetime).
        clock = new Date();
        const stuck = [await accept(['s1@rcpt.test']), await accept(['s2@rcpt.test']), await accept(['s3@rcpt.test']), await accept(['s4@rcpt.test'])];
        const others = [await accept(['f1@fast.test']), await accept(['f2@fast.test'])];
        const started = Date.now();
        await queue.addBulk(jobsFor(await firstEvents(stuck), new Date()));
        await new Promise((r) => setTimeout(r, 100));
        await queue.addBulk(jobsFor(await firstEvents(others), new Date()));
        await until(() => fastReceived.length === 2);
        // With waits bounded only by connect + greeting (4 s here), the two jobs waiting behind the first would hold the other slots that long.
        expect(fastReceived.sort()).to.deep.equal(['f1@fast.test', 'f2@fast.test']);
        expect(Date.now() - started).to.be.below(3000);
        const deferred = async (id: string) => (await store.readStream(streamName('message', id))).find((e) => e.type === 'DeliveryDeferred')?.data as DeliveryDeferred | undefined;
        // Whichever reached the address first holds its one connection; the other three gave up on it.
        await until(async () => (await Promise.all(stuck.map(deferred))).filter(Boolean).length === 3);
        const outcomes = await Promise.all(stuck.map(deferred));
        const holder = stuck.filter((_, i) => !outcomes[i]);
        expect(holder).to.have.length(1);
        for (const d of outcomes.filter(Boolean)) {
          expect(d!.smtpResponse).to.match(/^All 1 connections allowed to 127\.0\.0\.1:\d+ are busy and none came free for \d+ ms$/);
        }
        expect(await metrics.registry.getSingleMetricAsString('motor_delivery_connection_give_ups_total')).to.match(/reason="stalled"} 3$/m);
        open();
        await until(() => received(holder[0]) === 1);
      });
    } finally {
      await new Promise<void>((r) => fast.close(() => r()));
    }
  });

  it('recipients deferred in one round come back together: the one retry job queued for them takes them all', async () => {
    const to = ['a@rcpt.test', 'b@rcpt.test', 'c@rcpt.test', 'd@rcpt.test'];
    const messageId = await accept(to);
    reply = () => ({ code: 450, message: '4.2.0 Greylisted, come back later' });
    expect(await deliverRound(deps, messageId)).to.deep.equal({ kind: 'attempted' });

    const events = await store.readStream(streamName('message', messageId));
    const deferred = events.filter((e) => e.type === 'DeliveryDeferred');
    expect(deferred).to.have.length(4);
    // Deferred together, at one time: the enqueuer queues one job for them (the same job id for each).
    const jobs = jobsFor(deferred, clock);
    expect(new Set(jobs.map((j) => j.opts.jobId)).size).to.equal(1);
    // The retry job carries the message's size (counted from 'Hello': this acceptance has no contentBytes),
    // so the worker can wait for room before reading; a deferral older than the field gives a job without it.
    expect(jobs[0].data).to.deep.equal({ messageId, contentBytes: 5 });
    const { contentBytes: _size, ...old } = deferred[0].data as DeliveryDeferred;
    expect(jobsFor([{ ...deferred[0], data: old }], clock)[0].data).to.deep.equal({ messageId });

    // That job runs at its time: every recipient it was queued for must be due then.
    clock = new Date(clock.getTime() + jobs[0].opts.delay!);
    reply = () => 250;
    expect(await deliverRound(deps, messageId)).to.deep.equal({ kind: 'attempted' });
    const after = (await store.readStream(streamName('message', messageId))).slice(events.length);
    const delivered = after.filter((e) => e.type === 'DeliverySucceeded').map((e) => (e.data as DeliveryDeferred).recipient);
    expect(delivered.sort()).to.deep.equal(to);
  });

  it('two rounds that read the same revision: only one records DeliveryStarted and delivers, the other does nothing', async () => {
    const messageId = await accept(['race@rcpt.test']);
    // Both read the stream before either appends (two jobs for the message fired together): each
    // round's first read returns once the other's has.
    let arrived = 0;
    let bothRead!: () => void;
    const barrier = new Promise<void>((r) => { bothRead = r; });
    const racing = (): DeliveryDeps => {
      let first = true;
      const readStream: EventStore['readStream'] = async (id, o) => {
        const events = await store.readStream(id, o);
        if (first) {
          first = false;
          if (++arrived === 2) bothRead();
          await barrier;
        }
        return events;
      };
      const racingStore = new Proxy(store, {
        get: (target, key) => {
          if (key === 'readStream') return readStream;
          const value = Reflect.get(target, key) as unknown;
          return typeof value === 'function' ? value.bind(target) : value;
        },
      });
      return { ...deps, store: racingStore };
    };
    const results = await Promise.all([deliverRound(racing(), messageId), deliverRound(racing(), messageId)]);
    expect(results.map((r) => r.kind).sort()).to.deep.equal(['attempted', 'wait']);
    expect(received(messageId), 'messages received').to.equal(1);
    const events = await store.readStream(streamName('message', messageId));
    expect(events.map((e) => e.type)).to.deep.equal(['MessageAccepted', 'DeliveryStarted', 'DeliverySucceeded']);
    // The loser looks again later and finds the message done.
    expect(await deliverRound(deps, messageId)).to.deep.equal({ kind: 'done' });
  });

  it('a job that finds only deferrals not yet due completes; only an attempt in flight keeps it parked', async () => {
    const messageId = await accept(['later@rcpt.test']);
    reply = () => ({ code: 450, message: '4.2.0 Greylisted, come back later' });
    expect(await deliverRound(deps, messageId)).to.deep.equal({ kind: 'attempted' });
    // Parked until the deferral's next attempt, it would fire together with the enqueuer's retry job.
    expect(await deliverRound(deps, messageId)).to.deep.equal({ kind: 'not_due' });

    // An attempt in flight (its round may have died): this job is what brings it back once stale.
    const inFlight = await accept(['inflight@rcpt.test']);
    const stream = streamName('message', inFlight);
    await store.append(stream, [toEventData(newId(), { type: 'DeliveryStarted', data: { messageId: inFlight, recipient: 'inflight@rcpt.test', at: clock.toISOString(), attempt: 1 } })], { expectedRevision: 0n });
    expect(await deliverRound(deps, inFlight)).to.deep.equal({ kind: 'wait', at: new Date(clock.getTime() + IN_FLIGHT_STALE_MS) });
  });

  it('a recipient accepted by a fast MX is recorded while another domain of the message still waits for a greeting', async () => {
    clock = new Date();
    const messageId = await accept(['fast1@rcpt.test', 'slow1@slow.test']);
    const realTime = { ...deps, now: () => new Date(), settings: { ...deps.settings, timeouts: { connectMs: 4000, greetingMs: 4000, socketMs: 5000 } } };
    let settled = false;
    const round = deliverRound(realTime, messageId).finally(() => { settled = true; });
    const stream = streamName('message', messageId);
    let recorded = false;
    for (const until = Date.now() + 3000; !recorded && Date.now() < until;) {
      await new Promise((r) => setTimeout(r, 50));
      recorded = (await store.readStream(stream)).some((e) => e.type === 'DeliverySucceeded' && (e.data as DeliveryDeferred).recipient === 'fast1@rcpt.test');
    }
    expect(settled, 'the slow domain was still waiting for its greeting').to.equal(false);
    expect(recorded, 'fast1 delivered and recorded while the round still runs').to.equal(true);
    expect(silentSockets.size, 'connected to the silent MX').to.equal(1);

    expect(await round).to.deep.equal({ kind: 'attempted' });
    const events = await store.readStream(stream);
    expect(events.map((e) => `${e.type} ${(e.data as { recipient?: string }).recipient ?? ''}`.trim())).to.deep.equal([
      'MessageAccepted', 'DeliveryStarted fast1@rcpt.test', 'DeliveryStarted slow1@slow.test', 'DeliverySucceeded fast1@rcpt.test', 'DeliveryDeferred slow1@slow.test',
    ]);
    expect(received(messageId)).to.equal(1);
  });

  it('deferrals of one round recorded at different times each get a retry job due at their next attempt', async () => {
    clock = new Date();
    const messageId = await accept(['grey@rcpt.test', 'slow2@slow.test']);
    reply = () => ({ code: 450, message: '4.2.0 Greylisted, come back later' });
    // The round gives up on the silent MX after 6 s (its greeting timeout), later than the 5 s a retry job takes early recipients.
    const realTime = { ...deps, now: () => new Date(), settings: { ...deps.settings, timeouts: { connectMs: 6000, greetingMs: 6000, socketMs: 7000 } } };
    expect(await deliverRound(realTime, messageId)).to.deep.equal({ kind: 'attempted' });

    const deferred = (await store.readStream(streamName('message', messageId))).filter((e) => e.type === 'DeliveryDeferred');
    expect(deferred.map((e) => (e.data as DeliveryDeferred).recipient)).to.deep.equal(['grey@rcpt.test', 'slow2@slow.test']);
    const [first, second] = deferred.map((e) => Date.parse((e.data as DeliveryDeferred).nextAttemptAt));
    expect(second - first).to.be.above(5000);
    // As BullMQ keeps them: the first job of an id wins.
    const now = Date.now();
    const due = new Map<string, number>();
    for (const j of jobsFor(deferred, new Date(now))) if (!due.has(j.opts.jobId)) due.set(j.opts.jobId, now + j.opts.delay!);
    for (const at of [first, second]) {
      expect([...due.values()].some((t) => Math.abs(t - at) < 1000), `a retry job due at ${new Date(at).toISOString()}`).to.equal(true);
    }
  });

  it('two rounds of one message for different recipients: each records its own outcomes after the other\'s appends', async () => {
    clock = new Date();
    const messageId = await accept(['grey2@rcpt.test', 'slow3@slow.test']);
    let greylisted = true;
    reply = () => (greylisted ? { code: 450, message: '4.2.0 Greylisted, come back later' } : 250);
    const settings = { ...deps.settings, retrySchedule: [1], timeouts: { connectMs: 3000, greetingMs: 3000, socketMs: 5000 } };
    const realTime = { ...deps, now: () => new Date(), settings };
    // Round A: grey2 deferred at once (retry in 1 s), slow3 waits 3 s for a greeting.
    const roundA = deliverRound(realTime, messageId);
    const stream = streamName('message', messageId);
    for (const until = Date.now() + 2000; Date.now() < until;) {
      if ((await store.readStream(stream)).some((e) => e.type === 'DeliveryDeferred')) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    // Round B (grey2's retry job) takes grey2 while A still waits, and delivers it.
    greylisted = false;
    expect(await deliverRound(realTime, messageId)).to.deep.equal({ kind: 'attempted' });
    // A's deferral of slow3 comes after B's appends: it still belongs to A, and lands.
    expect(await roundA).to.deep.equal({ kind: 'attempted' });
    const events = await store.readStream(stream);
    expect(events.map((e) => `${e.type} ${(e.data as { recipient?: string }).recipient ?? ''} ${(e.data as { attempt?: number }).attempt ?? ''}`.trim())).to.deep.equal([
      'MessageAccepted', 'DeliveryStarted grey2@rcpt.test 1', 'DeliveryStarted slow3@slow.test 1', 'DeliveryDeferred grey2@rcpt.test 1',
      'DeliveryStarted grey2@rcpt.test 2', 'DeliverySucceeded grey2@rcpt.test 2', 'DeliveryDeferred slow3@slow.test 1',
    ]);
    expect(received(messageId)).to.equal(1);
  });

  it('the outcome of a round whose attempt another round took over as stale is not recorded', async () => {
    const messageId = await accept(['slow4@slow.test']);
    const settings = { ...deps.settings, timeouts: { connectMs: 2000, greetingMs: 2000, socketMs: 5000 } };
    // Round A hangs at the silent MX; 11 minutes later (its clock) round B takes the attempt over.
    const roundA = deliverRound({ ...deps, settings }, messageId);
    const stream = streamName('message', messageId);
    for (const until = Date.now() + 1000; Date.now() < until;) {
      if ((await store.readStream(stream)).some((e) => e.type === 'DeliveryStarted')) break;
      await new Promise((r) => setTimeout(r, 20));
    }
    const later = new Date(clock.getTime() + IN_FLIGHT_STALE_MS + 60_000);
    const roundB = deliverRound({ ...deps, settings, now: () => later }, messageId);
    expect(await roundA).to.deep.equal({ kind: 'attempted' });
    expect(await roundB).to.deep.equal({ kind: 'attempted' });
    const events = await store.readStream(stream);
    expect(events.map((e) => `${e.type} ${(e.data as { attempt?: number }).attempt ?? ''}`.trim())).to.deep.equal([
      'MessageAccepted', 'DeliveryStarted 1', 'DeliveryStarted 2', 'DeliveryDeferred 2',
    ]);
  });

  it('an MX that never completes the TCP handshake: the recipient deferred at the connect timeout, the reason in its smtpResponse', async () => {
    clock = new Date();
    const messageId = await accept(['nobody@unanswered.test']);
    const settings = { ...deps.settings, timeouts: { connectMs: 500, greetingMs: 15_000, socketMs: 15_000 } };
    const started = Date.now();
    expect(await deliverRound({ ...deps, now: () => new Date(), settings }, messageId)).to.deep.equal({ kind: 'attempted' });
    expect(Date.now() - started, 'the round ended at the connect timeout').to.be.below(3000);

    const events = await store.readStream(streamName('message', messageId));
    const deferred = events.filter((e) => e.type === 'DeliveryDeferred').map((e) => e.data as DeliveryDeferred);
    expect(deferred).to.have.length(1);
    expect(deferred[0]).to.include({ recipient: 'nobody@unanswered.test', smtpCode: null, enhancedCode: null });
    expect(deferred[0].smtpResponse).to.equal(`ETIMEDOUT: Connection timeout: 127.0.0.3:${sink.port} did not answer within 500 ms`);
    expect(Date.parse(deferred[0].nextAttemptAt)).to.be.above(Date.parse(deferred[0].at));
  });

  it('the attempt deadline ends a round whose MX hosts stall: every recipient without a verdict deferred, long before the SMTP timeouts', async () => {
    clock = new Date();
    const messageId = await accept(['stall@rcpt.test', 'slow5@slow.test']);
    // rcpt.test takes the message and never answers its end; slow.test never greets.
    dataReply = () => new Promise<SinkReply>(() => undefined);
    const settings = { ...deps.settings, attemptDeadlineMs: 1500, timeouts: { connectMs: 2000, greetingMs: 15_000, socketMs: 15_000 } };
    const started = Date.now();
    expect(await deliverRound({ ...deps, now: () => new Date(), settings }, messageId)).to.deep.equal({ kind: 'attempted' });
    expect(Date.now() - started, 'the round ended at its deadline').to.be.below(4000);

    const events = await store.readStream(streamName('message', messageId));
    const deferred = events.filter((e) => e.type === 'DeliveryDeferred').map((e) => e.data as DeliveryDeferred);
    expect(deferred.map((d) => d.recipient).sort()).to.deep.equal(['slow5@slow.test', 'stall@rcpt.test']);
    for (const d of deferred) expect(d).to.include({ smtpCode: null }).and.to.have.property('smtpResponse').that.matches(/^Attempt deadline exceeded/);
    // The end of the message was out, unanswered: the MX may have taken it, and it is tried again (at least once).
    expect(received(messageId)).to.equal(1);
  });

  it('MTA-STS: an enforce policy that does not list the MX defers the recipient with the reason; testing mode delivers and counts what enforce would refuse', async () => {
    clock = new Date();
    const policyHost = await startPolicyServer(issuedCertificate(['mta-sts.sts.test', 'mta-sts.ststesting.test']));
    try {
      for (const [domain, mode] of [['sts.test', 'enforce'], ['ststesting.test', 'testing']]) {
        // Both send to the sink's mx.rcpt.test, which offers no STARTTLS.
        dns.setRecords(domain, { MX: [{ exchange: 'mx.rcpt.test', priority: 10 }] });
        dns.setRecords(`_mta-sts.${domain}`, { TXT: ['v=STSv1; id=20261129;'] });
        dns.setRecords(`mta-sts.${domain}`, { A: ['127.0.0.1'] });
        policyHost.setPolicy(`mta-sts.${domain}`, `version: STSv1\nmode: ${mode}\nmx: mx.${domain}\nmx: mx.rcpt.test\nmax_age: 86400\n`);
      }
      policyHost.setPolicy('mta-sts.sts.test', 'version: STSv1\nmode: enforce\nmx: mx.sts.test\nmax_age: 86400\n');
      const metrics = createMetrics();
      const settings = { ...deps.settings, mtaSts: { port: policyHost.port }, tlsCa: testCa().cert.toString() };
      const withSts: DeliveryDeps = { ...deps, metrics, settings, now: () => new Date() };
      withSts.mtaSts = createMtaStsPolicies(withSts);

      const messageId = await accept(['ann@sts.test', 'bob@ststesting.test']);
      expect(await deliverRound(withSts, messageId)).to.deep.equal({ kind: 'attempted' });
      const events = await store.readStream(streamName('message', messageId));
      const deferred = events.filter((e) => e.type === 'DeliveryDeferred').map((e) => e.data as DeliveryDeferred);
      expect(deferred.map((d) => ({ recipient: d.recipient, smtpCode: d.smtpCode, smtpResponse: d.smtpResponse }))).to.deep.equal([
        { recipient: 'ann@sts.test', smtpCode: null, smtpResponse: 'MTA-STS policy of sts.test (enforce): mx.rcpt.test is not a listed MX' },
      ]);
      expect(events.filter((e) => e.type === 'DeliverySucceeded').map((e) => (e.data as { recipient: string }).recipient)).to.deep.equal(['bob@ststesting.test']);
      expect(received(messageId)).to.equal(1);

      const counted = await metrics.registry.getSingleMetricAsString('motor_delivery_mta_sts_total');
      expect(counted).to.include('motor_delivery_mta_sts_total{result="fetched"} 2');
      expect(counted).to.include('motor_delivery_mta_sts_total{result="enforced_refusal"} 1');
      expect(counted).to.include('motor_delivery_mta_sts_total{result="testing_would_fail"} 1');
    } finally {
      await policyHost.close();
    }
  });
});
