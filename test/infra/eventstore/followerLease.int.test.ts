import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import type { Knex } from 'knex';
import pg from 'pg';
import type { EventData, EventStore } from '../../../domain/eventStore';
import { createDb } from '../../../infra/db';
import { createEventStore } from '../../../infra/eventstore';
import { followLogAlone, followerLockName } from '../../../infra/eventstore/followerLease';
import { LEASE_IDLE_TIMEOUT_MS } from '../../../infra/lease';
import { createLogger } from '../../../infra/logger';
import { createMetrics } from '../../../infra/metrics';
import { CheckpointWriter, initCheckpoints } from '../../../workers/logEnqueuer';
import { createTestDatabase } from '../../support/db';
import { startPausableProxy } from '../../support/pausableProxy';
import { eventually } from '../../support/motor';

/**
 * A log follower's lease over real PostgreSQL: two followers of one name, each on a pool of its own
 * (two processes, as far as PostgreSQL can tell), follow the log one at a time; the other takes
 * over when the holder's session is terminated or the holder stops, from the shared checkpoint,
 * and no event is lost on the way.
 */
describe('log follower lease: one process at a time, with takeover (int)', function () {
  this.timeout(60_000);
  const TYPE = 'LeaseTestHappened';
  const RETRY_MS = 200;
  let drop: () => Promise<void>;
  let url: string;
  let store: EventStore;
  let admin: pg.Client;
  const pools: Knex[] = [];
  const runningFollowers: Array<() => Promise<void>> = [];

  before(async () => {
    const t = await createTestDatabase('follower_lease');
    drop = t.drop;
    url = t.url;
    store = await createEventStore({ databaseUrl: url, eventstoreUrl: null });
    admin = new pg.Client({ connectionString: url });
    await admin.connect();
    const setup = createDb(url);
    await initCheckpoints(setup);
    await setup.destroy();
  });
  after(async () => {
    // A test that failed half-way leaves its followers running, with a connection out of their pool.
    for (const stop of runningFollowers) await stop();
    for (const db of pools) await db.destroy();
    await admin.end();
    await store.close();
    await drop();
  });

  const ev = (n: number): EventData => ({ id: randomUUID(), type: TYPE, version: 1, data: { n } });
  /** Appends `ns`, one event each; returns their ids. */
  const append = async (ns: number[]) => {
    const events = ns.map(ev);
    await store.append(`leaseTest-${randomUUID()}`, events);
    return events.map((e) => e.id);
  };
  /** The sessions of this database holding the lease of `name` (pg_locks is the cluster's). */
  const holders = async (name: string): Promise<number[]> => (await admin.query(
    `select pid from pg_locks where locktype = 'advisory' and granted and objsubid = 1
       and database = (select oid from pg_database where datname = current_database())
       and ((classid::bigint << 32) | objid::bigint) = hashtextextended($1, 0)`, [followerLockName(name)])).rows.map((r: { pid: number }) => r.pid);

  /** A follower of `name` as a process would run it: its own pool, metrics, log lines, and the shared checkpoint row. */
  function startFollower(name: string, db = createDb(url)) {
    pools.push(db);
    const lines: string[] = [];
    const logger = createLogger('info', {}, { write: (line: string) => { lines.push(line); } });
    const metrics = createMetrics();
    const handled: string[] = [];
    let batches = 0;
    const abort = new AbortController();
    // Every batch's position written at once (interval 0): a takeover starts where the holder was.
    const checkpoint = new CheckpointWriter(db, name, logger, 0);
    const running = followLogAlone({ db, store, logger, metrics }, {
      name, types: [TYPE], leaseRetryMs: RETRY_MS,
      start: () => checkpoint.restart(),
      handle: async (batch) => {
        if (batch.events.length > 0) batches++;
        handled.push(...batch.events.map((e) => e.id));
        await checkpoint.save(batch.position);
      },
      stopped: () => checkpoint.flush(),
    }, abort.signal);
    const stop = async () => { abort.abort(); await running; };
    runningFollowers.push(stop);
    return {
      db, lines, handled, running,
      get batches() { return batches; },
      leader: async () => (await metrics.logFollowerLeader.get()).values.find((v) => v.labels.follower === name)?.value,
      stop,
    };
  }
  type Follower = ReturnType<typeof startFollower>;
  const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));
  const handledAll = (followers: Follower[], ids: string[]) => eventually(async () => {
    const seen = new Set(followers.flatMap((f) => f.handled));
    return ids.every((id) => seen.has(id));
  }, 10_000);
  /** Which of the two holds the lease, by their motor_log_follower_leader; one session holds the lock. */
  async function leaderOf(name: string, a: Follower, b: Follower): Promise<[Follower, Follower]> {
    expect(await holders(name)).to.have.length(1);
    const [la, lb] = [await a.leader(), await b.leader()];
    expect([la, lb].sort(), 'one leader, one standing by').to.deep.equal([0, 1]);
    return la === 1 ? [a, b] : [b, a];
  }

  it('only the holder handles batches; terminating its lock session hands over, and nothing appended is lost', async () => {
    const name = `lease-${randomUUID()}`;
    const before = await append([1, 2, 3]);
    const a = startFollower(name);
    const b = startFollower(name);
    await handledAll([a, b], before);
    const [leader, standby] = await leaderOf(name, a, b);
    const more = await append([4, 5, 6]);
    await handledAll([a, b], more);
    // Several retry intervals: the one standing by would have taken the lease by now if it could.
    await pause(RETRY_MS * 4);
    expect(leader.handled).to.include.members([...before, ...more]);
    expect(standby.batches, 'batches handled by the process standing by').to.equal(0);
    expect(standby.handled).to.deep.equal([]);

    // The holder's session ends from outside (as when its process dies or the server drops it).
    const [pid] = await holders(name);
    await admin.query('select pg_terminate_backend($1)', [pid]);
    await eventually(async () => (await standby.leader()) === 1, 5_000);
    expect(await leader.leader(), 'the old holder stands by').to.equal(0);
    const afterTakeover = await append([7, 8, 9]);
    await handledAll([standby], afterTakeover);
    await pause(RETRY_MS * 4);
    // The old holder stopped following, and did not take the lease back from the new one.
    expect(leader.handled.filter((id) => afterTakeover.includes(id))).to.deep.equal([]);
    // At least once: every event was handled by one or the other.
    const union = new Set([...leader.handled, ...standby.handled]);
    for (const id of [...before, ...more, ...afterTakeover]) expect(union.has(id), id).to.equal(true);
    expect(leader.lines.some((l) => l.includes('lost a log follower') && l.includes(name)), 'the loss is logged').to.equal(true);
    expect(standby.lines.some((l) => l.includes('took a log follower') && l.includes(name)), 'the takeover is logged').to.equal(true);
    expect(await holders(name)).to.have.length(1);

    await leader.stop();
    await standby.stop();
    expect(await holders(name), 'shutdown gives the lease up').to.deep.equal([]);
  });

  it('a holder that stops (shutdown) gives the lease up at once, and the other follows on from its checkpoint', async () => {
    const name = `lease-${randomUUID()}`;
    const a = startFollower(name);
    const b = startFollower(name);
    const first = await append([1, 2]);
    await handledAll([a, b], first);
    const [leader, standby] = await leaderOf(name, a, b);
    await leader.stop();
    expect(await leader.leader()).to.equal(0);
    await eventually(async () => (await standby.leader()) === 1, 5_000);
    const next = await append([3, 4]);
    await handledAll([standby], next);
    // From the checkpoint the holder wrote as it stopped: nothing before it is handled again.
    expect(standby.handled.filter((id) => first.includes(id))).to.deep.equal([]);
    await standby.stop();
    // Every pooled connection is back: the lease session was given back to its pool.
    for (const f of [a, b]) expect((f.db.client as { pool: { numUsed(): number } }).pool.numUsed()).to.equal(0);
  });

  it('a holder cut off from the server (its connection open, nothing passing) loses its lease within the idle timeout, and the other takes over', async function () {
    this.timeout(LEASE_IDLE_TIMEOUT_MS + 30_000);
    const name = `lease-${randomUUID()}`;
    const u = new URL(url);
    const proxy = await startPausableProxy({ host: u.hostname, port: Number(u.port || 5432) });
    try {
      u.host = `127.0.0.1:${proxy.port}`;
      const cutOff = startFollower(name, createDb(u.toString(), { queryTimeoutMs: 2_000, logger: createLogger('silent') }));
      await eventually(async () => (await cutOff.leader()) === 1, 5_000);
      const other = startFollower(name);
      await pause(RETRY_MS * 3);
      expect(await other.leader()).to.equal(0);
      // The holder's host freezes, or a black hole opens: the server keeps the session (and its
      // locks) until something ends it; TCP keepalive would take hours.
      proxy.cutOff();
      const started = Date.now();
      await eventually(async () => (await other.leader()) === 1, LEASE_IDLE_TIMEOUT_MS + 10_000);
      expect(Date.now() - started).to.be.at.least(LEASE_IDLE_TIMEOUT_MS - 1_000);
      const ids = await append([1, 2]);
      await handledAll([other], ids);
      expect(await cutOff.leader(), 'the cut-off holder stopped on its own deadline').to.equal(0);
      await other.stop();
      await cutOff.stop();
    } finally {
      await proxy.close();
    }
  });

  it('the lease session goes back to the pool without its idle timeout', async () => {
    const name = `lease-${randomUUID()}`;
    const db = createDb(url, { pool: { min: 0, max: 2 } });
    const f = startFollower(name, db);
    await eventually(async () => (await f.leader()) === 1, 5_000);
    await f.stop();
    // Both connections of the pool, the one the lease was held on among them.
    const conns = [await db.client.acquireConnection(), await db.client.acquireConnection()];
    for (const conn of conns) {
      const { rows } = await db.raw('show idle_session_timeout').connection(conn);
      expect(rows[0].idle_session_timeout).to.equal('0');
      await db.client.releaseConnection(conn);
    }
  });

  it('two followers of one name on one pool: only one follows (the lock is re-entrant within a session)', async () => {
    const name = `lease-${randomUUID()}`;
    const db = createDb(url);
    const a = startFollower(name, db);
    const b = startFollower(name, db);
    const ids = await append([1, 2, 3]);
    await handledAll([a, b], ids);
    await pause(RETRY_MS * 4);
    expect([a.batches > 0, b.batches > 0].filter(Boolean)).to.have.length(1);
    await a.stop();
    await b.stop();
  });

  it('followers of different names hold their leases side by side on one session', async () => {
    const db = createDb(url);
    const [x, y] = [startFollower(`lease-x-${randomUUID()}`, db), startFollower(`lease-y-${randomUUID()}`, db)];
    const ids = await append([1]);
    await handledAll([x], ids);
    await handledAll([y], ids);
    expect([await x.leader(), await y.leader()]).to.deep.equal([1, 1]);
    await x.stop();
    // The other lease is still held on the session kept for it.
    const more = await append([2]);
    await handledAll([y], more);
    await y.stop();
  });
});
