import type { ChildProcess } from 'node:child_process';
import { expect } from 'chai';
import type { BootstrapResult } from '../../commands/admin/bootstrap';
import type { RecordedEvent } from '../../domain/eventStore';
import { IN_FLIGHT_STALE_MS } from '../../domain/message/message';
import { followerLockName } from '../../infra/eventstore/followerLease';
import { leaseHolders } from '../../infra/lease';
import { allProjections } from '../../projections';
import { messagesProjection } from '../../projections/messages/projection';
import { projectionLeaseName, rebuild } from '../../projections/runner';
import { DELIVERY_ENQUEUER, LOG_FOLLOWERS } from '../../workers/followers';
import { MESSAGE_TABLES, dumpTables } from '../projections/fixtures';
import { startDnsServer, type TestDnsServer } from '../support/dnsServer';
import { startSmtpSink, type SmtpSink } from '../support/smtpSink';
import { startRoleProcess } from '../support/workerProcess';
import { eventually, getJson, postJson, startTestMotor, type TestMotor } from '../support/motor';

/**
 * The leases' takeovers lose nothing (infra/lease.ts): the API runs here, two worker processes and
 * two projector processes as children, and while messages keep arriving the test SIGKILLs, three
 * times each, whichever worker holds the delivery enqueuer's lease and whichever projector holds
 * the messages projection's, and starts a replacement each time; then ends the holder's database
 * session once under a process that lives on. Every accepted message must reach
 * the MX and end `delivered`, the messages read model must equal a from-scratch rebuild, and
 * neither checkpoint may move backwards.
 *
 * A worker killed mid-round leaves attempts in flight, retried once they are 10 minutes old
 * (docs/DELIVERY.md "When a worker dies"). So that this test need not wait for that, each worker
 * process runs with its clock 11 minutes ahead of the one started before it, and the holder
 * killed is always the oldest one alive (a replacement starts only once the survivor took the
 * lease over): whoever retakes a dead worker's job sees its attempts as stale.
 */
