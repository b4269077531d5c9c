import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { promisify } from 'node:util';
import { expect } from 'chai';
import { allProjections } from '../../projections';
import { createDeliveryQueue } from '../../workers/queue';
import { CHECKPOINTS, initCheckpoints } from '../../workers/logEnqueuer';
import { QUEUE_NAMES, type SystemStatus } from '../../scripts/status';
import { eventually, startTestMotor, type TestMotor } from '../support/motor';
import { call } from '../blocks/support';
import { directoryProjection } from '../../projections/directory/projection';
import { rebuild } from '../../projections/runner';
import { dumpTables } from '../projections/fixtures';
import { systemIds } from '../../commands/auth/systemMail';
import { startAuthHarness, type AuthHarness } from '../auth/harness';
import { hashSecret, parseApiKey } from '../../domain/credentials/apiKeys';
import { SCOPES } from '../../domain/credentials/scopes';
import { bootstrapOwner, type BootstrapResult, type DnsRecord } from '../../commands/admin/bootstrap';
import { DirectoryCache } from '../../commands/directoryCache';
import { authDepsOf, authenticate } from '../../smtp/auth';
import { toEventData, type DomainEvent } from '../../domain/events';
import type { EventData, EventStore, ExpectedRevision } from '../../domain/eventStore';
import type { KeyStore } from '../../infra/keys/keyStore';
import { generateDkimKey } from '../../workers/delivery/dkim';
import { newId } from '../../domain/ids';
import { accountEmailId } from '../../domain/account/emailClaim';
import { startPausableProxy, type PausableProxy } from '../support/pausableProxy';
import { TEST_PG_ADMIN_URL } from '../support/db';
import pg from 'pg';
import { processApplicationName } from '../../infra/db';
import { followerLockName } from '../../infra/eventstore/followerLease';
import { LOG_FOLLOWERS, WEBHOOK_DISPATCHER } from '../../workers/followers';

const run = promisify(execFile);

/** `npm run cli -- <args> --json` against the test Motor's database: its exit code and its JSON (null when it printed none). */
async function runCli(motor: TestMotor, args: string[], env: Record<string, string> = {}): Promise<{ code: number; out: any }> { // eslint-disable-line @typescript-eslint/no-explicit-any
  try {
    const { stdout } = await run('npx', ['tsx', 'scripts/cli.ts', ...args, '--json'], {
      env: { ...process.env, DATABASE_URL: motor.rt.databaseUrl, REDIS_URL: motor.rt.redisUrl, TOKEN_SECRET: 'test-token-secret-0123456789abcdef0123', LOG_LEVEL: 'silent', ...env },
    });
    return { code: 0, out: JSON.parse(stdout) };
  } catch (err) {
    const e = err as { code?: number; stdout?: string };
    return { code: e.code ?? -1, out: e.stdout ? JSON.parse(e.stdout) : null };
  }
}

/** A dry-run POST /v1/send from the block's domain with `apiKey`: its status (200 when the key works). */
async function dryRunSend(motor: TestMotor, apiKey: string, domain: string): Promise<number> {
  const res = await fetch(`${motor.baseUrl}/v1/send`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': apiKey },
    body: JSON.stringify({ from: `app@${domain}`, to: 'someone@example.com', subject: 'Hi', text: 'Hello', dryRun: true }),
  });
  return res.status;
}

/** `npm run cli -- status` (scripts/status.ts) against a running Motor: store, read models, queues; Redis down. */
describe('CLI status (int)', function () {
  this.timeout(120_000);
  let motor: TestMotor;

  before(async () => {
    // No worker role: nothing takes the job the test queues.
    motor = await startTestMotor({ roles: ['api', 'projector'] });
    await motor.bootstrap();
  });
  after(async () => { await motor?.close(); });

  const status = async (env: Record<string, string> = {}): Promise<{ code: number; out: SystemStatus; ms: number }> => {
    const started = Date.now();
    const r = await runCli(motor, ['status', '--queue-prefix', motor.rt.queuePrefix], env);
    return { code: r.code, out: r.out as SystemStatus, ms: Date.now() - started };
  };

  it('reports the store, every read model with its lag, and each queue\'s jobs by state', async () => {
    const queue = createDeliveryQueue(motor.rt.redisUrl, motor.rt.queuePrefix);
    try {
      await queue.add('deliver', { messageId: 'status-test' }, { jobId: 'status-test', delay: 600_000 });
    } finally {
      await queue.close();
    }
    const { code, out } = await eventually(async () => {
      const s = await status();
      return s.out.projections.every((p) => p.eventsBehind === 0) ? s : null;
    }, 30_000);
    expect(code).to.equal(0);
    expect(out.ok).to.equal(true);
    expect(out.store).to.deep.equal({ ok: true });
    expect(out.redis).to.deep.equal({ ok: true });
    expect(out.projections.map((p) => p.name)).to.deep.equal(allProjections().map((p) => p.name));
    for (const p of out.projections) expect(p.error, p.name).to.equal(undefined);
    expect(out.projections.find((p) => p.name === 'directory')!.checkpoint, 'the bootstrap was applied').to.be.a('string');
    expect(out.consumers, 'no worker role ran here: no enqueuer checkpoints').to.deep.equal([]);
    expect(Object.keys(out.queues)).to.deep.equal([...QUEUE_NAMES]);
    expect(out.queues['motor-delivery']).to.include({ delayed: 1, waiting: 0, failed: 0 });
    expect(out.queues['motor-webhooks']).to.deep.equal({ waiting: 0, active: 0, delayed: 0, prioritized: 0, 'waiting-children': 0, failed: 0, completed: 0 });
  });

  it('lists the queue feeders\' checkpoints with when they last moved', async () => {
    await initCheckpoints(motor.rt.db);
    const at = new Date('2026-11-24T12:00:00.000Z');
    await motor.rt.db.table(CHECKPOINTS).insert([{ name: 'webhook-dispatcher', position: '42', updated_at: at }, { name: 'delivery-enqueuer', position: null, updated_at: at }]);
    const { out } = await status();
    expect(out.consumers).to.deep.equal([
      { name: 'delivery-enqueuer', checkpoint: null, updatedAt: at.toISOString() },
      { name: 'webhook-dispatcher', checkpoint: '42', updatedAt: at.toISOString() },
    ]);
  });

  it('says which process holds each lease: the projections\' (this Motor\'s projector role), a follower\'s (another session), and the ones nobody holds', async () => {
    // A worker process elsewhere, as far as PostgreSQL can tell: its own session and name, holding the dispatcher's lease.
    const worker = new pg.Client({ connectionString: motor.rt.databaseUrl, application_name: 'motor-worker@elsewhere:4242' });
    await worker.connect();
    try {
      await worker.query('select pg_advisory_lock(hashtextextended($1, 0))', [followerLockName(WEBHOOK_DISPATCHER)]);
      const workerPid = (await worker.query('select pg_backend_pid() as pid')).rows[0].pid as number;
      const { code, out } = await eventually(async () => {
        const s = await status();
        return s.out.leases?.filter((l) => l.kind === 'projection').every((l) => l.held) ? s : null;
      }, 30_000);
      expect(code).to.equal(0);
      // The fields operators and their scripts read are all still there; leases come beside them.
      expect(Object.keys(out)).to.deep.equal(['ok', 'store', 'projections', 'consumers', 'redis', 'queues', 'leases']);
      expect(out.leases.map((l) => [l.kind, l.name, l.lock])).to.deep.equal([
        ...LOG_FOLLOWERS.map((n) => ['follower', n, `motor.follower:${n}`]),
        ...allProjections().map((p) => ['projection', p.name, `motor.projector:${p.name}`]),
      ]);
      const here = processApplicationName('motor');
      const ours = (await motor.rt.db.raw('select pid from pg_stat_activity where application_name = ?', [here])).rows.map((r: { pid: number }) => r.pid);
      for (const l of out.leases.filter((x) => x.kind === 'projection')) {
        expect(l.holder?.applicationName, l.name).to.equal(here);
        expect(ours, l.name).to.include(l.holder!.pid);
      }
      // One session holds all of a process's leases.
      expect(new Set(out.leases.filter((x) => x.kind === 'projection').map((l) => l.holder!.pid)).size).to.equal(1);
      const dispatcher = out.leases.find((l) => l.name === WEBHOOK_DISPATCHER)!;
      expect(dispatcher).to.deep.include({ held: true });
      expect(dispatcher.holder).to.deep.include({ pid: workerPid, applicationName: 'motor-worker@elsewhere:4242', clientAddress: '127.0.0.1' });
      expect(Date.parse(dispatcher.holder!.sessionStartedAt!)).to.be.at.most(Date.now());
      expect(dispatcher.holder!.lastStatementAt).to.be.a('string');
      for (const l of out.leases.filter((x) => x.kind === 'follower' && x.name !== WEBHOOK_DISPATCHER)) {
        expect(l, 'no worker role here').to.deep.include({ held: false, holder: null });
      }
    } finally {
      await worker.end();
    }
  });

  it('with Redis unreachable: redis not ok, no queues, exit code 1, and it does not hang', async () => {
    const { code, out, ms } = await status({ REDIS_URL: 'redis://127.0.0.1:1' });
    expect(code).to.equal(1);
    expect(out.ok).to.equal(false);
    expect(out.redis.ok).to.equal(false);
    expect(out.redis.error).to.be.a('string');
    expect(out.queues).to.deep.equal({});
    expect(out.store.ok, 'the store still answers').to.equal(true);
    expect(ms, 'answered promptly').to.be.below(30_000);
  });
});

