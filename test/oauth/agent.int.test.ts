import { execFile } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { promisify } from 'node:util';
import { expect } from 'chai';
import { createLocalJWKSet, decodeProtectedHeader, jwtVerify } from 'jose';
import { newId } from '../../domain/ids';
import { activeAgentToken, agentJwks, RETIRED_KEY_GRACE_MS, signAgentToken } from '../../commands/oauth/agentTokens';
import { KeyStore } from '../../infra/keys/keyStore';
import { ClientMetadataFetcher } from '../../commands/oauth/clientMetadata';
import type { BootstrapResult } from '../../commands/admin/bootstrap';
import { catchUpUntil } from '../../scripts/runtime';
import { ProjectionRunner } from '../../projections/runner';
import { oauthConnectionsProjection } from '../../projections/oauthConnections/projection';
import { listConnections } from '../../projections/oauthConnections/queries';
import { getJson, startTestMotor, type TestMotor } from '../support/motor';
import { CLIENT_DOCUMENT_ENV, startClientDocumentHost, type ClientDocumentHost } from '../support/clientDocumentHost';
import { authorizeUrl, dashboardUser, formTokenOf, getPage, postForm } from './support';
import { call, connectAgent } from '../mcp/support';

const MCP = 'https://mcp.example.test';
const AUTH = 'https://auth.example.test';
const ANALYTICS = `${MCP}/v1/service_analytics/mcp`;
const FULL = `${MCP}/v1/service/mcp`;
const CALLBACK = 'http://127.0.0.1:33418/callback';

const pkce = () => {
  const verifier = randomBytes(32).toString('base64url');
  return { verifier, challenge: createHash('sha256').update(verifier).digest('base64url') };
};

