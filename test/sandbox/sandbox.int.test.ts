import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import { streamName } from '../../domain/eventStore';
import type { MessageAccepted, SmtpSubmissionRefused } from '../../domain/events';
import { parseApiKey } from '../../domain/credentials/apiKeys';
import { findApiKeyByPrefix, getBlock, getSandboxAllowlist, listLiveBlocksOfAccount } from '../../projections/directory/queries';
import { rawSession, rfc822, transport } from '../smtp/harness';
import { bearer, eventually, getJson, postJson, startSandboxHarness, uniq, type SandboxHarness } from './harness';

/**
 * The account sandbox over real HTTP, SMTP and DNS on loopback (docs/SANDBOX.md): an agent starts
 * from zero with a dashboard session, provisions, mints its first bearer token for the returned
 * block, sends within the allowlist on HTTP and SMTP, and converts onto a verified domain.
 */
describe('Account sandbox (integration)', function () {
  this.timeout(120_000);
  let h: SandboxHarness;
  let user: { token: string; accountId: string; email: string };
  let handle: string;
  let motorBlockId: string;
  let sandboxDomain: string;
  let publicToken: string;

  const noCredential = (body: unknown) => {
    const text = JSON.stringify(body);
    expect(text).to.not.match(/"(password|smtpPassword|secret|key|apiKey|token)"\s*:|mk_live_|ak_live_/i);
  };

  before(async () => {
    h = await startSandboxHarness();
    user = await h.signUp();
    handle = `acme-${uniq()}`;
  });
  after(async () => {
    await h?.close();
  });

  it('dashboard path from zero: not provisioned → provision 201 → again 200 → bearer token for motorBlockId → public status', async () => {
    const before = await getJson(h.url('/api/developer/sandbox'), bearer(user.token));
    expect(before.status).to.equal(200);
    expect(before.body.data).to.include({ provisioned: false, motorBlockId: null, allowlistLocked: false, converted: false });

    const first = await postJson(h.url('/api/developer/sandbox/provision'), { handle: handle.toUpperCase() }, bearer(user.token));
    expect(first.status).to.equal(201);
    const s = first.body.data;
    expect(s).to.include({ provisioned: true, handle, channel: 'agent', allowlistLocked: true, hasActiveProductionBlock: false, converted: false });
    expect(s.domain).to.include({ name: `${handle}.sandbox.${h.motor.config.serviceDomain}`, sandbox: true });
    expect(s.allowlist).to.deep.equal([user.email]);
    expect(s.motorBlockId).to.match(/^[0-9a-f-]{36}$/);
    noCredential(first.body);
    motorBlockId = s.motorBlockId;
    sandboxDomain = s.domain.name;

    const block = await getBlock(h.motor.rt.db, motorBlockId);
    expect(block).to.include({ type: 'sandbox', accountId: user.accountId, status: 'active' });

    const again = await postJson(h.url('/api/developer/sandbox/provision'), { handle: 'another-one' }, bearer(user.token));
    expect(again.status).to.equal(200);
    expect(again.body.data).to.include({ motorBlockId, handle });

    publicToken = await h.dashboardToken(user.token, motorBlockId, ['sandbox.manage', 'config.read']);
    const pub = await getJson(h.url('/api/public/v1/account/sandbox'), bearer(publicToken));
    expect(pub.status).to.equal(200);
    expect(pub.body.data).to.deep.equal((await getJson(h.url('/api/developer/sandbox'), bearer(user.token))).body.data);

    const pubProvision = await postJson(h.url('/api/public/v1/account/sandbox/provision'), {}, bearer(publicToken));
    expect(pubProvision.status).to.equal(200);
    expect(pubProvision.body.data.motorBlockId).to.equal(motorBlockId);
  });

  it('credentials and scope: public routes need sandbox.manage and refuse a dashboard JWT; dashboard routes refuse a bearer token', async () => {
    const noScope = await h.dashboardToken(user.token, motorBlockId, ['config.read']);
    const r1 = await getJson(h.url('/api/public/v1/account/sandbox'), bearer(noScope));
    expect(r1.status).to.equal(403);
    expect(r1.body.code).to.equal('insufficient_scope');
    const r2 = await getJson(h.url('/api/public/v1/account/sandbox'), bearer(user.token));
    expect(r2.status).to.equal(401);
    const r3 = await getJson(h.url('/api/developer/sandbox'), bearer(publicToken));
    expect(r3.status).to.equal(401);
    const r4 = await getJson(h.url('/api/developer/sandbox'));
    expect(r4.status).to.equal(401);
  });

  it('concurrent provisions make one sandbox: one 201, the others 200 with the same block', async () => {
    const u = await h.signUp();
    const results = await Promise.all([
      postJson(h.url('/api/developer/sandbox/provision'), {}, bearer(u.token)),
      postJson(h.url('/api/developer/sandbox/provision'), {}, bearer(u.token)),
      postJson(h.url('/api/developer/sandbox/provision'), { channel: 'dashboard' }, bearer(u.token)),
    ]);
    expect(results.map((r) => r.status).sort()).to.deep.equal([200, 200, 201]);
    const ids = new Set(results.map((r) => r.body.data.motorBlockId));
    expect(ids.size).to.equal(1);
    expect(results[0].body.data.handle).to.match(/^sbx-[a-z2-7]{10}$/);
    const events = await h.motor.rt.store.readStream(streamName('account', u.accountId));
    expect(events.filter((e) => e.type === 'SandboxProvisioned')).to.have.length(1);
    const blocks = (await h.motor.rt.db.withSchema('rm_directory').table('motor_blocks').where({ account_id: u.accountId, type: 'sandbox' })) as unknown[];
    expect(blocks).to.have.length(1);
  });

  it('handles: not a DNS label → 400 invalid_handle; held by another account → 409 sandbox_handle_taken; bad channel → 400', async () => {
    const u = await h.signUp();
    for (const bad of ['Bad_Handle', '-x', 'a'.repeat(64), 'dots.not.allowed', 42]) {
      const r = await postJson(h.url('/api/developer/sandbox/provision'), { handle: bad }, bearer(u.token));
      expect(r.status, String(bad)).to.equal(400);
      expect(r.body.code).to.equal('invalid_handle');
    }
    const taken = await postJson(h.url('/api/developer/sandbox/provision'), { handle }, bearer(u.token));
    expect(taken.status).to.equal(409);
    expect(taken.body.code).to.equal('sandbox_handle_taken');
    expect(taken.body.nextAction).to.be.a('string');
    const channel = await postJson(h.url('/api/developer/sandbox/provision'), { channel: 'fax' }, bearer(u.token));
    expect(channel.status).to.equal(400);
    expect(channel.body.code).to.equal('validation_error');
    const status = await getJson(h.url('/api/developer/sandbox'), bearer(u.token));
    expect(status.body.data.provisioned).to.equal(false);
  });

  it('concurrent PATCH outbound: each 200 (or 409 sandbox_conflict after its tries), never 5xx (they were 500 internal_error); the allowlist is one that was answered 200', async () => {
    const u = await h.signUp();
    expect((await postJson(h.url('/api/developer/sandbox/provision'), {}, bearer(u.token))).status).to.equal(201);
    const rs = await Promise.all(Array.from({ length: 12 }, (_, i) => h.patch('/api/developer/sandbox/outbound', { addresses: [`burst${i}@rcpt.test`] }, bearer(u.token))));
    const seen = rs.map((r) => `${r.status}:${r.body.code ?? 'ok'}`);
    for (const r of seen) expect(r, seen.join(' ')).to.be.oneOf(['200:ok', '409:sandbox_conflict']);
    expect(seen.filter((r) => r === '200:ok').length, seen.join(' ')).to.be.greaterThan(6);
    const now = await getJson(h.url('/api/developer/sandbox'), bearer(u.token));
    const written = rs.flatMap((r, i) => (r.status === 200 ? [`burst${i}@rcpt.test`] : []));
    expect(now.body.data.allowlist).to.have.length(2);
    expect(now.body.data.allowlist[0]).to.equal(u.email);
    expect(written).to.include(now.body.data.allowlist[1]);
  });

  it('PATCH outbound: validates addresses and the maximum, and sets the effective allowlist', async () => {
    const bad = await h.patch('/api/developer/sandbox/outbound', { addresses: ['ok@rcpt.test', 'not-an-address'] }, bearer(user.token));
    expect(bad.status).to.equal(400);
    expect(bad.body.code).to.equal('invalid_email');
    const many = await h.patch('/api/developer/sandbox/outbound', { addresses: Array.from({ length: 26 }, (_, i) => `a${i}@rcpt.test`) }, bearer(user.token));
    expect(many.status).to.equal(400);
    expect(many.body.code).to.equal('allowlist_too_large');
    const notArray = await h.patch('/api/developer/sandbox/outbound', { addresses: 'a@rcpt.test' }, bearer(user.token));
    expect(notArray.status).to.equal(400);
    // An item String() cannot print (it was a 500).
    const unprintable = await h.patch('/api/developer/sandbox/outbound', { addresses: [{ toString: 1 }, 7] }, bearer(user.token));
    expect([unprintable.status, unprintable.body.code]).to.deep.equal([400, 'invalid_email']);
    expect(unprintable.body.invalid).to.deep.equal([{ toString: 1 }, 7]);

    const ok = await h.patch('/api/developer/sandbox/outbound', { addresses: ['Allowed@rcpt.test', 'second@rcpt.test', user.email] }, bearer(user.token));
    expect(ok.status).to.equal(200);
    expect(ok.body.data.allowlist).to.deep.equal([user.email, 'allowed@rcpt.test', 'second@rcpt.test']);
    const pub = await getJson(h.url('/api/public/v1/account/sandbox'), bearer(publicToken));
    expect(pub.body.data.allowlist).to.deep.equal([user.email, 'allowed@rcpt.test', 'second@rcpt.test']);
    expect(pub.body.data.allowlistLocked).to.equal(true);

    const none = await h.signUp();
    const r = await h.patch('/api/developer/sandbox/outbound', { addresses: [] }, bearer(none.token));
    expect(r.status).to.equal(404);
    expect(r.body.code).to.equal('sandbox_not_provisioned');
  });

  let apiKey: string;
  let smtpPassword: string;
  let oldUsername: string;

  it('the allowlist is enforced on POST /v1/send (real and dry run), before the quota', async () => {
    const k = await postJson(h.url(`/api/motor-blocks/${motorBlockId}/api-keys`), {}, bearer(user.token));
    expect(k.status).to.equal(201);
    apiKey = k.body.data.key;
    await eventually(async () => findApiKeyByPrefix(h.motor.rt.db, parseApiKey(apiKey)!.prefix));
    const send = (to: string[], extra: Record<string, unknown> = {}) =>
      postJson(h.url('/v1/send'), { from: `dev@${sandboxDomain}`, to, subject: 'sandbox', text: 'hi', ...extra }, { authorization: `ApiKey ${apiKey}` });

    const refused = await send(['allowed@rcpt.test', 'stranger@rcpt.test']);
    expect(refused.status).to.equal(403);
    expect(refused.body.code).to.equal('sandbox_recipient_not_allowed');
    expect(refused.body.refusedRecipients).to.deep.equal(['stranger@rcpt.test']);
    expect(refused.body.nextAction).to.match(/outbound/);
    expect(refused.headers.get('ratelimit-limit')).to.equal(null);

    const dry = await send(['stranger@rcpt.test'], { dryRun: true });
    expect(dry.status).to.equal(403);
    expect(dry.body.code).to.equal('sandbox_recipient_not_allowed');

    const ok = await send(['ALLOWED@rcpt.test', user.email]);
    expect(ok.status).to.equal(200);
    expect(ok.body.data.acceptanceStatus).to.equal('queued');
    await eventually(async () => h.mailsTo('allowed@rcpt.test').some((m) => m.includes('Subject: sandbox')), 20_000);
  });

  it('the allowlist is enforced on SMTP at RCPT TO (550 5.7.1, SmtpSubmissionRefused): the message goes to the allowed recipients only', async () => {
    const p = await postJson(h.url(`/api/motor-blocks/${motorBlockId}/smtp-password`), {}, bearer(user.token));
    expect(p.status).to.equal(200);
    smtpPassword = p.body.data.password;
    oldUsername = (await getBlock(h.motor.rt.db, motorBlockId))!.smtpUsername;
    await eventually(async () => (await getBlock(h.motor.rt.db, motorBlockId))?.smtpPasswordHash);
    const from = `dev@${sandboxDomain}`;

    // The refusal names the recipient at its RCPT TO (RFC 5321 4.3.2), not the whole message after DATA.
    const c = await rawSession(h, { smtpUsername: oldUsername, smtpPassword });
    expect(await c.command(`MAIL FROM:<${from}>`)).to.match(/^250 /);
    expect(await c.command('RCPT TO:<second@rcpt.test>')).to.match(/^250 /);
    const refusal = await c.command('RCPT TO:<stranger@rcpt.test>');
    expect(refusal).to.match(/^550 5\.7\.1 .*stranger@rcpt\.test/);
    expect(await c.command('DATA')).to.match(/^354 /);
    const done = await c.command(`${rfc822({ from, to: 'second@rcpt.test', subject: 'smtp sandbox rcpt' })}.`);
    c.end();
    expect(done).to.match(/^250 /);
    const id = /queued as ([0-9a-f-]{36})/.exec(done!)![1];
    expect(((await h.motor.rt.store.readStream(streamName('message', id)))[0].data as MessageAccepted).to).to.deep.equal(['second@rcpt.test']);
    await eventually(async () => h.mailsTo('second@rcpt.test').some((m) => m.includes('Subject: smtp sandbox rcpt')), 20_000);
    expect(h.mailsTo('stranger@rcpt.test').some((m) => m.includes('Subject: smtp sandbox rcpt'))).to.equal(false);

    const refused = await eventually(async () => (await h.motor.rt.store.readStream(streamName('smtpSubmission', motorBlockId)))
      .map((e) => e.data as SmtpSubmissionRefused).find((e) => e.code === 'sandbox_recipient_not_allowed'));
    expect(refused).to.deep.include({ reply: refusal, envelopeFrom: from, recipientCount: 1 });

    // A real client carries on with the accepted recipients and reports the refused one.
    const t = transport(h, { user: oldUsername, pass: smtpPassword });
    const info = await t.sendMail({ from, to: ['second@rcpt.test', 'stranger@rcpt.test'], subject: 'smtp sandbox ok', text: 'x' });
    const only = await t.sendMail({ from, to: ['second@rcpt.test'], subject: 'smtp sandbox ok', text: 'x' });
    t.close();
    expect(info.response).to.match(/^250 /);
    expect(info.accepted).to.deep.equal(['second@rcpt.test']);
    expect(info.rejected).to.deep.equal(['stranger@rcpt.test']);
    expect(only.response).to.match(/^250 /);
  });

  it('an address taken off the allowlist between RCPT TO and DATA: DATA refuses the message (554 5.7.1)', async () => {
    const set = (addresses: string[]) => h.patch('/api/developer/sandbox/outbound', { addresses }, bearer(user.token));
    const listed = async () => (await getSandboxAllowlist(h.motor.rt.db, motorBlockId)) ?? [];
    expect((await set(['allowed@rcpt.test', 'second@rcpt.test', 'third@rcpt.test'])).status).to.equal(200);
    await eventually(async () => (await listed()).includes('third@rcpt.test'));
    const from = `dev@${sandboxDomain}`;
    const c = await rawSession(h, { smtpUsername: oldUsername, smtpPassword });
    expect(await c.command(`MAIL FROM:<${from}>`)).to.match(/^250 /);
    expect(await c.command('RCPT TO:<third@rcpt.test>')).to.match(/^250 /);
    expect((await set(['allowed@rcpt.test', 'second@rcpt.test'])).status).to.equal(200);
    await eventually(async () => !(await listed()).includes('third@rcpt.test'));
    expect(await c.command('DATA')).to.match(/^354 /);
    const refusal = await c.command(`${rfc822({ from, to: 'third@rcpt.test' })}.`);
    c.end();
    expect(refusal).to.match(/^554 5\.7\.1 .*third@rcpt\.test/);
  });

  it('convert: refuses a missing, malformed, unknown, unverified or sandbox domain', async () => {
    const path = '/api/public/v1/account/sandbox/convert';
    const missing = await postJson(h.url(path), {}, bearer(publicToken));
    expect([missing.status, missing.body.code]).to.deep.equal([400, 'validation_error']);
    const malformed = await postJson(h.url(path), { domainId: 'nope' }, bearer(publicToken));
    expect([malformed.status, malformed.body.code]).to.deep.equal([400, 'invalid_id']);
    const unknown = await postJson(h.url(path), { domainId: '6f1c8a52-3b7e-4d0a-9a43-2f6e8b1c5d70' }, bearer(publicToken));
    expect([unknown.status, unknown.body.code]).to.deep.equal([404, 'domain_not_found']);
    const unverified = await h.addDomain(user.accountId, false);
    const r = await postJson(h.url(path), { domainId: unverified.id }, bearer(publicToken));
    expect([r.status, r.body.code]).to.deep.equal([409, 'domain_not_verified']);
    expect(r.body.nextAction).to.be.a('string');
    const sandboxDomainId = (await getJson(h.url('/api/developer/sandbox'), bearer(user.token))).body.data.domain.id;
    const own = await postJson(h.url(path), { domainId: sandboxDomainId }, bearer(publicToken));
    expect([own.status, own.body.code]).to.deep.equal([409, 'domain_not_verified']);
    const badType = await postJson(h.url(path), { domainId: unverified.id, type: 'marketing' }, bearer(publicToken));
    expect([badType.status, badType.body.code]).to.deep.equal([400, 'validation_error']);
    const other = await h.signUp();
    const otherDomain = await h.addDomain(other.accountId, true);
    const foreign = await postJson(h.url(path), { domainId: otherDomain.id }, bearer(publicToken));
    expect([foreign.status, foreign.body.code]).to.deep.equal([404, 'domain_not_found']);
    expect((await getBlock(h.motor.rt.db, motorBlockId))!.type).to.equal('sandbox');
  });

  it('convert: same block, new SMTP username, credential changes reported, never a credential; one-way', async () => {
    const target = await h.addDomain(user.accountId, true);
    // The domain id in capitals is the same id (docs/ARCHITECTURE.md "Ids in paths").
    const r = await postJson(h.url('/api/public/v1/account/sandbox/convert'), { domainId: target.id.toUpperCase(), name: 'Production app', type: 'transactional' }, bearer(publicToken));
    expect(r.status).to.equal(200);
    noCredential(r.body);
    const d = r.body.data;
    expect(d).to.include({ motorBlockId, name: 'Production app', type: 'transactional', previousSmtpUsername: oldUsername, allowlistLocked: false });
    expect(d.smtpUsername).to.be.a('string').and.not.equal(oldUsername);
    expect(d.credentialChanges).to.deep.equal({ smtpUsernameChanged: true, smtpPasswordChanged: false, apiKeysChanged: false, authMethodChanged: false, grantChanged: false });
    expect(d.integrationActionRequired).to.include(d.smtpUsername).and.include(oldUsername);
    expect(d.domain).to.deep.equal({ id: target.id, name: target.name });

    const block = (await getBlock(h.motor.rt.db, motorBlockId))!;
    expect(block).to.include({ type: 'transactional', name: 'Production app', domainId: target.id, smtpUsername: d.smtpUsername, status: 'active' });

    const status = (await getJson(h.url('/api/developer/sandbox'), bearer(user.token))).body.data;
    expect(status).to.include({ converted: true, allowlistLocked: false, hasActiveProductionBlock: true, motorBlockId });
    expect(status.allowlist).to.equal(null);

    // The same block API key sends from the new domain, to anyone.
    const send = await postJson(h.url('/v1/send'), { from: `app@${target.name}`, to: 'stranger@rcpt.test', subject: 'converted', text: 'x' }, { authorization: `ApiKey ${apiKey}` });
    expect(send.status).to.equal(200);

    // SMTP: the old username is refused; the same password works with the new one, to anyone.
    const old = transport(h, { user: oldUsername, pass: smtpPassword });
    const err = await old.sendMail({ from: `app@${target.name}`, to: 'stranger@rcpt.test', subject: 's', text: 't' }).then(() => null, (e) => e);
    old.close();
    expect(err?.responseCode).to.equal(535);
    const fresh = transport(h, { user: d.smtpUsername, pass: smtpPassword });
    const info = await fresh.sendMail({ from: `app@${target.name}`, to: 'stranger@rcpt.test', subject: 'smtp converted', text: 't' });
    fresh.close();
    expect(info.response).to.match(/^250 /);

    const second = await postJson(h.url('/api/developer/sandbox/convert'), { domainId: target.id }, bearer(user.token));
    expect([second.status, second.body.code]).to.deep.equal([409, 'sandbox_already_converted']);
    const patch = await h.patch('/api/developer/sandbox/outbound', { addresses: [] }, bearer(user.token));
    expect([patch.status, patch.body.code]).to.deep.equal([409, 'sandbox_already_converted']);
    const provision = await postJson(h.url('/api/developer/sandbox/provision'), {}, bearer(user.token));
    expect([provision.status, provision.body.data.converted]).to.deep.equal([200, true]);
  });

  it('convert through the dashboard route; without a sandbox it is 404 sandbox_not_provisioned', async () => {
    const u = await h.signUp();
    const none = await postJson(h.url('/api/developer/sandbox/convert'), { domainId: '6f1c8a52-3b7e-4d0a-9a43-2f6e8b1c5d70' }, bearer(u.token));
    expect([none.status, none.body.code]).to.deep.equal([404, 'sandbox_not_provisioned']);
    const p = await postJson(h.url('/api/developer/sandbox/provision'), { handle: `x${uniq()}` }, bearer(u.token));
    expect(p.status).to.equal(201);
    const target = await h.addDomain(u.accountId, true);
    const r = await postJson(h.url('/api/developer/sandbox/convert'), { domainId: target.id }, bearer(u.token));
    expect(r.status).to.equal(200);
    expect(r.body.data).to.include({ motorBlockId: p.body.data.motorBlockId, name: target.name, type: 'general_purpose' });
    expect(r.body.data.credentialChanges.smtpUsernameChanged).to.equal(true);
  });

  it('convert: a name another block of the account has (any case) → 409 motor_block_name_conflict, the sandbox stays a sandbox', async () => {
    const u = await h.signUp();
    const p = await postJson(h.url('/api/developer/sandbox/provision'), { handle: `n${uniq()}` }, bearer(u.token));
    expect(p.status).to.equal(201);
    const target = await h.addDomain(u.accountId, true);
    const manage = await h.dashboardToken(u.token, p.body.data.motorBlockId, ['config.manage', 'sandbox.manage']);
    const created = await postJson(h.url('/api/public/v1/account/motor-blocks'), { name: 'Billing', domainId: target.id }, { ...bearer(manage), 'Idempotency-Key': randomUUID() });
    expect(created.status).to.equal(201);
    const clash = await postJson(h.url('/api/public/v1/account/sandbox/convert'), { domainId: target.id, name: 'billing' }, bearer(manage));
    expect([clash.status, clash.body.code]).to.deep.equal([409, 'motor_block_name_conflict']);
    expect((await getBlock(h.motor.rt.db, p.body.data.motorBlockId))!.type).to.equal('sandbox');
    const ok = await postJson(h.url('/api/public/v1/account/sandbox/convert'), { domainId: target.id, name: 'Billing 2' }, bearer(manage));
    expect([ok.status, ok.body.data.name]).to.deep.equal([200, 'Billing 2']);
  });

  it('convert counts toward the plan\'s maxBlocks like a create: at the limit → 409 motor_block_limit_reached, the sandbox stays a sandbox', async () => {
    // Plan free allows 1 block, and bootstrap made it; the sandbox block does not count (yet).
    const acct = await h.bootstrapAccount('free');
    const t = await h.motor.token(acct, ['sandbox.manage', 'config.manage']);
    const p = await postJson(h.url('/api/public/v1/account/sandbox/provision'), { handle: `l${uniq()}` }, bearer(t));
    expect(p.status).to.equal(201);
    const sandboxBlockId: string = p.body.data.motorBlockId;
    const created = await postJson(h.url('/api/public/v1/account/motor-blocks'), { name: 'Second', domainId: acct.domainId }, { ...bearer(t), 'Idempotency-Key': randomUUID() });
    expect([created.status, created.body.code, created.body.limit]).to.deep.equal([409, 'motor_block_limit_reached', 1]);
    // Converting would make the same second production block: the same refusal.
    const r = await postJson(h.url('/api/public/v1/account/sandbox/convert'), { domainId: acct.domainId, name: 'Second' }, bearer(t));
    expect([r.status, r.body.code, r.body.limit]).to.deep.equal([409, 'motor_block_limit_reached', 1]);
    expect(r.body.nextAction).to.be.a('string');
    expect((await getBlock(h.motor.rt.db, sandboxBlockId))!.type).to.equal('sandbox');
    const status = (await getJson(h.url('/api/public/v1/account/sandbox'), bearer(t))).body.data;
    expect(status).to.include({ converted: false, allowlistLocked: true });

    // Once the other block is deleted, the slot is free and the conversion goes through.
    const path = `/api/public/v1/account/motor-blocks/${acct.motorBlockId}`;
    expect((await postJson(h.url(`${path}/deactivate`), { confirm: true }, bearer(t))).status).to.equal(200);
    const del = await fetch(h.url(path), { method: 'DELETE', headers: { 'content-type': 'application/json', ...bearer(t) }, body: JSON.stringify({ confirm: true, deleteHistory: true }) });
    expect(del.status).to.equal(202);
    await eventually(async () => (await getBlock(h.motor.rt.db, acct.motorBlockId))?.status === 'deleted' || null, 30_000);
    const ok = await postJson(h.url('/api/public/v1/account/sandbox/convert'), { domainId: acct.domainId, name: 'Second' }, bearer(t));
    expect([ok.status, ok.body.data?.motorBlockId]).to.deep.equal([200, sandboxBlockId]);
  });

  it('GET /account/state: a converted sandbox stays converted after its block is deleted (the state says the block is gone)', async () => {
    const acct = await h.bootstrapAccount('starter');
    const t = await h.motor.token(acct, ['sandbox.manage', 'config.manage', 'config.read']);
    const p = await postJson(h.url('/api/public/v1/account/sandbox/provision'), { handle: `g${uniq()}` }, bearer(t));
    expect(p.status).to.equal(201);
    const sandboxBlockId: string = p.body.data.motorBlockId;
    const state = async () => (await getJson(h.url('/api/public/v1/account/state'), bearer(t))).body.data.sandbox;
    expect(await state()).to.include({ provisioned: true, motorBlockId: sandboxBlockId, motorBlockStatus: 'active', converted: false, convertedAt: null });

    const c = await postJson(h.url('/api/public/v1/account/sandbox/convert'), { domainId: acct.domainId, name: 'Gone soon' }, bearer(t));
    expect(c.status).to.equal(200);
    expect(await state()).to.include({ motorBlockId: sandboxBlockId, motorBlockStatus: 'active', converted: true, convertedAt: c.body.data.convertedAt });

    const path = `/api/public/v1/account/motor-blocks/${sandboxBlockId}`;
    expect((await postJson(h.url(`${path}/deactivate`), { confirm: true }, bearer(t))).status).to.equal(200);
    const del = await fetch(h.url(path), { method: 'DELETE', headers: { 'content-type': 'application/json', ...bearer(t) }, body: JSON.stringify({ confirm: true, deleteHistory: true }) });
    expect(del.status).to.equal(202);
    await eventually(async () => (await getBlock(h.motor.rt.db, sandboxBlockId))?.status === 'deleted' || null, 30_000);

    // The conversion happened; deleting the block it made does not undo it (it was false again).
    const after = await state();
    expect(after).to.deep.equal({
      provisioned: true, handle: p.body.data.handle, domainId: p.body.data.domain.id, motorBlockId: sandboxBlockId, motorBlockStatus: 'deleted',
      converted: true, convertedAt: c.body.data.convertedAt,
    });
    // The sandbox route agrees.
    expect((await getJson(h.url('/api/public/v1/account/sandbox'), bearer(t))).body.data).to.include({ converted: true, convertedAt: c.body.data.convertedAt });
  });

  it('provision names its block under the account lock: a name another block has gets a suffix; a racing create of that name never makes two', async () => {
    const namesOf = async (accountId: string) => (await listLiveBlocksOfAccount(h.motor.rt.db, accountId)).map((b) => b.name.toLowerCase());
    const provision = (t: string, handle: string) => postJson(h.url('/api/public/v1/account/sandbox/provision'), { handle }, bearer(t));
    const create = (t: string, domainId: string, name: string) =>
      postJson(h.url('/api/public/v1/account/motor-blocks'), { name, domainId }, { ...bearer(t), 'Idempotency-Key': randomUUID() });

    // One after the other: the create took the name first (in other capitals).
    const acct = await h.bootstrapAccount('starter');
    const t = await h.motor.token(acct, ['sandbox.manage', 'config.manage']);
    const handle = `s${uniq()}`;
    expect((await create(t, acct.domainId, `SANDBOX ${handle}`)).status).to.equal(201);
    const p = await provision(t, handle);
    expect(p.status).to.equal(201);
    expect((await getBlock(h.motor.rt.db, p.body.data.motorBlockId))!.name).to.equal(`Sandbox ${handle} (2)`);
    const names = await namesOf(acct.accountId);
    expect(new Set(names).size, names.join(', ')).to.equal(names.length);

    // At the same time: whichever names first, the other sees it.
    for (let round = 0; round < 3; round++) {
      const a = await h.bootstrapAccount('starter');
      const ta = await h.motor.token(a, ['sandbox.manage', 'config.manage']);
      const hd = `s${uniq()}`;
      const [pr, cr] = await Promise.all([provision(ta, hd), create(ta, a.domainId, `Sandbox ${hd}`)]);
      expect(pr.status).to.equal(201);
      expect([201, 409], JSON.stringify(cr.body)).to.include(cr.status);
      if (cr.status === 409) expect(cr.body.code).to.equal('motor_block_name_conflict');
      const n = await namesOf(a.accountId);
      expect(new Set(n).size, n.join(', ')).to.equal(n.length);
    }
  });

  it('convert and creates racing for the last slot of the plan: exactly one gets it (the same account lock)', async () => {
    // Plan starter allows 5: bootstrap's block and 3 created ones leave one slot.
    const acct = await h.bootstrapAccount('starter');
    const t = await h.motor.token(acct, ['sandbox.manage', 'config.manage']);
    const p = await postJson(h.url('/api/public/v1/account/sandbox/provision'), { handle: `r${uniq()}` }, bearer(t));
    expect(p.status).to.equal(201);
    const create = (name: string) => postJson(h.url('/api/public/v1/account/motor-blocks'), { name, domainId: acct.domainId }, { ...bearer(t), 'Idempotency-Key': randomUUID() });
    for (const n of ['B1', 'B2', 'B3']) expect((await create(n)).status).to.equal(201);
    const results = await Promise.all([
      postJson(h.url('/api/public/v1/account/sandbox/convert'), { domainId: acct.domainId, name: 'Converted' }, bearer(t)),
      create('C1'), create('C2'), create('C3'),
    ]);
    const ok = results.filter((r) => r.status === 200 || r.status === 201);
    expect(ok, JSON.stringify(results.map((r) => [r.status, r.body.code]))).to.have.length(1);
    expect(results.filter((r) => r.status === 409).map((r) => r.body.code)).to.deep.equal(Array(3).fill('motor_block_limit_reached'));
    const live = await listLiveBlocksOfAccount(h.motor.rt.db, acct.accountId);
    expect(live.filter((b) => b.type !== 'sandbox')).to.have.length(5);
  });
});
