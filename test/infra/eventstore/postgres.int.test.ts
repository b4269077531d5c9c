import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import pg from 'pg';
import {
  EventStoreUnavailableError,
  WrongExpectedRevisionError,
  type EventData,
  type RecordedEvent,
} from '../../../domain/eventStore.js';
import { DELETE_STREAMS_SQL, PostgresEventStore, READ_STREAMS_SQL, SUBSCRIBE_SQL, type PostgresEventStoreOptions } from '../../../infra/eventstore/postgres/postgresEventStore.js';
import { CURRENT_SQL, EXISTING_SQL } from '../../../infra/eventstore/postgres/appendBatch.js';
import { createTestDatabase } from '../../support/db.js';
import { startPausableProxy, type PausableProxy } from '../../support/pausableProxy.js';
import { eventStoreContract, type ContractSubject } from './contract.js';

const HOLD_TRIGGER_SQL = `
CREATE OR REPLACE FUNCTION motor_test_hold() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_sleep((NEW.metadata->>'holdMs')::int / 1000.0);
  RETURN NULL;
END $$;
DROP TRIGGER IF EXISTS motor_test_hold ON events;
CREATE TRIGGER motor_test_hold AFTER INSERT ON events
  FOR EACH ROW WHEN (NEW.metadata ? 'holdMs') EXECUTE FUNCTION motor_test_hold();`;

function postgresSubject(label: string, options: PostgresEventStoreOptions): () => Promise<ContractSubject> {
  return async () => {
    const db = await createTestDatabase(label);
    return {
      open: async () => {
        const store = new PostgresEventStore(db.url, { poolSize: 3, ...options });
        await store.init();
        return store;
      },
      deletesPhysically: true,
      enableHeldTransactions: async () => {
        const c = new pg.Client({ connectionString: db.url });
        await c.connect();
        await c.query(HOLD_TRIGGER_SQL).finally(() => c.end());
      },
      inspectConcurrentLog: (log) => {
        // Late commits happened: some event follows one with a higher sequence number, so a reader
        // ordering by global_position alone (or checkpointing it) would have skipped it.
        const sequence = log.map((e) => BigInt(e.position.split(':')[1]));
        const overtaken = sequence.filter((gp, i) => i > 0 && gp < sequence[i - 1]).length;
        expect(overtaken, 'late commits in the concurrency test').to.be.greaterThan(0);
      },
      teardown: db.drop,
    };
  };
}

eventStoreContract('PostgreSQL, group commit', postgresSubject('es_group', {}));
eventStoreContract('PostgreSQL, one transaction per append', postgresSubject('es_single', { groupCommit: false }));

const ev = (data: unknown = {}): EventData => ({ id: randomUUID(), type: 'ThingHappened', version: 1, data });

/** Subscribes and collects the events of one stream; `firstSeen` waits (up to 10 s) for the first, `stop` ends it. */
function follow(store: PostgresEventStore, streamId: string, types?: string[]) {
  const ac = new AbortController();
  const seen: RecordedEvent[] = [];
  const done = (async () => {
    for await (const batch of store.subscribeToAll({ signal: ac.signal, types })) seen.push(...batch.events.filter((e) => e.streamId === streamId));
  })();
  return {
    seen,
    async firstSeen(): Promise<number> {
      const t0 = Date.now();
      while (seen.length === 0 && Date.now() - t0 < 10_000) await new Promise((r) => setTimeout(r, 5));
      return Date.now() - t0;
    },
    async stop(): Promise<void> {
      ac.abort();
      await done;
    },
  };
}