/** `npm run cli -- block deactivate|reactivate`: an operator stops and restarts a block's sending. */
describe('CLI block deactivate / reactivate (int)', function () {
  this.timeout(120_000);
  let motor: TestMotor;
  let block: Awaited<ReturnType<TestMotor['bootstrap']>>;

  before(async () => {
    motor = await startTestMotor({ roles: ['api', 'projector'] });
    block = await motor.bootstrap({ email: 'abuse@example.test', domain: 'abuse.example.test' });
  });
  after(async () => { await motor?.close(); });

  const cli = (...args: string[]) => runCli(motor, args);
  const dryRun = async () => {
    const res = await fetch(`${motor.baseUrl}/v1/send`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': block.apiKey },
      body: JSON.stringify({ from: 'app@abuse.example.test', to: 'someone@example.com', subject: 'Hi', text: 'Hello', dryRun: true }),
    });
    return { status: res.status, code: ((await res.json()) as { code?: string }).code ?? null };
  };

  it('deactivate: sends are refused with 403 motor_block_inactive; reactivate: accepted again; a repeat changes nothing', async () => {
    expect(await dryRun()).to.deep.equal({ status: 200, code: null });
    const off = await cli('block', 'deactivate', block.motorBlockId.toUpperCase());
    expect(off).to.deep.equal({ code: 0, out: { motorBlockId: block.motorBlockId, status: 'inactive', changed: true } });
    expect(await dryRun()).to.deep.equal({ status: 403, code: 'motor_block_inactive' });
    expect((await cli('block', 'deactivate', block.motorBlockId)).out).to.include({ status: 'inactive', changed: false });
    const on = await cli('block', 'reactivate', block.motorBlockId);
    expect(on.out).to.deep.equal({ motorBlockId: block.motorBlockId, status: 'active', changed: true });
    expect(await dryRun()).to.deep.equal({ status: 200, code: null });
    const events = (await motor.rt.store.readStream(`motorBlock-${block.motorBlockId}`)).map((e) => [e.type, e.metadata?.actor]);
    expect(events.slice(-2)).to.deep.equal([['MotorBlockDeactivated', 'cli'], ['MotorBlockReactivated', 'cli']]);
  });

  it('a block the operator stopped stays stopped: the account\'s reactivate is 403 motor_block_suspended, also after the account deactivated it first', async () => {
    const manage = await motor.token(block, ['config.manage']);
    const reactivate = () => call(motor, 'POST', `/account/motor-blocks/${block.motorBlockId}/reactivate`, manage);
    expect((await cli('block', 'deactivate', block.motorBlockId)).out).to.include({ status: 'inactive', changed: true });
    const refused = await reactivate();
    expect([refused.status, refused.body.code]).to.deep.equal([403, 'motor_block_suspended']);
    expect(await dryRun()).to.deep.equal({ status: 403, code: 'motor_block_inactive' });
    expect((await cli('block', 'reactivate', block.motorBlockId)).out).to.include({ status: 'active', changed: true });
    // The account stops it, then the operator: the account cannot lift the operator's stop either.
    const off = await call(motor, 'POST', `/account/motor-blocks/${block.motorBlockId}/deactivate`, manage, { confirm: true });
    expect([off.status, off.body.data.status]).to.deep.equal([200, 'inactive']);
    expect((await cli('block', 'deactivate', block.motorBlockId)).out, 'recorded: it was not suspended').to.include({ status: 'inactive', changed: true });
    expect((await reactivate()).body.code).to.equal('motor_block_suspended');
    expect((await cli('block', 'reactivate', block.motorBlockId)).out).to.include({ status: 'active', changed: true });
    // Once the operator lifted it, the account manages the block as before.
    expect((await call(motor, 'POST', `/account/motor-blocks/${block.motorBlockId}/deactivate`, manage, { confirm: true })).status).to.equal(200);
    const own = await reactivate();
    expect([own.status, own.body.data.status]).to.deep.equal([200, 'active']);
    expect(await dryRun()).to.deep.equal({ status: 200, code: null });
  });

  it('an unknown block: exit 1 with not_found; a malformed id: exit 2 (usage)', async () => {
    const unknown = await cli('block', 'deactivate', '0193a5f0-0000-7000-8000-00000000beef');
    expect(unknown.code).to.equal(1);
    expect(unknown.out.error).to.equal('not_found');
    expect((await cli('block', 'deactivate', 'nope')).code).to.equal(2);
  });
});

/** `npm run cli -- key revoke`: an operator revokes a key reported leaked, named by the key or its prefix. */
describe('CLI key revoke (int)', function () {
  this.timeout(120_000);
  let motor: TestMotor;
  let block: Awaited<ReturnType<TestMotor['bootstrap']>>;

  before(async () => {
    motor = await startTestMotor({ roles: ['api', 'projector'] });
    block = await motor.bootstrap({ email: 'leak@example.test', domain: 'leak.example.test' });
  });
  after(async () => { await motor?.close(); });

  const cli = (...args: string[]) => runCli(motor, args);
  const send = (apiKey: string) => dryRunSend(motor, apiKey, 'leak.example.test');

  it('the whole block key: revoked (401 from then on), the account key untouched; again: unchanged', async () => {
    expect(await send(block.apiKey)).to.equal(200);
    const r = await cli('key', 'revoke', block.apiKey);
    expect(r.code).to.equal(0);
    expect(r.out).to.include({ kind: 'block', accountId: block.accountId, motorBlockId: block.motorBlockId, changed: true });
    expect(r.out.revokedAt).to.be.a('string');
    expect(await send(block.apiKey)).to.equal(401);
    const again = await cli('key', 'revoke', block.apiKey.split('_').slice(0, 3).join('_'));
    expect(again.out).to.include({ id: r.out.id, changed: false, revokedAt: r.out.revokedAt });
    const token = await fetch(`${motor.baseUrl}/api/public/token/account-key`, {
      method: 'POST', headers: { 'content-type': 'application/json', authorization: `ApiKey ${block.accountApiKey}` }, body: JSON.stringify({ motorBlockId: block.motorBlockId }),
    });
    expect(token.status, 'the account key still works').to.equal(200);
  });

  it('the account key by its bare prefix; an unknown prefix: exit 1 not_found; not a key: exit 2', async () => {
    const prefix = block.accountApiKey.split('_')[2];
    const r = await cli('key', 'revoke', prefix);
    expect(r.out).to.include({ kind: 'account', accountId: block.accountId, motorBlockId: null, changed: true, prefix });
    const token = await fetch(`${motor.baseUrl}/api/public/token/account-key`, {
      method: 'POST', headers: { 'content-type': 'application/json', authorization: `ApiKey ${block.accountApiKey}` }, body: JSON.stringify({ motorBlockId: block.motorBlockId }),
    });
    expect(token.status).to.equal(401);
    const unknown = await cli('key', 'revoke', 'ZZZZZZZZZZZZ');
    expect([unknown.code, unknown.out?.error]).to.deep.equal([1, 'not_found']);
    expect((await cli('key', 'revoke', 'not-a-key')).code).to.equal(2);
  });
});

