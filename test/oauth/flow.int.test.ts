import { createHash, randomBytes } from 'node:crypto';
import { expect } from 'chai';
import jwt from 'jsonwebtoken';
import { streamName } from '../../domain/eventStore';
import { newId } from '../../domain/ids';
import { accessTokenSettings, signAccessToken } from '../../commands/oauth/accessTokens';
import type { RegisteredClient } from '../../commands/oauth/clients';
import type { BootstrapResult } from '../../commands/admin/bootstrap';
import { getJson, postJson, startTestMotor, type TestMotor } from '../support/motor';
import {
  authorize, authorizeUrl, dashboardUser, exchange, formTokenOf, getPage, newClient, oauthBlock, postForm, REDIRECT, refresh,
} from './support';

const pkce = () => {
  const verifier = randomBytes(32).toString('base64url');
  return { verifier, challenge: createHash('sha256').update(verifier).digest('base64url') };
};

describe('OAuth 2.0 authorization server: authorize, consent, token, validate (int)', function () {
  this.timeout(60_000);
  let motor: TestMotor;
  let b: BootstrapResult;
  let client: RegisteredClient;
  let user: Awaited<ReturnType<typeof dashboardUser>>;
  let blockId: string;

  before(async () => {
    motor = await startTestMotor({ roles: ['api', 'projector'], env: { ANONYMOUS_REQUEST_LIMIT: '100000' } });
    b = await motor.bootstrap();
    blockId = (await oauthBlock(motor, b, 'Mail <block>')).motorBlockId;
    client = await newClient(motor, b.accountId);
    user = await dashboardUser(motor, b.accountId);
  });
  after(async () => {
    await motor?.close();
  });

  const bearer = () => ({ authorization: `Bearer ${user.token}` });
  const base = () => ({ client_id: client.clientId, response_type: 'code', redirect_uri: REDIRECT, scope: 'email.send', state: 's1', motor_block_id: blockId });
  const grantEvents = async (code: string) => {
    const h = /^oc_([0-9a-f]{32})_/.exec(code)![1];
    const id = `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
    return (await motor.rt.store.readStream(streamName('oauthGrant', id))).map((e) => e.type);
  };

  describe('GET /api/oauth2/authorize', () => {
    it('a signed-in user gets the consent page (HTML, no-store, not frameable), escaped', async () => {
      const r = await getPage(authorizeUrl(motor, base()), bearer());
      expect(r.status).to.equal(200);
      expect(r.headers.get('content-type')).to.match(/^text\/html/);
      expect(r.headers.get('cache-control')).to.equal('no-store');
      expect(r.headers.get('x-frame-options')).to.equal('DENY');
      expect(r.text).to.include('Mail app &lt;test&gt;').and.include('Mail &lt;block&gt;');
      expect(formTokenOf(r.text)).to.match(/^oct_/);
    });

    it('without a dashboard credential: 401; the motor_dashboard cookie (POST /api/oauth2/session) works', async () => {
      expect((await getPage(authorizeUrl(motor, base()))).status).to.equal(401);
      const s = await fetch(`${motor.baseUrl}/api/oauth2/session`, { method: 'POST', headers: bearer() });
      expect(s.status).to.equal(204);
      const cookie = s.headers.get('set-cookie')!;
      expect(cookie).to.match(/^motor_dashboard=[^;]+; Path=\/api\/oauth2; HttpOnly; SameSite=Lax; Max-Age=900/);
      const r = await getPage(authorizeUrl(motor, base()), { cookie: cookie.split(';')[0] });
      expect(r.status).to.equal(200);
    });

    const errorCases: Array<[string, Record<string, string | undefined>, string]> = [
      ['no client_id', { client_id: undefined }, 'invalid_request'],
      ['unknown client_id', { client_id: newId() }, 'invalid_client'],
      ['malformed client_id', { client_id: 'nope' }, 'invalid_client'],
      ['no redirect_uri', { redirect_uri: undefined }, 'invalid_request'],
      ['unregistered redirect_uri', { redirect_uri: 'https://evil.test/cb' }, 'invalid_request'],
      ['redirect_uri prefix only', { redirect_uri: `${REDIRECT}/x` }, 'invalid_request'],
      ['response_type token', { response_type: 'token' }, 'invalid_request'],
      ['no response_type', { response_type: undefined }, 'invalid_request'],
      ['unknown scope', { scope: 'logs.read' }, 'invalid_scope'],
      ['block of no account', { motor_block_id: newId() }, 'invalid_request'],
      // PKCE is optional for SMTP clients, but one that is sent is S256 or refused (RFC 7636 §4.4.1).
      ['code_challenge_method plain', { code_challenge: pkce().verifier, code_challenge_method: 'plain' }, 'invalid_request'],
      ['code_challenge without a method (plain by default)', { code_challenge: pkce().challenge }, 'invalid_request'],
      ['code_challenge_method without a code_challenge', { code_challenge_method: 'S256' }, 'invalid_request'],
      ['code_challenge_method other than S256', { code_challenge: pkce().challenge, code_challenge_method: 'S512' }, 'invalid_request'],
      ['code_challenge too short', { code_challenge: pkce().challenge.slice(1), code_challenge_method: 'S256' }, 'invalid_request'],
      ['code_challenge with a character outside base64url', { code_challenge: `${pkce().challenge.slice(1)}+`, code_challenge_method: 'S256' }, 'invalid_request'],
    ];
    for (const [name, override, error] of errorCases) {
      it(`400 ${error} as JSON, never a redirect: ${name}`, async () => {
        const r = await getPage(authorizeUrl(motor, { ...base(), ...override }), bearer());
        expect(r.status).to.equal(400);
        expect(r.headers.get('location')).to.equal(null);
        expect(JSON.parse(r.text).error).to.equal(error);
      });
    }

    it('a parameter given twice is invalid_request, scope and the PKCE ones included', async () => {
      const { challenge } = pkce();
      for (const [name, value] of [['scope', 'email.send'], ['state', 's2'], ['code_challenge', challenge], ['code_challenge_method', 'S256']]) {
        const u = new URL(authorizeUrl(motor, { ...base(), code_challenge: challenge, code_challenge_method: 'S256' }));
        u.searchParams.append(name, value);
        const r = await getPage(u.toString(), bearer());
        expect(r.status, name).to.equal(400);
        expect(JSON.parse(r.text).error, name).to.equal('invalid_request');
      }
    });

    it('motor_block_id in capitals names the same block (a uuid is case-insensitive)', async () => {
      const r = await getPage(authorizeUrl(motor, { ...base(), motor_block_id: blockId.toUpperCase() }), bearer());
      expect(r.status, r.text).to.equal(200);
      expect(r.text).to.include(`name="motor_block_id" value="${blockId}"`);
      const { code } = await authorize(motor, { client, dashboardToken: user.token, motorBlockId: blockId.toUpperCase() });
      const t = await exchange(motor, client, code);
      expect(t.status, JSON.stringify(t.body)).to.equal(200);
      expect(t.body.motor_block.id).to.equal(blockId);
      const viaForm = await authorize(motor, { client, dashboardToken: user.token, motorBlockId: blockId.toUpperCase(), viaForm: true });
      expect((await exchange(motor, client, viaForm.code)).body.motor_block.id).to.equal(blockId);
    });

    it('a block of another account is refused', async () => {
      const other = await motor.bootstrap();
      const r = await getPage(authorizeUrl(motor, { ...base(), motor_block_id: other.motorBlockId }), bearer());
      expect(r.status).to.equal(400);
      expect(JSON.parse(r.text).error).to.equal('invalid_request');
    });
  });

  describe('POST /api/oauth2/consent', () => {
    it('approve: 302 to the redirect_uri with code and state; events OAuthConsentRequested, OAuthCodeIssued', async () => {
      const { code, state } = await authorize(motor, { client, dashboardToken: user.token, motorBlockId: blockId, state: 'st-1' });
      expect(code).to.match(/^oc_[0-9a-f]{32}_[A-Za-z0-9_-]{43}$/);
      expect(state).to.equal('st-1');
      expect(await grantEvents(code)).to.deep.equal(['OAuthConsentRequested', 'OAuthCodeIssued']);
    });

    it('the block picked on the page (no motor_block_id in the query) works', async () => {
      const page = await getPage(authorizeUrl(motor, { ...base(), motor_block_id: undefined }), bearer());
      expect(page.text).to.include(`<option value="${blockId}">`);
      const { code } = await authorize(motor, { client, dashboardToken: user.token, motorBlockId: blockId, viaForm: true });
      const t = await exchange(motor, client, code);
      expect(t.body.motor_block.id).to.equal(blockId);
    });

    it('the form token is single use, bound to its user, and needs the dashboard credential', async () => {
      const page = await getPage(authorizeUrl(motor, base()), bearer());
      const formToken = formTokenOf(page.text);
      const anonymous = await postForm(`${motor.baseUrl}/api/oauth2/consent`, { form_token: formToken, decision: 'approve' });
      expect(anonymous.status).to.equal(401);
      const other = await dashboardUser(motor, b.accountId);
      const stranger = await postForm(`${motor.baseUrl}/api/oauth2/consent`, { form_token: formToken, decision: 'approve' }, { authorization: `Bearer ${other.token}` });
      expect(stranger.status).to.equal(400);
      expect(JSON.parse(stranger.text).error).to.equal('invalid_request');
      const ok = await postForm(`${motor.baseUrl}/api/oauth2/consent`, { form_token: formToken, decision: 'approve' }, bearer());
      expect(ok.status).to.equal(302);
      const again = await postForm(`${motor.baseUrl}/api/oauth2/consent`, { form_token: formToken, decision: 'approve' }, bearer());
      expect(again.status).to.equal(400);
      const forged = await postForm(`${motor.baseUrl}/api/oauth2/consent`, { form_token: `${formToken.slice(0, -4)}AAAA`, decision: 'approve' }, bearer());
      expect(forged.status).to.equal(400);
    });

    it('deny: 302 with error=access_denied and the state, no code', async () => {
      const page = await getPage(authorizeUrl(motor, { ...base(), state: 'd1' }), bearer());
      const r = await postForm(`${motor.baseUrl}/api/oauth2/consent`, { form_token: formTokenOf(page.text), decision: 'deny' }, bearer());
      expect(r.status).to.equal(302);
      const loc = new URL(r.location!);
      expect(`${loc.origin}${loc.pathname}`).to.equal(REDIRECT);
      expect(loc.searchParams.get('error')).to.equal('access_denied');
      expect(loc.searchParams.get('state')).to.equal('d1');
      expect(loc.searchParams.has('code')).to.equal(false);
    });
  });

  describe('POST /api/oauth2/token', () => {
    it('authorization_code: exactly the spec response; OAuthTokenIssued; the token validates', async () => {
      const { code } = await authorize(motor, { client, dashboardToken: user.token, motorBlockId: blockId });
      const r = await exchange(motor, client, code);
      expect(r.status, JSON.stringify(r.body)).to.equal(200);
      expect(r.headers.get('cache-control')).to.equal('no-store');
      expect(Object.keys(r.body).sort()).to.deep.equal(['access_token', 'expires_in', 'motor_block', 'refresh_token', 'scope', 'token_type']);
      expect(r.body.token_type).to.equal('Bearer');
      expect(r.body.expires_in).to.equal(3600);
      expect(r.body.scope).to.equal('email.send');
      expect(r.body.refresh_token).to.match(/^ort_/);
      expect(r.body.access_token.split('.')).to.have.length(3);
      const block = await motor.rt.store.readStream(streamName('motorBlock', blockId));
      const created = block[0].data as { name: string; smtpUsername: string };
      expect(r.body.motor_block).to.deep.equal({ id: blockId, name: created.name, smtp_username: created.smtpUsername });
      expect(await grantEvents(code)).to.deep.equal(['OAuthConsentRequested', 'OAuthCodeIssued', 'OAuthTokenIssued']);
      const v = await getJson(`${motor.baseUrl}/api/oauth2/validate?token=${r.body.access_token}`);
      expect(v.status).to.equal(200);
    });

    it('a code used twice: invalid_grant, and the tokens issued from it are revoked', async () => {
      const { code } = await authorize(motor, { client, dashboardToken: user.token, motorBlockId: blockId });
      const first = await exchange(motor, client, code);
      expect(first.status).to.equal(200);
      const second = await exchange(motor, client, code);
      expect(second.status).to.equal(400);
      expect(second.body).to.deep.include({ error: 'invalid_grant' });
      expect((await getJson(`${motor.baseUrl}/api/oauth2/validate?token=${first.body.access_token}`)).status).to.equal(401);
      expect((await refresh(motor, client, first.body.refresh_token)).body.error).to.equal('invalid_grant');
      expect(await grantEvents(code)).to.include('OAuthGrantRevoked');
    });

    it('invalid_client: wrong secret, unknown client, missing secret; invalid_grant: wrong redirect_uri, other client, garbage code', async () => {
      const { code } = await authorize(motor, { client, dashboardToken: user.token, motorBlockId: blockId });
      expect((await exchange(motor, client, code, { client_secret: `${client.clientSecret.slice(0, -1)}x` })).body.error).to.equal('invalid_client');
      expect((await exchange(motor, client, code, { client_id: newId() })).body.error).to.equal('invalid_client');
      const noSecret = await postJson(`${motor.baseUrl}/api/oauth2/token`, { grant_type: 'authorization_code', client_id: client.clientId, code, redirect_uri: REDIRECT });
      expect(noSecret.status).to.equal(400);
      expect(noSecret.body.error).to.equal('invalid_client');
      const wrongUri = await exchange(motor, client, code, { redirect_uri: 'https://app.example.test/other' });
      expect(wrongUri.status).to.equal(400);
      expect(wrongUri.body.error).to.equal('invalid_grant');
      const otherClient = await newClient(motor, b.accountId);
      expect((await exchange(motor, otherClient, code)).body.error).to.equal('invalid_grant');
      expect((await exchange(motor, client, 'oc_garbage')).body.error).to.equal('invalid_grant');
      // The failed attempts spent nothing: the right request still works.
      expect((await exchange(motor, client, code)).status).to.equal(200);
      const grantType = await postJson(`${motor.baseUrl}/api/oauth2/token`, { grant_type: 'password', client_id: client.clientId, client_secret: client.clientSecret });
      expect(grantType.status).to.equal(400);
    });

    it('PKCE (optional): a code_challenge is recorded; the token request needs its S256 code_verifier; failures spend nothing', async () => {
      const { verifier, challenge } = pkce();
      const { code } = await authorize(motor, { client, dashboardToken: user.token, motorBlockId: blockId, query: { code_challenge: challenge, code_challenge_method: 'S256' } });
      const h = /^oc_([0-9a-f]{32})_/.exec(code)![1];
      const grantId = `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
      const requested = (await motor.rt.store.readStream(streamName('oauthGrant', grantId)))[0];
      expect(requested.data).to.deep.include({ codeChallenge: challenge });
      for (const [name, extra] of [
        ['no code_verifier', {}],
        ['a wrong code_verifier', { code_verifier: pkce().verifier }],
        ['the challenge itself (plain)', { code_verifier: challenge }],
        ['a malformed code_verifier', { code_verifier: 'short' }],
      ] as const) {
        const r = await exchange(motor, client, code, extra);
        expect(r.status, name).to.equal(400);
        expect(r.body.error, name).to.equal('invalid_grant');
      }
      expect(await grantEvents(code)).to.deep.equal(['OAuthConsentRequested', 'OAuthCodeIssued']);
      const ok = await exchange(motor, client, code, { code_verifier: verifier });
      expect(ok.status, JSON.stringify(ok.body)).to.equal(200);
      expect(ok.body.motor_block.id).to.equal(blockId);
    });

    it('PKCE downgrade (RFC 9700 §2.1.1): a code_verifier for a code requested without a code_challenge is invalid_grant and spends nothing', async () => {
      const { code } = await authorize(motor, { client, dashboardToken: user.token, motorBlockId: blockId });
      const r = await exchange(motor, client, code, { code_verifier: pkce().verifier });
      expect(r.status).to.equal(400);
      expect(r.body.error).to.equal('invalid_grant');
      const form = await postForm(`${motor.baseUrl}/api/oauth2/token`, {
        grant_type: 'authorization_code', client_id: client.clientId, client_secret: client.clientSecret, code, redirect_uri: REDIRECT, code_verifier: pkce().verifier,
      });
      expect([form.status, JSON.parse(form.text).error]).to.deep.equal([400, 'invalid_grant']);
      expect((await exchange(motor, client, code)).status).to.equal(200);
    });

    it('refresh_token rotates on every use; a spent one presented again revokes the family', async () => {
      const { code } = await authorize(motor, { client, dashboardToken: user.token, motorBlockId: blockId });
      const t0 = (await exchange(motor, client, code)).body;
      const r1 = await refresh(motor, client, t0.refresh_token);
      expect(r1.status, JSON.stringify(r1.body)).to.equal(200);
      expect(r1.body.refresh_token).to.not.equal(t0.refresh_token);
      expect(r1.body.motor_block.id).to.equal(blockId);
      expect(r1.body.expires_in).to.equal(3600);
      const r2 = await refresh(motor, client, r1.body.refresh_token);
      expect(r2.status).to.equal(200);
      expect(await grantEvents(code)).to.deep.equal(['OAuthConsentRequested', 'OAuthCodeIssued', 'OAuthTokenIssued', 'OAuthRefreshRotated', 'OAuthRefreshRotated']);
      const reuse = await refresh(motor, client, t0.refresh_token);
      expect(reuse.status).to.equal(400);
      expect(reuse.body.error).to.equal('invalid_grant');
      expect((await refresh(motor, client, r2.body.refresh_token)).body.error).to.equal('invalid_grant');
      expect((await getJson(`${motor.baseUrl}/api/oauth2/validate?token=${r2.body.access_token}`)).status).to.equal(401);
      const other = await newClient(motor, b.accountId);
      expect((await refresh(motor, other, r2.body.refresh_token)).body.error).to.equal('invalid_grant');
    });

    it('parameters it does not know are ignored (RFC 6749 §3.2): scope on a refresh (§6), an extension\'s, as JSON or a form', async () => {
      const { code } = await authorize(motor, { client, dashboardToken: user.token, motorBlockId: blockId });
      const t0 = await exchange(motor, client, code, { scope: 'email.send', state: 'ignored' });
      expect(t0.status, JSON.stringify(t0.body)).to.equal(200);
      const r1 = await postJson(`${motor.baseUrl}/api/oauth2/token`, {
        grant_type: 'refresh_token', client_id: client.clientId, client_secret: client.clientSecret, refresh_token: t0.body.refresh_token, scope: 'email.send',
      });
      expect(r1.status, JSON.stringify(r1.body)).to.equal(200);
      expect(r1.body.scope).to.equal('email.send');
      const r2 = await postForm(`${motor.baseUrl}/api/oauth2/token`, {
        grant_type: 'refresh_token', client_id: client.clientId, client_secret: client.clientSecret, refresh_token: r1.body.refresh_token, scope: 'email.send', ext: 'x',
      });
      expect(r2.status, r2.text).to.equal(200);
      const revoked = await postJson(`${motor.baseUrl}/api/oauth2/revoke`, {
        token: JSON.parse(r2.text).refresh_token, token_type_hint: 'refresh_token', client_id: client.clientId, client_secret: client.clientSecret, ext: 'x',
      });
      expect([revoked.status, revoked.body]).to.deep.equal([200, {}]);
      expect((await getJson(`${motor.baseUrl}/api/oauth2/validate?token=${JSON.parse(r2.text).access_token}`)).status).to.equal(401);
    });
  });

  describe('GET /api/oauth2/validate', () => {
    it('token query, access_token query and Bearer: 200 metadata', async () => {
      const { code } = await authorize(motor, { client, dashboardToken: user.token, motorBlockId: blockId });
      const t = (await exchange(motor, client, code)).body;
      for (const [url, headers] of [
        [`${motor.baseUrl}/api/oauth2/validate?token=${t.access_token}`, {}],
        [`${motor.baseUrl}/api/oauth2/validate?access_token=${t.access_token}`, {}],
        [`${motor.baseUrl}/api/oauth2/validate`, { authorization: `Bearer ${t.access_token}` }],
      ] as Array<[string, Record<string, string>]>) {
        const r = await getJson(url, headers);
        expect(r.status).to.equal(200);
        expect(r.body).to.include({ active: true, client_id: client.clientId, motor_block_id: blockId, account_id: b.accountId, scope: 'email.send', token_type: 'Bearer' });
        expect(r.body.exp - r.body.iat).to.equal(3600);
        expect(r.body.expires_in).to.be.within(3590, 3600);
      }
    });

    it('401: missing, garbage, the whole JSON response, expired, another key (dashboard JWT), a public bearer token', async () => {
      const { code } = await authorize(motor, { client, dashboardToken: user.token, motorBlockId: blockId });
      const t = (await exchange(motor, client, code)).body;
      const s = accessTokenSettings(motor.config);
      const claims = jwt.decode(t.access_token) as Record<string, string>;
      const expired = signAccessToken(s, { tokenId: claims.jti, grantId: claims.gid, clientId: claims.cid, userId: claims.sub, accountId: claims.acct, motorBlockId: claims.mbid, scope: 'email.send' }, new Date(Date.now() - 7200_000), 3600).token;
      const publicToken = await motor.token(b, ['logs.read']);
      for (const token of [undefined, 'garbage', JSON.stringify(t), expired, user.token, publicToken]) {
        const r = await getJson(`${motor.baseUrl}/api/oauth2/validate${token === undefined ? '' : `?token=${encodeURIComponent(token)}`}`);
        expect(r.status, String(token).slice(0, 30)).to.equal(401);
        expect(r.body.error).to.equal('invalid_token');
      }
    });
  });

  describe('POST /api/oauth2/revoke (RFC 7009)', () => {
    const revoke = (body: Record<string, unknown>) => postJson(`${motor.baseUrl}/api/oauth2/revoke`, body);
    const valid = async (token: string) => (await getJson(`${motor.baseUrl}/api/oauth2/validate?token=${encodeURIComponent(token)}`)).status === 200;

    it('an SMTP client revokes with its secret: the access and refresh tokens stop at once', async () => {
      const { code } = await authorize(motor, { client, dashboardToken: user.token, motorBlockId: blockId });
      const t = (await exchange(motor, client, code)).body;
      expect(await valid(t.access_token)).to.equal(true);
      const wrong = await revoke({ token: t.refresh_token, client_id: client.clientId, client_secret: 'mcs_wrong' });
      expect([wrong.status, wrong.body.error]).to.deep.equal([400, 'invalid_client']);
      expect(await valid(t.access_token), 'a refused revocation revokes nothing').to.equal(true);
      const r = await revoke({ token: t.access_token, client_id: client.clientId, client_secret: client.clientSecret });
      expect([r.status, r.body]).to.deep.equal([200, {}]);
      expect(await valid(t.access_token)).to.equal(false);
      expect((await refresh(motor, client, t.refresh_token)).body.error).to.equal('invalid_grant');
      const events = await grantEvents(code);
      expect(events[events.length - 1]).to.equal('OAuthGrantRevoked');
    });

    it('a token that is unknown, garbage or another client\'s: 200 and nothing revoked; no token: invalid_request', async () => {
      const { code } = await authorize(motor, { client, dashboardToken: user.token, motorBlockId: blockId });
      const t = (await exchange(motor, client, code)).body;
      const other = await newClient(motor, b.accountId);
      const forged = t.refresh_token.replace(/_[A-Za-z0-9_-]{43}$/, `_${'A'.repeat(43)}`);
      for (const [token, by] of [['garbage', client], [forged, client], [t.refresh_token, other], [t.access_token, other]] as const) {
        const r = await revoke({ token, client_id: by.clientId, client_secret: by.clientSecret });
        expect(r.status, token.slice(0, 20)).to.equal(200);
      }
      expect(await valid(t.access_token)).to.equal(true);
      expect((await revoke({ client_id: client.clientId, client_secret: client.clientSecret })).body.error).to.equal('invalid_request');
      expect((await revoke({ token: t.refresh_token })).body.error).to.equal('invalid_client');
    });
  });
});
