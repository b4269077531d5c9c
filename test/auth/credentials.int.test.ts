import { expect } from 'chai';
import { hashSecret } from '../../domain/credentials/apiKeys';
import { getBlock } from '../../projections/directory/queries';
import { eventually, getJson, postJson } from '../support/motor';
import { createBlockFor } from './fixtures';
import { startAuthHarness, type AuthHarness } from './harness';

describe('dashboard credentials and token minting with a dashboard JWT (int)', function () {
  this.timeout(90_000);
  let h: AuthHarness;
  let me: { token: string; accountId: string };
  let other: { token: string; accountId: string };
  let block: { motorBlockId: string; domain: string };
  let otherBlock: { motorBlockId: string };
  const auth = (t = me.token) => ({ authorization: `Bearer ${t}` });
  const del = async (path: string, headers: Record<string, string>) => {
    const res = await fetch(`${h.motor.baseUrl}${path}`, { method: 'DELETE', headers });
    return { status: res.status, body: await res.json() as any }; // eslint-disable-line @typescript-eslint/no-explicit-any
  };
  const get = (path: string, headers: Record<string, string>) => getJson(`${h.motor.baseUrl}${path}`, headers);

  before(async () => {
    h = await startAuthHarness();
    me = await h.signUp('owner@rcpt.test');
    other = await h.signUp('stranger@rcpt.test');
    block = await createBlockFor(h.motor, me.accountId);
    otherBlock = await createBlockFor(h.motor, other.accountId);
  });
  after(async () => { await h?.close(); });

  describe('POST /api/public/token (dashboard JWT)', () => {
    it('mints a public token for a block of the account, same body rules as the account-key route', async () => {
      const r = await h.post('/api/public/token', { motorBlockId: block.motorBlockId, scopes: ['logs.read', 'config.manage'], ttlSeconds: 120 }, auth());
      expect(r.status).to.equal(200);
      expect(r.body.data).to.include({ motorBlockId: block.motorBlockId, expiresIn: 120, tokenType: 'Bearer' });
      expect(r.body.data.scopes).to.deep.equal(['config.manage', 'logs.read']);
      const blocks = await get('/api/public/v1/motor-blocks', auth(r.body.data.token));
      expect(blocks.status).to.equal(200);
      expect(blocks.body.data[0].id).to.equal(block.motorBlockId);
      // A public token is not a dashboard JWT.
      expect((await h.post('/api/public/token', { motorBlockId: block.motorBlockId }, auth(r.body.data.token))).status).to.equal(401);
    });

    it('a token lives as long as the session that minted it: a password reset ends both (401 token_revoked)', async () => {
      const user = await h.signUp('minter@rcpt.test');
      const own = await createBlockFor(h.motor, user.accountId);
      const r = await h.post('/api/public/token', { motorBlockId: own.motorBlockId, scopes: ['config.read'] }, auth(user.token));
      expect(r.status).to.equal(200);
      const list = () => get('/api/public/v1/motor-blocks', auth(r.body.data.token));
      expect((await list()).status).to.equal(200);
      await h.signUp('minter@rcpt.test', 'another long passphrase');
      const dead = await list();
      expect([dead.status, dead.body.code]).to.deep.equal([401, 'token_revoked']);
    });

    it('refuses another account\'s block (403), bad bodies (422), missing or wrong credentials (401)', async () => {
      const foreign = await h.post('/api/public/token', { motorBlockId: otherBlock.motorBlockId }, auth());
      expect(foreign.status).to.equal(403);
      expect(foreign.body.code).to.equal('motor_block_not_authorized');
      for (const body of [{}, { motorBlockId: 'nope' }, { motorBlockId: block.motorBlockId, ttlSeconds: 59 }, { motorBlockId: block.motorBlockId, ttlSeconds: 901 },
        { motorBlockId: block.motorBlockId, scopes: ['logs.write'] }, { motorBlockId: block.motorBlockId, extra: true }]) {
        const r = await h.post('/api/public/token', body, auth());
        expect(r.status, JSON.stringify(body)).to.equal(422);
        expect(r.body.code).to.equal('validation_error');
      }
      expect((await h.post('/api/public/token', { motorBlockId: block.motorBlockId })).status).to.equal(401);
      const b = await h.motor.bootstrap();
      const withKey = await h.post('/api/public/token', { motorBlockId: b.motorBlockId }, { authorization: `ApiKey ${b.accountApiKey}` });
      expect(withKey.status).to.equal(401);
    });
  });

  describe('account API keys', () => {
    it('create (shown once, allowed scopes) → list masked → mint with it → revoke', async () => {
      const c = await h.post('/api/account/api-keys', { name: 'CI', scopes: ['logs.read', 'usage.read'] }, auth());
      expect(c.status).to.equal(201);
      expect(c.body.data.key).to.match(/^ak_live_/);
      expect(c.body.data.scopes).to.deep.equal(['logs.read', 'usage.read']);
      const key = c.body.data.key as string;
      const list = await eventually(async () => {
        const r = await get('/api/account/api-keys', auth());
        return r.body.data?.find((k: { id: string }) => k.id === c.body.data.id) ? r : null;
      });
      expect(JSON.stringify(list.body)).to.not.include(key);
      const item = list.body.data.find((k: { id: string }) => k.id === c.body.data.id);
      expect(item).to.include({ name: 'CI', status: 'active', masked: c.body.data.masked });
      // Others do not see it.
      expect((await get('/api/account/api-keys', auth(other.token))).body.data).to.deep.equal([]);

      const mint = () => postJson(`${h.motor.baseUrl}/api/public/token/account-key`, { motorBlockId: block.motorBlockId, scopes: ['logs.read', 'config.read'] }, { 'X-Api-Key': key });
      const m = await eventually(async () => { const r = await mint(); return r.status === 200 ? r : null; });
      expect(m.body.data.scopes).to.deep.equal(['logs.read']);
      const minted = () => get(`/api/public/v1/motor-blocks/${block.motorBlockId}/logs`, auth(m.body.data.token));
      expect((await minted()).status).to.equal(200);
      // The masked display is not a key.
      expect((await postJson(`${h.motor.baseUrl}/api/public/token/account-key`, { motorBlockId: block.motorBlockId }, { 'X-Api-Key': item.masked })).status).to.equal(401);

      expect((await del(`/api/account/api-keys/${c.body.data.id}`, auth(other.token))).status).to.equal(404);
      const r = await del(`/api/account/api-keys/${c.body.data.id}`, auth());
      expect(r.status).to.equal(200);
      expect(r.body.data.revokedAt).to.be.a('string');
      await eventually(async () => (await mint()).status === 401);
      // The bearer token it minted before goes with it.
      const dead = await minted();
      expect([dead.status, dead.body.code]).to.deep.equal([401, 'token_revoked']);
      expect((await del('/api/account/api-keys/not-a-uuid', auth())).status).to.equal(400);
    });

    it('validates the body (400)', async () => {
      for (const body of [{ scopes: [] }, { scopes: ['nope'] }, { name: '' }, { other: 1 }, { scopes: 'logs.read' }]) {
        const r = await h.post('/api/account/api-keys', body, auth());
        expect(r.status, JSON.stringify(body)).to.equal(400);
        expect(r.body.code).to.equal('validation_error');
      }
    });
  });

  describe('block API keys and SMTP password', () => {
    const send = (key: string) => postJson(`${h.motor.baseUrl}/v1/send`, { from: `app@${block.domain}`, to: 'user@rcpt.test', subject: 's', text: 't', dryRun: true }, { 'X-Api-Key': key });

    it('create → send → list masked → rotate (old dies, new works) → revoke', async () => {
      const c = await h.post(`/api/motor-blocks/${block.motorBlockId}/api-keys`, { name: 'prod' }, auth());
      expect(c.status).to.equal(201);
      expect(c.body.data.key).to.match(/^mk_live_/);
      await eventually(async () => (await send(c.body.data.key)).status === 200);
      const list = await eventually(async () => {
        const r = await get(`/api/motor-blocks/${block.motorBlockId}/api-keys`, auth());
        return r.body.data?.length ? r : null;
      });
      expect(list.body.data[0]).to.include({ id: c.body.data.id, masked: c.body.data.masked, status: 'active' });
      expect(JSON.stringify(list.body)).to.not.include(c.body.data.key);

      const rot = await h.post(`/api/motor-blocks/${block.motorBlockId}/api-keys/${c.body.data.id}/rotate`, {}, auth());
      expect(rot.status).to.equal(200);
      expect(rot.body.data.replaces).to.equal(c.body.data.id);
      await eventually(async () => (await send(rot.body.data.key)).status === 200);
      await eventually(async () => (await send(c.body.data.key)).status === 401);
      expect((await h.post(`/api/motor-blocks/${block.motorBlockId}/api-keys/${c.body.data.id}/rotate`, {}, auth())).body.code).to.equal('api_key_revoked');

      const r = await del(`/api/motor-blocks/${block.motorBlockId}/api-keys/${rot.body.data.id}`, auth());
      expect(r.status).to.equal(200);
      await eventually(async () => (await send(rot.body.data.key)).status === 401);
    });

    it('another account\'s block is 404 on every route; a malformed id is 400', async () => {
      const id = otherBlock.motorBlockId;
      const k = '00000000-0000-4000-8000-000000000000';
      for (const r of [
        await get(`/api/motor-blocks/${id}/api-keys`, auth()),
        await h.post(`/api/motor-blocks/${id}/api-keys`, {}, auth()),
        await h.post(`/api/motor-blocks/${id}/api-keys/${k}/rotate`, {}, auth()),
        await del(`/api/motor-blocks/${id}/api-keys/${k}`, auth()),
        await h.post(`/api/motor-blocks/${id}/smtp-password`, {}, auth()),
      ]) {
        expect(r.status).to.equal(404);
        expect(r.body.code).to.equal('motor_block_not_found');
      }
      expect((await get('/api/motor-blocks/x/api-keys', auth())).status).to.equal(400);
    });

    it('SMTP password: generated, shown once, stored as a hash', async () => {
      const r = await h.post(`/api/motor-blocks/${block.motorBlockId}/smtp-password`, {}, auth());
      expect(r.status).to.equal(200);
      expect(r.body.data.password).to.match(/^[0-9A-Za-z]{32}$/);
      expect(r.body.data.smtpUsername).to.match(/^mb_/);
      await eventually(async () => (await getBlock(h.motor.rt.db, block.motorBlockId))?.smtpPasswordHash === hashSecret(r.body.data.password));
    });
  });
});
