import { randomBytes } from 'node:crypto';
import net from 'node:net';
import { expect } from 'chai';
import pg from 'pg';
import { bootstrap, type BootstrapResult } from '../../commands/admin/bootstrap';
import { quotaKeys } from '../../commands/quota/sendQuota';
import { parseApiKey } from '../../domain/credentials/apiKeys';
import { loadConfig } from '../../infra/config';
import { createLogger } from '../../infra/logger';
import { directoryProjection } from '../../projections/directory/projection';
import { findApiKeyByPrefix } from '../../projections/directory/queries';
import { ProjectionRunner } from '../../projections/runner';
import { catchUpUntil, createRuntime, startRoles, type Runtime, type StartedRoles } from '../../scripts/runtime';
import { createTestDatabase, TEST_PG_ADMIN_URL, TEST_REDIS_URL } from '../support/db';
import { getJson, postJson, startTestMotor, type TestMotor } from '../support/motor';
import { senderDomainOf } from './publicApi';

/** A TCP proxy in front of PostgreSQL that the test can cut (refuse + reset) and restore. */
async function startPgProxy(): Promise<{ port: number; cut(): Promise<void>; restore(): Promise<void>; close(): Promise<void> }> {
  const target = new URL(TEST_PG_ADMIN_URL);
  const sockets = new Set<net.Socket>();
  const make = () => net.createServer((client) => {
    const upstream = net.connect(Number(target.port || 5432), target.hostname);
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
      s.on('error', () => { client.destroy(); upstream.destroy(); });
    }
    client.pipe(upstream).pipe(client);
  });
  let server = make();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const port = (server.address() as net.AddressInfo).port;
  const cut = async () => {
    await new Promise<void>((r) => { server.close(() => r()); for (const s of sockets) s.destroy(); });
  };
  return {
    port,
    cut,
    async restore() {
      if (server.listening) return;
      server = make();
      await new Promise<void>((r) => server.listen(port, '127.0.0.1', () => r()));
    },
    async close() { if (server.listening) await cut(); },
  };
}

/**
 * The send path never answers 200 unless MessageAccepted is committed: with the event store (or
 * the whole PostgreSQL) unavailable it answers 503 event_store_unavailable with Retry-After.
 */
