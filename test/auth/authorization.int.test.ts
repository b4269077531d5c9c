import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'chai';
import { signPublicToken } from '../../commands/tokens/publicTokens';
import { accessTokenSettings, signAccessToken } from '../../commands/oauth/accessTokens';
import { MCP_SERVERS } from '../../domain/oauth/agent';
import { newId } from '../../domain/ids';
import { grantAgentAccess } from '../support/agentGrant';
import { dashboardTokenSettings, signDashboardToken } from '../../commands/auth/dashboardTokens';
import { SCOPES, hasScopes, type Scope } from '../../domain/credentials/scopes';
import { answerText, eventually, postJson } from '../support/motor';
import { createBlockFor } from './fixtures';
import { getBlock } from '../../projections/directory/queries';
import { startAuthHarness, type AuthHarness } from './harness';

/**
 * The table-driven authorization test: every route of the OpenAPI document that needs a
 * credential, walked with no credential, a malformed one, an expired one, each wrong credential
 * type (the credentials of SPEC's credential map that no route of this document takes among them:
 * an agent's access token, an SMTP OAuth access token, a dashboard refresh token, an SMTP
 * password), a credential of another block and of another account, and one lacking the scope, plus
 * the right one (which must get past authorization and carry X-RateLimit-*). Routes added later
 * are picked up from read-api/generated/openapi.json automatically; their "other block/account"
 * expectation comes from the path (see `foreign()`).
 */

interface Operation { method: string; path: string; scheme: string; scopes: string[]; requiredQuery: Array<{ name: string; schema: Record<string, unknown> }> }

const spec = JSON.parse(readFileSync(join(__dirname, '../../read-api/generated/openapi.json'), 'utf8'));
const operations: Operation[] = [];
for (const [path, ops] of Object.entries(spec.paths as Record<string, Record<string, any>>)) { // eslint-disable-line @typescript-eslint/no-explicit-any
  for (const [method, op] of Object.entries(ops)) {
    const sec = (op.security ?? []) as Array<Record<string, string[]>>;
    if (sec.length === 0) continue;
    const [scheme, scopes] = Object.entries(sec[0])[0];
    operations.push({
      method: method.toUpperCase(), path, scheme, scopes,
      requiredQuery: ((op.parameters ?? []) as Array<{ in: string; required?: boolean; name: string; schema: Record<string, unknown> }>).filter((p) => p.in === 'query' && p.required),
    });
  }
}

type Cred = Record<string, string>;
const bearer = (t: string): Cred => ({ authorization: `Bearer ${t}` });
const apiKey = (k: string): Cred => ({ 'x-api-key': k });

