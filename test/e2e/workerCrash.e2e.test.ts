import type { ChildProcess } from 'node:child_process';
import { expect } from 'chai';
import type { BootstrapResult } from '../../commands/admin/bootstrap';
import { IN_FLIGHT_STALE_MS } from '../../domain/message/message';
import { startDnsServer, type TestDnsServer } from '../support/dnsServer';
import { startSmtpSink, type SmtpSink } from '../support/smtpSink';
import { startWorkerProcess } from '../support/workerProcess';
import { eventually, postJson, startTestMotor, type TestMotor } from '../support/motor';

/**
 * A delivery worker process killed with SIGKILL in the middle of a batch loses nothing: the API
 * and projectors run here, the worker role (enqueuer, delivery worker) in a child process, as
 * `npm start -- --role worker` builds it. After the kill a second worker process takes over; it
 * runs with its clock 11 minutes ahead, so the attempts the first one left in flight are already
 * stale (docs/DELIVERY.md "When a worker dies") instead of this test waiting 10 minutes.
 * Every accepted message must end `delivered`, and reach the MX at least once.
 */
describe('a worker process killed mid-batch loses no message (e2e)', function () {
  this.timeout(180_000);
  const N = 120;
  let dns: TestDnsServer;
  let mx: SmtpSink;
  let motor: TestMotor;
  let block: BootstrapResult;
  const children: ChildProcess[] = [];
  let env: Record<string, string>;

  /** The worker role in a fresh process; resolves once it runs. */
  async function startWorker(clockOffsetMs: number): Promise<ChildProcess> {
    const child = await startWorkerProcess(motor, env, clockOffsetMs);
    children.push(child);
    return child;
  }

  before(async () => {
    dns = await startDnsServer({
      'rcpt.test': { MX: [{ exchange: 'mx.rcpt.test', priority: 10 }] },
      'mx.rcpt.test': { A: ['127.0.0.1'] },
    });
    // 40 ms per message at the MX: a batch of the worker's 8 slots is always in the middle of something.
    mx = await startSmtpSink({ starttls: false, data: async (): Promise<250> => { await new Promise((r) => setTimeout(r, 40)); return 250; } });
    env = {
      LOG_LEVEL: 'silent', TOKEN_SECRET: 'test-token-secret-0123456789abcdef0123', DNS_SERVERS: dns.address, MX_PORT: String(mx.port), MX_ALLOW_PRIVATE_ADDRESSES: 'true',
      DELIVERY_CONCURRENCY: '8', DELIVERY_JOB_LOCK_SECONDS: '2',
    };
    motor = await startTestMotor({ roles: ['api', 'projector'], env });
    block = await motor.bootstrap();
    for (const r of block.dnsRecords) dns.addRecords(r.name, { TXT: [r.value] });
  });
  after(async () => {
    for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
    await motor?.rt.queue.obliterate({ force: true }).catch(() => undefined);
    await motor?.close();
    await mx?.close();
    await dns?.close();
  });

  it('every accepted message ends delivered after a SIGKILL and a restart', async () => {
    expect(IN_FLIGHT_STALE_MS).to.be.below(11 * 60_000);
    // All accepted before any worker runs: the first one starts with the whole backlog.
    const ids: string[] = [];
    for (let i = 0; i < N; i++) {
      const r = await postJson(`${motor.baseUrl}/v1/send`, { from: `app@${block.dnsRecords.find((d) => d.purpose === 'spf')!.name}`, to: `user${i}@rcpt.test`, subject: `crash ${i}`, text: 'x' }, { 'x-api-key': block.apiKey });
      expect(r.status, JSON.stringify(r.body)).to.equal(200);
      ids.push(r.body.data.id);
    }
    const first = await startWorker(0);
    // Kill it once a good part went out and the rest is queued or in flight.
    await eventually(async () => mx.messages.length >= 30, 30_000, 5);
    first.kill('SIGKILL');
    await new Promise((r) => first.once('exit', r));
    const deliveredBeforeKill = mx.messages.length;
    expect(deliveredBeforeKill, 'the kill came after the end').to.be.below(N);
    // What the dead worker left behind, once the projector has read all it wrote: attempts in
    // flight (`processed`, no outcome) are what the stale-attempt rule must pick up again.
    const count = async (outcome: string) => Number((await motor.rt.db.withSchema('rm_messages').table('messages').whereIn('id', ids).where('current_outcome', outcome).count({ n: '*' }))[0].n);
    let inFlight = -1;
    for (let stable = 0; stable < 3;) {
      await new Promise((r) => setTimeout(r, 200));
      const now = await count('processed');
      stable = now === inFlight ? stable + 1 : 0;
      inFlight = now;
    }
    expect(inFlight, 'no attempt was in flight at the kill').to.be.above(0);

    await startWorker(11 * 60_000);
    const outcomes = await eventually(async () => {
      const rows = await motor.rt.db.withSchema('rm_messages').table('messages').whereIn('id', ids).select('id', 'current_outcome');
      return rows.length === N && rows.every((r: { current_outcome: string }) => r.current_outcome === 'delivered') ? rows : null;
    }, 120_000, 250);
    expect(outcomes).to.have.length(N);

    const perMessage = new Map<string, number>();
    for (const m of mx.messages) {
      const id = /^Message-ID: <([^>]+)>/im.exec(m.raw.toString())?.[1].split('@')[0];
      if (id) perMessage.set(id, (perMessage.get(id) ?? 0) + 1);
    }
    const missing = ids.filter((id) => !perMessage.has(id));
    expect(missing, 'accepted but never reached the MX').to.deep.equal([]);
    // At least once: only the attempts in flight at the kill (at most the 8 slots) may have gone twice.
    const twice = [...perMessage.values()].filter((n) => n > 1).length;
    expect(twice).to.be.at.most(inFlight);
  });
});
