import { expect } from 'chai';
import type { DirectoryCache } from '../../commands/directoryCache.js';
import { streamName } from '../../domain/eventStore.js';
import { toEventData, type DeliveryDeferred, type MessageAccepted } from '../../domain/events.js';
import { newId } from '../../domain/ids.js';
import type { KeyStore } from '../../infra/keys/keyStore.js';
import { createLogger } from '../../infra/logger.js';
import { createMetrics } from '../../infra/metrics.js';
import { generateDkimKey } from '../../workers/delivery/dkim.js';
import { createResolver } from '../../workers/delivery/dns.js';
import { deliverRound, type DeliveryDeps } from '../../workers/deliveryWorker.js';
import { jobsFor } from '../../workers/enqueuer.js';
import { startDnsServer, type TestDnsServer } from '../support/dnsServer.js';
import { createEventStore } from '../../infra/eventstore/index.js';
import type { EventStore } from '../../domain/eventStore.js';
import { createTestDatabase } from '../support/db.js';
import { startSmtpSink, type SinkReply, type SmtpSink } from '../support/smtpSink.js';

/** deliverRound (workers/deliveryWorker.ts) on the PostgreSQL event store, against a loopback DNS server and SMTP sink. */
describe('delivery round (int)', function () {
  this.timeout(20_000);

  let dns: TestDnsServer;
  let sink: SmtpSink;
  let reply: (recipient: string) => SinkReply = () => 250;
  let deps: DeliveryDeps;
  let clock: Date;
  let store: EventStore;
  let dropDb: () => Promise<void>;

  before(async () => {
    const t = await createTestDatabase('deliveryround');
    dropDb = t.drop;
    store = await createEventStore({ databaseUrl: t.url, eventstoreUrl: null });
    dns = await startDnsServer({ 'rcpt.test': { MX: [{ exchange: 'mx.rcpt.test', priority: 10 }] }, 'mx.rcpt.test': { A: ['127.0.0.1'] } });
    sink = await startSmtpSink({ starttls: false, rcpt: (r) => reply(r) });
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
    await sink.close();
    await dns.close();
    await store.close();
    await dropDb();
  });
  beforeEach(() => {
    clock = new Date('2026-11-24T12:00:00.000Z');
  });

  async function accept(to: string[]): Promise<string> {
    const messageId = newId();
    const data: MessageAccepted = {
      messageId, motorBlockId: newId(), accountId: newId(), domainId: newId(), from: 'news@sender.test', fromName: null, to, subject: 'Hi',
      text: 'Hello', html: null, headers: {}, smtpMessageId: `${messageId}@sender.test`, idempotencyKey: null, source: 'http', metadata: {},
      acceptedAt: clock.toISOString(),
    };
    await store.append(streamName('message', messageId), [toEventData(newId(), { type: 'MessageAccepted', data })], { expectedRevision: 'no_stream' });
    return messageId;
  }

  it('recipients deferred in one round come back together: the retry job (one per attempt) takes them all', async () => {
    const to = ['a@rcpt.test', 'b@rcpt.test', 'c@rcpt.test', 'd@rcpt.test'];
    const messageId = await accept(to);
    reply = () => ({ code: 450, message: '4.2.0 Greylisted, come back later' });
    expect(await deliverRound(deps, messageId)).to.deep.equal({ kind: 'attempted' });

    const events = await store.readStream(streamName('message', messageId));
    const deferred = events.filter((e) => e.type === 'DeliveryDeferred');
    expect(deferred).to.have.length(4);
    // The enqueuer queues one job per message and attempt: the first of these wins, the others are duplicates.
    const jobs = jobsFor(deferred, clock);
    expect(new Set(jobs.map((j) => j.opts.jobId)).size).to.equal(1);

    // That job runs at its time: every recipient it was queued for must be due then.
    clock = new Date(clock.getTime() + jobs[0].opts.delay!);
    reply = () => 250;
    expect(await deliverRound(deps, messageId)).to.deep.equal({ kind: 'attempted' });
    const after = (await store.readStream(streamName('message', messageId))).slice(events.length);
    const delivered = after.filter((e) => e.type === 'DeliverySucceeded').map((e) => (e.data as DeliveryDeferred).recipient);
    expect(delivered.sort()).to.deep.equal(to);
  });
});