describe('PostgresEventStore', function () {
  this.timeout(30_000);
  let db: { url: string; drop: () => Promise<void> };
  const stores: PostgresEventStore[] = [];
  const clients: pg.Client[] = [];
  const open = async (options: PostgresEventStoreOptions = {}): Promise<PostgresEventStore> => {
    const s = new PostgresEventStore(db.url, { poolSize: 3, ...options });
    stores.push(s);
    await s.init();
    return s;
  };
  const rawClient = async (): Promise<pg.Client> => {
    const c = new pg.Client({ connectionString: db.url });
    await c.connect();
    clients.push(c);
    return c;
  };

  before(async () => {
    db = await createTestDatabase('es_pg');
  });
  after(async () => {
    await Promise.all(clients.map((c) => c.end().catch(() => undefined)));
    await Promise.all(stores.map((s) => s.close().catch(() => undefined)));
    await db.drop();
  });

  it('init() is idempotent and safe from concurrent processes', async () => {
    const fresh = await createTestDatabase('es_init');
    try {
      const many = Array.from({ length: 5 }, () => new PostgresEventStore(fresh.url, { poolSize: 1 }));
      await Promise.all(many.map((s) => s.init()));
      await many[0].init();
      await many[0].append(`init-${randomUUID()}`, [ev()]);
      await Promise.all(many.map((s) => s.close()));
    } finally {
      await fresh.drop();
    }
  });

  it('does not show an event while an older transaction is open, and shows the late commit first', async () => {
    const store = await open();
    const late = await rawClient();
    const s = `late-${randomUUID()}`;
    const start = await store.append(`late-start-${randomUUID()}`, [ev()]);
    await late.query('BEGIN');
    await late.query('SELECT pg_current_xact_id()'); // takes its transaction id now, commits later
    const early = await store.append(s, [ev({ n: 'committed first' })]);
    expect(await store.readAll({ after: start.position, maxCount: 10 })).to.deep.equal([]);

    const lateId = randomUUID();
    await late.query(
      `INSERT INTO events (stream_id, stream_revision, event_id, type, version, data) VALUES ($1, 0, $2, 'ThingHappened', 1, '{}')`,
      [`late-other-${randomUUID()}`, lateId],
    );
    await late.query('COMMIT');
    let log = await store.readAll({ after: start.position, maxCount: 10 });
    // Other suites' transactions on the same server may hold the horizon a little longer.
    for (let i = 0; i < 200 && log.length < 2; i++) {
      await new Promise((r) => setTimeout(r, 25));
      log = await store.readAll({ after: start.position, maxCount: 10 });
    }
    expect(log.map((e) => e.id)).to.deep.equal([lateId, (await store.readStream(s))[0].id]);
    expect(log[1].position).to.equal(early.position);
  });

  it('wakes a subscriber by NOTIFY, well before the polling interval', async () => {
    const store = await open({ pollIntervalMs: 20_000 });
    const s = `notify-${randomUUID()}`;
    const sub = follow(store, s);
    await new Promise((r) => setTimeout(r, 300)); // caught up and waiting
    const writer = await open();
    const appended = writer.append(s, [ev()]);
    const elapsed = await sub.firstSeen();
    await appended;
    await sub.stop();
    expect(sub.seen).to.have.length(1);
    expect(elapsed).to.be.below(3000); // typically a few ms; the polling interval is 20 s
  });

  it('a NOTIFY wakes only the subscriptions whose types it names', async () => {
    const store = await open({ pollIntervalMs: 20_000 });
    const writer = await open();
    const s = `typed-${randomUUID()}`;
    const sub = follow(store, s, ['WantedThing']);
    await new Promise((r) => setTimeout(r, 300)); // caught up and waiting
    let reads = 0;
    const spied = store as unknown as { readWindow: (...a: unknown[]) => Promise<unknown> };
    const readWindow = spied.readWindow.bind(store);
    spied.readWindow = (...a: unknown[]) => { reads++; return readWindow(...a); };
    for (let i = 0; i < 10; i++) await writer.append(`${s}-other-${i}`, [{ ...ev(), type: 'OtherThing' }]);
    await new Promise((r) => setTimeout(r, 200));
    expect(reads, 'reads after appends of other types').to.equal(0);
    const appended = writer.append(s, [{ ...ev({ n: 1 }), type: 'WantedThing' }]);
    const elapsed = await sub.firstSeen();
    await appended;
    await sub.stop();
    expect(sub.seen.map((e) => e.type)).to.deep.equal(['WantedThing']);
    expect(elapsed).to.be.below(3000); // woken by its NOTIFY; the polling interval is 20 s
    expect(reads).to.be.at.least(1);
  });

  it('re-polls soon when a NOTIFY arrives but an unrelated older transaction holds the horizon', async () => {
    const store = await open({ pollIntervalMs: 20_000 });
    const blocker = await rawClient();
    const s = `horizon-${randomUUID()}`;
    const sub = follow(store, s);
    await new Promise((r) => setTimeout(r, 300));
    await blocker.query('BEGIN');
    await blocker.query('SELECT pg_current_xact_id()');
    await (await open()).append(s, [ev()]);
    await new Promise((r) => setTimeout(r, 300));
    expect(sub.seen).to.have.length(0);
    await blocker.query('COMMIT'); // commits nothing to events: no NOTIFY
    const elapsed = await sub.firstSeen();
    await sub.stop();
    expect(sub.seen).to.have.length(1);
    expect(elapsed).to.be.below(3000); // typically a few ms; the polling interval is 20 s
  });

  it('a filtered subscription moves its position past events of other types without their data', async () => {
    const store = await open({ pollIntervalMs: 20_000 });
    const writer = await open();
    const first = await writer.append(`skip-${randomUUID()}`, [ev()]);
    const s = `skip-${randomUUID()}`;
    const last = await writer.append(s, Array.from({ length: 7 }, () => ev({ big: 'x'.repeat(100) })));
    const ac = new AbortController();
    const batches: Array<{ events: number; position: string }> = [];
    const done = (async () => {
      for await (const batch of store.subscribeToAll({ after: first.position, signal: ac.signal, batchSize: 3, types: ['NobodyWritesThis'] })) {
        batches.push({ events: batch.events.length, position: batch.position });
      }
    })();
    const t0 = Date.now();
    while (!batches.some((b) => b.position === last.position) && Date.now() - t0 < 10_000) await new Promise((r) => setTimeout(r, 5));
    ac.abort();
    await done;
    // Windows of 3 entries were examined, but position-only batches come at most once a second.
    const elapsed = Date.now() - t0;
    expect(batches.length).to.be.at.least(1).and.at.most(Math.ceil(elapsed / 1000) + 1);
    expect(batches.every((b) => b.events === 0)).to.equal(true);
    expect(batches.map((b) => b.position)).to.include(last.position);
    // The position handed over is a real resume point: nothing of ours is left after it.
    const after = await store.readAll({ after: last.position, maxCount: 100 });
    expect(after.filter((e) => e.streamId === s)).to.deep.equal([]);
  });

  it("a filtered subscription's read returns the wanted entries and the window's last one, not a row per entry", async () => {
    const writer = await open();
    const c = await rawClient();
    const first = await writer.append(`window-${randomUUID()}`, [ev()]);
    const kinds = ['Other', 'Wanted', 'Other', 'Other', 'Wanted', 'Other', 'Other'];
    await writer.append(`window-${randomUUID()}`, kinds.map((type, i) => ({ ...ev({ i }), type })));
    const [tx, pos] = first.position.split(':');
    const read = async (max: number, types: string[] | null) =>
      (await c.query(SUBSCRIBE_SQL, [tx, pos, max, types, []])).rows as Array<{ examined: number | null; type: string | null; global_position: string | null; data: { i: number } | null }>;

    const seven = await read(7, ['Wanted']);
    expect(seven.map((r) => r.type), 'two wanted, then the last entry as a position').to.deep.equal(['Wanted', 'Wanted', null]);
    expect(seven.map((r) => r.data?.i ?? null)).to.deep.equal([1, 4, null]);
    expect(seven.every((r) => r.examined === 7)).to.equal(true);
    const everything = await read(7, null);
    expect(everything.map((r) => r.data?.i), 'no filter: every entry').to.deep.equal([0, 1, 2, 3, 4, 5, 6]);
    expect(seven[2].global_position).to.equal(everything[6].global_position);
    // The window ends on a wanted entry: no extra row.
    expect((await read(5, ['Wanted'])).map((r) => r.data?.i)).to.deep.equal([1, 4]);
    expect((await read(3, ['NobodyWritesThis'])).map((r) => [r.type, r.examined])).to.deep.equal([[null, 3]]);
    // An empty window: the single row of nulls.
    const [tail] = everything.slice(-1);
    const [tTx, tPos] = [(await c.query('SELECT tx_id::text AS tx FROM events WHERE global_position = $1', [tail.global_position])).rows[0].tx, tail.global_position];
    const empty = (await c.query(SUBSCRIBE_SQL, [tTx, tPos, 10, ['Wanted'], []])).rows;
    expect(empty).to.have.length(1);
    expect(empty[0]).to.include({ examined: null, global_position: null });
  });

  it('countAfter counts the entries after a position, and those of given types, without reading them', async () => {
    const store = await open();
    const start = await store.append(`count-${randomUUID()}`, [ev()]);
    const s = `count-${randomUUID()}`;
    const kinds = ['Wanted', 'Other', 'Wanted', 'Other', 'Other', 'Wanted'];
    await store.append(s, kinds.map((type, i) => ({ ...ev({ i }), type })));
    const mine = (await store.readAll({ after: start.position, maxCount: 100 })).filter((e) => e.streamId === s);
    expect(mine).to.have.length(6);
    // Other suites may append to this database too: count only up to the end of our stream.
    const upTo = (await store.readAll({ after: start.position, maxCount: 1000 })).findIndex((e) => e.id === mine[5].id) + 1;
    const all = await store.countAfter({ after: start.position, maxCount: upTo });
    expect(all.examined).to.equal(upTo);
    expect(all.matching).to.equal(upTo);
    const wanted = await store.countAfter({ after: start.position, maxCount: upTo, types: ['Wanted'] });
    expect(wanted.matching).to.equal(3);
    expect(wanted.oldestMatching?.getTime()).to.equal(mine[0].createdAt.getTime());
    const firstTwo = await store.countAfter({ after: mine[0].position, maxCount: 2, types: ['Wanted'] });
    expect(firstTwo).to.deep.equal({ examined: 2, matching: 1, oldestMatching: mine[2].createdAt });
    const none = await store.countAfter({ after: mine[5].position, maxCount: 10, types: ['NobodyWritesThis'] });
    expect(none.matching).to.equal(0);
    expect(none.oldestMatching).to.equal(null);
  });

  it('motor_append_batch commits a clean batch in one statement, and rolls a batch with a conflict back whole (MTR01)', async () => {
    const store = await open();
    const c = await rawClient();
    const [taken, fresh, other] = [`fast-${randomUUID()}`, `fast-${randomUUID()}`, `fast-${randomUUID()}`];
    await store.append(taken, [ev()]);
    const req = (s: string, x: string) => ({ s, x, e: [{ id: randomUUID(), t: 'ThingHappened', v: 1, d: { s } }, { id: randomUUID(), t: 'ThingHappened', v: 1, d: {} }] });

    let code: string | undefined;
    await c.query('SELECT motor_append_batch($1::jsonb, $2)', [JSON.stringify([req(fresh, 'no_stream'), req(taken, 'no_stream')]), 'ThingHappened']).catch((e) => (code = e.code));
    expect(code).to.equal('MTR01');
    expect((await store.readStream(fresh)).length, 'the clean request of that batch is rolled back too').to.equal(0);

    const { rows } = await c.query('SELECT motor_append_batch($1::jsonb, $2) AS r', [JSON.stringify([req(fresh, 'no_stream'), req(taken, '0'), req(other, 'any')]), 'ThingHappened']);
    const out = rows[0].r as Array<{ i: number; ok: boolean; rev: string; tx: string; gp: string }>;
    expect(out.map((o) => [o.i, o.ok, o.rev])).to.deep.equal([[0, true, '1'], [1, true, '2'], [2, true, '1']]);
    const read = await store.readStream(taken);
    expect(read.map((e) => e.revision)).to.deep.equal([0n, 1n, 2n]);
    expect(read[2].position).to.equal(`${out[1].tx}:${out[1].gp}`);
  });

  it('coalesces concurrent appends into fewer transactions', async () => {
    const store = await open();
    const results = await Promise.all(Array.from({ length: 50 }, () => store.append(`message-${randomUUID()}`, [ev()], { expectedRevision: 'no_stream' })));
    const transactions = new Set(results.map((r) => r.position.split(':')[0]));
    expect(transactions.size).to.be.below(50);
  });

  it('appends asked for in one turn leave at its end, shared evenly between the free group commits', async () => {
    // Before (found by BENCH_STAGES, docs/PERFORMANCE.md 2026-11-25): the first append alone in one
    // commit, the second alone in the other, the other 38 in a third batch behind them.
    const store = await open({ maxInFlightBatches: 2 });
    const results = await Promise.all(Array.from({ length: 40 }, () => store.append(`message-${randomUUID()}`, [ev()], { expectedRevision: 'no_stream' })));
    const perTransaction = new Map<string, number>();
    for (const r of results) {
      const tx = r.position.split(':')[0];
      perTransaction.set(tx, (perTransaction.get(tx) ?? 0) + 1);
    }
    expect([...perTransaction.values()]).to.deep.equal([20, 20]);
    // One slot: everything of the turn in one commit.
    const single = await open({ maxInFlightBatches: 1 });
    const one = await Promise.all(Array.from({ length: 10 }, () => single.append(`message-${randomUUID()}`, [ev()], { expectedRevision: 'no_stream' })));
    expect(new Set(one.map((r) => r.position.split(':')[0])).size).to.equal(1);
  });

  it('groups concurrent stream reads into few statements, each read getting its own stream, range and count', async () => {
    const store = await open();
    const streams = Array.from({ length: 60 }, () => `message-${randomUUID()}`);
    await Promise.all(streams.map((s, i) => store.append(s, Array.from({ length: 1 + (i % 4) }, () => ev({ s, n: i })))));
    // Counted at the pool: a read takes a connection for its one statement.
    const pool = (store as unknown as { pool: pg.Pool }).pool;
    const connect = pool.connect.bind(pool) as (...args: unknown[]) => unknown;
    let statements = 0;
    (pool as unknown as { connect: (...args: unknown[]) => unknown }).connect = (...args: unknown[]) => {
      statements++;
      return connect(...args);
    };
    try {
      const reads = await Promise.all(streams.map((s, i) =>
        i % 3 === 0 ? store.readStream(s) : i % 3 === 1 ? store.readStream(s, { fromRevision: 1n }) : store.readStream(s, { maxCount: 1 })));
      expect(statements).to.be.at.most(10);
      reads.forEach((events, i) => {
        const size = 1 + (i % 4);
        const expected = i % 3 === 0 ? size : i % 3 === 1 ? size - 1 : 1;
        expect(events.map((e) => e.revision), `read ${i}`).to.deep.equal(Array.from({ length: expected }, (_, k) => BigInt(k + (i % 3 === 1 ? 1 : 0))));
        expect(events.every((e) => e.streamId === streams[i] && (e.data as { s: string }).s === streams[i])).to.equal(true);
      });
      // A read alone is not held back for company.
      const before = statements;
      expect((await store.readStream(streams[5])).length).to.equal(2);
      expect(statements - before).to.equal(1);
      expect(await store.readStream(`message-${randomUUID()}`)).to.deep.equal([]);
    } finally {
      (pool as unknown as { connect: unknown }).connect = connect;
    }
  });

  it("a retried 'any' append returns the original result", async () => {
    const store = await open();
    const s = `retry-${randomUUID()}`;
    const events = [ev(), ev()];
    const r = await store.append(s, events);
    await store.append(s, [ev()]);
    expect(await store.append(s, events)).to.deep.equal(r);
  });

  it('refuses event ids already stored elsewhere', async () => {
    const store = await open();
    const e = ev();
    await store.append(`ids-${randomUUID()}`, [e]);
    const other = `ids-${randomUUID()}`;
    try {
      await store.append(other, [e], { expectedRevision: 'no_stream' });
      expect.fail('should have thrown');
    } catch (err) {
      expect(err).to.be.instanceOf(WrongExpectedRevisionError);
    }
    expect(await store.readStream(other)).to.deep.equal([]);
  });

  it('fails one invalid append alone in a group', async () => {
    const store = await open();
    const results = await Promise.allSettled([
      ...Array.from({ length: 10 }, () => store.append(`g-${randomUUID()}`, [ev()])),
      store.append(`g-${randomUUID()}`, [{ ...ev(), data: { bad: '\u0000' } }]), // PostgreSQL jsonb refuses NUL
      ...Array.from({ length: 10 }, () => store.append(`g-${randomUUID()}`, [ev()])),
    ]);
    expect(results.filter((r) => r.status === 'rejected')).to.have.length(1);
    expect(results[10].status).to.equal('rejected');
  });

  it('deleteStreams leaves other positions unchanged', async () => {
    const store = await open();
    const keep = `keep-${randomUUID()}`;
    const gone = `gone-${randomUUID()}`;
    await store.append(gone, [ev()]);
    const kept = await store.append(keep, [ev()]);
    await store.deleteStreams([gone]);
    expect((await store.readStream(keep))[0].position).to.equal(kept.position);
    expect((await store.append(gone, [ev()], { expectedRevision: 'no_stream' })).nextExpectedRevision).to.equal(0n);
  });

  it('rejects malformed input before touching the database', async () => {
    const store = await open();
    for (const bad of [
      () => store.append('x-1', []),
      () => store.append('x-1', [{ ...ev(), id: 'not-a-uuid' }]),
      () => store.append('x-1', [ev()], { expectedRevision: -1n }),
      () => store.readAll({ after: 'nonsense', maxCount: 1 }),
    ]) {
      try {
        await bad();
        expect.fail('should have thrown');
      } catch (err) {
        expect(err).to.be.instanceOf(TypeError);
      }
    }
  });

  it('isPosition takes the positions its columns hold (tx_id xid8, global_position bigint), and the log reads from every one of them', async () => {
    const store = await open();
    for (const p of ['0:0', '18446744073709551615:9223372036854775807']) {
      expect(store.isPosition(p), p).to.equal(true);
      expect(await store.readAll({ after: p, maxCount: 1 }), p).to.be.an('array');
    }
    // One past either column: a client's id like these made the reads fail (docs/EVENTS.md "Resuming": 400 invalid_last_event_id).
    for (const p of ['18446744073709551616:1', '1:9223372036854775808', '1:18446744073709551615', '99999999999999999999:99999999999999999999']) {
      expect(store.isPosition(p), p).to.equal(false);
    }
  });

  it('maps an unreachable server to EventStoreUnavailableError', async () => {
    const store = new PostgresEventStore('postgres://postgres@127.0.0.1:1/nowhere', { poolSize: 1 });
    try {
      for (const call of [() => store.ping(), () => store.append(`u-${randomUUID()}`, [ev()]), () => store.init()]) {
        try {
          await call();
          expect.fail('should have thrown');
        } catch (err) {
          expect(err).to.be.instanceOf(EventStoreUnavailableError);
        }
      }
    } finally {
      await store.close();
    }
  });

  it('a group commit PostgreSQL does not answer within appendTimeoutMs fails its appends as unavailable, and the next ones go through', async () => {
    const store = await open({ appendTimeoutMs: 400 });
    const c = await rawClient();
    await c.query(HOLD_TRIGGER_SQL);
    const started = Date.now();
    // The insert is held 3 s in the server.
    const held = await store.append(`hold-${randomUUID()}`, [{ ...ev(), metadata: { holdMs: 3000 } }]).then(() => 'committed', (err: unknown) => err);
    const waited = Date.now() - started;
    expect(held).to.be.instanceOf(EventStoreUnavailableError);
    expect((held as Error).message).to.match(/did not answer within 400 ms; the outcome of the append is unknown/);
    expect(waited).to.be.within(380, 2000);
    // The connection still busy with the held batch was dropped, not handed to the next batch.
    const t = Date.now();
    await store.append(`after-${randomUUID()}`, [ev()]);
    expect(Date.now() - t).to.be.below(1000);
    await c.query('DROP TRIGGER IF EXISTS motor_test_hold ON events');
  });

  it('a database that stops answering (network black hole): appends fail as unavailable at the deadline, and succeed again once it answers', async () => {
    const url = new URL(db.url);
    const proxy = await startPausableProxy({ host: url.hostname, port: Number(url.port || 5432) });
    try {
      url.hostname = '127.0.0.1';
      url.port = String(proxy.port);
      const store = new PostgresEventStore(url.toString(), { poolSize: 2, appendTimeoutMs: 500 });
      stores.push(store);
      await store.init();
      await store.append(`bh-${randomUUID()}`, [ev()]);
      proxy.pause();
      const started = Date.now();
      const outcome = await store.append(`bh-${randomUUID()}`, [ev()]).then(() => 'committed', (err: unknown) => err);
      expect(outcome).to.be.instanceOf(EventStoreUnavailableError);
      expect(Date.now() - started).to.be.within(480, 2500);
      proxy.resume();
      // A new connection (the one that hung was dropped): answered as soon as the server is back.
      const stream = `bh-${randomUUID()}`;
      await store.append(stream, [ev({ back: true })]);
      expect((await store.readStream(stream)).map((e) => e.data)).to.deep.equal([{ back: true }]);
    } finally {
      await proxy.close();
    }
  });

  /** A store whose connections go through a pausable proxy (closed with the test's `finally`). */
  const behindProxy = async (options: PostgresEventStoreOptions): Promise<{ store: PostgresEventStore; proxy: PausableProxy }> => {
    const url = new URL(db.url);
    const proxy = await startPausableProxy({ host: url.hostname, port: Number(url.port || 5432) });
    url.hostname = '127.0.0.1';
    url.port = String(proxy.port);
    const store = new PostgresEventStore(url.toString(), options);
    stores.push(store);
    await store.init();
    return { store, proxy };
  };
  const backendPid = async (store: PostgresEventStore): Promise<number> =>
    (await (store as unknown as { pool: pg.Pool }).pool.query<{ pid: number }>('select pg_backend_pid() as pid')).rows[0].pid;

  it('a read PostgreSQL does not answer fails as unavailable at readTimeoutMs; its connection is dropped, and reads go through on a new one once it answers', async () => {
    const { store, proxy } = await behindProxy({ poolSize: 1, readTimeoutMs: 500 });
    try {
      const stream = `rd-${randomUUID()}`;
      await store.append(stream, [ev({ n: 1 })]);
      const before = await backendPid(store);
      proxy.pause();
      const started = Date.now();
      const outcome = await store.readStream(stream).then(() => 'answered', (err: unknown) => err);
      expect(outcome).to.be.instanceOf(EventStoreUnavailableError);
      expect((outcome as Error).message).to.match(/did not answer a read within 500 ms/);
      expect(Date.now() - started).to.be.within(480, 1500);
      // Grouped reads and the other reads fail the same way.
      const others = await Promise.all([
        store.readStream(stream), store.readStream(`${stream}-x`), store.readAll({ maxCount: 10 }), store.countAfter({ after: null, maxCount: 10 }), store.ping(),
      ].map((p) => p.then(() => 'answered', (err: unknown) => err)));
      for (const err of others) expect(err).to.be.instanceOf(EventStoreUnavailableError);
      // The server comes back, but the connections it had are gone for good.
      proxy.abandon();
      proxy.resume();
      const t = Date.now();
      expect((await store.readStream(stream)).map((e) => e.data)).to.deep.equal([{ n: 1 }]);
      expect(Date.now() - t).to.be.below(500);
      expect(await backendPid(store)).to.not.equal(before);
    } finally {
      await proxy.close();
    }
  });

  it('a subscription whose reads go unanswered catches up once the database answers again, on new connections', async () => {
    const { store, proxy } = await behindProxy({ poolSize: 2, readTimeoutMs: 500 });
    const direct = await open();
    const stream = `sub-${randomUUID()}`;
    const sub = follow(store, stream);
    try {
      await direct.append(stream, [ev({ n: 1 })]);
      await sub.firstSeen();
      expect(sub.seen).to.have.length(1);
      proxy.pause();
      await direct.append(stream, [ev({ n: 2 }), ev({ n: 3 })]);
      await new Promise((r) => setTimeout(r, 1500));
      expect(sub.seen, 'nothing read while the database does not answer').to.have.length(1);
      proxy.abandon();
      proxy.resume();
      const t = Date.now();
      while (sub.seen.length < 3 && Date.now() - t < 10_000) await new Promise((r) => setTimeout(r, 20));
      expect(sub.seen.map((e) => e.data)).to.deep.equal([{ n: 1 }, { n: 2 }, { n: 3 }]);
      // And woken by NOTIFY again (a new LISTEN connection), not only by its poll.
      await new Promise((r) => setTimeout(r, 1500));
      const woken = Date.now();
      await direct.append(stream, [ev({ n: 4 })]);
      while (sub.seen.length < 4 && Date.now() - woken < 5000) await new Promise((r) => setTimeout(r, 5));
      expect(sub.seen).to.have.length(4);
      expect(Date.now() - woken, 'woken by NOTIFY, well before the 1 s poll').to.be.below(500);
    } finally {
      await sub.stop();
      await proxy.close();
    }
  });

  it('a LISTEN connection cut silently (a NAT that forgot it) is found by its check and replaced: wake-ups come back without any read failing first', async () => {
    const { store, proxy } = await behindProxy({ poolSize: 2, readTimeoutMs: 500, listenerCheckMs: 300, pollIntervalMs: 60_000 });
    const direct = await open();
    const stream = `ls-${randomUUID()}`;
    const sub = follow(store, stream);
    const appendAndTime = async (n: number): Promise<number> => {
      const t = Date.now();
      await direct.append(stream, [ev({ n })]);
      while (sub.seen.length < n && Date.now() - t < 5000) await new Promise((r) => setTimeout(r, 5));
      expect(sub.seen, `event ${n} seen`).to.have.length(n);
      return Date.now() - t;
    };
    try {
      await direct.append(stream, [ev({ n: 1 })]);
      await sub.firstSeen();
      await new Promise((r) => setTimeout(r, 200)); // the listener connected
      expect(await appendAndTime(2), 'woken by NOTIFY').to.be.below(500);
      // Every connection open now (the listener's and the pool's) goes silent for good; new ones work.
      proxy.abandon();
      // The check (300 ms, unanswered for 500 ms), the reconnect a second later, and the second
      // reconnect after the subscription's read on an abandoned pooled connection fails.
      await new Promise((r) => setTimeout(r, 5000));
      expect(await appendAndTime(3), 'woken by NOTIFY on a new LISTEN connection, not by the 60 s poll').to.be.below(1000);
      expect(await appendAndTime(4)).to.be.below(500);
      expect(sub.seen.map((e) => e.data)).to.deep.equal([{ n: 1 }, { n: 2 }, { n: 3 }, { n: 4 }]);
    } finally {
      await sub.stop();
      await proxy.close();
    }
  });

  it('a lost LISTEN connection is replaced a second later even when the retry timer fires before Date.now() reaches its due time', async () => {
    const applicationName = `es-early-${randomUUID().slice(0, 8)}`;
    const store = await open({ applicationName, pollIntervalMs: 60_000 });
    const direct = await open();
    const stream = `early-${randomUUID()}`;
    const sub = follow(store, stream);
    const realNow = Date.now;
    try {
      await direct.append(stream, [ev({ n: 1 })]);
      await sub.firstSeen();
      await new Promise((r) => setTimeout(r, 200)); // the listener connected
      const admin = await rawClient();
      const { rowCount } = await admin.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1', [`${applicationName}-listen`]);
      expect(rowCount).to.equal(1);
      // Date.now() runs 20 ms behind the timers' clock from here on: the 1 s retry timer fires
      // while Date.now() is still short of the retry time (as it can by a millisecond for real).
      await new Promise((r) => setTimeout(r, 50)); // the loss seen and the retry time set
      Date.now = () => realNow() - 20;
      await new Promise((r) => setTimeout(r, 1500));
      Date.now = realNow;
      const t = realNow();
      await direct.append(stream, [ev({ n: 2 })]);
      while (sub.seen.length < 2 && realNow() - t < 5000) await new Promise((r) => setTimeout(r, 5));
      expect(sub.seen, 'woken by NOTIFY on the new LISTEN connection, not left to the 60 s poll').to.have.length(2);
      expect(realNow() - t).to.be.below(500);
    } finally {
      Date.now = realNow;
      await sub.stop();
    }
  });

  it('appends after close() are refused as unavailable', async () => {
    const store = await open();
    await store.close();
    try {
      await store.append(`c-${randomUUID()}`, [ev()]);
      expect.fail('should have thrown');
    } catch (err) {
      expect(err).to.be.instanceOf(EventStoreUnavailableError);
    }
  });
});