/** `npm run cli -- key create`: an operator issues a block or account key (a lost one, a rotation) without a dashboard login. */
describe('CLI key create (int)', function () {
  this.timeout(120_000);
  let motor: TestMotor;
  let block: Awaited<ReturnType<TestMotor['bootstrap']>>;

  // The worker role too: the deleted block's deletion job runs.
  before(async () => {
    motor = await startTestMotor();
    block = await motor.bootstrap({ email: 'rotate@example.test', domain: 'rotate.example.test' });
  });
  after(async () => { await motor?.close(); });

  const cli = (...args: string[]) => runCli(motor, args);
  const send = (apiKey: string) => dryRunSend(motor, apiKey, 'rotate.example.test');
  const mint = async (accountApiKey: string, scopes: string[]) => {
    const res = await fetch(`${motor.baseUrl}/api/public/token/account-key`, {
      method: 'POST', headers: { 'content-type': 'application/json', authorization: `ApiKey ${accountApiKey}` }, body: JSON.stringify({ motorBlockId: block.motorBlockId, scopes }),
    });
    const body = (await res.json()) as { code?: string; data?: { scopes: string[] } };
    return { status: res.status, code: body.code ?? null, scopes: body.data?.scopes ?? null };
  };
  const keysCreated = async () => (await motor.rt.db.raw(`select count(*)::int as n from events where type = 'ApiKeyCreated'`)).rows[0].n as number;
  /** The key's stream: one ApiKeyCreated by the CLI holding the secret's hash, and nowhere the secret itself. */
  const expectOnlyHashStored = async (keyId: string, apiKey: string) => {
    const { secret, prefix } = parseApiKey(apiKey)!;
    const events = await motor.rt.store.readStream(`apiKey-${keyId}`);
    expect(events.map((e) => [e.type, e.metadata?.actor])).to.deep.equal([['ApiKeyCreated', 'cli']]);
    expect(events[0].data).to.include({ keyId, prefix, secretHash: hashSecret(secret) });
    expect(JSON.stringify([events[0].data, events[0].metadata])).not.to.include(secret);
    const logged = await motor.rt.db.raw(`select count(*)::int as n from events where data::text like ? or metadata::text like ?`, [`%${secret}%`, `%${secret}%`]);
    expect(logged.rows[0].n, 'the secret is nowhere in the log').to.equal(0);
  };

  it('--block: a new mk_live key that sends, only its hash stored; the bootstrap key keeps working until key revoke', async () => {
    const r = await cli('key', 'create', '--block', block.motorBlockId.toUpperCase());
    expect(r.code).to.equal(0);
    expect(r.out).to.deep.equal({ keyId: r.out.keyId, apiKey: r.out.apiKey, kind: 'block', motorBlockId: block.motorBlockId, accountId: block.accountId });
    expect(parseApiKey(r.out.apiKey)?.kind).to.equal('block');
    expect(r.out.apiKey).not.to.equal(block.apiKey);
    await expectOnlyHashStored(r.out.keyId, r.out.apiKey);

    expect(await send(r.out.apiKey), 'the new key sends at once').to.equal(200);
    expect(await send(block.apiKey), 'the old one too, until it is revoked').to.equal(200);
    const revoked = await cli('key', 'revoke', block.apiKey);
    expect(revoked.out).to.include({ kind: 'block', changed: true });
    expect(await send(block.apiKey)).to.equal(401);
    expect(await send(r.out.apiKey), 'the app moved over keeps sending').to.equal(200);

    const own = await cli('key', 'revoke', r.out.apiKey);
    expect(own.out).to.include({ id: r.out.keyId, kind: 'block', motorBlockId: block.motorBlockId, changed: true });
    expect(await send(r.out.apiKey)).to.equal(401);
  });

  it('--account --scopes: mints a token with a scope it has, refused one it lacks; without --scopes: every scope, as bootstrap gives', async () => {
    const r = await cli('key', 'create', '--account', block.accountId, '--scopes', 'usage.read, logs.read');
    expect(r.code).to.equal(0);
    expect(r.out).to.deep.equal({ keyId: r.out.keyId, apiKey: r.out.apiKey, kind: 'account', accountId: block.accountId, scopes: ['logs.read', 'usage.read'] });
    expect(parseApiKey(r.out.apiKey)?.kind).to.equal('account');
    await expectOnlyHashStored(r.out.keyId, r.out.apiKey);
    expect(await mint(r.out.apiKey, ['logs.read'])).to.deep.equal({ status: 200, code: null, scopes: ['logs.read'] });
    expect(await mint(r.out.apiKey, ['config.manage'])).to.deep.equal({ status: 422, code: 'validation_error', scopes: null });

    const all = await cli('key', 'create', '--account', block.accountId);
    expect(all.out.scopes, 'the route\'s default, which is bootstrap\'s').to.deep.equal([...SCOPES]);
    expect((await mint(all.out.apiKey, ['config.manage'])).status).to.equal(200);

    const revoked = await cli('key', 'revoke', r.out.apiKey);
    expect(revoked.out).to.include({ id: r.out.keyId, kind: 'account', accountId: block.accountId, changed: true });
    expect((await mint(r.out.apiKey, ['logs.read'])).status).to.equal(401);
    expect((await mint(all.out.apiKey, ['logs.read'])).status, 'another key of the account is untouched').to.equal(200);
  });

  it('refusals, nothing appended: unknown or deleted block → motor_block_not_found (the route\'s code), unknown account → not_found, unknown scope → validation_error', async () => {
    // An account's only block, deleted as the account deletes it.
    const gone = await motor.bootstrap({ email: 'gone@example.test', domain: 'gone.example.test' });
    const t = await motor.token(gone, ['config.manage']);
    expect((await call(motor, 'POST', `/account/motor-blocks/${gone.motorBlockId}/deactivate`, t, { confirm: true })).status).to.equal(200);
    const del = await call(motor, 'DELETE', `/account/motor-blocks/${gone.motorBlockId}`, t, { confirm: true, deleteHistory: false });
    expect(del.status).to.equal(202);
    await eventually(async () => (await call(motor, 'GET', `/account/motor-block-deletions/${del.body.data.jobId}`, t)).body.data?.status === 'completed' || null, 30_000);

    const before = await keysCreated();
    for (const id of ['0193a5f0-0000-7000-8000-00000000beef', gone.motorBlockId]) {
      const r = await cli('key', 'create', '--block', id);
      expect([r.code, r.out?.error], id).to.deep.equal([1, 'motor_block_not_found']);
    }
    const account = await cli('key', 'create', '--account', '0193a5f0-0000-7000-8000-00000000beef');
    expect([account.code, account.out?.error]).to.deep.equal([1, 'not_found']);
    const scope = await cli('key', 'create', '--account', block.accountId, '--scopes', 'logs.read,logs.write');
    expect([scope.code, scope.out?.error, scope.out?.field]).to.deep.equal([1, 'validation_error', 'scopes']);
    expect((await cli('key', 'create', '--account', block.accountId, '--scopes', ',')).out?.error, 'an empty list').to.equal('validation_error');
    expect(await keysCreated(), 'no key created').to.equal(before);
  });

  it('without --json: one line naming the key, then the key alone on a line', async () => {
    const { stdout } = await run('npx', ['tsx', 'scripts/cli.ts', 'key', 'create', '--block', block.motorBlockId], {
      env: { ...process.env, DATABASE_URL: motor.rt.databaseUrl, REDIS_URL: motor.rt.redisUrl, TOKEN_SECRET: 'test-token-secret-0123456789abcdef0123', LOG_LEVEL: 'silent' },
    });
    const lines = stdout.trimEnd().split('\n');
    expect(lines).to.have.length(2);
    expect(lines[0]).to.include(block.motorBlockId).and.include('shown this once');
    expect(parseApiKey(lines[1])?.kind).to.equal('block');
    expect(await send(lines[1])).to.equal(200);
  });
});

/** `npm run cli -- key list`: an operator finds the keys of an account or a block, to revoke one, without ever seeing a secret. */
describe('CLI key list (int)', function () {
  this.timeout(120_000);
  let motor: TestMotor;
  let block: Awaited<ReturnType<TestMotor['bootstrap']>>;
  let other: Awaited<ReturnType<TestMotor['bootstrap']>>;
  /** Every whole key made in this suite: none may be printed. */
  const secrets: string[] = [];
  let created: string;

  before(async () => {
    motor = await startTestMotor({ roles: ['api', 'projector'] });
    block = await motor.bootstrap({ email: 'list@example.test', domain: 'list.example.test' });
    other = await motor.bootstrap({ email: 'other-list@example.test', domain: 'other-list.example.test' });
    created = (await cli('key', 'create', '--block', block.motorBlockId)).out.apiKey;
    expect((await cli('key', 'revoke', block.apiKey)).out).to.include({ kind: 'block', changed: true });
    secrets.push(block.apiKey, block.accountApiKey, created, other.apiKey, other.accountApiKey);
  });
  after(async () => { await motor?.close(); });

  const cli = (...args: string[]) => runCli(motor, args);
  const publicPart = (apiKey: string) => apiKey.split('_').slice(0, 3).join('_');
  const expectNoSecret = (printed: unknown) => {
    const text = JSON.stringify(printed);
    for (const key of secrets) {
      const { secret } = parseApiKey(key)!;
      expect(text).not.to.include(secret);
      expect(text).not.to.include(hashSecret(secret));
    }
  };

  it('--account: its account key and its block\'s keys, the revoked one only with --include-revoked; no secret, no hash', async () => {
    const r = await cli('key', 'list', '--account', block.accountId);
    expect(r.code).to.equal(0);
    expect(r.out.keys.map((k: { prefix: string; kind: string }) => [k.prefix, k.kind])).to.have.deep.members([
      [publicPart(block.accountApiKey), 'account'], [publicPart(created), 'block'],
    ]);
    const account = r.out.keys.find((k: { kind: string }) => k.kind === 'account');
    expect(account).to.deep.include({ accountId: block.accountId, motorBlockId: null, revoked: false, revokedAt: null, scopes: [...SCOPES] });
    expect(account.keyId).to.be.a('string');
    expect(Date.parse(account.createdAt)).to.be.a('number').and.not.NaN;
    const blockKey = r.out.keys.find((k: { kind: string }) => k.kind === 'block');
    expect(blockKey).to.deep.include({ accountId: block.accountId, motorBlockId: block.motorBlockId, revoked: false });
    expect(blockKey).not.to.have.property('scopes');
    expectNoSecret(r.out);

    const all = await cli('key', 'list', '--account', block.accountId.toUpperCase(), '--include-revoked');
    expect(all.out.keys).to.have.length(3);
    const revoked = all.out.keys.find((k: { prefix: string }) => k.prefix === publicPart(block.apiKey));
    expect(revoked).to.deep.include({ kind: 'block', motorBlockId: block.motorBlockId, revoked: true });
    expect(revoked.revokedAt).to.be.a('string');
    expect(all.out.keys.map((k: { createdAt: string }) => k.createdAt), 'oldest first').to.deep.equal(all.out.keys.map((k: { createdAt: string }) => k.createdAt).sort());
    expectNoSecret(all.out);

    // What it prints is what key revoke takes.
    const byPrefix = await cli('key', 'revoke', account.prefix);
    expect(byPrefix.out).to.include({ id: account.keyId, kind: 'account', changed: true });
    expect((await cli('key', 'list', '--account', block.accountId)).out.keys.map((k: { prefix: string }) => k.prefix)).to.deep.equal([publicPart(created)]);
  });

  it('--block: that block\'s keys only (no account key, no other account\'s)', async () => {
    const r = await cli('key', 'list', '--block', block.motorBlockId, '--include-revoked');
    expect(r.code).to.equal(0);
    expect(r.out.keys.map((k: { prefix: string }) => k.prefix)).to.have.members([publicPart(block.apiKey), publicPart(created)]);
    expect(r.out.keys.every((k: { kind: string; accountId: string }) => k.kind === 'block' && k.accountId === block.accountId)).to.equal(true);
    expectNoSecret(r.out);
    const theirs = await cli('key', 'list', '--block', other.motorBlockId);
    expect(theirs.out.keys.map((k: { prefix: string }) => k.prefix)).to.deep.equal([publicPart(other.apiKey)]);
  });

  it('unknown account → exit 1 not_found, unknown block → exit 1 motor_block_not_found; neither, both or a malformed id → exit 2', async () => {
    const account = await cli('key', 'list', '--account', '0193a5f0-0000-7000-8000-00000000beef');
    expect([account.code, account.out?.error]).to.deep.equal([1, 'not_found']);
    const unknown = await cli('key', 'list', '--block', '0193a5f0-0000-7000-8000-00000000beef');
    expect([unknown.code, unknown.out?.error]).to.deep.equal([1, 'motor_block_not_found']);
    expect((await cli('key', 'list')).code, 'neither').to.equal(2);
    expect((await cli('key', 'list', '--account', block.accountId, '--block', block.motorBlockId)).code, 'both').to.equal(2);
    expect((await cli('key', 'list', '--account', 'not-an-id')).code, 'malformed').to.equal(2);
  });

  it('without --json: one line per key with its public part, kind, block and state; no secret', async () => {
    const { stdout } = await run('npx', ['tsx', 'scripts/cli.ts', 'key', 'list', '--block', block.motorBlockId, '--include-revoked'], {
      env: { ...process.env, DATABASE_URL: motor.rt.databaseUrl, REDIS_URL: motor.rt.redisUrl, TOKEN_SECRET: 'test-token-secret-0123456789abcdef0123', LOG_LEVEL: 'silent' },
    });
    const lines = stdout.trimEnd().split('\n');
    expect(lines).to.have.length(2);
    const revoked = lines.find((l) => l.startsWith(publicPart(block.apiKey)))!;
    expect(revoked).to.include('block').and.include(block.motorBlockId).and.include('revoked');
    expect(lines.find((l) => l.startsWith(publicPart(created)))).to.include('active');
    expectNoSecret(stdout);
  });
});

