import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import type { Knex } from 'knex';
import { createDb } from '../../infra/db.js';
import { PostgresEventStore } from '../../infra/eventstore/postgres/postgresEventStore.js';
import { messagesProjection } from '../../projections/messages/projection.js';
import { getMessage, searchLogs } from '../../projections/messages/queries.js';
import { ProjectionRunner, rebuild, type Projection } from '../../projections/runner.js';
import { createTestDatabase } from '../support/db.js';
import { startPausableProxy } from '../support/pausableProxy.js';
import { MESSAGE_TABLES, acceptedEvent, appendTraffic, catchUpAll, dumpTables, recipientEvent, waitFor } from './fixtures.js';

const BLOCK = '22222222-2222-4222-8222-222222222222';

/** Counts applications: a duplicate application violates the primary key, a lost one leaves the sum short. */
const countingProjection: Projection = {
  name: 'counting',
  handles: ['Tick'],
  migrations: [
    {
      name: '001_ticks',
      async up(knex, schema) {
        await knex.schema.withSchema(schema).createTable('ticks', (t) => {
          t.text('event_id').primary();
        });
        await knex.schema.withSchema(schema).createTable('total', (t) => {
          t.integer('id').primary();
          t.integer('n').notNullable();
        });
        await knex.withSchema(schema).table('total').insert({ id: 1, n: 0 });
      },
    },
  ],
  async applyBatch(trx, schema, events) {
    await trx.withSchema(schema).table('ticks').insert(events.map((e) => ({ event_id: e.id })));
    await trx.withSchema(schema).table('total').where({ id: 1 }).increment('n', events.length);
    // Widen the race window.
    await new Promise((r) => setTimeout(r, 2));
  },
};

