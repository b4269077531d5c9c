import { randomBytes, randomUUID } from 'node:crypto';
import { expect } from 'chai';
import pg from 'pg';
import type { EventData, LogBatch, RecordedEvent } from '../../../domain/eventStore.js';
import { PostgresEventStore, type PostgresEventStoreOptions } from '../../../infra/eventstore/postgres/postgresEventStore.js';
import { createTestDatabase } from '../../support/db.js';

/**
 * Subscriptions of one PostgreSQL store share their reads of the head of the log
 * (infra/eventstore/postgres/sharedWindows.ts): what each receives must stay exactly what its own
 * reads would have given it.
 */
describe('PostgresEventStore: subscriptions sharing their reads of the log', function () {
  this.timeout(90_000);
  let db: { url: string; drop: () => Promise<void> };
  const stores: PostgresEventStore[] = [];
  const open = async (options: PostgresEventStoreOptions = {}): Promise<PostgresEventStore> => {
    const s = new PostgresEventStore(db.url, { poolSize: 4, ...options });
    stores.push(s);
    await s.init();
    return s;
  };
  const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));
  const ev = (type: string, data: Record<string, unknown> = {}): EventData => ({ id: randomUUID(), type, version: 1, data });

  /**
   * Counts the store's reads of a subscription window (the SQL statement) that were not held back.
   * A read held back is a retry the store makes while an older transaction anywhere in the cluster
   * (another test's, in another database: the snapshot horizon is the cluster's) is still open; how
   * many there are depends on the machine, not on the sharing of windows (a CI run with tests
   * running beside it counted 15 reads where 3 were made and 12 retried).
   */
  const countReads = (store: PostgresEventStore) => {
    const spied = store as unknown as { readWindow: (...a: unknown[]) => Promise<{ heldBack: boolean }> };
    const readWindow = spied.readWindow.bind(store);
    const counter = { reads: 0 };
    spied.readWindow = (...a: unknown[]) => readWindow(...a).then((page) => {
      if (!page.heldBack) counter.reads++;
      return page;
    });
    return counter;
  };

  interface Follower { seen: RecordedEvent[]; stop(): Promise<void> }
  const followAll = (store: PostgresEventStore, prefix: string, o: { types?: string[]; omitData?: string[]; batchSize?: number; slowMs?: number } = {}): Follower => {
    const ac = new AbortController();
    const seen: RecordedEvent[] = [];
    const done = (async () => {
      for await (const batch of store.subscribeToAll({ signal: ac.signal, types: o.types, omitData: o.omitData, batchSize: o.batchSize })) {
        seen.push(...batch.events.filter((e) => e.streamId.startsWith(prefix)));
        if (o.slowMs) await pause(Math.floor(Math.random() * o.slowMs));
      }
    })();
    return { seen, stop: async () => { ac.abort(); await done; } };
  };

  before(async () => {
    db = await createTestDatabase('es_shared');
  });
  after(async () => {
    await Promise.all(stores.map((s) => s.close().catch(() => undefined)));
    await db.drop();
  });

  for (const shareWindows of [true, false]) {
    it(`one NOTIFY, subscriptions at the head: ${shareWindows ? 'one read for all of them' : 'a read each (sharing off)'}`, async () => {
      const store = await open({ pollIntervalMs: 20_000, shareWindows });
      const writer = await open();
      const prefix = `wake${randomUUID().slice(0, 8)}`;
      const followers = [followAll(store, prefix, { types: ['A'] }), followAll(store, prefix, { types: ['A', 'B'] }), followAll(store, prefix), followAll(store, prefix, { types: ['B'] })];
      await pause(400); // caught up and asleep
      const counter = countReads(store);
      await writer.append(`${prefix}-1`, [ev('A', { n: 1 })]);
      const deadline = Date.now() + 10_000;
      while (followers.slice(0, 3).some((f) => f.seen.length === 0) && Date.now() < deadline) await pause(5);
      await pause(200);
      await Promise.all(followers.map((f) => f.stop()));
      expect(followers.map((f) => f.seen.map((e) => e.type))).to.deep.equal([['A'], ['A'], ['A'], []]);
      // The NOTIFY names type A: the B-only subscription is not woken; the three others read once between them.
      expect(counter.reads).to.equal(shareWindows ? 1 : 3);
    });
  }

  it('a batch from remembered windows holds everything the store has handed over since: `more: false` means no subscription of it has gone further', async () => {
    const store = await open({ pollIntervalMs: 20_000 });
    const writer = await open();
    const prefix = `more${randomUUID().slice(0, 8)}`;
    const c0 = await writer.append(`start-${prefix}`, [ev('Start')]);
    // A follows the head, window by window, and is held inside its handling of the batch with e2.
    let release!: () => void;
    const held = new Promise<void>((r) => { release = r; });
    const ac = new AbortController();
    const seenByA: string[] = [];
    const a = (async () => {
      for await (const batch of store.subscribeToAll({ after: c0.position, signal: ac.signal })) {
        seenByA.push(...batch.events.filter((e) => e.streamId.startsWith(prefix)).map((e) => e.streamId));
        if (seenByA.includes(`${prefix}-2`)) await held;
      }
    })();
    await pause(300);
    await writer.append(`${prefix}-1`, [ev('A', { n: 1 })]);
    const deadline = Date.now() + 5000;
    while (!seenByA.includes(`${prefix}-1`) && Date.now() < deadline) await pause(5);
    await writer.append(`${prefix}-2`, [ev('A', { n: 2 })]);
    while (!seenByA.includes(`${prefix}-2`) && Date.now() < deadline) await pause(5);
    expect(seenByA).to.deep.equal([`${prefix}-1`, `${prefix}-2`]);
    // B starts where A's first remembered window starts (an event stream resume): by its first
    // `more: false` it has everything A has been handed.
    const seen: string[] = [];
    const bc = new AbortController();
    for await (const batch of store.subscribeToAll({ after: c0.position, signal: bc.signal })) {
      seen.push(...batch.events.filter((e) => e.streamId.startsWith(prefix)).map((e) => e.streamId));
      if (batch.more === false) break;
    }
    bc.abort();
    release();
    ac.abort();
    await a;
    expect(seen).to.deep.equal([`${prefix}-1`, `${prefix}-2`]);
  });

  it('a read that is not remembered (a subscription behind, reading its own window) still makes a batch from an older window say more', async () => {
    const store = await open({ pollIntervalMs: 20_000 });
    const writer = await open();
    const prefix = `own${randomUUID().slice(0, 8)}`;
    const c0 = await writer.append(`start-${prefix}`, [ev('Start')]);
    const ac = new AbortController();
    const seenByA: string[] = [];
    const a = (async () => {
      for await (const batch of store.subscribeToAll({ after: c0.position, signal: ac.signal, batchSize: 2 })) {
        seenByA.push(...batch.events.filter((e) => e.streamId.startsWith(prefix)).map((e) => e.streamId));
      }
    })();
    await pause(300);
    await writer.append(`${prefix}-1`, [ev('A')]);
    const deadline = Date.now() + 5000;
    while (seenByA.length < 1 && Date.now() < deadline) await pause(5);
    // Three at once for windows of two: a full shared window, then a read of A's own that nobody remembers.
    await writer.append(`${prefix}-2`, [ev('A'), ev('A'), ev('A')]);
    while (seenByA.length < 4 && Date.now() < deadline) await pause(5);
    expect(seenByA).to.have.length(4);
    const seen: string[] = [];
    const bc = new AbortController();
    for await (const batch of store.subscribeToAll({ after: c0.position, signal: bc.signal, batchSize: 2 })) {
      seen.push(...batch.events.filter((e) => e.streamId.startsWith(prefix)).map((e) => e.streamId));
      if (batch.more === false) break;
    }
    bc.abort();
    ac.abort();
    await a;
    expect(seen).to.deep.equal(seenByA);
  });

  for (const shareWindows of [false, true]) {
    it(`an event held back when a window was read, released without a NOTIFY and handed over since: a batch from the window says more (sharing ${shareWindows ? 'on' : 'off'})`, async () => {
      const store = await open({ pollIntervalMs: 20_000, shareWindows });
      const writer = await open();
      const prefix = `held${randomUUID().slice(0, 8)}`;
      await writer.append(`${prefix}-0`, [ev('A')]);
      const ac = new AbortController();
      // The feed of the event stream: follows the head.
      const feed = store.subscribeToAll({ after: null, types: ['A'], batchSize: 100, signal: ac.signal })[Symbol.asyncIterator]();
      let b: LogBatch;
      do { b = (await feed.next()).value as LogBatch; } while (!(b.events.some((e) => e.streamId === `${prefix}-0`) && b.more === false));
      const c0 = b.position;
      await pause(300);
      await writer.append(`${prefix}-d`, [ev('A')]);
      const holder = new pg.Client({ connectionString: db.url });
      await holder.connect();
      try {
        await holder.query('BEGIN');
        await holder.query('SELECT pg_current_xact_id()'); // holds the horizon; its commit notifies nothing
        await writer.append(`${prefix}-e`, [ev('A')]);
        await pause(200);
        const held = (await feed.next()).value as LogBatch;
        expect(held.events.map((e) => e.streamId), 'e held back').to.deep.equal([`${prefix}-d`]);
        await holder.query('COMMIT');
      } finally {
        await holder.end();
      }
      const released = (await feed.next()).value as LogBatch;
      expect(released.events.map((e) => e.streamId), 'e once released').to.deep.equal([`${prefix}-e`]);
      // A resume from c0 (read-api/stream/eventStreams.ts) reads until more: false: e must be in by then.
      const rc = new AbortController();
      const seen: string[] = [];
      for await (const batch of store.subscribeToAll({ after: c0, types: ['A'], batchSize: 100, signal: rc.signal })) {
        seen.push(...batch.events.map((e) => e.streamId));
        if (batch.more === false) break;
      }
      rc.abort();
      ac.abort();
      await feed.return?.();
      expect(seen).to.deep.equal([`${prefix}-d`, `${prefix}-e`]);
    });
  }

  it('under concurrent writers, each subscription gets exactly its own events once, in log order, bodies left out only where asked', async () => {
    // A lost wake-up would stall a subscription for the 20 s poll interval: the deadline below is shorter.
    const store = await open({ pollIntervalMs: 20_000 });
    const prefix = `conc${randomUUID().slice(0, 8)}`;
    const start = await (await open()).append(`start-${prefix}`, [ev('Start')]);
    const specs = [
      { types: ['A'], batchSize: 50 },
      { types: ['A', 'B'], batchSize: 100, slowMs: 15 },
      { types: ['B', 'C'], batchSize: 100 },
      { batchSize: 70, slowMs: 10 },
      { types: ['A', 'C'], batchSize: 100, omitData: ['big'], slowMs: 5 },
      { types: ['A'], batchSize: 100, omitData: ['big'] },
    ];
    let hits = 0;
    const windows = (store as unknown as { windows: { find: (...a: unknown[]) => unknown } }).windows;
    const find = windows.find.bind(windows);
    windows.find = (...a: unknown[]) => { const r = find(...a); if (r) hits++; return r; };
    const followers = specs.map((spec) => followAll(store, prefix, spec));
    await pause(300);

    const big = randomBytes(4000).toString('base64'); // incompressible: stored above the 2 KB omit threshold
    const writers = await Promise.all(Array.from({ length: 4 }, () => open()));
    const TYPES = ['A', 'B', 'C'];
    await Promise.all(writers.map(async (w, i) => {
      for (let k = 0; k < 300; k++) {
        const events = Array.from({ length: 1 + (k % 3) }, (_, j) => ev(TYPES[(i + k + j) % 3], (k + j) % 17 === 0 ? { n: k, big } : { n: k }));
        await w.append(`${prefix}-w${i}-${k % 20}`, events);
      }
    }));

    // Everything written, read back in log order. An empty page is not the end: the store reads below
    // the oldest transaction still open in the cluster, and another database's (another test's) can hold it.
    const written = writers.length * Array.from({ length: 300 }, (_, k) => 1 + (k % 3)).reduce((x, y) => x + y, 0);
    const reference: RecordedEvent[] = [];
    const deadline = Date.now() + 15_000;
    for (let after = start.position; reference.length < written && Date.now() < deadline;) {
      const page = await store.readAll({ after, maxCount: 1000 });
      if (page.length === 0) {
        await pause(20);
        continue;
      }
      reference.push(...page.filter((e) => e.streamId.startsWith(prefix)));
      after = page[page.length - 1].position;
    }
    expect(reference.length, 'events written, read back').to.equal(written);
    const expected = specs.map((spec) => reference.filter((e) => !spec.types || spec.types.includes(e.type)));
    while (followers.some((f, i) => f.seen.length < expected[i].length) && Date.now() < deadline) await pause(20);
    await pause(200);
    await Promise.all(followers.map((f) => f.stop()));

    specs.forEach((spec, i) => {
      const label = JSON.stringify(spec);
      expect(followers[i].seen.map((e) => e.id), label).to.deep.equal(expected[i].map((e) => e.id));
      const bigOnes = followers[i].seen.filter((e) => typeof (reference.find((r) => r.id === e.id)!.data as { big?: string }).big === 'string');
      expect(bigOnes.length, label).to.be.greaterThan(0);
      for (const e of bigOnes) expect(Object.keys(e.data as object).sort(), label).to.deep.equal(spec.omitData ? ['n'] : ['big', 'n']);
    });
    expect(hits, 'windows taken from memory').to.be.greaterThan(0);
  });
});