/** Exit code and stderr of `npm run cli -- <args>` (for refusals, which print no JSON). */
async function cliStderr(args: string[], env: Record<string, string>): Promise<{ code: number; stderr: string }> {
  try {
    await run('npx', ['tsx', 'scripts/cli.ts', ...args], { env: { ...process.env, TOKEN_SECRET: 'test-token-secret-0123456789abcdef0123', LOG_LEVEL: 'silent', ...env } });
    return { code: 0, stderr: '' };
  } catch (err) {
    const e = err as { code?: number; stderr?: string };
    return { code: e.code ?? -1, stderr: e.stderr ?? '' };
  }
}

/** Malformed arguments never reach the store (there is none here): the reason and the usage on stderr, exit 2, no stack trace. */
describe('CLI arguments (int)', function () {
  this.timeout(60_000);

  for (const args of [
    ['bootstrap', '--email'],
    ['bootstrap', '--email', 'a@example.test', '--domain'],
    ['bootstrap', 'stray', '--email', 'a@example.test', '--domain', 'stray.example.test'],
    ['bootstrap', '--email', 'a@example.test', '--domain', 'x.example.test', '--trust-dns=yes'],
    ['block', 'set-limits', '0193a5f0-0000-7000-8000-00000000beef', '--burst'],
    ['oauth-client', 'create', '--account'],
    ['dns', 'managed-dkim', 'stray'],
    ['status', 'stray'],
    ['key', 'create'],
    ['key', 'create', '--block', 'nope'],
    ['key', 'create', '--account', 'nope'],
    ['key', 'create', '--block', '0193a5f0-0000-7000-8000-00000000beef', '--account', '0193a5f0-0000-7000-8000-00000000beef'],
    ['key', 'create', '--block', '0193a5f0-0000-7000-8000-00000000beef', '--scopes', 'logs.read'],
  ]) {
    it(`${args.join(' ')}: exit 2 with the reason and the usage, no stack trace`, async () => {
      const { code, stderr } = await cliStderr(args, { DATABASE_URL: 'postgres://127.0.0.1:1/none' });
      expect(code).to.equal(2);
      expect(stderr).to.include('Usage: npm run cli');
      expect(stderr).not.to.match(/\n\s+at /);
    });
  }
});

/**
 * A database that cannot be reached, or stops answering mid-command (test/support/pausableProxy.ts:
 * it freezes at the command's own statement, after the store and the directory have answered): one
 * line that says so, with its code (JSON with --json), exit 1, no stack trace, within the deadline.
 */
describe('CLI with a database away (int)', function () {
  this.timeout(120_000);
  const DEADLINE = 1500;
  let motor: TestMotor;
  const proxies: PausableProxy[] = [];

  before(async () => {
    motor = await startTestMotor({ roles: ['api'] });
    await motor.bootstrap();
  });
  after(async () => {
    for (const p of proxies) {
      p.resume();
      await p.close();
    }
    await motor?.close();
  });

  /** `block list` (with `extra` arguments) through a proxy that freezes at the list's query. */
  const frozenAtList = async (extra: string[]) => {
    const url = new URL(motor.rt.databaseUrl);
    const proxy = await startPausableProxy({ host: url.hostname, port: Number(url.port || 5432) }, { pauseOn: (chunk) => chunk.includes('"b"."limit_burst"') });
    proxies.push(proxy);
    url.port = String(proxy.port);
    return cliOutput(['block', 'list', ...extra], { DATABASE_URL: url.toString(), DATABASE_QUERY_TIMEOUT_MS: String(DEADLINE) });
  };

  it('a statement past DATABASE_QUERY_TIMEOUT_MS: event_store_unavailable in one line (a JSON object with --json), exit 1, no stack trace', async () => {
    const json = await frozenAtList(['--json']);
    expect(json.code, json.stderr).to.equal(1);
    expect(json.stderr).not.to.match(/\n\s+at /);
    const lines = json.stdout.trimEnd().split('\n');
    expect(lines).to.have.length(1);
    expect(JSON.parse(lines[0])).to.have.property('error', 'event_store_unavailable');
    expect(json.ms, 'the deadline, not a hang').to.be.below(DEADLINE + 15_000);

    const plain = await frozenAtList([]);
    expect(plain.code).to.equal(1);
    expect(plain.stdout).to.equal('');
    expect(plain.stderr.trimEnd().split('\n')).to.have.length(1);
    expect(plain.stderr).to.match(/^event_store_unavailable: /);
  });

  it('a database that cannot be reached: the same (this path printed one line already)', async () => {
    const env = { DATABASE_URL: 'postgres://motor@127.0.0.1:1/none' };
    const json = await cliOutput(['block', 'list', '--json'], env);
    expect(json.code).to.equal(1);
    expect(JSON.parse(json.stdout)).to.have.property('error', 'event_store_unavailable');
    const plain = await cliOutput(['block', 'list'], env);
    expect(plain.code).to.equal(1);
    expect(plain.stderr.trimEnd().split('\n')).to.have.length(1);
    expect(plain.stderr).to.match(/^event_store_unavailable: /);
  });
});

describe('CLI with a database that refuses the session (int)', function () {
  this.timeout(120_000);

  it('an unknown database or user: database_refused in one line (a JSON object with --json), exit 1, no stack trace', async () => {
    const admin = new URL(TEST_PG_ADMIN_URL);
    const noDatabase = new URL(admin);
    noDatabase.pathname = '/motor_no_such_database_x9';
    const noUser = new URL(admin);
    noUser.username = 'motor_no_such_role_x9';
    for (const url of [noDatabase, noUser]) {
      const json = await cliOutput(['block', 'list', '--json'], { DATABASE_URL: url.toString() });
      expect(json.code, json.stderr).to.equal(1);
      expect(json.stderr).not.to.match(/\n\s+at /);
      const body = JSON.parse(json.stdout);
      expect(body).to.have.property('error', 'database_refused');
      expect(body.message).to.match(/SQLSTATE (3D000|28\w{3}).*DATABASE_URL/);
      const plain = await cliOutput(['block', 'list'], { DATABASE_URL: url.toString() });
      expect(plain.code).to.equal(1);
      expect(plain.stderr.trimEnd().split('\n')).to.have.length(1);
      expect(plain.stderr).to.match(/^database_refused: PostgreSQL refused the session: /);
    }
  });
});

/** Exit code, stdout, stderr and duration of `npm run cli -- <args>`, whatever it printed. */
async function cliOutput(args: string[], env: Record<string, string>): Promise<{ code: number; stdout: string; stderr: string; ms: number }> {
  const started = Date.now();
  try {
    const { stdout, stderr } = await run('npx', ['tsx', 'scripts/cli.ts', ...args], {
      env: { ...process.env, TOKEN_SECRET: 'test-token-secret-0123456789abcdef0123', LOG_LEVEL: 'silent', ...env }, timeout: 60_000,
    });
    return { code: 0, stdout, stderr, ms: Date.now() - started };
  } catch (err) {
    const e = err as { code?: number; stdout?: string; stderr?: string };
    return { code: e.code ?? -1, stdout: e.stdout ?? '', stderr: e.stderr ?? '', ms: Date.now() - started };
  }
}