describe('ProjectionRunner (PostgreSQL, real event store)', function () {
  this.timeout(120_000);
  let dbh: { url: string; drop: () => Promise<void> };
  let db: Knex;
  let store: PostgresEventStore;

  beforeEach(async () => {
    dbh = await createTestDatabase('proj_runner');
    db = createDb(dbh.url, { pool: { min: 0, max: 12 } });
    store = new PostgresEventStore(dbh.url, { pollIntervalMs: 100 });
    await store.init();
  });
  afterEach(async () => {
    await store.close();
    await db.destroy();
    await dbh.drop();
  });

  it('catches up to the head, then has nothing to do; rows and checkpoint commit together', async () => {
    const { ids, eventCount: total } = await appendTraffic(store, { count: 60, motorBlockId: BLOCK });
    const runner = new ProjectionRunner(db, store, messagesProjection, { batchSize: 37 });
    await runner.init();
    expect(await catchUpAll(runner, total)).to.equal(total);
    expect(await runner.catchUp()).to.equal(0);
    const stats = runner.stats();
    expect(stats.eventsApplied + stats.eventsSkipped).to.equal(total);
    expect(stats.caughtUp).to.equal(true);
    expect(await runner.lag()).to.deep.equal({ eventsBehind: 0, capped: false, secondsBehind: 0 });
    const { rows } = await db.raw('select count(*)::int as n from rm_messages.messages');
    expect(rows[0].n).to.equal(60);
    const m = await getMessage(db, ids[0]);
    expect(m?.motorBlockId).to.equal(BLOCK);
    const cp = await db.raw('select position, events_applied::int + events_skipped::int as n from rm_messages.projection_checkpoint');
    expect(cp.rows[0].n).to.equal(total);
    expect(cp.rows[0].position).to.equal(await runner.checkpoint());
  });

  it('skips and counts events it does not handle, advancing the checkpoint even for an all-skipped batch', async () => {
    await store.append(`account-${randomUUID()}`, [
      { id: randomUUID(), type: 'AccountCreated', version: 1, data: {} },
      { id: randomUUID(), type: 'SomethingFromTheFuture', version: 7, data: { whatever: true } },
    ]);
    const runner = new ProjectionRunner(db, store, messagesProjection, { batchSize: 10 });
    await runner.init();
    expect(await catchUpAll(runner, 2)).to.equal(2);
    expect(runner.stats()).to.include({ eventsApplied: 0, eventsSkipped: 2, batches: 1 });
    expect(await runner.checkpoint()).to.be.a('string');
    const mid = randomUUID();
    await store.append(`message-${mid}`, [acceptedEvent(mid, BLOCK, ['a@x.test'], 0), { id: randomUUID(), type: 'DeliveryRerouted', version: 1, data: { messageId: mid } }]);
    expect(await catchUpAll(runner, 2)).to.equal(2);
    expect(runner.stats()).to.include({ eventsApplied: 1, eventsSkipped: 3 });
    expect((await getMessage(db, mid))?.currentOutcome).to.equal('queued');
  });

  it('two runners racing on one projection never apply an event twice nor lose one (checkpoint CAS)', async () => {
    const N = 400;
    for (let i = 0; i < N; i += 50) {
      await Promise.all(Array.from({ length: 50 }, () => store.append(`tick-${randomUUID()}`, [{ id: randomUUID(), type: 'Tick', version: 1, data: {} }])));
    }
    const a = new ProjectionRunner(db, store, countingProjection, { batchSize: 7 });
    const b = new ProjectionRunner(db, store, countingProjection, { batchSize: 11 });
    await Promise.all([a.init(), b.init()]);
    await waitFor(async () => {
      await Promise.all([a.catchUp(), b.catchUp()]);
      return a.stats().eventsApplied + b.stats().eventsApplied >= N;
    });
    const total = await db.raw('select n from rm_counting.total');
    const ticks = await db.raw('select count(*)::int as n from rm_counting.ticks');
    expect(total.rows[0].n).to.equal(N);
    expect(ticks.rows[0].n).to.equal(N);
    expect(a.stats().eventsApplied + b.stats().eventsApplied).to.equal(N);
  });

  it('drops a batch read after a stale checkpoint (compare-and-set)', async () => {
    for (let i = 0; i < 3; i++) await store.append(`tick-${randomUUID()}`, [{ id: randomUUID(), type: 'Tick', version: 1, data: {} }]);
    const runner = new ProjectionRunner(db, store, countingProjection, { batchSize: 10 });
    await runner.init();
    await catchUpAll(runner, 3);
    const head = await runner.checkpoint();
    const stale = await store.readAll({ after: null, maxCount: 10 });
    expect(await runner.applyEvents(null, stale)).to.deep.equal({ ok: false, position: head });
    expect(runner.stats().conflicts).to.equal(1);
    expect((await db.raw('select n from rm_counting.total')).rows[0].n).to.equal(3);
  });

  it('refuses a second concurrent rebuild of the same projection', async () => {
    await appendTraffic(store, { count: 20, motorBlockId: BLOCK });
    const results = await Promise.allSettled([rebuild(db, store, messagesProjection), rebuild(db, store, messagesProjection)]);
    expect(results.map((r) => r.status).sort()).to.deep.equal(['fulfilled', 'rejected']);
    const rejected = results.find((r) => r.status === 'rejected') as PromiseRejectedResult;
    expect(String(rejected.reason)).to.include('Another rebuild of messages is running');
  });

  it('rebuild has no statement deadline, whatever its db has: a swap that waits for the live runners past it is not cut', async () => {
    await appendTraffic(store, { count: 20, motorBlockId: BLOCK });
    const bounded = createDb(dbh.url, { queryTimeoutMs: 300 });
    const holder = await db.client.acquireConnection();
    try {
      // The live runners' lock, held as by a batch that takes its time.
      await db.raw('begin').connection(holder);
      await db.raw('select pg_advisory_xact_lock(hashtext(?))', ['motor.projection:rm_messages']).connection(holder);
      const rebuilt = rebuild(bounded, store, messagesProjection);
      await new Promise((r) => setTimeout(r, 1500));
      await db.raw('commit').connection(holder);
      expect((await rebuilt).events).to.be.above(0);
    } finally {
      await db.client.releaseConnection(holder);
      await bounded.destroy();
    }
  });

  it('run() follows new events through the subscription until aborted', async () => {
    const runner = new ProjectionRunner(db, store, messagesProjection, { batchSize: 50 });
    await runner.init();
    const ctl = new AbortController();
    const running = runner.run(ctl.signal);
    const mid = randomUUID();
    await store.append(`message-${mid}`, [acceptedEvent(mid, BLOCK, ['a@x.test'], 0)]);
    await waitFor(async () => (await getMessage(db, mid))?.currentOutcome === 'queued');
    await store.append(`message-${mid}`, [recipientEvent('DeliveryStarted', mid, 'a@x.test', 5), recipientEvent('DeliverySucceeded', mid, 'a@x.test', 9)]);
    await waitFor(async () => (await getMessage(db, mid))?.currentOutcome === 'delivered');
    ctl.abort();
    await running;
  });

  it('run() through a database that stops answering: its reads and batches fail at their deadlines and are retried, and it catches up once the database answers on new connections', async () => {
    const target = new URL(dbh.url);
    const proxy = await startPausableProxy({ host: target.hostname, port: Number(target.port || 5432) });
    target.hostname = '127.0.0.1';
    target.port = String(proxy.port);
    const frozenDb = createDb(target.toString(), { queryTimeoutMs: 500 });
    const frozenStore = new PostgresEventStore(target.toString(), { readTimeoutMs: 500, pollIntervalMs: 100 });
    const failures: unknown[] = [];
    const runner = new ProjectionRunner(frozenDb, frozenStore, messagesProjection, {
      batchSize: 50, retryDelayMs: 100, logger: { info: () => undefined, warn: () => undefined, error: (o) => { failures.push(o); } },
    });
    const ctl = new AbortController();
    let running: Promise<void> | undefined;
    try {
      await frozenStore.init();
      await runner.init();
      running = runner.run(ctl.signal);
      const first = randomUUID();
      await store.append(`message-${first}`, [acceptedEvent(first, BLOCK, ['a@x.test'], 0)]);
      await waitFor(async () => (await getMessage(db, first))?.currentOutcome === 'queued');
      proxy.pause();
      const second = randomUUID();
      await store.append(`message-${second}`, [acceptedEvent(second, BLOCK, ['b@x.test'], 0)]);
      await new Promise((r) => setTimeout(r, 1500));
      expect(await getMessage(db, second)).to.equal(null);
      // The server answers again, but not on the connections it had: a client without a deadline
      // would wait on them for ever.
      proxy.abandon();
      proxy.resume();
      await waitFor(async () => (await getMessage(db, second))?.currentOutcome === 'queued', 10_000);
      const third = randomUUID();
      await store.append(`message-${third}`, [acceptedEvent(third, BLOCK, ['c@x.test'], 0)]);
      await waitFor(async () => (await getMessage(db, third))?.currentOutcome === 'queued', 10_000);
    } finally {
      ctl.abort();
      await running;
      await frozenStore.close();
      await frozenDb.destroy();
      await proxy.close();
    }
  });

  it('a batch without events (a position-only handover) moves the checkpoint by compare-and-set alone', async () => {
    const runner = new ProjectionRunner(db, store, countingProjection, { batchSize: 50 });
    await runner.init();
    const other = async () => (await store.append(`other-${randomUUID()}`, [{ id: randomUUID(), type: 'Other', version: 1, data: {} }])).position;
    const p1 = await other();
    const p2 = await other();
    expect(await runner.applyEvents(null, [], p1)).to.deep.equal({ ok: true, position: p1 });
    expect(await runner.checkpoint()).to.equal(p1);
    // From a position the row no longer holds: a conflict, nothing written.
    expect(await runner.applyEvents(null, [], p2)).to.deep.equal({ ok: false, position: p1 });
    expect(await runner.checkpoint()).to.equal(p1);
    expect(runner.stats()).to.include({ batches: 1, conflicts: 1 });
    // Another writer holding the row (a batch transaction that has written its checkpoint and not
    // committed yet): the compare-and-set waits for it, then finds the position moved.
    const holder = await db.client.acquireConnection();
    try {
      await new Promise<void>((resolve, reject) => holder.query('BEGIN', (err: Error | null) => (err ? reject(err) : resolve())));
      await new Promise<void>((resolve, reject) => holder.query({ text: 'update rm_counting.projection_checkpoint set position = $1 where id = 1', values: [p2] }, (err: Error | null) => (err ? reject(err) : resolve())));
      const p3 = await other();
      const waiting = runner.applyEvents(p1, [], p3);
      await new Promise((r) => setTimeout(r, 200));
      await new Promise<void>((resolve, reject) => holder.query('COMMIT', (err: Error | null) => (err ? reject(err) : resolve())));
      expect(await waiting).to.deep.equal({ ok: false, position: p2 });
      expect(await runner.checkpoint()).to.equal(p2);
    } finally {
      await db.client.releaseConnection(holder);
    }
  });

  it('minBatchIntervalMs: the first event is applied at once, a trickle in few batches, a backlog without waiting', async () => {
    const tick = () => store.append(`tick-${randomUUID()}`, [{ id: randomUUID(), type: 'Tick', version: 1, data: {} }]);
    const total = async () => Number((await db.withSchema('rm_counting').table('total').where({ id: 1 }).first('n')).n);
    const interval = 1000;
    const runner = new ProjectionRunner(db, store, countingProjection, { batchSize: 100, minBatchIntervalMs: interval });
    await runner.init();
    const ctl = new AbortController();
    const running = runner.run(ctl.signal);
    try {
      // After a quiet spell nothing waits: the interval only spaces batches that follow each other.
      const t0 = performance.now();
      await tick();
      await waitFor(async () => (await total()) === 1);
      expect(performance.now() - t0).to.be.below(interval);

      // 40 events over ~1.6 s, one every 40 ms: without the interval that is a batch per event.
      const before = runner.stats().batches;
      for (let i = 0; i < 40; i++) {
        await tick();
        await new Promise((r) => setTimeout(r, 40));
      }
      await waitFor(async () => (await total()) === 41);
      const trickleBatches = runner.stats().batches - before;
      expect(trickleBatches).to.be.within(1, 4);

      // A backlog of 350 events: full batches (100) follow each other without the interval.
      await new Promise((r) => setTimeout(r, interval)); // the trickle's last wait is over
      await Promise.all(Array.from({ length: 350 }, () => tick()));
      const t1 = performance.now();
      await waitFor(async () => (await total()) === 391);
      // Waiting between the four batches would take at least 3 × interval.
      expect(performance.now() - t1).to.be.below(2 * interval);
    } finally {
      ctl.abort();
      await running;
    }
  });

  it('minBatchIntervalMs: behind a stretch of other event types, windows with few handled events follow each other at once', async () => {
    const total = async () => Number((await db.withSchema('rm_counting').table('total').where({ id: 1 }).first('n')).n);
    const interval = 1000;
    // Ten windows of 50 log entries, each with one handled event among 49 others.
    for (let w = 0; w < 10; w++) {
      await store.append(`other-${randomUUID()}`, Array.from({ length: 49 }, () => ({ id: randomUUID(), type: 'SomethingElse', version: 1, data: {} })));
      await store.append(`tick-${randomUUID()}`, [{ id: randomUUID(), type: 'Tick', version: 1, data: {} }]);
    }
    const runner = new ProjectionRunner(db, store, countingProjection, { batchSize: 50, minBatchIntervalMs: interval });
    await runner.init();
    const ctl = new AbortController();
    const t0 = performance.now();
    const running = runner.run(ctl.signal);
    try {
      await waitFor(async () => (await total()) === 10);
      // Waiting the interval after each of those batches would take at least 9 × interval.
      expect(performance.now() - t0).to.be.below(3 * interval);
      expect(runner.stats().batches).to.be.at.least(5);
    } finally {
      ctl.abort();
      await running;
    }
  });

  it('rebuild swaps a fresh schema in while readers keep answering and a live runner keeps going', async () => {
    const { ids, eventCount } = await appendTraffic(store, { count: 300, motorBlockId: BLOCK });
    const live = new ProjectionRunner(db, store, messagesProjection, { batchSize: 100 });
    await live.init();
    await catchUpAll(live, eventCount);
    const before = await dumpTables(db, 'rm_messages', MESSAGE_TABLES);

    const ctl = new AbortController();
    const running = live.run(ctl.signal);
    let reads = 0;
    const readErrors: unknown[] = [];
    let stopReading = false;
    const reader = (async () => {
      while (!stopReading) {
        try {
          const m = await getMessage(db, ids[reads % ids.length]);
          if (!m) throw new Error(`message ${ids[reads % ids.length]} vanished`);
          const page = await searchLogs(db, { motorBlockId: BLOCK, limit: 20 });
          if (page.items.length !== 20) throw new Error('short page');
          reads++;
        } catch (err) {
          readErrors.push(err);
        }
      }
    })();
    const writer = appendTraffic(store, { count: 100, motorBlockId: BLOCK, seed: 7, startMs: 10_000_000 });

    const phases = new Set<string>();
    const result = await rebuild(db, store, messagesProjection, { batchSize: 250, onProgress: (p) => phases.add(p.phase) });
    await writer;
    stopReading = true;
    await reader;

    expect(readErrors).to.deep.equal([]);
    expect(reads).to.be.greaterThan(0);
    expect(phases).to.include('done');
    expect(result.events).to.be.greaterThan(0);
    const schemas = await db.raw("select nspname from pg_namespace where nspname like 'rm_messages%' order by 1");
    expect(schemas.rows.map((r: { nspname: string }) => r.nspname)).to.deep.equal(['rm_messages']);
    // The swapped-in copy was analyzed: the planner has column statistics for every table with rows.
    const analyzed = await db.raw(`select c.relname, exists (select 1 from pg_stats s where s.schemaname = 'rm_messages' and s.tablename = c.relname) as has_stats
      from pg_class c join pg_namespace n on n.oid = c.relnamespace where n.nspname = 'rm_messages' and c.relkind = 'r' and c.relname = any(?::text[])`, [[...MESSAGE_TABLES]]);
    expect(analyzed.rows).to.have.length(MESSAGE_TABLES.length);
    for (const r of analyzed.rows as Array<{ relname: string; has_stats: boolean }>) expect(r.has_stats, r.relname).to.equal(true);

    // The live runner continues on the swapped-in schema; a second full rebuild must agree with it row for row.
    await waitFor(async () => (await db.raw('select count(*)::int as n from rm_messages.messages')).rows[0].n === 400);
    await waitFor(async () => (await live.lag()).eventsBehind === 0);
    ctl.abort();
    await running;
    const afterLive = await dumpTables(db, 'rm_messages', MESSAGE_TABLES);
    expect(afterLive.messages.length).to.equal(400);
    await rebuild(db, store, messagesProjection, { batchSize: 1000 });
    expect(await dumpTables(db, 'rm_messages', MESSAGE_TABLES)).to.deep.equal(afterLive);
    // And the first 300 messages' rows from before the rebuild are unchanged by it.
    for (const table of MESSAGE_TABLES) expect(afterLive[table]).to.include.members(before[table]);
  });
});
