import type { ChildProcess } from 'node:child_process';
import { expect } from 'chai';
import { streamName } from '../../domain/eventStore';
import { campaignMessageId } from '../../domain/comms/campaigns';
import { IN_FLIGHT_STALE_MS } from '../../domain/message/message';
import { startDnsServer, type TestDnsServer } from '../support/dnsServer';
import { startSmtpSink, type SmtpSink } from '../support/smtpSink';
import { startWorkerProcess } from '../support/workerProcess';
import { eventually, startTestMotor, type TestMotor } from '../support/motor';
import { as, commGet, commPost, tenant, type Tenant } from './support';

/**
 * The worker role killed with SIGKILL in the middle of a campaign (docs/COMMUNICATIONS.md "How a
 * campaign is sent"): the API and projectors run here, the worker role in a child process. After
 * the kill a second worker process takes the stalled page over and runs it again from the last
 * checkpoint. Every contact must end with exactly one MessageAccepted, under the id derived from
 * the campaign and the contact, and the campaign's counts must say so.
 */
describe('a campaign survives its worker process being killed mid-list (e2e)', function () {
  this.timeout(240_000);
  const N = 200;
  let dns: TestDnsServer;
  let mx: SmtpSink;
  let motor: TestMotor;
  let a: Tenant;
  let env: Record<string, string>;
  const children: ChildProcess[] = [];

  async function startWorker(clockOffsetMs = 0): Promise<ChildProcess> {
    const child = await startWorkerProcess(motor, env, clockOffsetMs);
    children.push(child);
    return child;
  }

  const acceptedCount = async (campaignId: string): Promise<number> => {
    const r = await motor.rt.db.raw(`select count(*)::int as n from events where type = 'MessageAccepted' and data->'metadata'->>'campaign_id' = ?`, [campaignId]);
    return r.rows[0].n as number;
  };

  before(async () => {
    dns = await startDnsServer({ 'rcpt.test': { MX: [{ exchange: 'mx.rcpt.test', priority: 10 }] }, 'mx.rcpt.test': { A: ['127.0.0.1'] } });
    mx = await startSmtpSink({ starttls: false });
    env = {
      LOG_LEVEL: 'silent', TOKEN_SECRET: 'test-token-secret-0123456789abcdef0123', DNS_SERVERS: dns.address, MX_PORT: String(mx.port), MX_ALLOW_PRIVATE_ADDRESSES: 'true',
      DELIVERY_JOB_LOCK_SECONDS: '2', CAMPAIGN_PAGE_SIZE: '10',
    };
    motor = await startTestMotor({ roles: ['api', 'projector'], env });
    a = await tenant(motor, 'campaign-crash@example.test');
  });
  after(async () => {
    for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
    await motor?.close();
    await mx?.close();
    await dns?.close();
  });

  it(`${N} contacts, the worker killed mid-list: every contact gets exactly one message`, async () => {
    const h = as(a);
    const tpl = await commPost(motor, '/templates', { name: 'T', subject: 'Hi {{name}}', type: 'text', body_text: 'Hello {{name}} {{unsubscribe_url}}' }, h);
    const list = await commPost(motor, '/lists', { name: 'Big' }, h);
    const listId = list.body.data.id as string;
    const contactIds: string[] = [];
    for (let i = 0; i < N; i += 20) {
      const batch = await Promise.all(Array.from({ length: Math.min(20, N - i) }, (_, k) => commPost(motor, `/lists/${listId}/contacts`, { email: `c${i + k}@rcpt.test`, name: `C${i + k}` }, h)));
      for (const r of batch) {
        expect(r.status, JSON.stringify(r.body)).to.equal(201);
        contactIds.push(r.body.data.id);
      }
    }
    const domain = (await motor.rt.directory.domain(a.b.domainId))!.name;
    const created = await commPost(motor, '/campaigns', { name: 'Crash', template_id: tpl.body.data.id, list_id: listId, motor_block_id: a.b.motorBlockId, from: `news@${domain}` }, h);
    expect(created.status).to.equal(201);
    const id = created.body.data.id as string;

    const first = await startWorker();
    expect((await commPost(motor, `/campaigns/${id}/send`, {}, h)).status).to.equal(202);
    await eventually(async () => (await acceptedCount(id)) >= 35, 60_000, 5);
    first.kill('SIGKILL');
    await new Promise((r) => first.once('exit', r));
    const atKill = await acceptedCount(id);
    expect(atKill, 'killed before the end of the list').to.be.lessThan(N);

    // Its clock 11 minutes ahead, as in test/e2e/workerCrash.e2e.test.ts: a delivery the first
    // worker had in flight when it was killed is then already stale (IN_FLIGHT_STALE_MS) and is
    // retried now rather than after 10 minutes.
    expect(IN_FLIGHT_STALE_MS).to.be.below(11 * 60_000);
    await startWorker(11 * 60_000);
    const done = await eventually(async () => {
      const r = await commGet(motor, `/campaigns/${id}`, h);
      return r.body.data.status === 'sent' ? r.body.data : null;
    }, 120_000, 200);
    expect(done.counts).to.deep.equal({ recipients: N, accepted: N, skipped_suppressed: 0, failed: 0 });
    expect(await acceptedCount(id)).to.equal(N);
    for (const contactId of contactIds) {
      const events = await motor.rt.store.readStream(streamName('message', campaignMessageId(id, contactId)), { maxCount: 2 });
      expect(events.filter((e) => e.type === 'MessageAccepted'), contactId).to.have.length(1);
    }
    // Delivered once each too (at-least-once delivery: a worker killed mid-round may deliver a message twice).
    await eventually(async () => new Set(mx.messages.flatMap((m) => m.envelope.rcptTo)).size === N, 60_000, 200);
  });
});