/** `npm run cli -- bootstrap` makes a new account each time: a second one for an owner who has one is refused. */
describe('CLI bootstrap (int)', function () {
  this.timeout(120_000);
  let motor: TestMotor;

  // No worker role: nothing but the CLI appends, so the whole log's length shows what it wrote.
  before(async () => { motor = await startTestMotor({ roles: ['api', 'projector'] }); });
  after(async () => { await motor?.close(); });

  const cli = (...args: string[]) => runCli(motor, args);
  const count = async (sql: string) => (await motor.rt.db.raw(`select count(*)::int as n from ${sql}`)).rows[0].n as number;
  const written = async () => ({ events: await count('events'), keys: await count('motor_keys.private_keys') });

  it('the same email again, in another case and padded: exit 1 account_exists with the first accountId, nothing appended, no key stored', async () => {
    const first = await cli('bootstrap', '--email', 'owner@boot.example.test', '--domain', 'one.boot.example.test', '--trust-dns');
    expect(first.code).to.equal(0);
    const before = await written();

    const second = await cli('bootstrap', '--email', ' Owner@BOOT.Example.test ', '--domain', 'two.boot.example.test', '--trust-dns');
    expect(second.code).to.equal(1);
    expect(second.out).to.include({ error: 'account_exists', accountId: first.out.accountId });
    expect(await written(), 'nothing appended, no DKIM key stored').to.deep.equal(before);

    // Without --json: one line on stderr with the code and the account to manage instead.
    const plain = await cliStderr(['bootstrap', '--email', 'OWNER@boot.example.test', '--domain', 'three.boot.example.test'], { DATABASE_URL: motor.rt.databaseUrl });
    expect(plain.code).to.equal(1);
    expect(plain.stderr.trimEnd().split('\n')).to.have.length(1);
    expect(plain.stderr).to.match(/^account_exists: /).and.include(first.out.accountId);
    expect(await written()).to.deep.equal(before);

    const other = await cli('bootstrap', '--email', 'someone-else@boot.example.test', '--domain', 'four.boot.example.test', '--trust-dns');
    expect(other.code, 'another owner is not refused').to.equal(0);
    expect(other.out.accountId).to.not.equal(first.out.accountId);
  });

  /** The accounts made for `email` (trimmed, any case): its AccountCreated events, whoever appended them. */
  const accountsOf = async (email: string) => (await motor.rt.db.raw(
    `select data->>'accountId' as id from events where type = 'AccountCreated' and lower(btrim(data->>'email')) = ? order by global_position`, [email],
  )).rows.map((r: { id: string }) => r.id) as string[];
  const bootstrapAs = (email: string, domain: string) => bootstrapOwner(motor.rt, {
    email, domain, trustDns: true, dkimAlgorithm: 'rsa-sha256', plan: motor.config.defaultPlan.name, serviceDomain: motor.config.serviceDomain,
    systemMailFrom: motor.config.systemMailFrom, bounceDomain: motor.config.inbound.bounceDomain, now: new Date(),
  });

  it('five bootstraps of one email at once (the CLI\'s command, as five operators would run it): one account, the other four account_exists with its id', async () => {
    const spellings = ['race@boot.example.test', ' Race@boot.example.test', 'RACE@BOOT.EXAMPLE.TEST', 'race@Boot.Example.Test ', 'race@boot.example.test'];
    const domains = spellings.map((_, i) => `race${i}.boot.example.test`);
    const settled = await Promise.allSettled(spellings.map((email, i) => bootstrapAs(email, domains[i])));
    const won = settled.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
    expect(won, 'exactly one bootstrap made an account').to.have.length(1);
    expect(await accountsOf('race@boot.example.test')).to.deep.equal([won[0].accountId]);
    for (const r of settled) {
      if (r.status === 'fulfilled') continue;
      expect(r.reason).to.include({ code: 'account_exists' });
      expect(r.reason.details).to.deep.equal({ accountId: won[0].accountId });
    }
    // The winner's keys are the account's: its block key sends.
    const winnerDomain = domains[settled.findIndex((r) => r.status === 'fulfilled')];
    await eventually(async () => (await dryRunSend(motor, won[0].apiKey, winnerDomain)) === 200);

    const again = await cli('bootstrap', '--email', 'race@boot.example.test', '--domain', 'race9.boot.example.test', '--trust-dns');
    expect(again.code).to.equal(1);
    expect(again.out).to.include({ error: 'account_exists', accountId: won[0].accountId });
  });

  it('an email whose account was made before accounts claimed their email (an AccountCreated alone in the log): account_exists with that account, also for bootstraps at once', async () => {
    const accountId = randomUUID();
    await motor.rt.store.append(`account-${accountId}`, [toEventData(newId(), {
      type: 'AccountCreated', data: { accountId, email: 'Legacy@Boot.example.test', plan: motor.config.defaultPlan.name, createdAt: new Date().toISOString() },
    }, { actor: 'cli' })], { expectedRevision: 'no_stream' });

    // The CLI catches the directory up before it decides, as it always did.
    const first = await cli('bootstrap', '--email', 'legacy@boot.example.test', '--domain', 'legacy.boot.example.test', '--trust-dns');
    expect(first.code).to.equal(1);
    expect(first.out).to.include({ error: 'account_exists', accountId });

    const settled = await Promise.allSettled([1, 2, 3].map((i) => bootstrapAs('LEGACY@boot.example.test', `legacy${i}.boot.example.test`)));
    for (const r of settled) {
      expect(r.status).to.equal('rejected');
      if (r.status === 'rejected') expect(r.reason).to.include({ code: 'account_exists' }).and.to.have.deep.property('details', { accountId });
    }
    expect(await accountsOf('legacy@boot.example.test')).to.deep.equal([accountId]);
  });

  it('a claim whose account never came (a bootstrap stopped between its two appends): the next bootstrap makes that account instead of being refused for good', async () => {
    const accountId = randomUUID();
    await motor.rt.store.append(`accountEmail-${accountEmailId('stopped@boot.example.test')}`, [toEventData(newId(), {
      type: 'AccountEmailClaimed', data: { email: 'stopped@boot.example.test', accountId, claimedAt: new Date().toISOString() },
    }, { actor: 'cli' })], { expectedRevision: 'no_stream' });

    const r = await cli('bootstrap', '--email', 'Stopped@boot.example.test', '--domain', 'stopped.boot.example.test', '--trust-dns');
    expect(r.code).to.equal(0);
    expect(r.out.accountId).to.equal(accountId);
    expect(await accountsOf('stopped@boot.example.test')).to.deep.equal([accountId]);
    const again = await cli('bootstrap', '--email', 'stopped@boot.example.test', '--domain', 'stopped2.boot.example.test');
    expect(again.out).to.include({ error: 'account_exists', accountId });
  });
});

/** A bootstrap that stopped after AccountCreated (the process died, the store failed): the next one finishes that account. */
/**
 * `bootstrap --domain` is a tenant's domain, checked as the HTTP add checks one (parseDomainName):
 * never SERVICE_DOMAIN, the operator's BOUNCE_DOMAIN nor a name under either (docs/DOMAINS.md
 * "Bounce domain").
 */
describe('CLI bootstrap with BOUNCE_DOMAIN (int)', function () {
  this.timeout(120_000);
  const BOUNCE_DOMAIN = 'bounces.operator.test';
  const SERVICE_DOMAIN = 'motor.test';
  let motor: TestMotor;

  before(async () => { motor = await startTestMotor({ roles: ['api', 'projector'], env: { BOUNCE_DOMAIN, SERVICE_DOMAIN } }); });
  after(async () => { await motor?.close(); });

  const cli = (env: Record<string, string>, ...args: string[]) => runCli(motor, args, env);
  const count = async (sql: string) => (await motor.rt.db.raw(`select count(*)::int as n from ${sql}`)).rows[0].n as number;
  const written = async () => ({ events: await count('events'), keys: await count('motor_keys.private_keys') });

  it('the bounce domain, a name under it, in upper case or with a trailing dot: exit 1 domain_reserved, nothing claimed, appended or stored', async () => {
    const before = await written();
    const names = [BOUNCE_DOMAIN, `MAIL.${BOUNCE_DOMAIN.toUpperCase()}`, `${BOUNCE_DOMAIN}.`, `x.Bounces.Operator.Test.`];
    for (const [i, domain] of names.entries()) {
      const r = await cli({ BOUNCE_DOMAIN }, 'bootstrap', '--email', `reserved${i}@boot.example.test`, '--domain', domain, '--trust-dns');
      expect([r.code, r.out?.error], domain).to.deep.equal([1, 'domain_reserved']);
    }
    expect(await written()).to.deep.equal(before);
  });

  it('SERVICE_DOMAIN, a name under it (a sandbox name too), in any case or with a trailing dot: exit 1 domain_reserved as the HTTP add; names the add finds invalid: exit 1 invalid_domain; nothing claimed, appended or stored', async () => {
    const before = await written();
    const env = { BOUNCE_DOMAIN, SERVICE_DOMAIN };
    const reserved = [SERVICE_DOMAIN, 'Motor.Test.', 'mail.motor.test', 'x.sandbox.MOTOR.test'];
    for (const [i, domain] of reserved.entries()) {
      const r = await cli(env, 'bootstrap', '--email', `service${i}@boot.example.test`, '--domain', domain, '--trust-dns');
      expect([r.code, r.out?.error, r.out?.field], domain).to.deep.equal([1, 'domain_reserved', 'domain']);
      // What to do instead, as the HTTP envelope says it.
      expect(r.out?.nextAction, domain).to.be.a('string').and.include('sandbox');
    }
    // An address, a numeric top-level label: the add refuses them, bootstrap (with a pattern of its own) took them.
    for (const [i, domain] of ['192.0.2.1', 'example.123', 'exa mple.com'].entries()) {
      const r = await cli(env, 'bootstrap', '--email', `invalid${i}@boot.example.test`, '--domain', domain, '--trust-dns');
      expect([r.code, r.out?.error], domain).to.deep.equal([1, 'invalid_domain']);
    }
    // Without --json: one line on stderr, the code first.
    const plain = await cliStderr(['bootstrap', '--email', 'service-plain@boot.example.test', '--domain', SERVICE_DOMAIN], { DATABASE_URL: motor.rt.databaseUrl, ...env });
    expect(plain.code).to.equal(1);
    expect(plain.stderr.trimEnd().split('\n')).to.have.length(1);
    expect(plain.stderr).to.match(/^domain_reserved: /).and.include(SERVICE_DOMAIN).and.match(/ \(next: .*sandbox.*\)$/m);
    expect(await written()).to.deep.equal(before);
  });

  it('a sibling and the parent are the tenant\'s: bootstrapped; with BOUNCE_DOMAIN unset the bounce domain\'s own name is too', async () => {
    for (const [i, domain] of ['notbounces.operator.test', 'operator.test'].entries()) {
      const r = await cli({ BOUNCE_DOMAIN }, 'bootstrap', '--email', `allowed${i}@boot.example.test`, '--domain', domain, '--trust-dns');
      expect(r.code, JSON.stringify(r.out)).to.equal(0);
    }
    const unset = await cli({ BOUNCE_DOMAIN: '' }, 'bootstrap', '--email', 'unset@boot.example.test', '--domain', BOUNCE_DOMAIN, '--trust-dns');
    expect(unset.code, JSON.stringify(unset.out)).to.equal(0);
  });
});