describe('lease takeovers under SIGKILL lose no message (e2e)', function () {
  this.timeout(240_000);
  const KILLS = 3;
  const MIN_MESSAGES = 300;
  const MAX_MESSAGES = 900;
  const CONCURRENCY = 8;
  const DOMAINS = ['rcpt1.test', 'rcpt2.test', 'rcpt3.test', 'rcpt4.test'];
  const GENERATION_MS = IN_FLIGHT_STALE_MS + 60_000;
  let dns: TestDnsServer;
  let mx: SmtpSink;
  let motor: TestMotor;
  let block: BootstrapResult;
  let env: Record<string, string>;
  const children: ChildProcess[] = [];

  async function start(roles: ['worker'] | ['projector'], clockOffsetMs: number): Promise<ChildProcess> {
    const child = await startRoleProcess(motor, roles, env, clockOffsetMs);
    children.push(child);
    return child;
  }

  const alive = (c: ChildProcess) => c.exitCode === null && c.signalCode === null;

  /** The child holding `lock` (its sessions are named `motor-<role>@<host>:<pid>`), or null. */
  async function holderOf(lock: string, among: ChildProcess[]): Promise<ChildProcess | null> {
    const holder = (await leaseHolders(motor.rt.db, [lock])).get(lock);
    return among.find((c) => holder?.applicationName?.endsWith(`:${c.pid}`)) ?? null;
  }

  before(async () => {
    const zones: Parameters<typeof startDnsServer>[0] = {};
    for (const d of DOMAINS) {
      zones[d] = { MX: [{ exchange: `mx.${d}`, priority: 10 }] };
      zones[`mx.${d}`] = { A: ['127.0.0.1'] };
    }
    dns = await startDnsServer(zones);
    // 100 ms per message at the MX: a kill finds rounds in the middle of their sessions.
    mx = await startSmtpSink({ starttls: false, data: async (): Promise<250> => { await new Promise((r) => setTimeout(r, 100)); return 250; } });
    env = {
      LOG_LEVEL: 'silent', TOKEN_SECRET: 'test-token-secret-0123456789abcdef0123', DNS_SERVERS: dns.address, MX_PORT: String(mx.port), MX_ALLOW_PRIVATE_ADDRESSES: 'true',
      DELIVERY_CONCURRENCY: String(CONCURRENCY), DELIVERY_JOB_LOCK_SECONDS: '2', API_REQUEST_LIMIT: '100000',
    };
    motor = await startTestMotor({ roles: ['api'], env });
    block = await motor.bootstrap();
    for (const r of block.dnsRecords) dns.addRecords(r.name, { TXT: [r.value] });
    await motor.setLimits(block.motorBlockId, { burst: 100_000, hourly: 100_000, daily: 100_000 });
  });
  after(async () => {
    for (const c of children) if (alive(c)) c.kill('SIGKILL');
    await motor?.rt.queue.obliterate({ force: true }).catch(() => undefined);
    await motor?.close();
    await mx?.close();
    await dns?.close();
  });

  it(`every accepted message is delivered through ${KILLS} takeovers of each lease`, async () => {
    const enqueuerLock = followerLockName(DELIVERY_ENQUEUER);
    const projectionLock = projectionLeaseName(messagesProjection.name);

    // The first of each pair takes the lease before the second starts: the holder is the oldest.
    let generation = 0;
    const workers = [await start(['worker'], 0)];
    await eventually(() => holderOf(enqueuerLock, workers), 30_000, 100);
    workers.push(await start(['worker'], ++generation * GENERATION_MS));
    const projectors = [await start(['projector'], 0)];
    await eventually(() => holderOf(projectionLock, projectors), 30_000, 100);
    projectors.push(await start(['projector'], 0));

    // Neither checkpoint may go backwards across a takeover (the next holder starts from it).
    const checkpoints = { enqueuer: [] as string[], projection: [] as string[] };
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        const e = await motor.rt.db.raw('select position from motor_workers.checkpoints where name = ?', [DELIVERY_ENQUEUER]).catch(() => ({ rows: [] }));
        const p = await motor.rt.db.raw('select position from rm_messages.projection_checkpoint').catch(() => ({ rows: [] }));
        if (e.rows[0]?.position) checkpoints.enqueuer.push(e.rows[0].position);
        if (p.rows[0]?.position) checkpoints.projection.push(p.rows[0].position);
        await new Promise((r) => setTimeout(r, 50));
      }
    })();

    // Messages keep arriving until every kill is done (at least MIN_MESSAGES).
    const from = `app@${block.dnsRecords.find((d) => d.purpose === 'spf')!.name}`;
    const ids: string[] = [];
    let killing = true;
    const sender = (async () => {
      for (let i = 0; (killing || i < MIN_MESSAGES) && i < MAX_MESSAGES; i += 10) {
        const batch = await Promise.all(Array.from({ length: 10 }, (_, j) => postJson(`${motor.baseUrl}/v1/send`, {
          from, to: `user${i + j}@${DOMAINS[(i + j) % DOMAINS.length]}`, subject: `takeover ${i + j}`, text: 'x',
        }, { 'x-api-key': block.apiKey })));
        for (const r of batch) {
          expect(r.status, JSON.stringify(r.body)).to.equal(200);
          ids.push(r.body.data.id);
        }
        await new Promise((r) => setTimeout(r, 150));
      }
    })();

    const log: string[] = [];
    /**
     * Kills the holder of `lock` KILLS times: each time once `progress` moved on, waiting for the
     * survivor to take the lease over before starting the replacement (so the holder stays the
     * oldest). Then ends the holder's session once.
     */
    async function killHolders(what: string, lock: string, group: ChildProcess[], progress: () => Promise<number>, step: number, nextOffset: () => number): Promise<void> {
      for (let k = 0; k < KILLS; k++) {
        const since = await progress();
        await eventually(async () => (await progress()) >= since + step, 60_000, 50);
        const holder = await eventually(() => holderOf(lock, group.filter(alive)), 30_000, 50);
        expect(holder, `${what}: the holder is the oldest process alive`).to.equal(group.filter(alive)[0]);
        const t0 = Date.now();
        holder.kill('SIGKILL');
        await new Promise((r) => holder.once('exit', r));
        const survivor = group.filter(alive)[0];
        await eventually(async () => (await holderOf(lock, [survivor])) === survivor, 30_000, 50);
        log.push(`${what} takeover ${k + 1} in ${Date.now() - t0} ms`);
        group.push(await start(what === 'worker' ? ['worker'] : ['projector'], nextOffset()));
      }
      // Last, the holder's session ended under a process that lives on (pg_terminate_backend, as
      // an operator moves a lease): it stops and stands by, the other takes over. Last, because the
      // old holder keeps delivering with the older clock.
      const since = await progress();
      await eventually(async () => (await progress()) >= since + step, 60_000, 50);
      const holder = await eventually(() => holderOf(lock, group.filter(alive)), 30_000, 50);
      const t0 = Date.now();
      await motor.rt.db.raw('select pg_terminate_backend(?)', [(await leaseHolders(motor.rt.db, [lock])).get(lock)!.pid]);
      const next = await eventually(async () => {
        const h = await holderOf(lock, group.filter(alive));
        return h && h !== holder ? h : null;
      }, 30_000, 50);
      expect(alive(holder), `${what}: the process whose session ended lives on`).to.equal(true);
      log.push(`${what} takeover from ${group.indexOf(holder)} to ${group.indexOf(next)} after its session ended in ${Date.now() - t0} ms`);
    }
    const delivered = async () => mx.messages.length;
    const projected = async () => Number((await motor.rt.db.raw('select events_applied::int as n from rm_messages.projection_checkpoint').catch(() => ({ rows: [{ n: 0 }] }))).rows[0]?.n ?? 0);
    const started = Date.now();
    await Promise.all([
      killHolders('worker', enqueuerLock, workers, delivered, 40, () => ++generation * GENERATION_MS),
      killHolders('projector', projectionLock, projectors, projected, 60, () => 0),
    ]).finally(() => { killing = false; });
    await sender;
    const N = ids.length;

    // No lease is left unheld: every follower and every projection resumed in a process alive.
    const everyLease = [...LOG_FOLLOWERS.map(followerLockName), ...allProjections().map((p) => projectionLeaseName(p.name))];
    const livePids = () => new Set(children.filter(alive).map((c) => `:${c.pid}`));
    const unheld = async () => [...await leaseHolders(motor.rt.db, everyLease)]
      .filter(([, h]) => !h || !livePids().has(h.applicationName?.slice(h.applicationName.lastIndexOf(':')) ?? '')).map(([lock]) => lock);
    try {
      await eventually(async () => (await unheld()).length === 0, 15_000, 200);
    } catch {
      expect(await unheld(), 'leases no live process holds').to.deep.equal([]);
    }

    // Every accepted message ends delivered: in the read model, then through the API.
    const count = async () => Number((await motor.rt.db.withSchema('rm_messages').table('messages').whereIn('id', ids).where('current_outcome', 'delivered').count({ n: '*' }))[0].n);
    try {
      await eventually(async () => (await count()) === N, 90_000, 250);
    } catch (err) {
      throw new Error(`${(err as Error).message}: ${await count()} of ${N} delivered in the read model; MX has ${mx.messages.length}; ${log.join('; ')}`);
    }
    const token = await motor.token(block, ['logs.read']);
    const notDelivered: string[] = [];
    for (let i = 0; i < N; i += 25) {
      await Promise.all(ids.slice(i, i + 25).map(async (id) => {
        const r = await getJson(`${motor.baseUrl}/api/public/v1/messages/${id}`, { authorization: `Bearer ${token}` });
        if (r.status !== 200 || r.body.data.currentOutcome !== 'delivered') notDelivered.push(`${id}: ${r.status} ${r.body?.data?.currentOutcome}`);
      }));
    }
    expect(notDelivered, 'GET /messages/{id} not delivered').to.deep.equal([]);

    // Each reached the MX; twice only where a worker died with the attempt in flight
    // (docs/DELIVERY.md "When a worker dies": a round with DeliveryStarted and no outcome).
    await new Promise((r) => setTimeout(r, 1000));
    const perMessage = new Map<string, number>();
    for (const m of mx.messages) {
      const id = /^Message-ID: <([^>]+)>/im.exec(m.raw.toString())?.[1].split('@')[0];
      if (id) perMessage.set(id, (perMessage.get(id) ?? 0) + 1);
    }
    expect(ids.filter((id) => !perMessage.has(id)), 'accepted but never reached the MX').to.deep.equal([]);
    let abandonedRounds = 0;
    const unexplained: string[] = [];
    for (const id of ids) {
      const events: RecordedEvent[] = await motor.rt.store.readStream(`message-${id}`);
      const rounds = new Set(events.filter((e) => e.type === 'DeliveryStarted').map((e) => e.metadata.correlationId));
      expect(rounds.has(undefined), 'every round names itself').to.equal(false);
      const finished = new Set(events.filter((e) => e.type !== 'DeliveryStarted' && e.type !== 'MessageAccepted').map((e) => e.metadata.correlationId));
      const abandoned = [...rounds].filter((r) => !finished.has(r)).length;
      abandonedRounds += abandoned;
      if ((perMessage.get(id) ?? 0) > 1 + abandoned) unexplained.push(`${id}: ${perMessage.get(id)} at the MX, ${abandoned} round(s) cut by a kill`);
    }
    const duplicates = [...perMessage.values()].filter((n) => n > 1).length;
    expect(unexplained, 'delivered twice without a crash mid-attempt').to.deep.equal([]);
    // Each kill cuts at most the rounds of the dead worker's slots.
    expect(abandonedRounds).to.be.at.most(KILLS * CONCURRENCY);

    // The read model equals a from-scratch rebuild, once the projector has read the whole log and
    // every process is gone (nothing appends, nothing applies any more).
    for (const w of workers.filter(alive)) w.kill('SIGKILL');
    const head = async () => (await motor.rt.db.raw(`select tx_id::text || ':' || global_position::text as p from events order by tx_id desc, global_position desc limit 1`)).rows[0].p as string;
    const projectionCheckpoint = async () => (await motor.rt.db.raw('select position from rm_messages.projection_checkpoint')).rows[0].position as string;
    await eventually(async () => (await projectionCheckpoint()) === (await head()), 30_000, 100);
    for (const p of projectors.filter(alive)) p.kill('SIGKILL');
    await Promise.all(children.filter(alive).map((c) => new Promise((r) => c.once('exit', r))));
    sampling = false;
    await sampler;

    const live = await dumpTables(motor.rt.db, 'rm_messages', MESSAGE_TABLES);
    const liveCheckpoint = await projectionCheckpoint();
    expect(live.messages.length).to.be.at.least(N);
    await rebuild(motor.rt.db, motor.rt.store, messagesProjection, { batchSize: 2000 });
    const rebuilt = await dumpTables(motor.rt.db, 'rm_messages', MESSAGE_TABLES);
    expect(await projectionCheckpoint()).to.equal(liveCheckpoint);
    for (const table of MESSAGE_TABLES) {
      const a = new Set(live[table]);
      const b = new Set(rebuilt[table]);
      expect({ table, onlyLive: live[table].filter((r) => !b.has(r)), onlyRebuilt: rebuilt[table].filter((r) => !a.has(r)) })
        .to.deep.equal({ table, onlyLive: [], onlyRebuilt: [] });
      expect(rebuilt[table].length).to.equal(live[table].length);
    }

    const order = (p: string) => p.split(':').map(BigInt);
    const backwards = (list: string[]) => list.filter((p, i) => {
      if (i === 0) return false;
      const [a, b] = [order(list[i - 1]), order(p)];
      return b[0] < a[0] || (b[0] === a[0] && b[1] < a[1]);
    });
    expect(backwards(checkpoints.enqueuer), 'the delivery enqueuer\'s checkpoint moved backwards').to.deep.equal([]);
    expect(backwards(checkpoints.projection), 'the messages projection\'s checkpoint moved backwards').to.deep.equal([]);

    console.log(`      ${N} messages in ${Math.round((Date.now() - started) / 1000)} s; ${log.join('; ')}; `
      + `${duplicates} delivered twice, ${abandonedRounds} round(s) cut by a kill`);
  });
});
