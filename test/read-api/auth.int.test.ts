import { expect } from 'chai';
import jwt from 'jsonwebtoken';
import type { BootstrapResult } from '../../commands/admin/bootstrap';
import { signPublicToken } from '../../commands/tokens/publicTokens';
import { generateApiKey } from '../../domain/credentials/apiKeys';
import type { Scope } from '../../domain/credentials/scopes';
import { streamName } from '../../domain/eventStore';
import { toEventData } from '../../domain/events';
import { newId } from '../../domain/ids';
import { findApiKeyByPrefix } from '../../projections/directory/queries';
import { eventually, getJson, postJson, startTestMotor, type TestMotor } from '../support/motor';
import { senderDomainOf, sendMail } from './publicApi';

/**
 * The credential map (SPEC "Authentication") for every route that exists: each credential type on
 * each route, expired and forged tokens, scopes, block binding, and token minting's own rules.
 */
describe('authentication and authorization matrix (int)', function () {
  this.timeout(60_000);
  let motor: TestMotor;
  let a: BootstrapResult;
  let b: BootstrapResult;
  let messageId: string;
  let smtpMessageId: string;

  const settings = () => ({ secret: motor.config.tokenSecret, issuer: motor.config.tokenIssuer, audience: motor.config.tokenAudience });
  const sign = (block: BootstrapResult, scopes: Scope[], opts: { now?: Date; ttl?: number; secret?: string } = {}) =>
    signPublicToken({ ...settings(), ...(opts.secret ? { secret: opts.secret } : {}) },
      { motorBlockId: block.motorBlockId, accountId: block.accountId, scopes, userId: block.accountId, clientId: 'test' },
      opts.ttl ?? 300, opts.now ?? new Date()).token;

  /** Every public API route, with what it needs. */
  const publicRoutes = () => [
    { name: 'GET /messages/{id}', path: `/api/public/v1/messages/${messageId}`, scope: 'logs.read' },
    { name: 'GET /messages?smtpMessageId', path: `/api/public/v1/messages?smtpMessageId=${encodeURIComponent(smtpMessageId)}`, scope: 'logs.read' },
    { name: 'GET /messages/{id}/events', path: `/api/public/v1/messages/${messageId}/events`, scope: 'logs.read' },
    { name: 'GET /messages/{id}/recipients', path: `/api/public/v1/messages/${messageId}/recipients`, scope: 'logs.read' },
    { name: 'GET /motor-blocks', path: '/api/public/v1/motor-blocks', scope: null },
    { name: 'GET /motor-blocks/{id}/logs', path: `/api/public/v1/motor-blocks/${a.motorBlockId}/logs`, scope: 'logs.read' },
  ];
  const get = (path: string, headers: Record<string, string> = {}) => getJson(`${motor.baseUrl}${path}`, headers);
  const mint = (body: unknown, headers: Record<string, string>) => postJson(`${motor.baseUrl}/api/public/token/account-key`, body, headers);
  const mail = () => ({ from: `app@${senderDomainOf(a)}`, to: 'user@rcpt.test', subject: 'x', text: 'y' });

  before(async () => {
    motor = await startTestMotor({ roles: ['api', 'projector'] });
    a = await motor.bootstrap();
    b = await motor.bootstrap();
    messageId = (await sendMail(motor, a)).id;
    const t = await motor.token(a, ['logs.read']);
    smtpMessageId = await eventually(async () => {
      const r = await get(`/api/public/v1/messages/${messageId}`, { authorization: `Bearer ${t}` });
      const sid = r.body?.data?.smtpMessageId as string | undefined;
      // The smtpMessageId route reads the read model: wait until the projector has the message.
      return sid && (await get(`/api/public/v1/messages?smtpMessageId=${encodeURIComponent(sid)}`, { authorization: `Bearer ${t}` })).status === 200 ? sid : null;
    });
  });
  after(async () => { await motor?.close(); });

  describe('public API routes', () => {
    it('200 with a valid token of the right block and scope', async () => {
      const token = await motor.token(a, ['logs.read']);
      for (const r of publicRoutes()) {
        const res = await get(r.path, { authorization: `Bearer ${token}` });
        expect(res.status, r.name).to.equal(200);
        expect(res.body.success, r.name).to.equal(true);
      }
    });

    it('401 invalid_token without a credential or with a malformed bearer', async () => {
      const headers: Array<Record<string, string>> = [
        {}, { authorization: 'Bearer' }, { authorization: 'Bearer ' }, { authorization: 'Bearer not-a-jwt' }, { authorization: 'Bearer a.b.c' },
        { authorization: 'Basic dXNlcjpwYXNz' }, { authorization: `Bearer ${await motor.token(a, ['logs.read'])}x` },
        { authorization: `Token ${await motor.token(a, ['logs.read'])}` },
      ];
      for (const r of publicRoutes()) {
        for (const h of headers) {
          const res = await get(r.path, h);
          expect(res.status, `${r.name} ${JSON.stringify(h)}`).to.equal(401);
          expect(res.body).to.include({ success: false, code: 'invalid_token' });
          expect(res.headers.get('x-ratelimit-limit')).to.equal(null);
        }
      }
    });

    it('401 token_expired for an expired token (including one minted with ttlSeconds 60)', async () => {
      const minted = await mint({ motorBlockId: a.motorBlockId, scopes: ['logs.read'], ttlSeconds: 60 }, { 'X-Api-Key': a.accountApiKey });
      expect(minted.status).to.equal(200);
      expect(minted.body.data.expiresIn).to.equal(60);
      const claims = jwt.decode(minted.body.data.token) as jwt.JwtPayload;
      expect(claims.exp! - claims.iat!).to.equal(60);
      expect((await get(publicRoutes()[0].path, { authorization: `Bearer ${minted.body.data.token}` })).status).to.equal(200);

      const expired = sign(a, ['logs.read'], { now: new Date(Date.now() - 3600_000), ttl: 60 });
      const justExpired = sign(a, ['logs.read'], { now: new Date(Date.now() - 62_000), ttl: 60 });
      for (const r of publicRoutes()) {
        for (const t of [expired, justExpired]) {
          const res = await get(r.path, { authorization: `Bearer ${t}` });
          expect(res.status, r.name).to.equal(401);
          expect(res.body.code, r.name).to.equal('token_expired');
        }
      }
    });

    it('401 invalid_token for a token signed with another secret, another issuer or another audience, or alg none', async () => {
      const forged = sign(a, ['logs.read', 'logs.pii'], { secret: 'another-secret-0123456789abcdef0123456789' });
      const otherIssuer = signPublicToken({ ...settings(), issuer: 'https://evil.test' },
        { motorBlockId: a.motorBlockId, accountId: a.accountId, scopes: ['logs.read'], userId: a.accountId, clientId: 'x' }, 300, new Date()).token;
      const otherAudience = signPublicToken({ ...settings(), audience: 'https://evil.test/api' },
        { motorBlockId: a.motorBlockId, accountId: a.accountId, scopes: ['logs.read'], userId: a.accountId, clientId: 'x' }, 300, new Date()).token;
      const payload = jwt.decode(sign(a, ['logs.read'])) as jwt.JwtPayload;
      const none = `${Buffer.from(JSON.stringify({ alg: 'none', typ: 'JWT' })).toString('base64url')}.${Buffer.from(JSON.stringify(payload)).toString('base64url')}.`;
      for (const r of publicRoutes()) {
        for (const t of [forged, otherIssuer, otherAudience, none]) {
          const res = await get(r.path, { authorization: `Bearer ${t}` });
          expect(res.status, r.name).to.equal(401);
          expect(res.body.code).to.equal('invalid_token');
        }
      }
    });

    it('403 motor_block_forbidden for a token bound to another block', async () => {
      const other = await motor.token(b, ['logs.read', 'logs.pii']);
      for (const r of publicRoutes().filter((x) => /\{id\}/.test(x.name))) {
        const res = await get(r.path, { authorization: `Bearer ${other}` });
        expect(res.status, r.name).to.equal(403);
        expect(res.body.code, r.name).to.equal('motor_block_forbidden');
      }
      // Block-agnostic routes only ever show the token's own block.
      const list = await get('/api/public/v1/motor-blocks', { authorization: `Bearer ${other}` });
      expect(list.body.data.map((x: { id: string }) => x.id)).to.deep.equal([b.motorBlockId]);
      const bySid = await get(publicRoutes()[1].path, { authorization: `Bearer ${other}` });
      expect(bySid.status).to.equal(404);
    });

    it('403 insufficient_scope for a token lacking the route\'s scope', async () => {
      const token = await motor.token(a, ['analytics.read']);
      for (const r of publicRoutes()) {
        const res = await get(r.path, { authorization: `Bearer ${token}` });
        if (r.scope === null) {
          expect(res.status, r.name).to.equal(200);
          continue;
        }
        expect(res.status, r.name).to.equal(403);
        expect(res.body).to.include({ success: false, code: 'insufficient_scope' });
        expect(res.body.requiredScopes).to.deep.equal([r.scope]);
      }
      const piiOnly = await motor.token(a, ['logs.pii']);
      expect((await get(publicRoutes()[0].path, { authorization: `Bearer ${piiOnly}` })).status).to.equal(403);
    });

    it('401 for API keys (block or account) on the public API, as Bearer, as ApiKey or as X-Api-Key', async () => {
      for (const r of publicRoutes()) {
        for (const h of <Array<Record<string, string>>>[
          { authorization: `Bearer ${a.apiKey}` }, { authorization: `ApiKey ${a.apiKey}` }, { 'x-api-key': a.apiKey },
          { authorization: `Bearer ${a.accountApiKey}` }, { authorization: `ApiKey ${a.accountApiKey}` }, { 'x-api-key': a.accountApiKey },
        ]) {
          const res = await get(r.path, h);
          expect(res.status, `${r.name} ${JSON.stringify(h)}`).to.equal(401);
          expect(res.body.code).to.equal('invalid_token');
        }
      }
    });
  });

  describe('POST /v1/send', () => {
    it('401 for no key, an account key, a public token, or a block key as Bearer', async () => {
      const token = await motor.token(a, ['logs.read']);
      for (const h of <Array<Record<string, string>>>[
        {}, { authorization: `ApiKey ${a.accountApiKey}` }, { 'x-api-key': a.accountApiKey }, { authorization: `Bearer ${token}` },
        { authorization: `Bearer ${a.apiKey}` }, { authorization: 'ApiKey' }, { 'x-api-key': 'mk_live_nope' },
      ]) {
        const res = await postJson(`${motor.baseUrl}/v1/send`, mail(), h);
        expect(res.status, JSON.stringify(h)).to.equal(401);
        expect(res.body).to.include({ success: false, code: 'invalid_api_key', error: 'Invalid API key format' });
      }
      expect((await postJson(`${motor.baseUrl}/v1/send`, mail(), { authorization: `ApiKey ${a.apiKey}` })).status).to.equal(200);
      expect((await postJson(`${motor.baseUrl}/v1/send`, mail(), { 'x-api-key': a.apiKey })).status).to.equal(200);
    });

    it('401 for another block\'s key? no: the key decides the block, so the sender domain check refuses it (403)', async () => {
      const res = await postJson(`${motor.baseUrl}/v1/send`, mail(), { 'x-api-key': b.apiKey });
      expect(res.status).to.equal(403);
      expect(res.body.code).to.equal('from_domain_mismatch');
    });
  });

  describe('POST /api/public/token/account-key', () => {
    const body = () => ({ motorBlockId: a.motorBlockId, scopes: ['logs.read'] });

    it('401 for no key, a block key, a public token, or an unknown account key', async () => {
      const token = await motor.token(a, ['logs.read']);
      for (const h of <Array<Record<string, string>>>[
        {}, { authorization: `ApiKey ${a.apiKey}` }, { 'x-api-key': a.apiKey }, { authorization: `Bearer ${token}` },
        { authorization: `Bearer ${a.accountApiKey}` }, { 'x-api-key': generateApiKey('account').key }, { 'x-api-key': a.accountApiKey.slice(0, -2) },
      ]) {
        const res = await mint(body(), h);
        expect(res.status, JSON.stringify(h)).to.equal(401);
        expect(res.body).to.include({ success: false, code: 'invalid_api_key' });
      }
    });

    it('mints with ApiKey or X-Api-Key; default ttl 300 is in the JWT', async () => {
      for (const h of <Array<Record<string, string>>>[{ authorization: `ApiKey ${a.accountApiKey}` }, { 'x-api-key': a.accountApiKey }]) {
        const res = await mint(body(), h);
        expect(res.status).to.equal(200);
        expect(res.body.data).to.include({ tokenType: 'Bearer', expiresIn: 300, motorBlockId: a.motorBlockId });
        expect(res.body.data.scopes).to.deep.equal(['logs.read']);
        const claims = jwt.decode(res.body.data.token) as jwt.JwtPayload;
        expect(claims.exp! - claims.iat!).to.equal(300);
        expect(Math.abs(claims.exp! * 1000 - Date.parse(res.body.data.expiresAt))).to.be.below(1000);
        expect(claims.mbid).to.equal(a.motorBlockId);
        expect(claims.scope).to.equal('logs.read');
      }
      const max = await mint({ ...body(), ttlSeconds: 900 }, { 'x-api-key': a.accountApiKey });
      expect(max.status).to.equal(200);
      const claims = jwt.decode(max.body.data.token) as jwt.JwtPayload;
      expect(claims.exp! - claims.iat!).to.equal(900);
    });

    it('422 validation_error for a bad body', async () => {
      const id = a.motorBlockId;
      const bad: unknown[] = [
        { motorBlockId: id, extra: true },
        { motorBlockId: 'not-a-uuid' },
        {},
        { scopes: ['logs.read'] },
        { motorBlockId: id, ttlSeconds: 59 },
        { motorBlockId: id, ttlSeconds: 901 },
        { motorBlockId: id, ttlSeconds: 120.5 },
        { motorBlockId: id, ttlSeconds: '300' },
        { motorBlockId: id, scopes: ['logs.read', 'logs.write'] },
        { motorBlockId: id, scopes: 'logs.read' },
        { motorBlockId: id, scopes: [1] },
        [],
      ];
      for (const x of bad) {
        const res = await mint(x, { 'x-api-key': a.accountApiKey });
        expect(res.status, JSON.stringify(x)).to.equal(422);
        expect(res.body).to.include({ success: false, code: 'validation_error', error: 'Validation error' });
      }
      const notJson = await mint('{"motorBlockId":', { 'x-api-key': a.accountApiKey });
      expect(notJson.status).to.equal(400);
      expect(notJson.body.code).to.equal('invalid_json');
    });

    it('403 motor_block_not_authorized for a block of another account (or no block at all)', async () => {
      for (const motorBlockId of [b.motorBlockId, newId()]) {
        const res = await mint({ motorBlockId, scopes: ['logs.read'] }, { 'x-api-key': a.accountApiKey });
        expect(res.status).to.equal(403);
        expect(res.body.code).to.equal('motor_block_not_authorized');
      }
    });

    it('grants the intersection of the requested scopes and the key\'s scopes', async () => {
      const key = generateApiKey('account');
      const keyId = newId();
      await motor.rt.store.append(streamName('apiKey', keyId), [toEventData(newId(), { type: 'ApiKeyCreated', data: {
        keyId, kind: 'account', accountId: a.accountId, prefix: key.prefix, secretHash: key.secretHash, scopes: ['logs.read', 'config.manage'], createdAt: new Date().toISOString(),
      } })], { expectedRevision: 'no_stream' });
      await eventually(async () => (await findApiKeyByPrefix(motor.rt.db, key.prefix)) !== null);
      const grant = async (scopes?: string[]) => {
        const res = await mint({ motorBlockId: a.motorBlockId, ...(scopes ? { scopes } : {}) }, { 'x-api-key': key.key });
        return res.status === 200 ? { scopes: res.body.data.scopes, jwt: (jwt.decode(res.body.data.token) as jwt.JwtPayload).scope } : res.status;
      };
      expect(await grant(['logs.read', 'logs.pii'])).to.deep.equal({ scopes: ['logs.read'], jwt: 'logs.read' });
      expect(await grant(['config.read'])).to.deep.equal({ scopes: ['config.read'], jwt: 'config.read' });
      expect(await grant()).to.deep.equal({ scopes: ['config.manage', 'config.read', 'logs.read'], jwt: 'config.manage config.read logs.read' });
      expect(await grant(['logs.pii'])).to.equal(422);
      // The granted token cannot reach what the key never had.
      const limited = await mint({ motorBlockId: a.motorBlockId, scopes: ['logs.read', 'logs.pii'] }, { 'x-api-key': key.key });
      const pii = await get(`/api/public/v1/messages/${messageId}?includePII=true`, { authorization: `Bearer ${limited.body.data.token}` });
      expect(pii.status).to.equal(403);
    });
  });
});
