import { randomBytes, randomUUID } from 'node:crypto';
import { expect } from 'chai';
import type { Knex } from 'knex';
import pg from 'pg';
import { createDb } from '../../infra/db.js';
import { PostgresEventStore } from '../../infra/eventstore/postgres/postgresEventStore.js';
import { createLogger } from '../../infra/logger.js';
import { ProjectionRunner, projectionLeaseName, rebuild, type Projection } from '../../projections/runner.js';
import { allProjections } from '../../projections/index.js';
import { bootstrap } from '../../commands/admin/bootstrap.js';
import { getBlock } from '../../projections/directory/queries.js';
import { createRuntime, startRoles, type Runtime, type StartedRoles } from '../../scripts/runtime.js';
import { createTestDatabase } from '../support/db.js';
import { eventually, startTestMotor, type TestMotor } from '../support/motor.js';
import { waitFor } from './fixtures.js';

/** Counts applications: a tick applied twice violates the primary key, one lost leaves the total short. */
const ticking: Projection = {
  name: 'ticking',
  handles: ['Tick'],
  migrations: [{
    name: '001_ticks',
    async up(knex, schema) {
      await knex.schema.withSchema(schema).createTable('ticks', (t) => { t.text('event_id').primary(); });
    },
  }],
  async applyBatch(trx, schema, events) {
    await trx.withSchema(schema).table('ticks').insert(events.map((e) => ({ event_id: e.id })));
  },
};

/**
 * A projection's lease over real PostgreSQL: two live runners of one projection, each on a pool of
 * its own (two projector processes, as far as PostgreSQL can tell), apply its batches one at a
 * time; the other takes over when the holder's session ends, and a rebuild swaps its schema in
 * under the holder, which keeps its lease and goes on.
 */
describe('projection lease: one projector process per projection at a time (int)', function () {
  this.timeout(120_000);
  const RETRY_MS = 200;
  let dbh: { url: string; drop: () => Promise<void> };
  let store: PostgresEventStore;
  let admin: pg.Client;
  const pools: Knex[] = [];
  const running: Array<() => Promise<void>> = [];

  before(async () => {
    dbh = await createTestDatabase('proj_lease');
    store = new PostgresEventStore(dbh.url, { pollIntervalMs: 50 });
    await store.init();
    admin = new pg.Client({ connectionString: dbh.url });
    await admin.connect();
  });
  after(async () => {
    // A test that failed half-way leaves its runners going, with a connection out of their pool.
    for (const stop of running) await stop();
    for (const db of pools) await db.destroy();
    await admin.end();
    await store.close();
    await dbh.drop();
  });

  const tick = async (n: number): Promise<void> => {
    for (let i = 0; i < n; i++) await store.append(`tick-${randomUUID()}`, [{ id: randomUUID(), type: 'Tick', version: 1, data: {} }]);
  };
  const applied = async (): Promise<number> => (await admin.query('select count(*)::int as n from rm_ticking.ticks')).rows[0].n;
  /** The sessions holding the projection's lease (pg_locks is the cluster's). */
  const holders = async (): Promise<number[]> => (await admin.query(
    `select pid from pg_locks where locktype = 'advisory' and granted and objsubid = 1
       and database = (select oid from pg_database where datname = current_database())
       and ((classid::bigint << 32) | objid::bigint) = hashtextextended($1, 0)`, [projectionLeaseName(ticking.name)])).rows.map((r: { pid: number }) => r.pid);

  /** A projector process's live runner of `ticking`: its own pool, its log lines and its leader state. */
  async function startProjector() {
    const db = createDb(dbh.url);
    pools.push(db);
    const lines: string[] = [];
    const logger = createLogger('info', {}, { write: (line: string) => { lines.push(line); } });
    const runner = new ProjectionRunner(db, store, ticking, { batchSize: 20, logger });
    await runner.init();
    let leader: boolean | null = null;
    const abort = new AbortController();
    const done = runner.runAlone(abort.signal, { retryMs: RETRY_MS, leading: (held) => { leader = held; } });
    const stop = async () => { abort.abort(); await done; };
    running.push(stop);
    return { runner, lines, stop, get leader() { return leader; } };
  }
  type Projector = Awaited<ReturnType<typeof startProjector>>;
  const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));
  async function leaderOf(a: Projector, b: Projector): Promise<[Projector, Projector]> {
    expect(await holders()).to.have.length(1);
    expect([a.leader, b.leader].sort(), 'one leader, one standing by').to.deep.equal([false, true]);
    return a.leader ? [a, b] : [b, a];
  }

  it('only the holder applies batches (no batch read twice, none dropped); terminating its lease session hands over', async () => {
    const a = await startProjector();
    const b = await startProjector();
    await tick(60);
    await waitFor(async () => (await applied()) === 60);
    // Several retry intervals: the one standing by would have taken the lease by now if it could.
    await pause(RETRY_MS * 4);
    const [leader, standby] = await leaderOf(a, b);
    expect(leader.runner.stats().eventsApplied).to.equal(60);
    expect(standby.runner.stats(), 'the process standing by read nothing and lost no race').to.include({ batches: 0, conflicts: 0, eventsApplied: 0 });
    expect(leader.runner.stats().conflicts, 'no batch dropped for a race').to.equal(0);

    // The holder's lease session ends from outside (as when its process dies or the server drops it).
    const [pid] = await holders();
    await admin.query('select pg_terminate_backend($1)', [pid]);
    await eventually(async () => standby.leader === true, 5_000);
    expect(leader.leader, 'the old holder stands by').to.equal(false);
    const before = leader.runner.stats().batches;
    await tick(40);
    await waitFor(async () => (await applied()) === 100);
    await pause(RETRY_MS * 4);
    expect(standby.runner.stats().eventsApplied).to.equal(40);
    expect(leader.runner.stats().batches, 'the old holder stopped projecting and did not take the lease back').to.equal(before);
    expect(leader.lines.some((l) => l.includes('lost a projection\'s lease') && l.includes('"projection":"ticking"')), 'the loss is logged').to.equal(true);
    expect(standby.lines.some((l) => l.includes('took a projection\'s lease') && l.includes('"projection":"ticking"')), 'the takeover is logged').to.equal(true);

    await standby.stop();
    expect(standby.leader).to.equal(false);
    // A holder that stops gives the lease up at once: the other takes it at its next try.
    await eventually(async () => leader.leader === true, 5_000);
    await leader.stop();
    expect(await holders(), 'shutdown gives the lease up').to.deep.equal([]);
  });

  it('a rebuild swaps its copy in under the holder, which keeps its lease and projects on into the swapped-in schema', async () => {
    const start = await applied();
    const a = await startProjector();
    const b = await startProjector();
    await tick(30);
    await waitFor(async () => (await applied()) === start + 30);
    const [leader, standby] = await leaderOf(a, b);
    const [pid] = await holders();

    const replayDb = createDb(dbh.url);
    pools.push(replayDb);
    const result = await rebuild(replayDb, store, ticking, { batchSize: 50 });
    expect(result.applied).to.equal(start + 30);
    expect(await holders(), 'the lease is the projection\'s, not its schema\'s: same holder after the swap').to.deep.equal([pid]);
    expect(leader.leader).to.equal(true);

    const before = leader.runner.stats().eventsApplied;
    await tick(25);
    await waitFor(async () => (await applied()) === start + 55);
    expect(leader.runner.stats().eventsApplied - before, 'applied by the holder, into the rebuilt schema').to.equal(25);
    expect(standby.runner.stats().batches).to.equal(0);
    await a.stop();
    await b.stop();
  });
});

