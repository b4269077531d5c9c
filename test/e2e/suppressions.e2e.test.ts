import { expect } from 'chai';
import type { BootstrapResult } from '../../commands/admin/bootstrap';
import { SUPPRESSION_COUNTS_REFRESH_MS } from '../../workers/delivery/suppressions';
import { startDnsServer, type TestDnsServer } from '../support/dnsServer';
import { startSmtpSink, type SmtpSink } from '../support/smtpSink';
import { eventually, getJson, postJson, startTestMotor, type TestMotor } from '../support/motor';

/**
 * A Motor Block's suppression list through the real pipeline (docs/DELIVERY.md "Suppressions"):
 * a recipient the MX refuses with 550 5.1.1 is suppressed; the next message to it is accepted as
 * always but recorded `failed` without an SMTP attempt, while its other recipients are delivered;
 * once the owner lifts it, mail to it is attempted again. Plus the routes' scopes and masking.
 */
describe('block suppressions: bounce → not attempted → lifted → delivered (e2e)', function () {
  this.timeout(90_000);
  let dns: TestDnsServer;
  let mx: SmtpSink;
  let motor: TestMotor;
  let block: BootstrapResult;
  let other: BootstrapResult;
  let senderDomain: string;
  let readToken: string;
  const refused = new Set(['gone@rcpt.test']);

  before(async () => {
    dns = await startDnsServer({
      'rcpt.test': { MX: [{ exchange: 'mx.rcpt.test', priority: 10 }] },
      'mx.rcpt.test': { A: ['127.0.0.1'] },
    });
    mx = await startSmtpSink({ rcpt: (r) => (refused.has(r.toLowerCase()) ? { code: 550, message: '5.1.1 No such user here' } : 250) });
    motor = await startTestMotor({ env: { DNS_SERVERS: dns.address, MX_PORT: String(mx.port), DELIVERY_RETRY_SCHEDULE: '1,1,1' } });
    block = await motor.bootstrap({ trustDns: true });
    other = await motor.bootstrap({ email: 'other-owner@example.test', domain: 'other-sender.test', trustDns: true });
    senderDomain = block.dnsRecords.find((r) => r.purpose === 'spf')!.name;
    for (const r of block.dnsRecords) dns.addRecords(r.name, { TXT: [r.value] });
    readToken = await motor.token(block, ['logs.read', 'logs.pii']);
  });
  after(async () => {
    await motor?.close();
    await mx?.close();
    await dns?.close();
  });

  const base = () => `${motor.baseUrl}/api/public/v1/motor-blocks/${block.motorBlockId}/suppressions`;
  const bearer = (t: string) => ({ authorization: `Bearer ${t}` });
  const send = (to: string[]) => postJson(`${motor.baseUrl}/v1/send`, { from: `app@${senderDomain}`, to, subject: 'Reset', text: 'Your code' }, { 'X-Api-Key': block.apiKey });
  const del = async (address: string, token: string, blockId = block.motorBlockId) => {
    const res = await fetch(`${motor.baseUrl}/api/public/v1/motor-blocks/${blockId}/suppressions/${encodeURIComponent(address)}`, { method: 'DELETE', headers: bearer(token) });
    return { status: res.status, body: await res.json() as { code?: string; data?: Record<string, unknown> } };
  };
  /** Every recipient of the message once all are terminal, by address. */
  const settled = (id: string) => eventually(async () => {
    const r = await getJson(`${motor.baseUrl}/api/public/v1/messages/${id}/recipients?includePII=true`, bearer(readToken));
    if (r.status !== 200 || !r.body.data.allTerminal) return null;
    return Object.fromEntries((r.body.data.recipients as Array<{ recipient: string; outcome: string; smtpResponse: string | null; smtpCode: string | null }>)
      .map((x) => [x.recipient, x]));
  }, 30_000);
  const listed = async (query = '?includePII=true') => (await getJson(`${base()}${query}`, bearer(readToken))).body.data;

  it('a 550 5.1.1 suppresses the address; the next message to it is failed without an attempt, its other recipient delivered', async () => {
    const first = await send(['Gone@rcpt.test']);
    expect(first.status).to.equal(200);
    expect((await settled(first.body.data.id))['Gone@rcpt.test'].outcome).to.equal('bounced');
    const item = await eventually(async () => (await listed()).items.find((i: { address: string }) => i.address === 'gone@rcpt.test'), 10_000);
    expect(item).to.deep.equal({ address: 'gone@rcpt.test', reason: 'hard_bounce', suppressedAt: item.suppressedAt, messageId: first.body.data.id, smtpCode: '550', enhancedCode: '5.1.1' });
    // The delivery worker's count of the block's suppressions is refreshed at most this often.
    await new Promise((r) => setTimeout(r, SUPPRESSION_COUNTS_REFRESH_MS + 200));

    const attemptsBefore = mx.rcptAttempts.filter((a) => a.toLowerCase() === 'gone@rcpt.test').length;
    const second = await send(['GONE@rcpt.test', 'fine@rcpt.test']);
    expect(second.status, 'accepted exactly as before').to.equal(200);
    expect(second.body.data.acceptanceStatus).to.equal('queued');
    const outcomes = await settled(second.body.data.id);
    expect(outcomes['GONE@rcpt.test'].outcome).to.equal('failed');
    expect(outcomes['GONE@rcpt.test'].smtpCode).to.equal(null);
    expect(outcomes['GONE@rcpt.test'].smtpResponse).to.match(/^Not sent: gone@rcpt\.test is on this Motor Block's suppression list \(hard bounce on .+\); lift it to send again$/);
    expect(outcomes['fine@rcpt.test'].outcome).to.equal('delivered');
    expect(mx.rcptAttempts.filter((a) => a.toLowerCase() === 'gone@rcpt.test').length, 'the MX never saw it').to.equal(attemptsBefore);
    expect((await motor.rt.metrics.deliverySuppressed.get()).values[0]?.value, 'motor_delivery_suppressed_total').to.equal(1);
  });

  it('GET masks addresses without includePII, needs logs.read, and includePII needs logs.pii', async () => {
    expect((await listed('')).items.map((i: { address: string }) => i.address)).to.deep.equal(['g***@r***.test']);
    expect((await listed('')).pii_masked).to.equal(true);
    const plain = await motor.token(block, ['logs.read']);
    expect((await getJson(`${base()}?includePII=true`, bearer(plain))).body.code).to.equal('insufficient_scope');
    const noLogs = await motor.token(block, ['config.manage']);
    expect((await getJson(base(), bearer(noLogs))).status).to.equal(403);
    expect((await getJson(`${base()}?limit=0`, bearer(readToken))).status).to.equal(400);
  });

  it('another block\'s token is 403; lifting needs config.manage; an address not suppressed is 404 suppression_not_found', async () => {
    const otherToken = await motor.token(other, ['logs.read', 'config.manage']);
    expect((await getJson(base(), bearer(otherToken))).body.code).to.equal('motor_block_forbidden');
    expect((await del('gone@rcpt.test', otherToken)).body.code).to.equal('motor_block_forbidden');
    // Its own list is empty: the suppression is block A's alone.
    expect((await getJson(`${motor.baseUrl}/api/public/v1/motor-blocks/${other.motorBlockId}/suppressions`, bearer(otherToken))).body.data.items).to.deep.equal([]);
    const readOnly = await motor.token(block, ['logs.read']);
    const r = await del('gone@rcpt.test', readOnly);
    expect([r.status, r.body.code]).to.deep.equal([403, 'insufficient_scope']);
    const manage = await motor.token(block, ['config.manage']);
    const missing = await del('nobody@rcpt.test', manage);
    expect([missing.status, missing.body.code]).to.deep.equal([404, 'suppression_not_found']);
  });

  it('a lift (any case) answers the record, the next GET no longer lists it, and the next message to it is delivered', async () => {
    const manage = await motor.token(block, ['config.manage']);
    const lifted = await del('Gone@RCPT.test', manage);
    expect(lifted.status).to.equal(200);
    expect(lifted.body.data).to.deep.include({ address: 'gone@rcpt.test', reason: 'hard_bounce', smtpCode: '550', enhancedCode: '5.1.1', lifted: true });
    expect((await listed()).items, 'read-your-writes').to.deep.equal([]);
    expect((await del('gone@rcpt.test', manage)).status, 'lifted already').to.equal(404);

    refused.delete('gone@rcpt.test');
    const third = await send(['gone@rcpt.test']);
    expect((await settled(third.body.data.id))['gone@rcpt.test'].outcome).to.equal('delivered');
  });
});
