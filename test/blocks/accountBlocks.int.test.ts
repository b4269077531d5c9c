import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import type { BootstrapResult } from '../../commands/admin/bootstrap';
import { streamName } from '../../domain/eventStore';
import { toEventData } from '../../domain/events';
import { newId } from '../../domain/ids';
import { eventually, startTestMotor, type TestMotor } from '../support/motor';
import { senderDomainOf } from '../read-api/publicApi';
import { addDomain, call, sendFrom } from './support';

/**
 * The account Motor Block routes over real HTTP (SPEC "Account Motor Blocks"): create with
 * Idempotency-Key, plan limit, name conflict, rename, type, assign-domain, deactivate and
 * reactivate (with real sends refused and accepted), delete refusals, id conflict, authorization
 * check, scopes and credentials. Deletion itself: deletion.int.test.ts.
 */
describe('account Motor Block routes (int)', function () {
  this.timeout(120_000);
  let motor: TestMotor;
  let a: BootstrapResult;
  let other: BootstrapResult;
  let manage: string;
  let readOnly: string;
  let otherManage: string;
  const v4 = () => randomUUID();

  before(async () => {
    // The dashboard host ({auth_url}) apart from the API's: dashboardUrl must name the former.
    motor = await startTestMotor({ env: { PLAN_DEFAULT_MAX_BLOCKS: '20', AUTH_PUBLIC_URL: 'https://dashboard.example.test' } });
    a = await motor.bootstrap();
    other = await motor.bootstrap();
    manage = await motor.token(a, ['config.manage']);
    readOnly = await motor.token(a, ['config.read']);
    otherManage = await motor.token(other, ['config.manage']);
  });
  after(async () => { await motor?.close(); });

  const create = (body: Record<string, unknown>, key: string | null = v4(), token = manage) =>
    call(motor, 'POST', '/account/motor-blocks', token, body, key === null ? {} : { 'Idempotency-Key': key });

  describe('GET /account/motor-blocks', () => {
    it('lists the blocks of the grant in the Motor Block shape, never a credential', async () => {
      const r = await call(motor, 'GET', '/account/motor-blocks', readOnly);
      expect(r.status).to.equal(200);
      expect(r.body.success).to.equal(true);
      const mine = r.body.data.find((x: { id: string }) => x.id === a.motorBlockId);
      expect(mine).to.include({ type: 'general_purpose', activeAuthMethod: 'smtp_password', credentialsAvailable: false, smtp_username: a.smtpUsername, status: 'active' });
      expect(mine.domain).to.include({ id: a.domainId, name: senderDomainOf(a), sendReady: true });
      expect(mine.dashboardUrl).to.equal(`https://dashboard.example.test/dashboard/motor-blocks/${a.motorBlockId}`);
      expect(r.body.data.map((x: { id: string }) => x.id)).to.not.include(other.motorBlockId);
      expect(JSON.stringify(r.body)).to.not.match(/mk_live|ak_live|passwordHash|secret|"password"/i);
    });

    it('GET /motor-blocks shows the token\'s block with every SPEC Motor Block field, description included', async () => {
      const made = await create({ name: 'Described', domainId: a.domainId, description: 'receipts' });
      const token = await motor.token({ ...a, motorBlockId: made.body.data.id }, ['logs.read']);
      const r = await call(motor, 'GET', '/motor-blocks', token);
      expect(r.status).to.equal(200);
      expect(r.body.data).to.have.length(1);
      expect(r.body.data[0]).to.include({ id: made.body.data.id, name: 'Described', type: 'general_purpose', description: 'receipts', credentialsAvailable: false, smtp_username: made.body.data.smtp_username });
      expect(r.body.data[0].domain).to.include({ id: a.domainId });
      const plain = await call(motor, 'GET', '/motor-blocks', await motor.token(a, ['logs.read']));
      expect(plain.body.data[0]).to.have.property('description', null);
    });
  });

  describe('POST /account/motor-blocks', () => {
    it('201 with a new active block on a verified domain: generated SMTP username, smtp_password auth, no credential', async () => {
      const r = await create({ name: 'Orders', domainId: a.domainId, type: 'transactional', description: 'order mail' });
      expect(r.status).to.equal(201);
      expect(r.body.data).to.include({ name: 'Orders', type: 'transactional', description: 'order mail', status: 'active', credentialsAvailable: false, activeAuthMethod: 'smtp_password' });
      expect(r.body.data.dashboardUrl).to.equal(`https://dashboard.example.test/dashboard/motor-blocks/${r.body.data.id}`);
      expect(r.body.data.smtp_username).to.match(/^mb_/);
      expect(r.body.data.domain.id).to.equal(a.domainId);
      // In the caller's grant by the creating event itself, and listed at once (read-your-writes).
      const list = await call(motor, 'GET', '/account/motor-blocks', readOnly);
      expect(list.body.data.map((x: { id: string }) => x.id)).to.include(r.body.data.id);
      const grant = await motor.rt.db.withSchema('rm_directory').table('grant_blocks').where({ motor_block_id: r.body.data.id }).first();
      expect(grant.grant_id).to.equal(`account:${a.accountId}`);
      const created = (await motor.rt.store.readStream(streamName('motorBlock', r.body.data.id)))[0];
      expect(created.type).to.equal('MotorBlockCreated');
      expect((created.data as { grantId: string }).grantId).to.equal(`account:${a.accountId}`);
    });

    it('type defaults to general_purpose', async () => {
      const r = await create({ name: 'Defaults', domainId: a.domainId });
      expect(r.status).to.equal(201);
      expect(r.body.data.type).to.equal('general_purpose');
    });

    it('same Idempotency-Key and same input → the same block (200); different input → 409 idempotency_conflict', async () => {
      const key = v4();
      const first = await create({ name: 'Retry me', domainId: a.domainId }, key);
      const again = await create({ name: 'Retry me', domainId: a.domainId, type: 'general_purpose' }, key);
      expect(first.status).to.equal(201);
      expect(again.status).to.equal(200);
      expect(again.body.data.id).to.equal(first.body.data.id);
      expect(again.body.data.smtp_username).to.equal(first.body.data.smtp_username);
      const changed = await create({ name: 'Something else', domainId: a.domainId }, key);
      expect(changed.status).to.equal(409);
      expect(changed.body).to.include({ success: false, code: 'idempotency_conflict' });
      expect(changed.body.nextAction).to.be.a('string');
    });

    it('the same key and input after the block was deleted → 404 motor_block_not_found (it was 200 with a "deleted" block); a new key creates again', async () => {
      const key = v4();
      const body = { name: 'Short-lived', domainId: a.domainId };
      const first = await create(body, key);
      expect(first.status).to.equal(201);
      const id = first.body.data.id;
      expect((await call(motor, 'POST', `/account/motor-blocks/${id}/deactivate`, manage, { confirm: true })).status).to.equal(200);
      const del = await call(motor, 'DELETE', `/account/motor-blocks/${id}`, manage, { confirm: true, deleteHistory: false });
      expect(del.status).to.equal(202);
      await eventually(async () => (await call(motor, 'GET', `/account/motor-block-deletions/${del.body.data.jobId}`, manage)).body.data?.status === 'completed', 30_000);

      const replay = await create(body, key);
      expect(replay.status, JSON.stringify(replay.body)).to.equal(404);
      expect(replay.body).to.include({ success: false, code: 'motor_block_not_found' });
      expect(replay.body.nextAction).to.match(/Idempotency-Key/);
      expect(JSON.stringify(replay.body)).to.not.include('"deleted"');
      // Nothing was appended to the gone block's stream.
      const events = await motor.rt.store.readStream(streamName('motorBlock', id));
      expect(events[events.length - 1].type).to.equal('MotorBlockDeleted');
      // Another input with that key is still the key's conflict; a new key makes a new block.
      expect((await create({ name: 'Other', domainId: a.domainId }, key)).body.code).to.equal('idempotency_conflict');
      const fresh = await create(body, v4());
      expect(fresh.status).to.equal(201);
      expect(fresh.body.data.id).to.not.equal(id);
    });

    it('20 concurrent creates with one key → one block', async () => {
      const key = v4();
      const results = await Promise.all(Array.from({ length: 20 }, () => create({ name: 'Concurrent', domainId: a.domainId }, key)));
      expect(results.map((r) => r.status).filter((s) => s === 201)).to.have.length(1);
      expect(results.every((r) => r.status === 200 || r.status === 201)).to.equal(true);
      expect(new Set(results.map((r) => r.body.data.id)).size).to.equal(1);
      const list = await call(motor, 'GET', '/account/motor-blocks', readOnly);
      expect(list.body.data.filter((x: { name: string }) => x.name === 'Concurrent')).to.have.length(1);
    });

    it('Idempotency-Key missing or not a UUID v4 → 400 invalid_idempotency_key', async () => {
      for (const key of [null, 'abc', '6f1c8a52-3b7e-1d0a-9a43-2f6e8b1c5d70']) {
        const r = await create({ name: 'No key', domainId: a.domainId }, key);
        expect(r.status).to.equal(400);
        expect(r.body.code).to.equal('invalid_idempotency_key');
      }
    });

    it('bad input → 422 validation_error (name missing, description over 500, unknown type, unknown field)', async () => {
      expect((await create({ domainId: a.domainId })).body.code).to.equal('validation_error');
      const long = await create({ name: 'Long', domainId: a.domainId, description: 'x'.repeat(501) });
      expect([long.status, long.body.code]).to.deep.equal([422, 'validation_error']);
      const t = await create({ name: 'T', domainId: a.domainId, type: 'bulk' });
      expect([t.status, t.body.code]).to.deep.equal([422, 'validation_error']);
      const d = await create({ name: 'D', domainId: 'nope' });
      expect([d.status, d.body.code]).to.deep.equal([422, 'validation_error']);
      const extra = await create({ name: 'E', domainId: a.domainId, colour: 'red' });
      expect([extra.status, extra.body.code]).to.deep.equal([422, 'validation_error']);
    });

    it('sandbox, marketing and portal types → 409 motor_block_type_not_allowed', async () => {
      for (const type of ['sandbox', 'marketing', 'portal']) {
        const r = await create({ name: `Type ${type}`, domainId: a.domainId, type });
        expect([r.status, r.body.code]).to.deep.equal([409, 'motor_block_type_not_allowed']);
      }
    });

    it('unverified or DNS-incomplete domain → 409 domain_not_verified; sandbox domain → 409 domain_not_verified; another account\'s domain → 404', async () => {
      const unverified = await addDomain(motor, a.accountId, { verified: false });
      const noDns = await addDomain(motor, a.accountId, { dnsReady: false });
      const sandbox = await addDomain(motor, a.accountId, { sandbox: true });
      for (const domainId of [unverified, noDns, sandbox]) {
        const r = await create({ name: `On ${domainId}`, domainId });
        expect([r.status, r.body.code]).to.deep.equal([409, 'domain_not_verified']);
        expect(r.body.nextAction).to.be.a('string');
      }
      const foreign = await create({ name: 'Foreign', domainId: other.domainId });
      expect([foreign.status, foreign.body.code]).to.deep.equal([404, 'domain_not_found']);
    });

    it('a name already used in the account (any case) → 409 motor_block_name_conflict', async () => {
      await create({ name: 'Unique name', domainId: a.domainId });
      const r = await create({ name: 'UNIQUE NAME', domainId: a.domainId });
      expect([r.status, r.body.code]).to.deep.equal([409, 'motor_block_name_conflict']);
    });

    it('concurrent creates with different keys and one name → one block, the others 409 motor_block_name_conflict', async () => {
      const results = await Promise.all(Array.from({ length: 8 }, () => create({ name: 'Racing name', domainId: a.domainId })));
      expect(results.filter((r) => r.status === 201)).to.have.length(1);
      expect(results.filter((r) => r.status === 409).map((r) => r.body.code)).to.deep.equal(Array(7).fill('motor_block_name_conflict'));
    });

    it('over the plan limit → 409 motor_block_limit_reached', async () => {
      const c = await motor.bootstrap();
      const t = await motor.token(c, ['config.manage']);
      // PLAN_DEFAULT_MAX_BLOCKS=20 and bootstrap made one.
      for (let i = 0; i < 19; i++) expect((await create({ name: `L${i}`, domainId: c.domainId }, v4(), t)).status).to.equal(201);
      const r = await create({ name: 'L20', domainId: c.domainId }, v4(), t);
      expect([r.status, r.body.code]).to.deep.equal([409, 'motor_block_limit_reached']);
      expect(r.body.limit).to.equal(20);
    });
  });

  describe('rename, type, assign-domain', () => {
    let id: string;
    let username: string;
    before(async () => {
      const r = await create({ name: 'Changeable', domainId: a.domainId });
      id = r.body.data.id;
      username = r.body.data.smtp_username;
    });

    it('PATCH name → 200, the SMTP username never changes; a taken name → 409', async () => {
      const r = await call(motor, 'PATCH', `/account/motor-blocks/${id}/name`, manage, { name: 'Renamed' });
      expect(r.status).to.equal(200);
      expect(r.body.data).to.include({ name: 'Renamed', smtp_username: username });
      const list = await call(motor, 'GET', '/account/motor-blocks', readOnly);
      expect(list.body.data.find((x: { id: string }) => x.id === id)).to.include({ name: 'Renamed', smtp_username: username });
      const taken = await call(motor, 'PATCH', `/account/motor-blocks/${id}/name`, manage, { name: 'Orders' });
      expect([taken.status, taken.body.code]).to.deep.equal([409, 'motor_block_name_conflict']);
    });

    it('PATCH type needs confirm true (400 confirmation_required), then changes it; marketing → 409', async () => {
      const no = await call(motor, 'PATCH', `/account/motor-blocks/${id}/type`, manage, { type: 'transactional' });
      expect([no.status, no.body.code]).to.deep.equal([400, 'confirmation_required']);
      expect(no.body.nextAction).to.be.a('string');
      const falsy = await call(motor, 'PATCH', `/account/motor-blocks/${id}/type`, manage, { type: 'transactional', confirm: false });
      expect(falsy.body.code).to.equal('confirmation_required');
      const ok = await call(motor, 'PATCH', `/account/motor-blocks/${id}/type`, manage, { type: 'transactional', confirm: true });
      expect([ok.status, ok.body.data.type]).to.deep.equal([200, 'transactional']);
      const mk = await call(motor, 'PATCH', `/account/motor-blocks/${id}/type`, manage, { type: 'marketing', confirm: true });
      expect([mk.status, mk.body.code]).to.deep.equal([409, 'motor_block_type_not_allowed']);
    });

    it('POST assign-domain: confirm required, target verified non-sandbox owned; then the block is on the new domain', async () => {
      const target = await addDomain(motor, a.accountId);
      const unverified = await addDomain(motor, a.accountId, { verified: false });
      const sandbox = await addDomain(motor, a.accountId, { sandbox: true });
      const noConfirm = await call(motor, 'POST', `/account/motor-blocks/${id}/assign-domain`, manage, { domainId: target });
      expect([noConfirm.status, noConfirm.body.code]).to.deep.equal([400, 'confirmation_required']);
      for (const d of [unverified, sandbox]) {
        const r = await call(motor, 'POST', `/account/motor-blocks/${id}/assign-domain`, manage, { domainId: d, confirm: true });
        expect([r.status, r.body.code]).to.deep.equal([409, 'domain_not_verified']);
      }
      const foreign = await call(motor, 'POST', `/account/motor-blocks/${id}/assign-domain`, manage, { domainId: other.domainId, confirm: true });
      expect([foreign.status, foreign.body.code]).to.deep.equal([404, 'domain_not_found']);
      const ok = await call(motor, 'POST', `/account/motor-blocks/${id}/assign-domain`, manage, { domainId: target, confirm: true });
      expect(ok.status).to.equal(200);
      expect(ok.body.data.domain.id).to.equal(target);
    });

    it('a motorBlockId query parameter naming another block → 400 motor_block_id_conflict', async () => {
      const r = await call(motor, 'PATCH', `/account/motor-blocks/${id}/name?motorBlockId=${a.motorBlockId}`, manage, { name: 'X' });
      expect([r.status, r.body.code]).to.deep.equal([400, 'motor_block_id_conflict']);
      const same = await call(motor, 'PATCH', `/account/motor-blocks/${id}/name?motorBlockId=${id}`, manage, { name: 'Renamed' });
      expect(same.status).to.equal(200);
    });

    it('another account\'s block or an unknown id → 404 motor_block_not_found; a malformed id → 400', async () => {
      const theirs = await call(motor, 'PATCH', `/account/motor-blocks/${other.motorBlockId}/name`, manage, { name: 'Mine now' });
      expect([theirs.status, theirs.body.code]).to.deep.equal([404, 'motor_block_not_found']);
      const unknown = await call(motor, 'POST', `/account/motor-blocks/${newId()}/deactivate`, manage, { confirm: true });
      expect(unknown.status).to.equal(404);
      const bad = await call(motor, 'POST', '/account/motor-blocks/not-a-uuid/deactivate', manage, { confirm: true });
      expect(bad.status).to.equal(400);
    });
  });

  describe('deactivate and reactivate', () => {
    it('deactivate needs confirm; an inactive block\'s sends are refused; reactivate makes them work again', async () => {
      const domain = senderDomainOf(a);
      expect((await sendFrom(motor, domain, a.apiKey)).status).to.equal(200);
      const no = await call(motor, 'POST', `/account/motor-blocks/${a.motorBlockId}/deactivate`, manage, {});
      expect([no.status, no.body.code]).to.deep.equal([400, 'confirmation_required']);
      const off = await call(motor, 'POST', `/account/motor-blocks/${a.motorBlockId}/deactivate`, manage, { confirm: true });
      expect([off.status, off.body.data.status]).to.deep.equal([200, 'inactive']);
      const refused = await sendFrom(motor, domain, a.apiKey);
      expect([refused.status, refused.body.code]).to.deep.equal([403, 'motor_block_inactive']);
      const list = await call(motor, 'GET', '/account/motor-blocks', readOnly);
      expect(list.body.data.find((x: { id: string }) => x.id === a.motorBlockId).status).to.equal('inactive');
      const on = await call(motor, 'POST', `/account/motor-blocks/${a.motorBlockId}/reactivate`, manage);
      expect([on.status, on.body.data.status]).to.deep.equal([200, 'active']);
      expect((await sendFrom(motor, domain, a.apiKey)).status).to.equal(200);
    });

    it('reactivate without a verified production domain → 409 motor_block_domain_required', async () => {
      const d = await addDomain(motor, a.accountId);
      const r = await create({ name: 'Fragile', domainId: d });
      const id = r.body.data.id;
      await call(motor, 'POST', `/account/motor-blocks/${id}/deactivate`, manage, { confirm: true });
      // The domain's DNS breaks while the block is off.
      await motor.rt.store.append(streamName('sendingDomain', d), [toEventData(newId(), {
        type: 'DomainDnsChecked', data: { domainId: d, method: 'dns', spfConfigured: false, dkimConfigured: true, dmarcConfigured: false, checkedAt: new Date().toISOString() },
      })], { expectedRevision: 'any' });
      const on = await call(motor, 'POST', `/account/motor-blocks/${id}/reactivate`, manage);
      expect([on.status, on.body.code]).to.deep.equal([409, 'motor_block_domain_required']);
      expect(on.body.nextAction).to.be.a('string');
    });
  });

  describe('DELETE refusals', () => {
    it('active block → 409 motor_block_must_be_inactive; confirm missing → 400; deleteHistory missing → 422', async () => {
      const r = await create({ name: 'Keep me', domainId: a.domainId });
      const id = r.body.data.id;
      const active = await call(motor, 'DELETE', `/account/motor-blocks/${id}`, manage, { confirm: true, deleteHistory: true });
      expect([active.status, active.body.code]).to.deep.equal([409, 'motor_block_must_be_inactive']);
      await call(motor, 'POST', `/account/motor-blocks/${id}/deactivate`, manage, { confirm: true });
      const noConfirm = await call(motor, 'DELETE', `/account/motor-blocks/${id}`, manage, { deleteHistory: true });
      expect([noConfirm.status, noConfirm.body.code]).to.deep.equal([400, 'confirmation_required']);
      const noHistoryFlag = await call(motor, 'DELETE', `/account/motor-blocks/${id}`, manage, { confirm: true });
      expect([noHistoryFlag.status, noHistoryFlag.body.code]).to.deep.equal([422, 'validation_error']);
    });
  });

  describe('authorization check and credentials', () => {
    it('GET /account/authorization/motor-blocks/{id}: authorized true for a covered block, 403 otherwise', async () => {
      const ok = await call(motor, 'GET', `/account/authorization/motor-blocks/${a.motorBlockId}`, manage);
      expect(ok.status).to.equal(200);
      expect(ok.body.data.authorized).to.equal(true);
      for (const id of [other.motorBlockId, newId()]) {
        const no = await call(motor, 'GET', `/account/authorization/motor-blocks/${id}`, manage);
        expect([no.status, no.body.code]).to.deep.equal([403, 'motor_block_not_authorized']);
      }
      const theirs = await call(motor, 'GET', `/account/authorization/motor-blocks/${other.motorBlockId}`, otherManage);
      expect(theirs.status).to.equal(200);
    });

    it('a token without the scope → 403 insufficient_scope; no token, an API key or a bad token → 401', async () => {
      const post = await create({ name: 'Scope', domainId: a.domainId }, v4(), readOnly);
      expect([post.status, post.body.code]).to.deep.equal([403, 'insufficient_scope']);
      const logsOnly = await motor.token(a, ['logs.read']);
      expect((await call(motor, 'GET', '/account/motor-blocks', logsOnly)).status).to.equal(403);
      expect((await call(motor, 'GET', `/account/motor-block-deletions/${newId()}`, logsOnly)).status).to.equal(403);
      expect((await call(motor, 'GET', '/account/motor-blocks', null)).status).to.equal(401);
      const withKey = await call(motor, 'GET', '/account/motor-blocks', null, undefined, { authorization: `ApiKey ${a.accountApiKey}` });
      expect(withKey.status).to.equal(401);
      const blockKey = await call(motor, 'POST', '/account/motor-blocks', null, { name: 'k', domainId: a.domainId }, { 'X-Api-Key': a.apiKey, 'Idempotency-Key': v4() });
      expect(blockKey.status).to.equal(401);
      expect((await call(motor, 'GET', '/account/motor-blocks', 'not.a.token')).status).to.equal(401);
    });
  });
});
