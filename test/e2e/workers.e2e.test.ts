import { expect } from 'chai';
import type { BootstrapResult } from '../../commands/admin/bootstrap';
import { createLogger } from '../../infra/logger';
import { createRuntime, startRoles, type Runtime, type StartedRoles } from '../../scripts/runtime';
import { startDnsServer, type TestDnsServer } from '../support/dnsServer';
import { startSmtpSink, type SmtpSink } from '../support/smtpSink';
import { TEST_REDIS_URL } from '../support/db';
import { eventually, getJson, postJson, startTestMotor, type TestMotor } from '../support/motor';

/**
 * Two Motor processes' worth of delivery workers (two runtimes, two enqueuers, two BullMQ workers)
 * on one database and one queue: every message reaches the MX exactly once, both delivered, and
 * one of them fed the queue (the enqueuers' lease).
 */
describe('two workers share the delivery queue (e2e)', function () {
  this.timeout(120_000);
  const N = 200;
  let dns: TestDnsServer;
  let mx: SmtpSink;
  let motor: TestMotor;
  let rt2: Runtime;
  let worker2: StartedRoles;
  let block: BootstrapResult;

  before(async () => {
    dns = await startDnsServer({
      'rcpt.test': { MX: [{ exchange: 'mx.rcpt.test', priority: 10 }] },
      'mx.rcpt.test': { A: ['127.0.0.1'] },
    });
    // A little latency per message so that neither worker can drain the queue alone in a blink.
    mx = await startSmtpSink({ starttls: false, data: async (): Promise<250> => { await new Promise((r) => setTimeout(r, 10)); return 250; } });
    motor = await startTestMotor({ env: { DNS_SERVERS: dns.address, MX_PORT: String(mx.port), DELIVERY_CONCURRENCY: '4' } });
    rt2 = await createRuntime(motor.config, {
      databaseUrl: motor.rt.databaseUrl, redisUrl: process.env.TEST_REDIS_URL ?? TEST_REDIS_URL,
      logger: createLogger(process.env.TEST_LOG_LEVEL ?? 'silent'), directoryTtlMs: 0, queuePrefix: motor.rt.queuePrefix,
    });
    worker2 = await startRoles(rt2, ['worker']);
    block = await motor.bootstrap();
    for (const r of block.dnsRecords) dns.addRecords(r.name, { TXT: [r.value] });
  });
  after(async () => {
    await worker2?.stop();
    await rt2?.close();
    await motor?.close();
    await mx?.close();
    await dns?.close();
  });

  it(`delivers ${N} messages exactly once, with both workers taking part`, async () => {
    const completed = [0, 0];
    motor.started.workers[0].on('completed', () => { completed[0]++; });
    worker2.workers[0].on('completed', () => { completed[1]++; });
    expect(worker2.server).to.equal(null);

    const from = `app@${block.dnsRecords.find((r) => r.purpose === 'spf')!.name}`;
    const ids: string[] = [];
    for (let i = 0; i < N; i += 20) {
      const batch = await Promise.all(Array.from({ length: 20 }, (_, j) =>
        postJson(`${motor.baseUrl}/v1/send`, { from, to: `user${i + j}@rcpt.test`, subject: `n${i + j}`, text: 'hi' }, { 'x-api-key': block.apiKey })));
      for (const r of batch) {
        expect(r.status, JSON.stringify(r.body)).to.equal(200);
        ids.push(r.body.data.id);
      }
    }

    const messageIdOf = (raw: Buffer) => /^Message-ID:\s*<([^>]+)>/im.exec(raw.toString('utf8'))?.[1] ?? null;
    await eventually(async () => new Set(mx.messages.map((m) => messageIdOf(m.raw))).size >= N, 90_000, 200);
    // Let any duplicate that is still in flight arrive before counting.
    await new Promise((r) => setTimeout(r, 1500));

    const perMessageId = new Map<string, number>();
    for (const m of mx.messages) {
      const id = messageIdOf(m.raw);
      expect(id, 'every delivered message has a Message-ID').to.not.equal(null);
      perMessageId.set(id!, (perMessageId.get(id!) ?? 0) + 1);
    }
    const duplicates = [...perMessageId].filter(([, n]) => n > 1);
    expect(duplicates, 'messages delivered more than once').to.deep.equal([]);
    expect(mx.messages).to.have.length(N);
    expect([...perMessageId.keys()].map((id) => id.split('@')[0]).sort()).to.deep.equal([...ids].sort());

    expect(completed[0] + completed[1]).to.be.at.least(N);
    expect(completed[0], `worker 1 completed ${completed[0]}`).to.be.above(0);
    expect(completed[1], `worker 2 completed ${completed[1]}`).to.be.above(0);

    // One process fed the queues: each log follower's lease is held by one of the two, the other
    // stood by (infra/eventstore/followerLease.ts).
    const leading = async (rt: Runtime) => new Map((await rt.metrics.logFollowerLeader.get()).values.map((v) => [String(v.labels.follower), v.value]));
    const [one, two] = [await leading(motor.rt), await leading(rt2)];
    expect([...one.keys()].sort()).to.include.members(['delivery-enqueuer', 'webhook-dispatcher', 'webhook-pause-notices']);
    for (const follower of new Set([...one.keys(), ...two.keys()])) {
      expect((one.get(follower) ?? 0) + (two.get(follower) ?? 0), `processes following ${follower}`).to.equal(1);
    }

    // The read side agrees: every message delivered, once.
    const token = await motor.token(block, ['logs.read']);
    const delivered = await eventually(async () => {
      const r = await getJson(`${motor.baseUrl}/api/public/v1/motor-blocks/${block.motorBlockId}/logs?status=delivered&limit=1000`, { authorization: `Bearer ${token}` });
      return r.status === 200 && r.body.data.items.length === N ? r.body.data.items : null;
    }, 30_000, 200);
    expect(delivered).to.have.length(N);
    const timeline = await getJson(`${motor.baseUrl}/api/public/v1/messages/${ids[0]}/events`, { authorization: `Bearer ${token}` });
    expect(timeline.body.data.events.map((e: { outcome: string }) => e.outcome)).to.deep.equal(['queued', 'processed', 'delivered']);
  });
});