describe('CLI bootstrap after one that stopped midway (int)', function () {
  this.timeout(180_000);
  let motor: TestMotor;

  before(async () => { motor = await startTestMotor({ roles: ['api', 'projector'] }); });
  after(async () => { await motor?.close(); });

  const cli = (...args: string[]) => runCli(motor, args);

  /** The store, with the `nth` append to a stream matching `stream` failing as a store that went away would (nothing of it appended). */
  const storeFailingAt = (stream: RegExp, nth = 1): EventStore => {
    let seen = 0;
    return new Proxy(motor.rt.store, {
      get(target, prop) {
        if (prop === 'append') {
          return async (streamId: string, events: EventData[], options?: { expectedRevision?: ExpectedRevision }) => {
            if (stream.test(streamId) && ++seen === nth) throw new Error(`cut before ${streamId}`);
            return target.append(streamId, events, options);
          };
        }
        const v = Reflect.get(target, prop);
        return typeof v === 'function' ? v.bind(target) : v;
      },
    });
  };
  const keysFailing = (): KeyStore => new Proxy(motor.rt.keys, {
    get(target, prop) {
      if (prop === 'put') return async () => { throw new Error('cut before the DKIM key'); };
      const v = Reflect.get(target, prop);
      return typeof v === 'function' ? v.bind(target) : v;
    },
  });
  /** The CLI's bootstrap, through the same code, with a store or key store that fails at one step, or a kill before it finishes (`beforeFinish`). */
  const bootstrapCut = (email: string, domain: string, deps: { store?: EventStore; keys?: KeyStore; beforeFinish?: (r: BootstrapResult) => Promise<void> }) => bootstrapOwner(
    { db: motor.rt.db, store: deps.store ?? motor.rt.store, keys: deps.keys ?? motor.rt.keys, beforeFinish: deps.beforeFinish },
    {
      email, domain, trustDns: true, dkimAlgorithm: 'rsa-sha256', plan: motor.config.defaultPlan.name, serviceDomain: motor.config.serviceDomain,
      systemMailFrom: motor.config.systemMailFrom, bounceDomain: motor.config.inbound.bounceDomain, now: new Date(),
    },
  );
  const accountOf = async (email: string) => (await motor.rt.db.raw(
    `select data->>'accountId' as id from events where type = 'AccountCreated' and lower(btrim(data->>'email')) = ?`, [email],
  )).rows.map((r: { id: string }) => r.id) as string[];
  /** The blocks the account's list names (its AccountBlockAdded events). */
  const listedBlocks = async (accountId: string) => (await motor.rt.store.readStream(`account-${accountId}`))
    .filter((e) => e.type === 'AccountBlockAdded').map((e) => (e.data as { motorBlockId: string }).motorBlockId);
  const blockCreations = async (motorBlockId: string) => (await motor.rt.store.readStream(`motorBlock-${motorBlockId}`)).filter((e) => e.type === 'MotorBlockCreated').length;

  /** Every key made for the account, by its prefix, and whether it is revoked. */
  const keysOf = async (accountId: string) => (await motor.rt.db.raw(
    `select c.data->>'prefix' as prefix, r.type is not null as revoked from events c left join events r on r.type = 'ApiKeyRevoked' and r.data->>'keyId' = c.data->>'keyId'
     where c.type = 'ApiKeyCreated' and c.data->>'accountId' = ?`, [accountId],
  )).rows as Array<{ prefix: string; revoked: boolean }>;
  /** The keys of the account still valid are exactly `valid` (full keys). */
  const expectOnlyValid = async (accountId: string, valid: string[]) => {
    const keys = await keysOf(accountId);
    expect(keys.filter((k) => !k.revoked).map((k) => k.prefix).sort()).to.deep.equal(valid.map((k) => parseApiKey(k)!.prefix).sort());
  };

  /** The rerun finished the account: the same one, the block its list named, printed keys that work, the block listed. */
  const expectFinished = async (out: any, accountId: string, domain: string) => { // eslint-disable-line @typescript-eslint/no-explicit-any
    const blocks = await listedBlocks(accountId);
    expect(blocks, 'the account still names one block').to.have.length(1);
    expect(out).to.include({ accountId, motorBlockId: blocks[0] });
    expect(out.apiKey).to.match(/^mk_live_/);
    expect(out.accountApiKey).to.match(/^ak_live_/);
    expect(out.smtpUsername).to.be.a('string');
    expect(out.smtpPassword).to.be.a('string');
    expect(out.dnsRecords.map((r: DnsRecord) => r.purpose)).to.deep.equal(['dkim', 'spf', 'dmarc', 'ownership']);
    expect(await blockCreations(blocks[0])).to.equal(1);
    await eventually(async () => (await dryRunSend(motor, out.apiKey, domain)) === 200, 10_000);
    const token = await fetch(`${motor.baseUrl}/api/public/token/account-key`, {
      method: 'POST', headers: { 'content-type': 'application/json', authorization: `ApiKey ${out.accountApiKey}` }, body: JSON.stringify({ motorBlockId: blocks[0] }),
    });
    expect(token.status, 'the account key mints tokens for the block').to.equal(200);
    const list = await cli('block', 'list');
    expect(list.out.filter((b: { motorBlockId: string }) => b.motorBlockId === blocks[0])).to.deep.equal([{
      motorBlockId: blocks[0], accountId, name: domain, type: 'general_purpose', status: 'active', domain,
      limits: { burst: motor.config.defaultPlan.burst, hourly: motor.config.defaultPlan.hourly, daily: motor.config.defaultPlan.daily },
    }]);
  };

  const cuts: Array<{ step: string; deps: () => { store?: EventStore; keys?: KeyStore } }> = [
    { step: 'the DKIM key (account made, nothing else)', deps: () => ({ keys: keysFailing() }) },
    { step: 'the domain (its key stored)', deps: () => ({ store: storeFailingAt(/^sendingDomain-/) }) },
    { step: 'the block key (domain added)', deps: () => ({ store: storeFailingAt(/^apiKey-/) }) },
    { step: 'the account key (block key added)', deps: () => ({ store: storeFailingAt(/^apiKey-/, 2) }) },
    { step: 'the block (both keys added)', deps: () => ({ store: storeFailingAt(/^motorBlock-/) }) },
  ];
  cuts.forEach(({ step, deps }, i) => {
    it(`stopped before ${step}: a rerun finishes the account and prints working keys; a bootstrap after that is account_exists`, async () => {
      const email = `cut${i}@resume.example.test`;
      const domain = `cut${i}.resume.example.test`;
      const cut = await bootstrapCut(email, domain, deps()).then(() => null, (err: Error) => err);
      expect(cut?.message).to.match(/^cut before/);
      const [accountId] = await accountOf(email);
      expect(accountId, 'the cut bootstrap made the account').to.be.a('string');

      const r = await cli('bootstrap', '--email', email.toUpperCase(), '--domain', domain, '--trust-dns');
      expect(r.code, JSON.stringify(r.out)).to.equal(0);
      await expectFinished(r.out, accountId, domain);
      await expectOnlyValid(accountId, [r.out.apiKey, r.out.accountApiKey]);
      const domains = (await motor.rt.db.raw(`select count(*)::int as n from events where type = 'DomainAdded' and data->>'accountId' = ?`, [accountId])).rows[0].n;
      expect(domains, 'one domain, whichever run added it').to.equal(1);

      const again = await cli('bootstrap', '--email', email, '--domain', domain, '--trust-dns');
      expect(again.code).to.equal(1);
      expect(again.out).to.include({ error: 'account_exists', accountId });
      expect(await accountOf(email)).to.deep.equal([accountId]);
    });
  });

  it('killed after its block, before it printed: the rerun revokes the keys and the SMTP password it made, also when the rerun itself was cut while revoking; key create keys stay', async () => {
    const email = 'unshown@resume.example.test';
    const domain = 'unshown.resume.example.test';
    let unshown: BootstrapResult | null = null;
    // What the CLI would have printed, had it not been killed while it waited for the directory.
    const cut = await bootstrapCut(email, domain, { beforeFinish: async (r) => { unshown = r; throw new Error('cut before printing'); } })
      .then(() => null, (err: Error) => err);
    expect(cut?.message).to.equal('cut before printing');
    const old = unshown! as BootstrapResult;
    const { accountId, motorBlockId } = old;
    const mint = async (accountApiKey: string) => (await fetch(`${motor.baseUrl}/api/public/token/account-key`, {
      method: 'POST', headers: { 'content-type': 'application/json', authorization: `ApiKey ${accountApiKey}` }, body: JSON.stringify({ motorBlockId }),
    })).status;
    const smtpAuth = authDepsOf({ store: motor.rt.store, directory: new DirectoryCache(motor.rt.db, 0), clock: motor.rt.clock }, motor.rt.smtpAuthLimiter);
    let address = 10;
    const smtpLogin = async (username: string, password: string) => (await authenticate(smtpAuth, { mechanism: 'PLAIN', username, password, remoteAddress: `192.0.2.${address++}` })).ok;
    await eventually(async () => (await dryRunSend(motor, old.apiKey, domain)) === 200, 10_000);
    expect(await mint(old.accountApiKey), 'the cut run\'s keys were valid').to.equal(200);
    expect(await smtpLogin(old.smtpUsername, old.smtpPassword), 'and its SMTP password').to.equal(true);

    // Keys the operator made meanwhile, not by a bootstrap: they stay.
    const blockKey = await cli('key', 'create', '--block', motorBlockId);
    const accountKey = await cli('key', 'create', '--account', accountId);
    expect([blockKey.code, accountKey.code]).to.deep.equal([0, 0]);

    // A rerun cut after its first revocation: the next one revokes the rest, and this one's keys.
    const cutRerun = await bootstrapCut(email, domain, { store: storeFailingAt(/^apiKey-/, 2) }).then(() => null, (err: Error) => err);
    expect(cutRerun?.message).to.match(/^cut before apiKey-/);
    expect(await accountOf(email)).to.deep.equal([accountId]);

    const r = await cli('bootstrap', '--email', email, '--domain', domain, '--trust-dns');
    expect(r.code, JSON.stringify(r.out)).to.equal(0);
    expect(r.out).to.include({ accountId, motorBlockId, domainId: old.domainId, smtpUsername: old.smtpUsername });
    await expectFinished(r.out, accountId, domain);
    await expectOnlyValid(accountId, [r.out.apiKey, r.out.accountApiKey, blockKey.out.apiKey, accountKey.out.apiKey]);

    await eventually(async () => (await dryRunSend(motor, old.apiKey, domain)) === 401, 10_000);
    expect(await mint(old.accountApiKey), 'the cut run\'s account key').to.equal(401);
    expect(await smtpLogin(old.smtpUsername, old.smtpPassword), 'the cut run\'s SMTP password').to.equal(false);
    expect(await smtpLogin(r.out.smtpUsername, r.out.smtpPassword), 'the printed SMTP password').to.equal(true);
    expect(await dryRunSend(motor, blockKey.out.apiKey, domain), 'the key create block key').to.equal(200);
    expect(await mint(accountKey.out.apiKey), 'the key create account key').to.equal(200);

    const again = await cli('bootstrap', '--email', email, '--domain', domain, '--trust-dns');
    expect(again.out).to.include({ error: 'account_exists', accountId });
    await expectOnlyValid(accountId, [r.out.apiKey, r.out.accountApiKey, blockKey.out.apiKey, accountKey.out.apiKey]);
  });

  it('stopped by an older release after its domain (a random domain id): the rerun uses that domain, given again; another domain given instead is added and used', async () => {
    const email = 'older@resume.example.test';
    const accountId = randomUUID();
    const motorBlockId = randomUUID();
    const domainId = randomUUID();
    const at = new Date().toISOString();
    await motor.rt.store.append(`accountEmail-${accountEmailId(email)}`, [toEventData(newId(), {
      type: 'AccountEmailClaimed', data: { email, accountId, claimedAt: at },
    }, { actor: 'cli' })], { expectedRevision: 'no_stream' });
    // What the steps before the block appended, as that release wrote them.
    await motor.rt.store.append(`account-${accountId}`, [
      { type: 'AccountCreated', data: { accountId, email, plan: motor.config.defaultPlan.name, createdAt: at } },
      { type: 'AccountBlocksListed', data: { accountId, motorBlockIds: [], listedAt: at } },
      { type: 'AccountBlockAdded', data: { accountId, motorBlockId, addedAt: at } },
    ].map((e) => toEventData(newId(), e as DomainEvent, { actor: 'cli' })), { expectedRevision: 'no_stream' });
    const dkimKeyId = randomUUID();
    await motor.rt.keys.put(dkimKeyId, 'rsa-sha256', (await generateDkimKey('rsa-sha256')).privateKeyPem);
    await motor.rt.store.append(`sendingDomain-${domainId}`, [toEventData(newId(), {
      type: 'DomainAdded', data: {
        domainId, accountId, name: 'older.resume.example.test', dkimSelector: 'motor20260101', dkimAlgorithm: 'rsa-sha256', dkimPublicKey: 'cHVibGlj', dkimKeyId,
        ownershipToken: 'a'.repeat(32), dkimMode: 'txt', addedAt: at,
      },
    }, { actor: 'cli' })], { expectedRevision: 'no_stream' });

    const r = await cli('bootstrap', '--email', email, '--domain', 'Older.resume.example.test.', '--trust-dns');
    expect(r.code, JSON.stringify(r.out)).to.equal(0);
    expect(r.out).to.include({ accountId, motorBlockId, domainId });
    expect(r.out.dnsRecords[0]).to.deep.equal({ type: 'TXT', name: 'motor20260101._domainkey.older.resume.example.test', value: 'v=DKIM1; k=rsa; p=cHVibGlj', purpose: 'dkim' });
    await expectFinished(r.out, accountId, 'older.resume.example.test');

    // Another owner whose bootstrap stopped after its domain, rerun with another domain: the block is on the one given now.
    const cut = await bootstrapCut('switch@resume.example.test', 'first.resume.example.test', { store: storeFailingAt(/^apiKey-/) }).then(() => null, (err: Error) => err);
    expect(cut?.message).to.match(/^cut before/);
    const [switched] = await accountOf('switch@resume.example.test');
    const s = await cli('bootstrap', '--email', 'switch@resume.example.test', '--domain', 'second.resume.example.test', '--trust-dns');
    expect(s.code, JSON.stringify(s.out)).to.equal(0);
    await expectFinished(s.out, switched, 'second.resume.example.test');
  });

  it('two reruns at once: one finishes the account, the other is account_exists and the keys it made are revoked', async () => {
    const email = 'race@resume.example.test';
    const cut = await bootstrapCut(email, 'race.resume.example.test', { store: storeFailingAt(/^sendingDomain-/) }).then(() => null, (err: Error) => err);
    expect(cut?.message).to.match(/^cut before/);
    const [accountId] = await accountOf(email);

    const runs = await Promise.all([1, 2].map(() => cli('bootstrap', '--email', email, '--domain', 'race.resume.example.test', '--trust-dns')));
    expect(runs.map((x) => x.code).sort()).to.deep.equal([0, 1]);
    const won = runs.find((x) => x.code === 0)!;
    const lost = runs.find((x) => x.code === 1)!;
    expect(lost.out).to.include({ error: 'account_exists', accountId });
    await expectFinished(won.out, accountId, 'race.resume.example.test');
    const keys = await keysOf(accountId);
    const printed = [parseApiKey(won.out.apiKey)!.prefix, parseApiKey(won.out.accountApiKey)!.prefix];
    for (const k of keys) expect(k.revoked, k.prefix).to.equal(!printed.includes(k.prefix));
    expect(keys.filter((k) => !k.revoked).map((k) => k.prefix).sort()).to.deep.equal([...printed].sort());

    // Three in one process, where their steps interleave: still one block, one domain, one winner.
    const email3 = 'race3@resume.example.test';
    await bootstrapCut(email3, 'race3.resume.example.test', { keys: keysFailing() }).catch(() => null);
    const [account3] = await accountOf(email3);
    const settled = await Promise.allSettled([1, 2, 3].map(() => bootstrapCut(email3, 'race3.resume.example.test', {})));
    const winners = settled.flatMap((x) => (x.status === 'fulfilled' ? [x.value] : []));
    expect(winners).to.have.length(1);
    for (const x of settled) if (x.status === 'rejected') expect(x.reason).to.include({ code: 'account_exists' }).and.to.have.deep.property('details', { accountId: account3 });
    await eventually(async () => (await cli('block', 'list')).out.some((b: { motorBlockId: string }) => b.motorBlockId === winners[0].motorBlockId), 10_000);
    await expectFinished(winners[0], account3, 'race3.resume.example.test');
    const domains = (await motor.rt.db.raw(`select count(*)::int as n from events where type = 'DomainAdded' and data->>'accountId' = ?`, [account3])).rows[0].n;
    expect(domains).to.equal(1);
  });

  it('not a bootstrap\'s account: one whose list names no block, and one whose block create by its user stopped, are account_exists and are left as they are', async () => {
    for (const [i, blocks] of [[], [randomUUID()]].entries()) {
      const email = `dash${i}@resume.example.test`;
      const accountId = randomUUID();
      const userId = randomUUID();
      const at = new Date().toISOString();
      await motor.rt.store.append(`accountEmail-${accountEmailId(email)}`, [toEventData(newId(), {
        type: 'AccountEmailClaimed', data: { email, accountId, claimedAt: at },
      }, { actor: `user:${userId}` })], { expectedRevision: 'no_stream' });
      // As the first dashboard password makes it (commands/auth/onboarding.ts), then a block create that stopped after recording its id.
      await motor.rt.store.append(`account-${accountId}`, [
        { type: 'AccountCreated', data: { accountId, email, plan: motor.config.defaultPlan.name, createdAt: at } },
        { type: 'AccountBlocksListed', data: { accountId, motorBlockIds: [], listedAt: at } },
      ].map((e) => toEventData(newId(), e as DomainEvent, { actor: `user:${userId}` })), { expectedRevision: 'no_stream' });
      for (const motorBlockId of blocks) {
        await motor.rt.store.append(`account-${accountId}`, [toEventData(newId(), {
          type: 'AccountBlockAdded', data: { accountId, motorBlockId, addedAt: new Date().toISOString() },
        }, { actor: `user:${userId}` })], { expectedRevision: 1n });
      }
      const before = (await motor.rt.db.raw(`select count(*)::int as n from events`)).rows[0].n;
      const r = await cli('bootstrap', '--email', email, '--domain', `dash${i}.resume.example.test`, '--trust-dns');
      expect(r.code).to.equal(1);
      expect(r.out).to.include({ error: 'account_exists', accountId });
      expect((await motor.rt.db.raw(`select count(*)::int as n from events`)).rows[0].n, 'nothing appended').to.equal(before);
      for (const motorBlockId of blocks) expect(await blockCreations(motorBlockId)).to.equal(0);
    }
  });
});