describe('event store unavailable (int)', function () {
  this.timeout(60_000);
  const mailFor = (b: BootstrapResult) => ({ from: `app@${senderDomainOf(b)}`, to: 'user@rcpt.test', subject: 'x', text: 'y' });

  describe('store closed under a running API', () => {
    let motor: TestMotor;
    let a: BootstrapResult;
    before(async () => {
      motor = await startTestMotor({ roles: ['api'] });
      a = await motor.bootstrap();
    });
    after(async () => { await motor?.close(); });

    it('answers 503 event_store_unavailable, never 200, and charges no quota', async () => {
      const ok = await postJson(`${motor.baseUrl}/v1/send`, mailFor(a), { 'x-api-key': a.apiKey });
      expect(ok.status).to.equal(200);
      const remaining = Number(ok.headers.get('ratelimit-remaining'));
      await motor.rt.store.close();
      const results = await Promise.all(Array.from({ length: 10 }, (_, i) =>
        postJson(`${motor.baseUrl}/v1/send`, mailFor(a), { 'x-api-key': a.apiKey, ...(i % 2 ? { 'Idempotency-Key': `k-${i}` } : {}) })));
      for (const r of results) {
        expect(r.status).to.equal(503);
        expect(r.body).to.include({ success: false, code: 'event_store_unavailable' });
        expect(r.headers.get('retry-after')).to.match(/^\d+$/);
        expect(r.headers.get('ratelimit-limit')).to.equal(null);
      }
      // Refused sends were counted as refusals and refunded: the daily counter holds the one accepted send.
      const metrics = await getJson(`${motor.baseUrl}/metrics`);
      expect(metrics.body).to.match(/motor_sends_refused_total\{[^}]*code="event_store_unavailable"[^}]*\} 10/);
      const daily = quotaKeys(a.motorBlockId, a.accountId, new Date())[2];
      expect(Number(await motor.rt.redis.get(daily))).to.equal(motor.config.defaultPlan.daily - remaining);
    });
  });

  describe('PostgreSQL unreachable', () => {
    let proxy: Awaited<ReturnType<typeof startPgProxy>>;
    let db: Awaited<ReturnType<typeof createTestDatabase>>;
    let rt: Runtime;
    let started: StartedRoles;
    let baseUrl: string;
    let a: BootstrapResult;

    before(async () => {
      db = await createTestDatabase('esdown');
      proxy = await startPgProxy();
      const u = new URL(db.url);
      u.host = `127.0.0.1:${proxy.port}`;
      const config = loadConfig({ LOG_LEVEL: 'silent', TOKEN_SECRET: 'test-token-secret-0123456789abcdef0123' });
      rt = await createRuntime(config, {
        databaseUrl: u.toString(), redisUrl: TEST_REDIS_URL, logger: createLogger('silent'), directoryTtlMs: 0,
        queuePrefix: `motor-test-${randomBytes(4).toString('hex')}`,
      });
      started = await startRoles(rt, ['api'], { port: 0, host: '127.0.0.1' });
      baseUrl = `http://127.0.0.1:${started.port}`;
      a = await bootstrap(rt.store, rt.keys, {
        email: 'owner@example.test', domain: `d${randomBytes(4).toString('hex')}.example.test`, trustDns: true, dkimAlgorithm: 'rsa-sha256',
        plan: config.defaultPlan.name, serviceDomain: config.serviceDomain, now: new Date(),
      });
      const prefix = parseApiKey(a.accountApiKey)!.prefix;
      await catchUpUntil(new ProjectionRunner(rt.db, rt.store, directoryProjection), async () => (await findApiKeyByPrefix(rt.db, prefix)) !== null);
    });
    after(async () => {
      await proxy.restore().catch(() => undefined);
      await started?.stop();
      await rt?.close();
      await proxy?.close();
      await db?.drop();
    });

    it('answers 503 event_store_unavailable while the database cannot be reached, and 200 again once it can', async () => {
      const send = () => postJson(`${baseUrl}/v1/send`, mailFor(a), { 'x-api-key': a.apiKey });
      const first = await send();
      expect(first.status).to.equal(200);
      const minted = await postJson(`${baseUrl}/api/public/token/account-key`, { motorBlockId: a.motorBlockId, scopes: ['logs.read'] }, { 'x-api-key': a.accountApiKey });
      expect(minted.status).to.equal(200);
      await proxy.cut();
      // Reads fail the same way (the token needs no database to verify, the read does).
      const read = await getJson(`${baseUrl}/api/public/v1/messages/${first.body.data.id}`, { authorization: `Bearer ${minted.body.data.token}` });
      expect(read.status).to.equal(503);
      expect(read.body.code).to.equal('event_store_unavailable');
      const mint = await postJson(`${baseUrl}/api/public/token/account-key`, { motorBlockId: a.motorBlockId }, { 'x-api-key': a.accountApiKey });
      expect(mint.status).to.equal(503);
      for (let i = 0; i < 5; i++) {
        const r = await send();
        expect(r.status, JSON.stringify(r.body)).to.equal(503);
        expect(r.body).to.include({ success: false, code: 'event_store_unavailable' });
        expect(r.headers.get('retry-after')).to.match(/^\d+$/);
      }
      const status = await getJson(`${baseUrl}/v1/status`);
      expect(status.status).to.equal(503);
      expect(status.body.status).to.equal('degraded');
      expect(status.body.components.eventStore.ok).to.equal(false);
      expect((await getJson(`${baseUrl}/readyz`)).status).to.equal(503);
      expect((await getJson(`${baseUrl}/healthz`)).status).to.equal(200);

      await proxy.restore();
      const back = await (async () => {
        for (let i = 0; i < 50; i++) {
          const r = await send();
          if (r.status === 200) return r;
          expect(r.status).to.equal(503);
          await new Promise((res) => setTimeout(res, 100));
        }
        throw new Error('never recovered');
      })();
      expect(back.body.data.acceptanceStatus).to.equal('queued');
    });

    it('recovers from terminated connections with 503s at worst (never 500)', async () => {
      await proxy.restore();
      const admin = new pg.Client({ connectionString: TEST_PG_ADMIN_URL });
      await admin.connect();
      try {
        const name = new URL(db.url).pathname.slice(1);
        await admin.query('select pg_terminate_backend(pid) from pg_stat_activity where datname = $1 and pid <> pg_backend_pid()', [name]);
      } finally {
        await admin.end();
      }
      const statuses: number[] = [];
      for (let i = 0; i < 10; i++) statuses.push((await postJson(`${baseUrl}/v1/send`, mailFor(a), { 'x-api-key': a.apiKey })).status);
      expect(statuses.every((s) => s === 200 || s === 503), statuses.join(',')).to.equal(true);
      expect(statuses[statuses.length - 1]).to.equal(200);
    });
  });
});