// The subscription's one statement on a log the planner knows nothing about (autovacuum off or
// behind, as on the development machine): every part of it must walk an index, never the log.
describe('PostgresEventStore subscription plan without statistics', function () {
  this.timeout(60_000);
  let db: { url: string; drop: () => Promise<void> };
  let store: PostgresEventStore;
  let c: pg.Client;

  before(async () => {
    db = await createTestDatabase('es_plan');
    store = new PostgresEventStore(db.url, { poolSize: 2 });
    await store.init();
    c = new pg.Client({ connectionString: db.url });
    await c.connect();
    await c.query('ALTER TABLE events SET (autovacuum_enabled = false)');
    await c.query(`INSERT INTO events (stream_id, stream_revision, event_id, type, version, data)
      SELECT 'plan-' || g, 0, gen_random_uuid(), CASE WHEN g % 3 = 0 THEN 'MessageAccepted' ELSE 'DeliverySucceeded' END, 1, '{}'
      FROM generate_series(1, 30000) g`);
    const stats = await c.query(`SELECT count(*)::int AS n FROM pg_stats WHERE tablename = 'events'`);
    expect(stats.rows[0].n).to.equal(0);
  });
  after(async () => {
    await c?.end().catch(() => undefined);
    await store?.close().catch(() => undefined);
    await db?.drop();
  });

  it('reads the window and probes for held-back entries through the index, near the head and from the start', async () => {
    const head = await c.query('SELECT tx_id::text AS tx, global_position::text AS pos FROM events ORDER BY tx_id DESC, global_position DESC LIMIT 1 OFFSET 20');
    for (const [tx, pos] of [[head.rows[0].tx, head.rows[0].pos], ['0', '0']]) {
      const r = await c.query(`EXPLAIN (ANALYZE, BUFFERS) ${SUBSCRIBE_SQL}`, [tx, pos, 500, ['MessageAccepted'], ['text', 'html', 'raw', 'headers']]);
      const plan = r.rows.map((x: Record<string, string>) => x['QUERY PLAN']).join('\n');
      expect(plan, `from ${tx}:${pos}`).not.to.match(/Seq Scan on events/);
      expect(plan).to.match(/Index (Only )?Scan using events_tx_order/);
    }
  });

  const planOf = async (sql: string, params: unknown[]): Promise<string> =>
    (await c.query(`EXPLAIN ${sql}`, params)).rows.map((x: Record<string, string>) => x['QUERY PLAN']).join('\n');

  it('grouped stream reads probe the index per stream', async () => {
    const streams = Array.from({ length: 50 }, (_, i) => `plan-${i + 1}`);
    const plan = await planOf(READ_STREAMS_SQL, [streams, streams.map(() => '0'), streams.map(() => null)]);
    expect(plan).not.to.match(/Seq Scan on events/);
  });

  it('deleteStreams finds the streams through the index', async () => {
    // A deleted block's history: many message streams at once.
    const streams = Array.from({ length: 200 }, (_, i) => `plan-${i + 1}`);
    expect(await planOf(DELETE_STREAMS_SQL, [streams])).not.to.match(/Seq Scan on events/);
    expect(await planOf('DELETE FROM events WHERE stream_id = ANY($1::text[])', [streams]), 'the form it replaces').to.match(/Seq Scan on events/);
  });

  it("an append's revision and event-id checks probe the index (group commit's fallback path)", async () => {
    const streams = Array.from({ length: 50 }, (_, i) => `plan-${i + 1}`);
    const ids = (await c.query('SELECT event_id::text AS id FROM events LIMIT 50')).rows.map((r: { id: string }) => r.id);
    expect(await planOf(CURRENT_SQL, [streams])).not.to.match(/Seq Scan on events/);
    expect(await planOf(EXISTING_SQL, [ids])).not.to.match(/Seq Scan on events/);
  });

  it('motor_append_batch looks up current revisions without scanning the log', async () => {
    // Counted by this backend's not yet reported scans (pg_stat_xact_user_tables), before and after; rolled back.
    const seqScans = async () => Number((await c.query(`SELECT seq_scan FROM pg_stat_xact_user_tables WHERE relname = 'events'`)).rows[0].seq_scan);
    await c.query('BEGIN');
    try {
      const before = await seqScans();
      const batch = [
        { s: 'plan-7', x: '0', e: [{ id: randomUUID(), t: 'DeliveryStarted', v: 1, d: {} }] },
        { s: 'plan-8', x: 'any', e: [{ id: randomUUID(), t: 'DeliveryStarted', v: 1, d: {} }] },
        { s: `plan-new-${randomUUID()}`, x: 'no_stream', e: [{ id: randomUUID(), t: 'MessageAccepted', v: 1, d: {} }] },
      ];
      const r = await c.query('SELECT motor_append_batch($1::jsonb, $2) AS r', [JSON.stringify(batch), 'DeliveryStarted,MessageAccepted']);
      expect((r.rows[0].r as Array<{ ok: boolean }>).map((x) => x.ok)).to.deep.equal([true, true, true]);
      expect(await seqScans()).to.equal(before);
    } finally {
      await c.query('ROLLBACK');
    }
  });
});
