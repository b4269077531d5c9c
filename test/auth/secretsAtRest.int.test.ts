import { expect } from 'chai';
import { SCOPES } from '../../domain/credentials/scopes';
import { eventually, getJson, postJson } from '../support/motor';
import { createBlockFor } from './fixtures';
import { PASSWORD, startAuthHarness, type AuthHarness } from './harness';

/**
 * Secrets at rest (and in the logs): after every kind of secret has been issued and used (password, refresh tokens,
 * dashboard and public JWTs, block and account API keys, an SMTP password, an OAuth client secret,
 * a setup token, a webhook signing secret), none of them appears anywhere Motor keeps data: any table of any schema of its
 * database (event log, read models, checkpoints, key store) or any key of Redis (queues, caches,
 * limiter and quota counters). Only hashes are kept; this reads everything rather than trusting
 * the columns it knows about. The Motor logs at trace level into memory meanwhile, and no log line
 * holds a secret either, failed logins and unparsable bodies with secrets in them included.
 */
describe('secrets at rest: no issued secret is stored in clear (int)', function () {
  this.timeout(120_000);
  let h: AuthHarness;
  const secrets: Record<string, string> = {};
  const logLines: string[] = [];

  before(async () => {
    h = await startAuthHarness({ API_REQUEST_LIMIT: '1000000' }, { logLines });
    const email = 'secrets@rcpt.test';
    // register → code → verify-code (setup token) → set-password, by hand to keep the setup token.
    const before = h.mx.messages.length;
    expect((await h.post('/api/auth/register', { email })).status).to.equal(200);
    const code = await h.codeFor(email, before);
    const verified = await h.post('/api/auth/verify-code', { email, code });
    secrets.setupToken = verified.body.data.setupToken;
    const set = await h.post('/api/auth/set-password', { email, password: PASSWORD, setupToken: secrets.setupToken, channel: 'agent' });
    expect(set.status).to.equal(200);
    secrets.password = PASSWORD;
    secrets.signupRefreshToken = set.body.data.refreshToken;
    const login = await h.post('/api/auth/login', { email, password: PASSWORD });
    expect(login.status).to.equal(200);
    secrets.dashboardJwt = login.body.data.token;
    secrets.refreshToken = login.body.data.refreshToken;
    const refreshed = await h.post('/api/auth/refresh', { refreshToken: secrets.refreshToken });
    expect(refreshed.status, JSON.stringify(refreshed.body)).to.equal(200);
    secrets.rotatedRefreshToken = refreshed.body.data.refreshToken;

    const dash = { authorization: `Bearer ${secrets.dashboardJwt}` };
    const block = await createBlockFor(h.motor, set.body.data.accountId);
    const blockKey = await h.post(`/api/motor-blocks/${block.motorBlockId}/api-keys`, {}, dash);
    const accountKey = await h.post('/api/account/api-keys', {}, dash);
    const smtp = await h.post(`/api/motor-blocks/${block.motorBlockId}/smtp-password`, {}, dash);
    const client = await h.post('/api/oauth2/clients', { name: 'Mail app', redirectUris: ['https://app.example.test/cb'] }, dash);
    expect([blockKey.status, accountKey.status, smtp.status, client.status]).to.deep.equal([201, 201, 200, 201]);
    secrets.blockApiKey = blockKey.body.data.key;
    secrets.accountApiKey = accountKey.body.data.key;
    secrets.smtpPassword = smtp.body.data.password;
    secrets.oauthClientSecret = client.body.data.clientSecret;

    // Use them: the credentials reach the caches, the limiter and the logs the way traffic does.
    const sent = await eventually(async () => {
      const r = await postJson(`${h.motor.baseUrl}/v1/send`, { from: `app@${block.domain}`, to: 'user@rcpt.test', subject: 's', text: 't' }, { 'x-api-key': secrets.blockApiKey });
      return r.status === 200 ? r : null;
    });
    const minted = await eventually(async () => {
      const r = await postJson(`${h.motor.baseUrl}/api/public/token/account-key`, { motorBlockId: block.motorBlockId, scopes: [...SCOPES] }, { authorization: `ApiKey ${secrets.accountApiKey}` });
      return r.status === 200 ? r : null;
    });
    secrets.publicJwt = minted.body.data.token;
    // A webhook's signing secret (kept encrypted in the key store: it must be usable, so not hashed).
    const hook = await postJson(`${h.motor.baseUrl}/api/public/v1/motor-blocks/${block.motorBlockId}/webhooks`, { url: 'https://hooks.example.test/motor' }, { authorization: `Bearer ${secrets.publicJwt}` });
    expect(hook.status, JSON.stringify(hook.body)).to.equal(201);
    secrets.webhookSecret = hook.body.data.secret;
    const read = await getJson(`${h.motor.baseUrl}/api/public/v1/messages/${sent.body.data.id}`, { authorization: `Bearer ${secrets.publicJwt}` });
    expect(read.status).to.equal(200);
    // Failure paths, where a secret could end up in an error that gets logged.
    await h.post('/api/auth/login', { email, password: `${PASSWORD}x` });
    await postJson(`${h.motor.baseUrl}/api/auth/login`, 'not json', {});
    await fetch(`${h.motor.baseUrl}/api/auth/set-password`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: `{"email":"${email}","password":"${PASSWORD}","setupToken":"${secrets.setupToken}"` });
    await fetch(`${h.motor.baseUrl}/api/auth/refresh`, { method: 'POST', headers: { 'content-type': 'application/json', 'content-encoding': 'gzip' }, body: JSON.stringify({ refreshToken: secrets.refreshToken }) });
    await postJson(`${h.motor.baseUrl}/v1/send`, { from: 'nobody@elsewhere.test', to: 'x@rcpt.test', subject: 's', text: 't' }, { 'x-api-key': secrets.blockApiKey });
    await postJson(`${h.motor.baseUrl}/v1/send`, {}, { authorization: `ApiKey ${secrets.accountApiKey}` });
    await getJson(`${h.motor.baseUrl}/api/public/v1/motor-blocks`, { authorization: `Bearer ${secrets.dashboardJwt}x` });
    // Let the projectors and the delivery worker write what they write (this fixture's domain has
    // no usable DKIM key, so the worker's verdict is a failure; it is the writing that matters).
    await eventually(async () => (await getJson(`${h.motor.baseUrl}/api/public/v1/messages/${sent.body.data.id}`, { authorization: `Bearer ${secrets.publicJwt}` })).body.data?.currentOutcome !== 'queued', 20_000);
  });
  after(async () => { await h?.close(); });

  /** What to look for: each secret whole, and for keys `<type>_live_<prefix>_<secret>` the part after the prefix too. */
  const needles = (): Array<[string, string]> => Object.entries(secrets).flatMap(([name, value]): Array<[string, string]> => {
    const key = /^(?:mk|ak)_live_[^_]+_(.+)$/.exec(value);
    return key ? [[name, value], [`${name} (secret part)`, key[1]]] : [[name, value]];
  });

  it('issued every kind of secret (the check below would pass vacuously otherwise)', () => {
    for (const name of ['password', 'setupToken', 'signupRefreshToken', 'refreshToken', 'rotatedRefreshToken', 'dashboardJwt', 'publicJwt', 'blockApiKey', 'accountApiKey', 'smtpPassword', 'oauthClientSecret', 'webhookSecret']) {
      expect(secrets[name], name).to.be.a('string').with.length.above(11);
    }
  });

  it('no table of any schema holds one', async () => {
    const tables = await h.motor.rt.db.raw<{ rows: Array<{ schema: string; name: string }> }>(
      "SELECT table_schema AS schema, table_name AS name FROM information_schema.tables WHERE table_type = 'BASE TABLE' AND table_schema NOT IN ('pg_catalog', 'information_schema')",
    );
    expect(tables.rows.length).to.be.above(10);
    const found: string[] = [];
    let rows = 0;
    for (const t of tables.rows) {
      const dump = await h.motor.rt.db.raw<{ rows: Array<{ row: string }> }>(`SELECT t::text AS row FROM "${t.schema}"."${t.name}" t`);
      rows += dump.rows.length;
      const text = dump.rows.map((r) => r.row).join('\n');
      for (const [name, needle] of needles()) if (text.includes(needle)) found.push(`${name} in ${t.schema}.${t.name}`);
    }
    expect(rows).to.be.above(20);
    expect(found).to.deep.equal([]);
  });

  it('no log line holds one', () => {
    expect(logLines.length).to.be.above(15);
    const found: string[] = [];
    logLines.forEach((line, i) => {
      for (const [name, needle] of needles()) if (line.includes(needle)) found.push(`${name} in log line ${i}: ${line.slice(0, 200)}`);
    });
    expect(found).to.deep.equal([]);
  });

  it('no Redis key or value holds one', async () => {
    const redis = h.motor.rt.redis;
    const found: string[] = [];
    let keys = 0;
    let cursor = '0';
    do {
      const [next, batch] = await redis.scan(cursor, 'COUNT', 1000);
      cursor = next;
      for (const key of batch) {
        keys++;
        const type = await redis.type(key);
        const values: string[] = type === 'string' ? [(await redis.get(key)) ?? '']
          : type === 'hash' ? Object.entries(await redis.hgetall(key)).flat()
            : type === 'list' ? await redis.lrange(key, 0, -1)
              : type === 'set' ? await redis.smembers(key)
                : type === 'zset' ? await redis.zrange(key, '0', '-1')
                  : type === 'stream' ? (await redis.xrange(key, '-', '+')).flatMap(([id, fields]) => [id, ...fields])
                    : [];
        const text = [key, ...values].join('\n');
        for (const [name, needle] of needles()) if (text.includes(needle)) found.push(`${name} in ${type} ${key}`);
      }
    } while (cursor !== '0');
    expect(keys).to.be.above(0);
    expect(found).to.deep.equal([]);
  });
});
