import { randomUUID } from 'node:crypto';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { expect } from 'chai';
import type { BootstrapResult } from '../../commands/admin/bootstrap';
import { refresherFor } from '../../commands/domains/health';
import { streamName } from '../../domain/eventStore';
import { AGENT_SCOPES } from '../../domain/oauth/agent';
import { startAuthHarness, type AuthHarness } from '../auth/harness';
import { grantAgentAccess } from '../support/agentGrant';
import { eventually, getJson, type TestMotor } from '../support/motor';
import { MCP_ENV, call, connectAgent, ok } from './support';
import { acceptedEvent, recipientEvent } from '../projections/fixtures';
import { blockSuppressionIdOf } from '../../domain/motorBlock/suppressions';

const FULL = '/v1/service/mcp';

/**
 * The agent tools over real Streamable HTTP (the SDK's client), each against the same handler its
 * REST route uses: sends and their reads, the account boundary, and the domain, sandbox, webhook,
 * free-recipient and block lifecycle tools with their effects read back.
 */
describe('MCP agent tools (int)', function () {
  this.timeout(120_000);
  let h: AuthHarness;
  let motor: TestMotor;
  let owner: BootstrapResult;
  let other: BootstrapResult;
  let agent: Client;
  let grantId: string;
  const domain = `agent${Date.now().toString(36)}.example.test`;
  const rcpt = 'someone.special@rcpt.test';

  before(async () => {
    h = await startAuthHarness({ ...MCP_ENV, SERVICE_DOMAIN: 'motor.test', DOMAIN_DNS_TIMEOUT_MS: '700', API_REQUEST_LIMIT: '100000' });
    motor = h.motor;
    owner = await motor.bootstrap({ email: 'owner@rcpt.test', domain });
    other = await motor.bootstrap({ email: 'other@rcpt.test' });
    const g = await grantAgentAccess(motor, { accountId: owner.accountId, path: FULL, scopes: [...AGENT_SCOPES] });
    grantId = g.grantId;
    agent = await connectAgent(motor, FULL, g.accessToken);
  });
  after(async () => {
    await agent?.close();
    if (motor) await refresherFor(motor.rt.http).idle();
    await h?.close();
  });

  /** The actor recorded on the last event of a stream. */
  const lastActor = async (stream: string) => {
    const events = await motor.rt.store.readStream(stream);
    return (events[events.length - 1].metadata as { actor?: string }).actor;
  };

  describe('send_email and the analytics reads', () => {
    let messageId: string;

    it('send_email is accepted through the /v1/send path; get_message reads it with masked recipients', async () => {
      const sent = await ok(agent, 'send_email', {
        motorBlockId: owner.motorBlockId, from: `app@${domain}`, to: [rcpt], subject: 'From an agent', text: 'hello', metadata: { order: 42 },
      });
      expect(sent).to.include({ acceptanceStatus: 'queued', from: `app@${domain}`, subject: 'From an agent' });
      expect(sent.id).to.match(/^[0-9a-f-]{36}$/);
      messageId = sent.id;
      const read = await ok(agent, 'get_message', { messageId });
      expect(read.message).to.include({ id: messageId, motorBlockId: owner.motorBlockId, recipientCount: 1, subject: 'From an agent', recipient: 's***@r***.test' });
      expect(read.recipients.recipients.map((r: { recipient: string }) => r.recipient)).to.deep.equal(['s***@r***.test']);
      expect(read.pii_masked).to.equal(true);
      expect((await ok(agent, 'get_message', { messageId: messageId.toUpperCase() })).message.id, 'an id in capitals is the same id').to.equal(messageId);
      expect(JSON.stringify(read)).to.not.include('someone.special');
      const [acceptedEvent] = await motor.rt.store.readStream(streamName('message', messageId));
      expect([acceptedEvent.type, (acceptedEvent.metadata as { actor?: string }).actor], 'MessageAccepted names the agent').to.deep.equal(['MessageAccepted', `agent:${grantId}`]);
    });

    it('search_logs finds the send by metadata, recipients always masked', async () => {
      const page = await eventually(async () => {
        const p = await ok(agent, 'search_logs', { motorBlockId: owner.motorBlockId, query: 'metadata.order:42' });
        return p.items.length > 0 ? p : null;
      });
      expect(page.pii_masked).to.equal(true);
      expect(page.items.map((m: { id: string }) => m.id)).to.deep.equal([messageId]);
      expect(page.items[0].recipient).to.equal('s***@r***.test');
      expect(JSON.stringify(page)).to.not.include('someone.special');
    });

    it('get_block_overview and get_block_metrics count the send; list_motor_blocks lists the block', async () => {
      const overview = await eventually(async () => {
        const o = await ok(agent, 'get_block_overview', { motorBlockId: owner.motorBlockId });
        return o.totals.messages >= 1 ? o : null;
      });
      expect(overview.motorBlockId).to.equal(owner.motorBlockId);
      expect(overview.reputation).to.be.an('object');
      const metrics = await ok(agent, 'get_block_metrics', { motorBlockId: owner.motorBlockId, interval: 'day' });
      expect(metrics.points.reduce((n: number, p: { messages: number }) => n + p.messages, 0)).to.be.at.least(1);
      const blocks = await ok(agent, 'list_motor_blocks');
      expect(blocks.motorBlocks.map((b: { id: string }) => b.id)).to.include(owner.motorBlockId);
    });

    it('dryRun validates and queues nothing; idempotencyKey replays the first send', async () => {
      const dry = await ok(agent, 'send_email', { motorBlockId: owner.motorBlockId, from: `app@${domain}`, to: rcpt, subject: 'dry', text: 'x', dryRun: true });
      expect(dry).to.include({ dryRun: true, status: 'validated', motorBlockId: owner.motorBlockId, recipientCount: 1, domain });
      expect(dry).to.not.have.property('id');
      const key = `agent-${randomUUID()}`;
      const first = await ok(agent, 'send_email', { motorBlockId: owner.motorBlockId, from: `app@${domain}`, to: rcpt, subject: 'once', text: 'x', idempotencyKey: key });
      const again = await ok(agent, 'send_email', { motorBlockId: owner.motorBlockId, from: `app@${domain}`, to: rcpt, subject: 'once', text: 'x', idempotencyKey: key });
      expect(again).to.include({ id: first.id, idempotent: true });
    });

    it('send errors are isError results with the spec\'s code and status', async () => {
      const mismatch = await call(agent, 'send_email', { motorBlockId: owner.motorBlockId, from: 'app@elsewhere.example.test', to: rcpt, subject: 's', text: 'x' });
      expect(mismatch.isError).to.equal(true);
      expect(mismatch.json).to.include({ error: 'from_domain_mismatch', status: 403 });
      const noBody = await call(agent, 'send_email', { motorBlockId: owner.motorBlockId, from: `app@${domain}`, to: rcpt, subject: 's' });
      expect([noBody.isError, noBody.json.error, noBody.json.status]).to.deep.equal([true, 'validation_error', 422]);
      const badKey = await call(agent, 'send_email', { motorBlockId: owner.motorBlockId, from: `app@${domain}`, to: rcpt, subject: 's', text: 'x', idempotencyKey: 'has space' });
      expect([badKey.isError, badKey.json.error]).to.deep.equal([true, 'validation_error']);
      const badId = await call(agent, 'send_email', { motorBlockId: 'nope', from: `app@${domain}`, to: rcpt, subject: 's', text: 'x' });
      expect([badId.isError, badId.json.error, badId.json.status]).to.deep.equal([true, 'invalid_id', 400]);
    });

    it('a block or message of another account is refused by every tool that names it', async () => {
      const theirs = other.motorBlockId;
      const calls: Array<[string, Record<string, unknown>]> = [
        ['send_email', { motorBlockId: theirs, from: 'app@x.example.test', to: rcpt, subject: 's', text: 'x' }],
        ['search_logs', { motorBlockId: theirs }],
        ['get_block_overview', { motorBlockId: theirs }],
        ['list_webhooks', { motorBlockId: theirs }],
        ['create_webhook', { motorBlockId: theirs, url: 'https://hooks.example.test/x' }],
        ['rotate_webhook_secret', { motorBlockId: theirs, webhookId: randomUUID() }],
        ['rename_motor_block', { motorBlockId: theirs, name: 'mine now' }],
        ['deactivate_motor_block', { motorBlockId: theirs, confirm: true }],
      ];
      for (const [name, args] of calls) {
        const r = await call(agent, name, args);
        expect([r.isError, r.json.error, r.json.status], name).to.deep.equal([true, 'motor_block_not_found', 404]);
      }
      const theirToken = await motor.token(other, ['logs.read']);
      const theirSend = await fetch(`${motor.baseUrl}/v1/send`, {
        method: 'POST', headers: { 'content-type': 'application/json', authorization: `ApiKey ${other.apiKey}` },
        body: JSON.stringify({ from: 'app@' + (await getJson(`${motor.baseUrl}/api/public/v1/domains`, { authorization: `Bearer ${await motor.token(other, ['config.read'])}` })).body.data[0].domain, to: 'other@rcpt.test', subject: 's', text: 'x' }),
      });
      expect(theirSend.status).to.equal(200);
      const theirId = ((await theirSend.json()) as { data: { id: string } }).data.id;
      expect((await getJson(`${motor.baseUrl}/api/public/v1/messages/${theirId}`, { authorization: `Bearer ${theirToken}` })).status).to.equal(200);
      const r = await call(agent, 'get_message', { messageId: theirId });
      expect([r.isError, r.json.error]).to.deep.equal([true, 'message_not_found']);
      expect((await call(agent, 'list_motor_blocks')).json.motorBlocks.map((b: { id: string }) => b.id)).to.not.include(theirs);
    });
  });

  describe('the block suppression list', () => {
    it('list_block_suppressions shows the block\'s suppressed addresses masked; lift_block_suppression lifts a hard bounce (the event names the agent), never a complaint', async () => {
      const bounced = 'bounced.person@rcpt.test';
      const complained = 'angry.person@rcpt.test';
      const messageId = randomUUID();
      // The events the delivery worker and the feedback loop would append (this harness has no MX).
      await motor.rt.store.append(streamName('message', messageId), [
        acceptedEvent(messageId, owner.motorBlockId, [bounced, complained], 0),
        recipientEvent('DeliveryBounced', messageId, bounced, 1000),
        recipientEvent('ComplaintReceived', messageId, complained, 2000),
      ], { expectedRevision: 'no_stream' });
      const page = await eventually(async () => {
        const p = await ok(agent, 'list_block_suppressions', { motorBlockId: owner.motorBlockId });
        return p.items.length === 2 ? p : null;
      });
      expect(page.pii_masked).to.equal(true);
      expect(page.items.map((i: { address: string; reason: string }) => [i.address, i.reason])).to.deep.equal([['a***@r***.test', 'complaint'], ['b***@r***.test', 'hard_bounce']]);
      expect(JSON.stringify(page)).to.not.include('person@');
      const limited = await ok(agent, 'list_block_suppressions', { motorBlockId: owner.motorBlockId, limit: 1 });
      expect([limited.items.length, typeof limited.nextCursor]).to.deep.equal([1, 'string']);

      const refused = await call(agent, 'lift_block_suppression', { motorBlockId: owner.motorBlockId, address: complained });
      expect([refused.isError, refused.json.error, refused.json.status]).to.deep.equal([true, 'suppression_not_liftable', 409]);
      const lifted = await ok(agent, 'lift_block_suppression', { motorBlockId: owner.motorBlockId, address: bounced.toUpperCase() });
      expect(lifted).to.include({ address: bounced, reason: 'hard_bounce', messageId, lifted: true });
      const after = await ok(agent, 'list_block_suppressions', { motorBlockId: owner.motorBlockId });
      expect(after.items.map((i: { reason: string }) => i.reason), 'read-your-writes: gone at once').to.deep.equal(['complaint']);
      const lifts = await motor.rt.store.readStream(streamName('blockSuppression', blockSuppressionIdOf(owner.motorBlockId, bounced)));
      expect(lifts.map((e) => [e.type, (e.metadata as { actor?: string }).actor])).to.deep.equal([['BlockSuppressionLifted', `agent:${grantId}`]]);
      const again = await call(agent, 'lift_block_suppression', { motorBlockId: owner.motorBlockId, address: bounced });
      expect([again.isError, again.json.error, again.json.status]).to.deep.equal([true, 'suppression_not_found', 404]);
    });

    it('another account\'s block: both tools answer motor_block_not_found', async () => {
      for (const [name, args] of [
        ['list_block_suppressions', { motorBlockId: other.motorBlockId }],
        ['lift_block_suppression', { motorBlockId: other.motorBlockId, address: 'x@rcpt.test' }],
      ] as const) {
        const r = await call(agent, name, args);
        expect([r.isError, r.json.error, r.json.status], name).to.deep.equal([true, 'motor_block_not_found', 404]);
      }
    });
  });

  describe('domains and the sandbox', () => {
    let domainId: string;
    const own = `own${Date.now().toString(36)}.example.test`;

    it('add_domain → publish the ownership record → verify_domain → get_domain verified; check_domain_dns records a check; events carry agent:<grantId>', async () => {
      const added = await ok(agent, 'add_domain', { domain: own });
      expect(added).to.include({ domain: own, status: 'pending_verification', verified: false });
      domainId = added.id;
      expect(await lastActor(streamName('sendingDomain', domainId))).to.equal(`agent:${grantId}`);
      const ownership = added.dnsRecords.find((r: { purpose: string }) => r.purpose === 'ownership');
      h.dns.addRecords(ownership.name, { TXT: [ownership.value] });
      const verified = await ok(agent, 'verify_domain', { domainId });
      expect(verified).to.include({ id: domainId, verified: true, status: 'verified' });
      expect((await ok(agent, 'get_domain', { domainId })).verified).to.equal(true);
      const checked = await ok(agent, 'check_domain_dns', { domainId });
      expect(checked.lastCheckedAt).to.be.a('string');
      expect(checked.dnsRecords.find((r: { purpose: string }) => r.purpose === 'spf').status).to.equal('missing');
      expect((await ok(agent, 'list_domains')).domains.map((d: { id: string }) => d.id)).to.include(domainId);
      const again = await call(agent, 'add_domain', { domain: own });
      expect([again.isError, again.json.error, again.json.status]).to.deep.equal([true, 'domain_already_added', 409]);
      const theirs = await call(agent, 'get_domain', { domainId: other.domainId });
      expect([theirs.isError, theirs.json.error]).to.deep.equal([true, 'domain_not_found']);
    });

    it('provision_sandbox → set_sandbox_allowlist (enforced on send_email) → convert_sandbox onto the verified domain', async () => {
      expect((await ok(agent, 'get_sandbox_status')).provisioned).to.equal(false);
      const handle = `agent-${Date.now().toString(36)}`;
      const provisioned = await ok(agent, 'provision_sandbox', { handle });
      expect(provisioned).to.include({ created: true, provisioned: true, handle, allowlistLocked: true, channel: 'agent' });
      const sandboxBlock = provisioned.motorBlockId as string;
      const listed = await ok(agent, 'set_sandbox_allowlist', { addresses: ['friend@rcpt.test'] });
      expect(listed.outboundAddresses).to.deep.equal(['friend@rcpt.test']);
      expect(listed.allowlist).to.include('friend@rcpt.test');
      const from = `app@${provisioned.domain.name}`;
      const refused = await call(agent, 'send_email', { motorBlockId: sandboxBlock, from, to: 'stranger@rcpt.test', subject: 's', text: 'x' });
      expect([refused.isError, refused.json.error]).to.deep.equal([true, 'sandbox_recipient_not_allowed']);
      expect((await call(agent, 'send_email', { motorBlockId: sandboxBlock, from, to: 'friend@rcpt.test', subject: 's', text: 'x', dryRun: true })).isError).to.equal(false);
      const converted = await ok(agent, 'convert_sandbox', { domainId, name: 'converted by agent' });
      expect(converted).to.include({ motorBlockId: sandboxBlock, name: 'converted by agent' });
      expect(converted.domain).to.deep.equal({ id: domainId, name: own });
      expect((await ok(agent, 'get_sandbox_status')).converted).to.equal(true);
      expect(await lastActor(streamName('motorBlock', sandboxBlock))).to.equal(`agent:${grantId}`);
    });
  });

  it('webhooks: create (secret once) → rotate its secret → list → update → test → deliveries and stats → delete', async () => {
    const created = await ok(agent, 'create_webhook', { motorBlockId: owner.motorBlockId, url: 'https://hooks.example.test/motor', events: ['message.delivered'] });
    expect(created.secret).to.match(/^whsec_/);
    expect(created).to.include({ url: 'https://hooks.example.test/motor', enabled: true, disabledReason: null, failingSince: null });
    const webhookId = created.id as string;
    // Rotation: the new secret once, as create shows its own; the endpoint as the resource is.
    const rotated = await ok(agent, 'rotate_webhook_secret', { motorBlockId: owner.motorBlockId, webhookId, previousSecretValidForSeconds: 60 });
    expect(rotated.secret).to.match(/^whsec_/).and.not.equal(created.secret);
    expect(rotated).to.include({ id: webhookId, url: 'https://hooks.example.test/motor', enabled: true, disabledReason: null, failingSince: null });
    expect(await lastActor(streamName('webhook', webhookId))).to.equal(`agent:${grantId}`);
    const badWindow = await call(agent, 'rotate_webhook_secret', { motorBlockId: owner.motorBlockId, webhookId, previousSecretValidForSeconds: 604801 });
    expect([badWindow.isError, badWindow.json.error]).to.deep.equal([true, 'validation_error']);
    const listed = await ok(agent, 'list_webhooks', { motorBlockId: owner.motorBlockId });
    expect(listed.webhooks.map((w: { id: string }) => w.id)).to.include(webhookId);
    expect(JSON.stringify(listed)).to.not.include(created.secret);
    expect(JSON.stringify(listed)).to.not.include(rotated.secret);
    const updated = await ok(agent, 'update_webhook', { motorBlockId: owner.motorBlockId, webhookId, enabled: false });
    expect(updated).to.include({ id: webhookId, enabled: false });
    const queued = await ok(agent, 'test_webhook', { motorBlockId: owner.motorBlockId, webhookId });
    expect(queued.status).to.equal('queued');
    const deliveries = await eventually(async () => {
      const d = await ok(agent, 'list_webhook_deliveries', { motorBlockId: owner.motorBlockId, webhookId });
      return d.deliveries.length > 0 ? d : null;
    });
    expect(deliveries.deliveries[0]).to.include({ id: queued.deliveryId, event: 'webhook.test' });
    // Ids in capitals are the same ids, as on the HTTP routes.
    const shouted = await ok(agent, 'list_webhook_deliveries', { motorBlockId: owner.motorBlockId.toUpperCase(), webhookId: webhookId.toUpperCase() });
    expect(shouted.deliveries.map((d: { id: string }) => d.id)).to.deep.equal(deliveries.deliveries.map((d: { id: string }) => d.id));
    const stats = await ok(agent, 'get_webhook_stats', { motorBlockId: owner.motorBlockId, webhookId, hours: 1 });
    expect(stats.hours).to.equal(1);
    expect(stats.delivered + stats.failed + stats.queued + stats.retrying).to.equal(1);
    expect(await lastActor(streamName('webhook', webhookId))).to.equal(`agent:${grantId}`);
    expect(await ok(agent, 'delete_webhook', { motorBlockId: owner.motorBlockId, webhookId })).to.deep.equal({ id: webhookId, deleted: true });
    expect((await ok(agent, 'list_webhooks', { motorBlockId: owner.motorBlockId })).webhooks).to.deep.equal([]);
    const gone = await call(agent, 'test_webhook', { motorBlockId: owner.motorBlockId, webhookId });
    expect([gone.isError, gone.json.error]).to.deep.equal([true, 'webhook_not_found']);
  });

  it('free recipients: add (a confirmation link is mailed) → list pending → remove', async () => {
    const before = h.mx.messages.length;
    const added = await ok(agent, 'add_free_recipient', { email: 'pal@rcpt.test' });
    expect(added.recipient).to.deep.equal({ email: 'pal@rcpt.test', status: 'pending' });
    await eventually(async () => h.mx.messages.slice(before).some((m) => m.envelope.rcptTo.map((r) => r.toLowerCase()).includes('pal@rcpt.test')), 20_000);
    const list = await ok(agent, 'list_free_recipients');
    const entry = list.recipients.find((r: { email: string }) => r.email === 'pal@rcpt.test');
    expect(entry).to.include({ status: 'pending' });
    expect(await ok(agent, 'remove_free_recipient', { recipientId: entry.id })).to.deep.equal({ id: entry.id, email: 'pal@rcpt.test', removed: true });
    expect((await ok(agent, 'list_free_recipients')).recipients).to.deep.equal([]);
    const own = await call(agent, 'add_free_recipient', { email: 'owner@rcpt.test' });
    expect([own.isError, own.json.error]).to.deep.equal([true, 'own_address']);
  });

  it('block lifecycle: create (idempotent) → rename → deactivate (confirm rule; sends refused) → reactivate → deactivate → delete', async () => {
    const key = randomUUID();
    const created = await ok(agent, 'create_motor_block', { name: 'agent block', domainId: owner.domainId, type: 'transactional', idempotencyKey: key });
    expect(created).to.include({ created: true, name: 'agent block', type: 'transactional', status: 'active', credentialsAvailable: false });
    const id = created.id as string;
    expect(await lastActor(streamName('motorBlock', id))).to.equal(`agent:${grantId}`);
    const retried = await ok(agent, 'create_motor_block', { name: 'agent block', domainId: owner.domainId, type: 'transactional', idempotencyKey: key });
    expect(retried).to.include({ created: false, id });
    expect((await ok(agent, 'rename_motor_block', { motorBlockId: id, name: 'renamed by agent' })).name).to.equal('renamed by agent');

    const unconfirmed = await call(agent, 'deactivate_motor_block', { motorBlockId: id });
    expect([unconfirmed.isError, unconfirmed.json.error, unconfirmed.json.status]).to.deep.equal([true, 'confirmation_required', 400]);
    expect((await ok(agent, 'deactivate_motor_block', { motorBlockId: id, confirm: true })).status).to.equal('inactive');
    const refused = await call(agent, 'send_email', { motorBlockId: id, from: `app@${domain}`, to: rcpt, subject: 's', text: 'x' });
    expect([refused.isError, refused.json.error]).to.deep.equal([true, 'motor_block_inactive']);
    expect((await ok(agent, 'reactivate_motor_block', { motorBlockId: id })).status).to.equal('active');

    const active = await call(agent, 'delete_motor_block', { motorBlockId: id, confirm: true, deleteHistory: true });
    expect([active.isError, active.json.error]).to.deep.equal([true, 'motor_block_must_be_inactive']);
    await ok(agent, 'deactivate_motor_block', { motorBlockId: id, confirm: true });
    const noConfirm = await call(agent, 'delete_motor_block', { motorBlockId: id, deleteHistory: true });
    expect([noConfirm.isError, noConfirm.json.error]).to.deep.equal([true, 'confirmation_required']);
    const queued = await ok(agent, 'delete_motor_block', { motorBlockId: id, confirm: true, deleteHistory: true });
    expect(queued).to.include({ motorBlockId: id, status: 'queued' });
    const job = await eventually(async () => {
      const j = await call(agent, 'get_motor_block_deletion', { jobId: queued.jobId });
      return j.isError ? null : j.json;
    });
    expect(job).to.include({ jobId: queued.jobId, motorBlockId: id, deleteHistory: true });
    const blocks = await eventually(async () => {
      const b = await ok(agent, 'list_motor_blocks');
      return b.motorBlocks.every((x: { id: string }) => x.id !== id) ? b : null;
    }, 20_000);
    expect(blocks.motorBlocks.map((x: { id: string }) => x.id)).to.include(owner.motorBlockId);
  });
});