/**
 * Two Motors' projector roles on one database (two projector processes): each projection is led by
 * one of them (motor_projection_leader adds up to 1), and when one stops the other leads them all
 * and keeps the read models moving.
 */
describe('projector role in two processes on one database (int)', function () {
  this.timeout(120_000);
  let motor: TestMotor;
  let rt2: Runtime;
  let started2: StartedRoles;

  before(async () => {
    motor = await startTestMotor({ roles: ['projector'] });
    rt2 = await createRuntime(motor.config, {
      databaseUrl: motor.rt.databaseUrl, redisUrl: motor.rt.redisUrl, logger: createLogger('silent'), directoryTtlMs: 0,
      queuePrefix: `motor-test-${randomBytes(4).toString('hex')}`,
    });
    started2 = await startRoles(rt2, ['projector']);
  });
  after(async () => {
    await started2?.stop();
    await rt2?.close();
    await motor?.close();
  });

  const leaders = async (rt: Runtime): Promise<Record<string, number>> =>
    Object.fromEntries((await rt.metrics.projectionLeader.get()).values.map((v) => [v.labels.projection, v.value]));

  it('each projection is led by one of them; the other takes them all over when it stops', async () => {
    const names = allProjections().map((p) => p.name);
    await eventually(async () => {
      const [one, two] = [await leaders(motor.rt), await leaders(rt2)];
      return names.every((n) => (one[n] ?? 0) + (two[n] ?? 0) === 1);
    }, 20_000);

    await motor.started.stop();
    expect(Object.values(await leaders(motor.rt)).every((v) => v === 0), 'the stopped one leads nothing').to.equal(true);
    await eventually(async () => {
      const two = await leaders(rt2);
      return names.every((n) => two[n] === 1);
    }, 20_000);
    // The directory is projected by the other process alone (no catch-up of the test's own).
    const b = await bootstrap(rt2.store, rt2.keys, {
      email: 'lease@example.test', domain: `d${randomBytes(4).toString('hex')}.example.test`, trustDns: true, dkimAlgorithm: 'rsa-sha256',
      plan: motor.config.defaultPlan.name, serviceDomain: motor.config.serviceDomain, now: new Date(),
    });
    await eventually(async () => (await getBlock(rt2.db, b.motorBlockId)) !== null, 20_000);
  });
});