describe('authorization table: every authenticated route × every credential case (int)', function () {
  this.timeout(120_000);
  let h: AuthHarness;
  const c = {} as {
    dashA: string; dashB: string; dashExpired: string;
    blockA1: string; blockA2: string; blockB1: string; msgA1: string; smtpIdA1: string; smtpUserA1: string;
    blockKeyA1: string; blockKeyA2: string; paramBlockKeyA1: string; accountKeyA: string; accountKeyB: string; paramAccountKeyA: string; maskedAccountKeyA: string;
    fromA1: string; fromA2: string;
    pub: (block: 'A1' | 'A2' | 'B1', scopes?: Scope[]) => Promise<string>;
    pubExpired: string;
    agentToken: string; smtpAccessToken: string; refreshTokenA: string; smtpPasswordA1: string;
  };

  before(async () => {
    h = await startAuthHarness();
    const a = await h.signUp('table-a@rcpt.test');
    const b = await h.signUp('table-b@rcpt.test');
    c.dashA = a.token;
    c.dashB = b.token;
    c.refreshTokenA = a.refreshToken;
    c.dashExpired = signDashboardToken(dashboardTokenSettings(h.motor.config), { userId: a.userId, accountId: a.accountId, sessionId: a.userId }, new Date(Date.now() - 3600_000)).token;
    const a1 = await createBlockFor(h.motor, a.accountId);
    const a2 = await createBlockFor(h.motor, a.accountId);
    const b1 = await createBlockFor(h.motor, b.accountId);
    Object.assign(c, { blockA1: a1.motorBlockId, blockA2: a2.motorBlockId, blockB1: b1.motorBlockId, fromA1: `app@${a1.domain}`, fromA2: `app@${a2.domain}` });
    c.smtpUserA1 = (await getBlock(h.motor.rt.db, a1.motorBlockId))!.smtpUsername;
    const mk = async (dash: string, path: string, body: unknown) => {
      const r = await h.post(path, body, bearer(dash));
      if (r.status !== 201) throw new Error(`${path}: ${r.status} ${JSON.stringify(r.body)}`);
      return r.body.data as { id: string; key: string; masked: string };
    };
    c.blockKeyA1 = (await mk(c.dashA, `/api/motor-blocks/${c.blockA1}/api-keys`, {})).key;
    c.blockKeyA2 = (await mk(c.dashA, `/api/motor-blocks/${c.blockA2}/api-keys`, {})).key;
    c.paramBlockKeyA1 = (await mk(c.dashA, `/api/motor-blocks/${c.blockA1}/api-keys`, { name: 'param' })).id;
    const ak = await mk(c.dashA, '/api/account/api-keys', {});
    c.accountKeyA = ak.key;
    c.maskedAccountKeyA = ak.masked;
    c.accountKeyB = (await mk(c.dashB, '/api/account/api-keys', {})).key;
    c.paramAccountKeyA = (await mk(c.dashA, '/api/account/api-keys', { name: 'param' })).id;
    const blocks = { A1: c.blockA1, A2: c.blockA2, B1: c.blockB1 };
    c.pub = async (block, scopes) => {
      const dash = block === 'B1' ? c.dashB : c.dashA;
      const r = await h.post('/api/public/token', { motorBlockId: blocks[block], ...(scopes ? { scopes } : {}) }, bearer(dash));
      if (r.status !== 200) throw new Error(`mint: ${r.status} ${JSON.stringify(r.body)}`);
      return r.body.data.token as string;
    };
    const s = h.motor.config;
    c.pubExpired = signPublicToken({ secret: s.tokenSecret, issuer: s.tokenIssuer, audience: s.tokenAudience },
      { motorBlockId: c.blockA1, accountId: a.accountId, scopes: [...SCOPES], userId: a.userId, clientId: 't' }, 60, new Date(Date.now() - 3600_000)).token;
    // A message of block A1 (keys reach the directory asynchronously).
    const sent = await eventually(async () => {
      const r = await postJson(`${h.motor.baseUrl}/v1/send`, { from: c.fromA1, to: 'user@rcpt.test', subject: 's', text: 't' }, apiKey(c.blockKeyA1));
      return r.status === 200 ? r : null;
    });
    c.msgA1 = sent.body.data.id;
    // Credentials of the map that are valid where they belong (an MCP server, SMTP AUTH) and must be nowhere else.
    c.agentToken = (await grantAgentAccess(h.motor, { accountId: a.accountId, userId: a.userId, path: MCP_SERVERS[0].path, scopes: [...MCP_SERVERS[0].scopes] })).accessToken;
    c.smtpAccessToken = signAccessToken(accessTokenSettings(h.motor.config), {
      tokenId: newId(), grantId: newId(), clientId: newId(), userId: a.userId, accountId: a.accountId, motorBlockId: c.blockA1, scope: 'email.send',
    }, new Date(), 3600).token;
    c.smtpPasswordA1 = (await h.post(`/api/motor-blocks/${c.blockA1}/smtp-password`, {}, bearer(c.dashA))).body.data.password;
    c.smtpIdA1 = `${c.msgA1}@${a1.domain}`;
    await eventually(async () => (await postJson(`${h.motor.baseUrl}/api/public/token/account-key`, { motorBlockId: c.blockA1 }, apiKey(c.accountKeyA))).status === 200
      && (await postJson(`${h.motor.baseUrl}/api/public/token/account-key`, { motorBlockId: c.blockB1 }, apiKey(c.accountKeyB))).status === 200
      && (await postJson(`${h.motor.baseUrl}/v1/send`, { from: c.fromA2, to: 'u@rcpt.test', subject: 's', text: 't', dryRun: true }, apiKey(c.blockKeyA2))).status === 200);
  });
  after(async () => { await h?.close(); });

  /** `capitals`: the ids in the path written in upper case (docs/ARCHITECTURE.md "Ids in paths"). */
  const urlOf = (op: Operation, capitals = false): string => {
    const id = (v: string) => (capitals ? v.toUpperCase() : v);
    const path = op.path
      .replace('{keyId}', id(op.path.startsWith('/api/account/') ? c.paramAccountKeyA : c.paramBlockKeyA1))
      .replace('{id}', id(op.path.startsWith('/api/public/v1/messages') ? c.msgA1 : c.blockA1));
    const q = op.requiredQuery.map(({ name, schema }) => {
      const v = name === 'smtpMessageId' ? c.smtpIdA1 : Array.isArray(schema.enum) ? String(schema.enum[0]) : schema.type === 'integer' || schema.type === 'number' ? '1' : schema.type === 'boolean' ? 'false' : 'x';
      return `${name}=${encodeURIComponent(v)}`;
    });
    // Query parameters a route checks itself before authorization (not marked required in the document).
    if (op.path.endsWith('/metrics') && !op.requiredQuery.some((p) => p.name === 'interval')) q.push('interval=day');
    return `${h.motor.baseUrl}${path}${q.length ? `?${q.join('&')}` : ''}`;
  };
  const bodyOf = (op: Operation): unknown => {
    if (op.path === '/v1/send') return { from: c.fromA1, to: 'user@rcpt.test', subject: 's', text: 't', dryRun: true };
    // Block A1's own SMTP settings (the port has no listener here: the check runs and reports a failed connect).
    if (op.path === '/v1/test-email') return { host: h.motor.config.smtpPublicHosts[0], port: h.motor.config.smtpPublicPorts[0], username: c.smtpUserA1, password: 'x', to: 'user@rcpt.test' };
    if (op.path.startsWith('/api/public/token')) return { motorBlockId: c.blockA1 };
    if (op.path === '/api/account/api-keys') return { scopes: ['logs.read'] };
    return {};
  };
  const call = async (op: Operation, headers: Cred, capitals = false) => {
    const init: RequestInit = { method: op.method, headers: { ...headers } };
    if (op.method !== 'GET' && op.method !== 'DELETE') {
      init.body = JSON.stringify(bodyOf(op));
      (init.headers as Record<string, string>)['content-type'] = 'application/json';
    }
    const res = await fetch(urlOf(op, capitals), init);
    const text = await answerText(res);
    let body: any; // eslint-disable-line @typescript-eslint/no-explicit-any
    try { body = JSON.parse(text); } catch { body = text; }
    return { status: res.status, body, headers: res.headers };
  };

  /** The right credential for an operation (block A1 / account A). */
  const right = async (op: Operation): Promise<Cred> => {
    switch (op.scheme) {
      case 'publicBearer': return bearer(await c.pub('A1'));
      case 'dashboardJwt': return bearer(c.dashA);
      case 'accountApiKey': return apiKey(c.accountKeyA);
      case 'blockApiKey': return apiKey(c.blockKeyA1);
      default: throw new Error(`unknown scheme ${op.scheme}`);
    }
  };
  const unauthorizedCode = (op: Operation) => (op.scheme === 'publicBearer' || op.scheme === 'dashboardJwt' ? 'invalid_token' : 'invalid_api_key');

  /** What a credential of another block / another account gets, by route; null = the route names no foreign resource. */
  const foreign = (op: Operation, who: 'block' | 'account'): { cred: () => Promise<Cred>; status: number; code: string } | null => {
    const p = op.path;
    if (op.scheme === 'publicBearer') {
      const cred = async () => bearer(await c.pub(who === 'block' ? 'A2' : 'B1'));
      if (p.startsWith('/api/public/v1/motor-blocks/{id}') || /^\/api\/public\/v1\/messages\/\{id\}/.test(p)) return { cred, status: 403, code: 'motor_block_forbidden' };
      if (p === '/api/public/v1/messages') return { cred, status: 404, code: 'message_not_found' };
      return null;
    }
    if (op.scheme === 'blockApiKey') {
      if (who !== 'block') return null;
      // Another block's key: /v1/send refuses A1's sender domain, /v1/test-email A1's SMTP username.
      return op.path === '/v1/test-email'
        ? { cred: async () => apiKey(c.blockKeyA2), status: 422, code: 'smtp_username_mismatch' }
        : { cred: async () => apiKey(c.blockKeyA2), status: 403, code: 'from_domain_mismatch' };
    }
    if (who === 'block') return null; // account-wide credentials
    if (op.scheme === 'accountApiKey') return { cred: async () => apiKey(c.accountKeyB), status: 403, code: 'motor_block_not_authorized' };
    if (p === '/api/public/token') return { cred: async () => bearer(c.dashB), status: 403, code: 'motor_block_not_authorized' };
    if (p.startsWith('/api/motor-blocks/{id}')) return { cred: async () => bearer(c.dashB), status: 404, code: 'motor_block_not_found' };
    if (p === '/api/account/api-keys/{keyId}') return { cred: async () => bearer(c.dashB), status: 404, code: 'api_key_not_found' };
    return null;
  };

  let checked = 0;
  after(() => { console.log(`      authorization table: ${operations.length} routes, ${checked} cases`); }); // eslint-disable-line no-console

  for (const op of operations) {
    it(`${op.method} ${op.path} [${op.scheme}${op.scopes.length ? ` ${op.scopes.join(',')}` : ''}]`, async () => {
      const cases: Array<{ name: string; cred: () => Promise<Cred>; status: number; code: string }> = [];
      const u = unauthorizedCode(op);
      const isBearer = op.scheme === 'publicBearer' || op.scheme === 'dashboardJwt';
      cases.push({ name: 'no credential', cred: async () => ({}), status: 401, code: u });
      cases.push({ name: 'malformed', cred: async () => (isBearer ? bearer('not.a.jwt') : apiKey('mk_live_short')), status: 401, code: u });
      cases.push({ name: 'Basic auth', cred: async () => ({ authorization: 'Basic dXNlcjpwYXNz' }), status: 401, code: u });
      if (op.scheme === 'publicBearer') cases.push({ name: 'expired', cred: async () => bearer(c.pubExpired), status: 401, code: 'token_expired' });
      if (op.scheme === 'dashboardJwt') cases.push({ name: 'expired', cred: async () => bearer(c.dashExpired), status: 401, code: 'token_expired' });
      const wrongTypes: Array<[string, () => Promise<Cred>]> = [
        ['publicBearer', async () => bearer(await c.pub('A1'))],
        ['dashboardJwt', async () => bearer(c.dashA)],
        ['accountApiKey', async () => apiKey(c.accountKeyA)],
        ['blockApiKey', async () => apiKey(c.blockKeyA1)],
        ['accountApiKey as ApiKey header', async () => ({ authorization: `ApiKey ${c.accountKeyA}` })],
        ['agent access token', async () => bearer(c.agentToken)],
        ['SMTP OAuth access token', async () => bearer(c.smtpAccessToken)],
        ['dashboard refresh token', async () => bearer(c.refreshTokenA)],
        ['SMTP password as ApiKey', async () => ({ authorization: `ApiKey ${c.smtpPasswordA1}` })],
        ['SMTP password as X-Api-Key', async () => apiKey(c.smtpPasswordA1)],
      ];
      for (const [type, cred] of wrongTypes) if (!type.startsWith(op.scheme)) cases.push({ name: `wrong type: ${type}`, cred, status: 401, code: u });
      if (op.scheme === 'accountApiKey') cases.push({ name: 'masked key', cred: async () => apiKey(c.maskedAccountKeyA), status: 401, code: u });
      for (const who of ['block', 'account'] as const) {
        const f = foreign(op, who);
        if (f) cases.push({ name: `another ${who}`, ...f });
      }
      if (op.scheme === 'publicBearer' && op.scopes.length > 0) {
        const lacking = SCOPES.filter((s) => !hasScopes([s], op.scopes));
        // Each required scope alone is not enough when the route needs several; any unrelated scope never is.
        cases.push({ name: `lacking scope (${lacking[0]})`, cred: async () => bearer(await c.pub('A1', [lacking[0]])), status: 403, code: 'insufficient_scope' });
        if (op.scopes.length > 1) cases.push({ name: `only ${op.scopes[0]}`, cred: async () => bearer(await c.pub('A1', [op.scopes[0] as Scope])), status: 403, code: 'insufficient_scope' });
      }
      const failures: string[] = [];
      for (const k of cases) {
        const r = await call(op, await k.cred());
        checked++;
        if (r.status !== k.status || r.body?.code !== k.code) failures.push(`${k.name}: expected ${k.status} ${k.code}, got ${r.status} ${r.body?.code ?? JSON.stringify(r.body).slice(0, 120)}`);
      }
      // The ids in capitals name the same block, key or message: never refused as another block's or
      // account's, never not found where the ids as stored are found; a read answers the same. Asked
      // first, so that a write (a key revoked, a block renamed) is made by the capitals.
      const capitals = op.path.includes('{') ? await call(op, await right(op), true) : null;
      if (capitals) checked++;
      // The right credential gets past authorization, and the API request limit reports itself.
      const ok = await call(op, await right(op));
      checked++;
      if ([401, 403, 429].includes(ok.status) || ok.status >= 500) failures.push(`right credential: got ${ok.status} ${JSON.stringify(ok.body).slice(0, 160)}`);
      if (ok.headers.get('x-ratelimit-limit') === null) failures.push('right credential: no X-RateLimit-Limit header');
      if (capitals) {
        const got = `${capitals.status} ${capitals.body?.code ?? ''}`;
        const refusals = (['block', 'account'] as const).map((who) => foreign(op, who)).filter((f) => f !== null).map((f) => `${f.status} ${f.code}`);
        if ([401, 403, 429].includes(capitals.status) || capitals.status >= 500 || refusals.includes(got)) failures.push(`ids in capitals: got ${got}`);
        if (capitals.status === 404 && ok.status !== 404) failures.push(`ids in capitals: 404 ${capitals.body?.code}, as stored ${ok.status}`);
        if (op.method === 'GET' && got !== `${ok.status} ${ok.body?.code ?? ''}`) failures.push(`ids in capitals: got ${got}, as stored ${ok.status} ${ok.body?.code ?? ''}`);
      }
      expect(failures, failures.join('\n')).to.deep.equal([]);
    });
  }
});
