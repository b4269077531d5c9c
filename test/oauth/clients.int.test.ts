import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { expect } from 'chai';
import { streamName } from '../../domain/eventStore';
import type { OAuthClientRegistered } from '../../domain/events';
import { hashSecret } from '../../domain/credentials/apiKeys';
import { eventually, getJson, postJson, startTestMotor, type TestMotor } from '../support/motor';
import { dashboardUser } from './support';

const run = promisify(execFile);

describe('OAuth clients: registration (int)', function () {
  this.timeout(60_000);
  let motor: TestMotor;
  let accountId: string;

  before(async () => {
    motor = await startTestMotor({ roles: ['api', 'projector'] });
    accountId = (await motor.bootstrap()).accountId;
  });
  after(async () => {
    await motor?.close();
  });

  const registered = async (clientId: string): Promise<OAuthClientRegistered> => {
    const events = await motor.rt.store.readStream(streamName('oauthClient', clientId));
    expect(events.map((e) => e.type)).to.deep.equal(['OAuthClientRegistered']);
    return events[0].data as OAuthClientRegistered;
  };

  it('CLI oauth-client create: prints client_id and a secret shown once; the event holds only its hash', async () => {
    const { stdout } = await run('npx', ['tsx', 'scripts/cli.ts', 'oauth-client', 'create', '--account', accountId, '--name', 'Thunderbird',
      '--redirect-uri', 'https://app.example.test/cb', '--redirect-uri', 'http://127.0.0.1:8765/cb', '--json'], {
      env: { ...process.env, DATABASE_URL: motor.rt.databaseUrl, TOKEN_SECRET: 'test-token-secret-0123456789abcdef0123', LOG_LEVEL: 'silent' },
    });
    const out = JSON.parse(stdout);
    expect(out.client_id).to.match(/^[0-9a-f-]{36}$/);
    expect(out.client_secret).to.match(/^mcs_[A-Za-z0-9_-]{43}$/);
    expect(out.redirect_uris).to.deep.equal(['https://app.example.test/cb', 'http://127.0.0.1:8765/cb']);
    const e = await registered(out.client_id);
    expect(e.accountId).to.equal(accountId);
    expect(e.registeredBy).to.equal('cli');
    expect(e.secretHash).to.equal(hashSecret(out.client_secret));
    expect(JSON.stringify(e)).to.not.include(out.client_secret);
  });

  it('CLI refuses an unknown account and a bad redirect URI', async () => {
    const env = { ...process.env, DATABASE_URL: motor.rt.databaseUrl, TOKEN_SECRET: 'test-token-secret-0123456789abcdef0123', LOG_LEVEL: 'silent' };
    const bad = await run('npx', ['tsx', 'scripts/cli.ts', 'oauth-client', 'create', '--account', '00000000-0000-4000-8000-000000000000', '--name', 'x', '--redirect-uri', 'https://a.test/cb', '--json'], { env }).catch((e) => e);
    // As every operator command answers an unknown id: not_found, exit 1 (2 is for malformed arguments).
    expect(bad.code).to.equal(1);
    expect(JSON.parse(bad.stdout).error).to.equal('not_found');
    const uri = await run('npx', ['tsx', 'scripts/cli.ts', 'oauth-client', 'create', '--account', accountId, '--name', 'x', '--redirect-uri', 'http://evil.test/cb', '--json'], { env }).catch((e) => e);
    expect(uri.code).to.equal(1);
    expect(JSON.parse(uri.stdout).error).to.equal('validation_error');
  });

  it('CLI with an unreachable database: one line naming event_store_unavailable, exit 1, no stack trace', async () => {
    const env = { ...process.env, DATABASE_URL: 'postgres://postgres@127.0.0.1:1/none', TOKEN_SECRET: 'test-token-secret-0123456789abcdef0123', LOG_LEVEL: 'silent' };
    const plain = await run('npx', ['tsx', 'scripts/cli.ts', 'block', 'list'], { env }).catch((e) => e);
    expect(plain.code).to.equal(1);
    expect(plain.stderr.trim().split('\n').filter((l: string) => !l.startsWith('npm warn'))).to.have.length(1);
    expect(plain.stderr).to.match(/^event_store_unavailable: .*ECONNREFUSED/m).and.not.match(/\n\s+at /);
    const json = await run('npx', ['tsx', 'scripts/cli.ts', 'block', 'list', '--json'], { env }).catch((e) => e);
    expect(json.code).to.equal(1);
    expect(JSON.parse(json.stdout).error).to.equal('event_store_unavailable');
  });

  it('POST /api/oauth2/clients with a dashboard JWT: 201, secret once, event registeredBy the user', async () => {
    const u = await dashboardUser(motor, accountId);
    const r = await postJson(`${motor.baseUrl}/api/oauth2/clients`, { name: 'My app', redirectUris: ['https://my.app.test/callback'] }, { authorization: `Bearer ${u.token}` });
    expect(r.status, JSON.stringify(r.body)).to.equal(201);
    expect(r.body.data.clientSecret).to.match(/^mcs_/);
    expect(r.body.data.accountId).to.equal(accountId);
    const e = await registered(r.body.data.clientId);
    expect(e.registeredBy).to.equal(`user:${u.userId}`);
    expect(e.secretHash).to.equal(hashSecret(r.body.data.clientSecret));
  });

  it('POST /api/oauth2/clients: 401 without a dashboard JWT, 400 for bad redirect URIs or an empty name', async () => {
    const none = await postJson(`${motor.baseUrl}/api/oauth2/clients`, { name: 'x', redirectUris: ['https://a.test/cb'] });
    expect(none.status).to.equal(401);
    const u = await dashboardUser(motor, accountId);
    const auth = { authorization: `Bearer ${u.token}` };
    for (const redirectUris of [['http://evil.test/cb'], ['https://a.test/cb#frag'], ['not a uri'], []]) {
      const r = await postJson(`${motor.baseUrl}/api/oauth2/clients`, { name: 'x', redirectUris }, auth);
      expect(r.status, JSON.stringify(redirectUris)).to.equal(400);
      expect(r.body.code).to.equal('validation_error');
    }
    const empty = await postJson(`${motor.baseUrl}/api/oauth2/clients`, { name: ' ', redirectUris: ['https://a.test/cb'] }, auth);
    expect(empty.status).to.equal(400);
  });

  it('GET /api/oauth2/clients lists the account\'s clients (read model), never a secret or its hash', async () => {
    const u = await dashboardUser(motor, accountId);
    const auth = { authorization: `Bearer ${u.token}` };
    const created = await postJson(`${motor.baseUrl}/api/oauth2/clients`, { name: 'Listed', redirectUris: ['https://listed.test/cb'] }, auth);
    const list = await eventually(async () => {
      const r = await getJson(`${motor.baseUrl}/api/oauth2/clients`, auth);
      return r.body.data?.some((c: { clientId: string }) => c.clientId === created.body.data.clientId) ? r.body.data : null;
    });
    const item = list.find((c: { clientId: string }) => c.clientId === created.body.data.clientId);
    expect(item).to.deep.include({ name: 'Listed', redirectUris: ['https://listed.test/cb'], registeredBy: `user:${u.userId}` });
    expect(JSON.stringify(list)).to.not.match(/mcs_|secret/i);
    const other = await motor.bootstrap();
    const stranger = await dashboardUser(motor, other.accountId);
    const theirs = await getJson(`${motor.baseUrl}/api/oauth2/clients`, { authorization: `Bearer ${stranger.token}` });
    expect(theirs.body.data).to.deep.equal([]);
  });
});