/** The same refusal for the owner of a dashboard account and for the service's own sender (the system account). */
describe('CLI bootstrap of a dashboard or system address (int)', function () {
  this.timeout(120_000);
  let h: AuthHarness;
  before(async () => { h = await startAuthHarness(); });
  after(async () => { await h?.close(); });

  // The Motor here delivers mail in the background: count only what a bootstrap would append.
  const bootstrapEvents = async () => (await h.motor.rt.db.raw(
    `select count(*)::int as n from events where type = any(?)`, [['AccountCreated', 'DomainAdded', 'MotorBlockCreated', 'ApiKeyCreated']],
  )).rows[0].n as number;
  const cli = (...args: string[]) => runCli(h.motor, args, { SYSTEM_MAIL_FROM: 'no-reply@motor.test' });

  it('SYSTEM_MAIL_FROM, even before the system account is provisioned: account_exists with the system account id', async () => {
    const before = await bootstrapEvents();
    const r = await cli('bootstrap', '--email', 'No-Reply@Motor.test', '--domain', 'sys.boot.example.test', '--trust-dns');
    expect(r.code).to.equal(1);
    expect(r.out).to.include({ error: 'account_exists', accountId: systemIds('no-reply@motor.test').accountId });
    expect(await bootstrapEvents()).to.equal(before);
  });

  it('the address of a dashboard account: account_exists with that account', async () => {
    const { accountId } = await h.signUp('dash@rcpt.test');
    const before = await bootstrapEvents();
    const r = await cli('bootstrap', '--email', 'Dash@RCPT.test', '--domain', 'dash.boot.example.test', '--trust-dns');
    expect(r.code).to.equal(1);
    expect(r.out).to.include({ error: 'account_exists', accountId });
    expect(await bootstrapEvents()).to.equal(before);
  });
});