describe('OAuth 2.1 for agent clients: metadata documents, PKCE, resource-bound RS256 tokens, connections (int)', function () {
  this.timeout(60_000);
  let motor: TestMotor;
  let host: ClientDocumentHost;
  let b: BootstrapResult;
  let user: Awaited<ReturnType<typeof dashboardUser>>;
  let clientId: string;

  before(async () => {
    host = await startClientDocumentHost();
    motor = await startTestMotor({
      roles: ['api', 'projector'],
      env: {
        ANONYMOUS_REQUEST_LIMIT: '100000', MCP_PUBLIC_URL: MCP, AUTH_PUBLIC_URL: AUTH, ...CLIENT_DOCUMENT_ENV,
      },
    });
    b = await motor.bootstrap();
    user = await dashboardUser(motor, b.accountId);
    clientId = `${host.origin}/agent/client.json`;
    host.docs.set('/agent/client.json', { client_id: clientId, client_name: 'Agent <x>', redirect_uris: [CALLBACK], token_endpoint_auth_method: 'none' });
  });
  after(async () => {
    await motor?.close();
    await host?.close();
  });

  const bearer = () => ({ authorization: `Bearer ${user.token}` });
  const params = (o: Record<string, string | undefined> = {}) => {
    const { challenge } = pkce();
    return {
      client_id: clientId, response_type: 'code', redirect_uri: CALLBACK, code_challenge: challenge, code_challenge_method: 'S256',
      resource: ANALYTICS, scope: 'read:analytics', state: 'st-1', ...o,
    };
  };
  const token = async (form: Record<string, string>) => {
    const res = await fetch(`${motor.baseUrl}/api/oauth2/token`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: new URLSearchParams(form).toString() });
    return { status: res.status, headers: res.headers, body: await res.json() as Record<string, unknown> };
  };
  /** Browser side: consent page, approve; the code of the redirect. */
  const code = async (q: Record<string, string | undefined>) => {
    const page = await getPage(authorizeUrl(motor, q), bearer());
    expect(page.status, page.text).to.equal(200);
    const r = await postForm(`${motor.baseUrl}/api/oauth2/consent`, { form_token: formTokenOf(page.text), decision: 'approve' }, bearer());
    expect(r.status, r.text).to.equal(302);
    const loc = new URL(r.location!);
    expect(`${loc.origin}${loc.pathname}`).to.equal(CALLBACK);
    expect(loc.searchParams.get('state')).to.equal(q.state ?? null);
    return loc.searchParams.get('code')!;
  };
  const connect = async (resource = ANALYTICS, scope = 'read:analytics') => {
    const { verifier, challenge } = pkce();
    const c = await code(params({ code_challenge: challenge, resource, scope }));
    const r = await token({ grant_type: 'authorization_code', client_id: clientId, code: c, redirect_uri: CALLBACK, code_verifier: verifier, resource });
    expect(r.status, JSON.stringify(r.body)).to.equal(200);
    return r.body as { access_token: string; refresh_token: string; scope: string; expires_in: number; token_type: string };
  };
  const check = (t: string, resource = ANALYTICS) => activeAgentToken({ store: motor.rt.store, keys: motor.rt.keys, config: motor.config }, t, resource, new Date());

  it('publishes RFC 8414 metadata and the JWKS under /.well-known', async () => {
    const m = await getJson(`${motor.baseUrl}/.well-known/oauth-authorization-server`);
    expect(m.status).to.equal(200);
    expect(m.body).to.include({ issuer: AUTH, authorization_endpoint: `${AUTH}/api/oauth2/authorize`, token_endpoint: `${AUTH}/api/oauth2/token`, jwks_uri: `${AUTH}/.well-known/jwks.json`, client_id_metadata_document_supported: true });
    expect(m.body.code_challenge_methods_supported).to.deep.equal(['S256']);
    // SPEC "Versioning": the interactive reference is at {base_url}/api/public/docs, whatever host the authorization server has.
    expect(m.body.service_documentation).to.equal(`${motor.config.publicBaseUrl}/api/public/docs`);
    expect(m.body.scopes_supported).to.include('manage:motor-blocks').and.not.include('logs.pii');
    const k = await getJson(`${motor.baseUrl}/.well-known/jwks.json`);
    expect(k.status).to.equal(200);
    expect(k.body.keys).to.have.length(1);
    expect(k.body.keys[0]).to.include({ kty: 'RSA', alg: 'RS256', use: 'sig' });
    expect(k.body.keys[0]).to.not.have.property('d');
  });

  it('code with PKCE S256 → an RS256 at+jwt for the resource, verifiable with the JWKS; no secret needed', async () => {
    const t = await connect();
    expect(t).to.include({ token_type: 'Bearer', expires_in: 3600, scope: 'read:analytics' });
    expect(t.refresh_token).to.match(/^ort_/);
    expect(decodeProtectedHeader(t.access_token)).to.include({ alg: 'RS256', typ: 'at+jwt' });
    const jwks = createLocalJWKSet((await getJson(`${motor.baseUrl}/.well-known/jwks.json`)).body);
    const { payload } = await jwtVerify(t.access_token, jwks, { issuer: AUTH, audience: ANALYTICS, typ: 'at+jwt' });
    expect(payload).to.include({ client_id: clientId, scope: 'read:analytics', acct: b.accountId, sub: user.userId });
    expect(payload.exp! - payload.iat!).to.equal(3600);
    const v = await check(t.access_token);
    expect(v.ok && v.claims.scopes).to.deep.equal(['read:analytics']);
    // Bound to its audience: another server refuses it.
    expect((await check(t.access_token, FULL)).ok).to.equal(false);
  });

  it('the consent page names the client (escaped), the server and each scope; no scope asked = the server\'s list', async () => {
    const page = await getPage(authorizeUrl(motor, params({ resource: FULL, scope: undefined })), bearer());
    expect(page.status).to.equal(200);
    expect(page.text).to.include('Agent &lt;x&gt;').and.include(FULL);
    for (const s of ['send:transactional', 'read:analytics', 'read:domains', 'manage:domains', 'manage:sandbox', 'read:webhooks', 'manage:webhooks']) expect(page.text).to.include(`<code>${s}</code>`);
    expect(page.text).to.not.include('manage:motor-blocks');
    expect(page.text).to.not.include('<select');
  });

  const authorizeErrors: Array<[string, Record<string, string | undefined>, string]> = [
    ['PKCE plain', { code_challenge_method: 'plain' }, 'invalid_request'],
    ['no code_challenge_method', { code_challenge_method: undefined }, 'invalid_request'],
    ['no code_challenge', { code_challenge: undefined }, 'invalid_request'],
    ['a short code_challenge', { code_challenge: 'abc' }, 'invalid_request'],
    ['no resource', { resource: undefined }, 'invalid_request'],
    ['an unknown resource', { resource: `${MCP}/v1/other/mcp` }, 'invalid_target'],
    ['a resource with a trailing slash', { resource: `${ANALYTICS}/` }, 'invalid_target'],
    ['logs.pii', { scope: 'read:analytics logs.pii' }, 'invalid_scope'],
    ['a scope the server does not offer', { scope: 'manage:domains' }, 'invalid_scope'],
    ['a redirect_uri not in the document', { redirect_uri: 'http://127.0.0.1:1/other' }, 'invalid_request'],
    ['response_type token', { response_type: 'token' }, 'invalid_request'],
    ['an http client_id', { client_id: 'HTTP_CLIENT' }, 'invalid_client'],
    ['a client_id without a document', { client_id: 'MISSING_DOC' }, 'invalid_client'],
  ];
  for (const [name, o, error] of authorizeErrors) {
    it(`authorize refuses ${name}: 400 ${error}, no redirect`, async () => {
      const q = params(o);
      if (q.client_id === 'HTTP_CLIENT') q.client_id = clientId.replace('https:', 'http:');
      if (q.client_id === 'MISSING_DOC') q.client_id = `${host.origin}/missing.json`;
      const r = await getPage(authorizeUrl(motor, q), bearer());
      expect(r.status, r.text).to.equal(400);
      expect(JSON.parse(r.text).error).to.equal(error);
      expect(r.headers.get('location')).to.equal(null);
    });
  }

  it('a document whose client_id differs from its URL, or that is not JSON, is refused (invalid_client)', async () => {
    host.docs.set('/liar.json', { client_id: 'https://elsewhere.example/client.json', redirect_uris: [CALLBACK] });
    host.docs.set('/garbage.json', 'not json');
    for (const path of ['/liar.json', '/garbage.json']) {
      const r = await getPage(authorizeUrl(motor, params({ client_id: `${host.origin}${path}` })), bearer());
      expect(r.status).to.equal(400);
      expect(JSON.parse(r.text)).to.include({ error: 'invalid_client' });
    }
  });

  it('the document host must be public unless allowed (SSRF guard)', async () => {
    const fetcher = new ClientMetadataFetcher({ allowPrivateAddresses: false, caFile: null });
    try {
      await fetcher.get(clientId);
      expect.fail('a loopback document host was fetched');
    } catch (e) {
      expect((e as { code?: string; message: string }).code).to.equal('invalid_client');
      expect((e as Error).message).to.match(/private address/);
    }
  });

  it('token: a wrong code_verifier is invalid_grant and spends nothing; the right one then works', async () => {
    const { verifier, challenge } = pkce();
    const c = await code(params({ code_challenge: challenge }));
    const base = { grant_type: 'authorization_code', client_id: clientId, code: c, redirect_uri: CALLBACK, resource: ANALYTICS };
    const wrong = await token({ ...base, code_verifier: pkce().verifier });
    expect(wrong.status).to.equal(400);
    expect(wrong.body.error).to.equal('invalid_grant');
    expect((await token({ ...base, code_verifier: verifier, resource: FULL })).body.error).to.equal('invalid_target');
    expect((await token({ ...base, code_verifier: verifier, resource: 'https://nope.example/mcp' })).body.error).to.equal('invalid_target');
    const noVerifier = await token(base);
    expect(noVerifier.status).to.equal(400);
    expect(noVerifier.body.error).to.equal('invalid_request');
    const { resource: _r, ...noResource } = base;
    expect((await token({ ...noResource, code_verifier: verifier })).body.error).to.equal('invalid_request');
    const ok = await token({ ...base, code_verifier: verifier });
    expect(ok.status, JSON.stringify(ok.body)).to.equal(200);
    expect(ok.headers.get('cache-control')).to.equal('no-store');
  });

  it('refresh tokens rotate on every use; a spent one presented again revokes the connection', async () => {
    const t = await connect();
    const r1 = await token({ grant_type: 'refresh_token', client_id: clientId, refresh_token: t.refresh_token, resource: ANALYTICS });
    expect(r1.status, JSON.stringify(r1.body)).to.equal(200);
    expect(r1.body.refresh_token).to.not.equal(t.refresh_token);
    expect((await check(r1.body.access_token as string)).ok).to.equal(true);
    expect((await token({ grant_type: 'refresh_token', client_id: clientId, refresh_token: r1.body.refresh_token as string })).body.error).to.equal('invalid_request');
    expect((await token({ grant_type: 'refresh_token', client_id: clientId, refresh_token: r1.body.refresh_token as string, resource: FULL })).body.error).to.equal('invalid_target');
    const reuse = await token({ grant_type: 'refresh_token', client_id: clientId, refresh_token: t.refresh_token, resource: ANALYTICS });
    expect(reuse.body.error).to.equal('invalid_grant');
    expect(await check(r1.body.access_token as string)).to.deep.equal({ ok: false, reason: 'revoked' });
    expect((await token({ grant_type: 'refresh_token', client_id: clientId, refresh_token: r1.body.refresh_token as string, resource: ANALYTICS })).body.error).to.equal('invalid_grant');
  });

  it('connections: listed for the account; revoking one stops its tokens at once and leaves the user signed in', async () => {
    const t = await connect(FULL, 'read:webhooks manage:webhooks');
    const v = await check(t.access_token, FULL);
    expect(v.ok).to.equal(true);
    const grantId = v.ok ? v.claims.grantId : '';
    const runner = new ProjectionRunner(motor.rt.db, motor.rt.store, oauthConnectionsProjection);
    await catchUpUntil(runner, async () => (await listConnections(motor.rt.db, b.accountId)).some((c) => c.id === grantId));

    const list = await getJson(`${motor.baseUrl}/api/oauth2/connections`, bearer());
    expect(list.status).to.equal(200);
    const mine = list.body.data.find((c: { id: string }) => c.id === grantId);
    expect(mine).to.include({ kind: 'agent', clientId, clientName: 'Agent <x>', resource: FULL, scope: 'manage:webhooks read:webhooks', status: 'active', userId: user.userId });

    // Another account's user cannot revoke it (404, as for a connection that does not exist).
    const other = await motor.bootstrap({ email: 'other@example.test' });
    const stranger = await dashboardUser(motor, other.accountId);
    const denied = await fetch(`${motor.baseUrl}/api/oauth2/connections/${grantId}`, { method: 'DELETE', headers: { authorization: `Bearer ${stranger.token}` } });
    expect(denied.status).to.equal(404);
    expect((await check(t.access_token, FULL)).ok).to.equal(true);
    expect((await fetch(`${motor.baseUrl}/api/oauth2/connections/${newId()}`, { method: 'DELETE', headers: bearer() })).status).to.equal(404);

    // The id in capitals names the same connection.
    const del = await fetch(`${motor.baseUrl}/api/oauth2/connections/${grantId.toUpperCase()}`, { method: 'DELETE', headers: bearer() });
    expect(del.status).to.equal(204);
    expect(await check(t.access_token, FULL)).to.deep.equal({ ok: false, reason: 'revoked' });
    expect((await token({ grant_type: 'refresh_token', client_id: clientId, refresh_token: t.refresh_token, resource: FULL })).body.error).to.equal('invalid_grant');
    expect((await fetch(`${motor.baseUrl}/api/oauth2/connections/${grantId}`, { method: 'DELETE', headers: bearer() })).status).to.equal(204);

    // The user's own session is untouched: the same dashboard JWT still works.
    const after = await getJson(`${motor.baseUrl}/api/oauth2/connections`, bearer());
    expect(after.status).to.equal(200);
    await catchUpUntil(runner, async () => (await listConnections(motor.rt.db, b.accountId)).some((c) => c.id === grantId && c.status === 'revoked'));
    const row = (await listConnections(motor.rt.db, b.accountId)).find((c) => c.id === grantId)!;
    expect(row).to.include({ status: 'revoked', revokedReason: 'user_revoked' });
  });

  it('the whole way: consent, token, tools over MCP with the SDK client; refreshed token works; revoked → 401', async () => {
    const t = await connect(ANALYTICS, 'read:analytics');
    const agent = await connectAgent(motor, '/v1/service_analytics/mcp', t.access_token);
    const blocks = await call(agent, 'list_motor_blocks');
    expect(blocks.isError, JSON.stringify(blocks.json)).to.equal(false);
    expect(JSON.stringify(blocks.json)).to.include(b.motorBlockId);
    await agent.close();
    // The token is for the analytics server only.
    const other = await fetch(`${motor.baseUrl}/v1/service_domains/mcp`, {
      method: 'POST', headers: { authorization: `Bearer ${t.access_token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} }),
    });
    expect(other.status).to.equal(401);

    const r = await token({ grant_type: 'refresh_token', client_id: clientId, refresh_token: t.refresh_token, resource: ANALYTICS });
    const again = await connectAgent(motor, '/v1/service_analytics/mcp', r.body.access_token as string);
    expect((await call(again, 'list_motor_blocks')).isError).to.equal(false);
    await again.close();

    const v = await check(r.body.access_token as string);
    const grantId = v.ok ? v.claims.grantId : '';
    expect((await fetch(`${motor.baseUrl}/api/oauth2/connections/${grantId}`, { method: 'DELETE', headers: bearer() })).status).to.equal(204);
    const refused = await fetch(`${motor.baseUrl}/v1/service_analytics/mcp`, {
      method: 'POST', headers: { authorization: `Bearer ${r.body.access_token as string}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} }),
    });
    expect(refused.status).to.equal(401);
    expect(refused.headers.get('www-authenticate')).to.include('error="invalid_token"').and.include(`resource_metadata="${MCP}/.well-known/oauth-protected-resource/v1/service_analytics/mcp"`);
  });

  it('RFC 7009: the agent revokes its own connection with its refresh or access token (a form, no secret); a forged or foreign one revokes nothing', async () => {
    const revoke = async (form: Record<string, string>) => {
      const res = await fetch(`${motor.baseUrl}/api/oauth2/revoke`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: new URLSearchParams(form).toString() });
      return { status: res.status, body: await res.json() as Record<string, unknown> };
    };
    const a = await connect();
    const forged = a.refresh_token.replace(/_[A-Za-z0-9_-]{43}$/, `_${'A'.repeat(43)}`);
    expect((await revoke({ token: forged, client_id: clientId })).status).to.equal(200);
    expect((await revoke({ token: a.access_token, client_id: `${host.origin}/someone-else.json` })).status).to.equal(200);
    expect((await check(a.access_token)).ok, 'nothing revoked yet').to.equal(true);
    const r = await revoke({ token: a.refresh_token, client_id: clientId, token_type_hint: 'refresh_token' });
    expect([r.status, r.body]).to.deep.equal([200, {}]);
    expect(await check(a.access_token)).to.deep.equal({ ok: false, reason: 'revoked' });

    const c = await connect();
    expect((await revoke({ token: c.access_token, client_id: clientId })).status).to.equal(200);
    expect(await check(c.access_token)).to.deep.equal({ ok: false, reason: 'revoked' });
    expect((await token({ grant_type: 'refresh_token', client_id: clientId, refresh_token: c.refresh_token, resource: ANALYTICS })).body.error).to.equal('invalid_grant');
    const m = await getJson(`${motor.baseUrl}/.well-known/oauth-authorization-server`);
    expect(m.body.revocation_endpoint).to.equal(`${AUTH}/api/oauth2/revoke`);
  });

  it('signing-key rotation (CLI): new tokens use the new key, old ones verify until the grace ends, the JWKS lists both meanwhile', async () => {
    const before = await connect();
    const oldKid = decodeProtectedHeader(before.access_token).kid;
    const { stdout } = await promisify(execFile)('npx', ['tsx', 'scripts/cli.ts', 'oauth', 'rotate-signing-key', '--json'], {
      env: { ...process.env, DATABASE_URL: motor.rt.databaseUrl, LOG_LEVEL: 'silent' },
    });
    const out = JSON.parse(stdout);
    expect(out.previousKeyId).to.equal(oldKid);
    expect(out.keyId).to.be.a('string').and.not.equal(oldKid);
    expect(Date.parse(out.previousPublishedUntil) - Date.now()).to.be.within(RETIRED_KEY_GRACE_MS - 60_000, RETIRED_KEY_GRACE_MS);

    // This API process learns of the rotation when its key list ages (60 s) or at a kid it does not know; a fresh key store reads it at once.
    const keys = new KeyStore(motor.rt.db, motor.config.keyEncryptionKey);
    const fresh = (t: string, resource = ANALYTICS) => activeAgentToken({ store: motor.rt.store, keys, config: motor.config }, t, resource, new Date());
    expect((await fresh(before.access_token)).ok, 'a token of the previous key still verifies').to.equal(true);
    expect((await agentJwks(keys)).keys.map((k) => k.kid)).to.have.members([out.keyId, oldKid]);
    const v = await fresh(before.access_token);
    const claims = v.ok ? v.claims : null;
    const next = await signAgentToken({ keys, config: motor.config }, claims!, new Date(), 3600);
    expect(decodeProtectedHeader(next.token).kid).to.equal(out.keyId);

    // Once the grace is over, the previous key is gone from the JWKS and its tokens are refused.
    // (Time passes: every version of the key moves back past the grace.)
    await motor.rt.db.raw(`update motor_keys.signing_key_versions set created_at = created_at - make_interval(secs => ?) where purpose = 'agent-access-token'`, [RETIRED_KEY_GRACE_MS / 1000 + 1]);
    const later = new KeyStore(motor.rt.db, motor.config.keyEncryptionKey);
    expect((await agentJwks(later)).keys.map((k) => k.kid)).to.deep.equal([out.keyId]);
    expect(await activeAgentToken({ store: motor.rt.store, keys: later, config: motor.config }, before.access_token, ANALYTICS, new Date())).to.deep.equal({ ok: false, reason: 'invalid' });
  });

  it('SMTP clients are unchanged: a uuid client_id still needs its secret', async () => {
    const r = await token({ grant_type: 'authorization_code', client_id: newId(), code: 'x', redirect_uri: CALLBACK });
    expect(r.status).to.equal(400);
    expect(r.body.error).to.equal('invalid_client');
  });
});