/** `npm run cli -- block set-limits`: the block's configured send limits. */
describe('CLI block set-limits (int)', function () {
  this.timeout(120_000);
  let motor: TestMotor;
  let block: Awaited<ReturnType<TestMotor['bootstrap']>>;

  before(async () => {
    motor = await startTestMotor({ roles: ['api', 'projector'] });
    block = await motor.bootstrap({ email: 'limits@example.test', domain: 'limits.example.test' });
  });
  after(async () => { await motor?.close(); });

  const cli = (...args: string[]) => runCli(motor, args);

  it('applied, also for an upper-case id; a limit beyond what the directory stores is refused before anything is appended', async () => {
    const ok = await cli('block', 'set-limits', block.motorBlockId.toUpperCase(), '--burst', '5', '--hourly', '50', '--daily', '500');
    expect(ok).to.deep.equal({ code: 0, out: { motorBlockId: block.motorBlockId, limits: { burst: 5, hourly: 50, daily: 500 } } });

    const before = (await motor.rt.store.readStream(`motorBlock-${block.motorBlockId}`)).length;
    const huge = await cliStderr(['block', 'set-limits', block.motorBlockId, '--burst', '5', '--hourly', '50', '--daily', '3000000000'], { DATABASE_URL: motor.rt.databaseUrl });
    expect(huge.code).to.equal(2);
    expect(huge.stderr).to.include('--daily must be an integer from 1 to 2147483647');
    expect((await motor.rt.store.readStream(`motorBlock-${block.motorBlockId}`)).length, 'nothing appended').to.equal(before);

    // The directory keeps projecting.
    const next = await cli('block', 'set-limits', block.motorBlockId, '--burst', '6', '--hourly', '60', '--daily', '600');
    expect(next).to.deep.equal({ code: 0, out: { motorBlockId: block.motorBlockId, limits: { burst: 6, hourly: 60, daily: 600 } } });
  });
});

/** `npm run cli -- account set-plan`: an operator moves an account to another plan; every reader of the plan follows. */
describe('CLI account set-plan (int)', function () {
  this.timeout(120_000);
  let motor: TestMotor;
  let acct: Awaited<ReturnType<TestMotor['bootstrap']>>;
  let token: string;

  before(async () => {
    // The default plan allows one block, which bootstrap makes: a create is refused until an upgrade.
    motor = await startTestMotor({ roles: ['api', 'projector'], env: { PLAN_DEFAULT_MAX_BLOCKS: '1' } });
    acct = await motor.bootstrap({ email: 'upgrade@example.test', domain: 'upgrade.example.test' });
    token = await motor.token(acct, ['config.manage', 'usage.read']);
  });
  after(async () => { await motor?.close(); });

  const cli = (...args: string[]) => runCli(motor, args);
  const createBlock = (name: string) => call(motor, 'POST', '/account/motor-blocks', token, { name, domainId: acct.domainId }, { 'Idempotency-Key': randomUUID() });
  const accountHourly = async () => (await call(motor, 'GET', '/account/rate-limits', token)).body.data.hourly.limit;
  const dryRun = async () => {
    const res = await fetch(`${motor.baseUrl}/v1/send`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': acct.apiKey },
      body: JSON.stringify({ from: 'app@upgrade.example.test', to: 'someone@example.com', subject: 'Hi', text: 'Hello', dryRun: true }),
    });
    return { status: res.status, code: ((await res.json()) as { code?: string }).code ?? null };
  };
  const planEvents = async () => (await motor.rt.store.readStream(`account-${acct.accountId}`))
    .filter((e) => e.type === 'AccountPlanChanged').map((e) => [e.data, e.metadata?.actor]);

  it('default → free → starter: maxBlocks, the account ceilings and the Free-plan recipient rule follow; the same plan again changes nothing', async () => {
    const refused = await createBlock('Second');
    expect([refused.status, refused.body.code, refused.body.limit]).to.deep.equal([409, 'motor_block_limit_reached', 1]);
    expect(await accountHourly()).to.equal(motor.config.defaultPlan.accountHourly);
    expect(await dryRun()).to.deep.equal({ status: 200, code: null });

    const free = await cli('account', 'set-plan', acct.accountId.toUpperCase(), 'free');
    expect(free).to.deep.equal({ code: 0, out: { accountId: acct.accountId, plan: 'free', previousPlan: 'default', changed: true } });
    expect(await dryRun(), 'a Free account sends only to itself and its confirmed free recipients').to.deep.equal({ status: 403, code: 'recipient_not_permitted' });
    expect(await accountHourly()).to.equal(200);

    const again = await cli('account', 'set-plan', acct.accountId, 'free');
    expect(again).to.deep.equal({ code: 0, out: { accountId: acct.accountId, plan: 'free', previousPlan: 'free', changed: false } });
    expect(await planEvents(), 'nothing appended by the repeat').to.have.length(1);

    const starter = await cli('account', 'set-plan', acct.accountId, 'starter');
    expect(starter).to.deep.equal({ code: 0, out: { accountId: acct.accountId, plan: 'starter', previousPlan: 'free', changed: true } });
    const created = await createBlock('Second');
    expect(created.status, JSON.stringify(created.body)).to.equal(201);
    expect(await accountHourly()).to.equal(10_000);
    expect(await dryRun()).to.deep.equal({ status: 200, code: null });
    const state = await call(motor, 'GET', '/account/state', token);
    expect(state.body.data.plan).to.equal('starter');

    const at = (await planEvents()).map(([d]) => (d as { changedAt: string }).changedAt);
    expect(await planEvents()).to.deep.equal([
      [{ accountId: acct.accountId, plan: 'free', previousPlan: 'default', changedAt: at[0] }, 'cli'],
      [{ accountId: acct.accountId, plan: 'starter', previousPlan: 'free', changedAt: at[1] }, 'cli'],
    ]);
  });

  it('an unknown plan or account: exit 1 with unknown_plan / not_found, nothing appended; malformed arguments: exit 2', async () => {
    const before = (await motor.rt.store.readStream(`account-${acct.accountId}`)).length;
    const unknownPlan = await cli('account', 'set-plan', acct.accountId, 'gold');
    expect([unknownPlan.code, unknownPlan.out?.error]).to.deep.equal([1, 'unknown_plan']);
    expect(unknownPlan.out.message).to.include('starter');
    const unknownAccount = await cli('account', 'set-plan', '0193a5f0-0000-7000-8000-00000000beef', 'pro');
    expect([unknownAccount.code, unknownAccount.out?.error]).to.deep.equal([1, 'not_found']);
    expect(await motor.rt.store.readStream('account-0193a5f0-0000-7000-8000-00000000beef')).to.deep.equal([]);
    expect((await motor.rt.store.readStream(`account-${acct.accountId}`)).length, 'nothing appended').to.equal(before);
    for (const args of [['account', 'set-plan', 'nope', 'pro'], ['account', 'set-plan', acct.accountId], ['account', 'set-plan', acct.accountId, 'pro', 'stray']]) {
      expect((await cli(...args)).code, args.join(' ')).to.equal(2);
    }
  });

  it('a replay of the directory from the start gives the same accounts (plan and revision)', async () => {
    const live = await eventually(async () => {
      const d = await dumpTables(motor.rt.db, 'rm_directory', ['accounts']);
      return d.accounts.some((j) => j.includes('"plan":"starter"')) ? d : null;
    });
    await rebuild(motor.rt.db, motor.rt.store, directoryProjection);
    expect(await dumpTables(motor.rt.db, 'rm_directory', ['accounts'])).to.deep.equal(live);
  });
});
