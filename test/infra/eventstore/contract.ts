import { randomBytes, randomUUID } from 'node:crypto';
import { expect } from 'chai';
import {
  InvalidEventDataError,
  WrongExpectedRevisionError,
  type EventData,
  type EventStore,
  type GlobalPosition,
  type RecordedEvent,
} from '../../../domain/eventStore.js';

/** What an adapter's test file hands the contract. */
export interface ContractSubject {
  /** A new store instance (own connections) on the suite's backing store. Closed by the contract. */
  open(): Promise<EventStore>;
  /** deleteStreams removes the events from the global log too (PostgreSQL), not only from reads of the stream. */
  deletesPhysically: boolean;
  /**
   * Called once before the concurrency test: afterwards an append whose event metadata carries
   * `holdMs` keeps its transaction open that long after inserting (so late commits happen).
   */
  enableHeldTransactions?: () => Promise<void>;
  /** Adapter-specific checks on the concurrency test's final log (e.g. that late commits did happen). */
  inspectConcurrentLog?: (log: RecordedEvent[]) => void;
  teardown(): Promise<void>;
}

const ev = (type = 'ThingHappened', data: unknown = { n: 1 }, metadata?: EventData['metadata']): EventData =>
  ({ id: randomUUID(), type, version: 1, data, ...(metadata ? { metadata } : {}) });

/** Every log read in a test is narrowed to its own streams: the backing store is shared. */
const ofStreams = (events: RecordedEvent[], prefix: string): RecordedEvent[] => events.filter((e) => e.streamId.startsWith(prefix));

async function readAllFrom(store: EventStore, after: GlobalPosition | null, pageSize = 500): Promise<RecordedEvent[]> {
  const out: RecordedEvent[] = [];
  for (;;) {
    const page = await store.readAll({ after, maxCount: pageSize });
    out.push(...page);
    if (page.length < pageSize) return out;
    after = page[page.length - 1].position;
  }
}

/**
 * The log of `prefix` streams once it holds at least `count` events. readAll may lag an append:
 * the PostgreSQL adapter holds events back while an older transaction (of any database on the
 * server, e.g. another suite's) is still running.
 */
async function visibleLog(store: EventStore, after: GlobalPosition | null, prefix: string, count: number): Promise<RecordedEvent[]> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const log = ofStreams(await readAllFrom(store, after), prefix);
    if (log.length >= count || Date.now() > deadline) return log;
    await new Promise((r) => setTimeout(r, 20));
  }
}

async function expectConflict(p: Promise<unknown>): Promise<WrongExpectedRevisionError> {
  try {
    await p;
  } catch (err) {
    expect(err).to.be.instanceOf(WrongExpectedRevisionError);
    return err as WrongExpectedRevisionError;
  }
  expect.fail('expected a WrongExpectedRevisionError');
}

/** Collects from a subscription until `until` holds (or times out), then aborts it. */
async function collect(
  store: EventStore,
  opts: { after?: GlobalPosition | null; prefix: string; until: (seen: RecordedEvent[]) => boolean; timeoutMs?: number; batchSize?: number },
): Promise<{ seen: RecordedEvent[]; last: GlobalPosition | null }> {
  const ac = new AbortController();
  const timer = setTimeout(() => ac.abort(), opts.timeoutMs ?? 10_000);
  const seen: RecordedEvent[] = [];
  let last: GlobalPosition | null = opts.after ?? null;
  try {
    for await (const batch of store.subscribeToAll({ after: opts.after, signal: ac.signal, batchSize: opts.batchSize })) {
      seen.push(...ofStreams(batch.events, opts.prefix));
      last = batch.position;
      if (opts.until(seen)) break;
    }
  } finally {
    clearTimeout(timer);
    ac.abort();
  }
  return { seen, last };
}

export function eventStoreContract(name: string, factory: () => Promise<ContractSubject>): void {
  describe(`EventStore contract: ${name}`, function () {
    this.timeout(30_000);
    let subject: ContractSubject;
    let store: EventStore;
    const opened: EventStore[] = [];
    const open = async (): Promise<EventStore> => {
      const s = await subject.open();
      opened.push(s);
      return s;
    };
    /** A stream name unique to this test run (`<category>-<uuid>`). */
    const stream = (category = 'contract'): string => `${category}-${randomUUID()}`;

    before(async () => {
      subject = await factory();
      store = await open();
    });
    after(async () => {
      await Promise.all(opened.map((s) => s.close().catch(() => undefined)));
      await subject?.teardown();
    });

    describe('append and readStream', () => {
      it('stores events with 0-based revisions and reads them back', async () => {
        const s = stream();
        const events = [ev('A', { a: 1, nested: { x: [1, 'two'] } }, { correlationId: 'c-1', actor: 'cli' }), ev('B', { b: true })];
        const result = await store.append(s, events, { expectedRevision: 'no_stream' });
        expect(result.nextExpectedRevision).to.equal(1n);
        expect(result.position).to.be.a('string');
        const read = await store.readStream(s);
        expect(read.map((e) => e.revision)).to.deep.equal([0n, 1n]);
        expect(read[0]).to.include({ id: events[0].id, type: 'A', version: 1, streamId: s });
        expect(read[0].data).to.deep.equal({ a: 1, nested: { x: [1, 'two'] } });
        expect(read[0].metadata).to.deep.include({ correlationId: 'c-1', actor: 'cli' });
        expect(read[0].createdAt).to.be.instanceOf(Date);
        expect(read[1].position).to.equal(result.position);
      });

      it('reads an unknown stream as empty', async () => {
        expect(await store.readStream(stream('nothing'))).to.deep.equal([]);
      });

      it('honours fromRevision and maxCount', async () => {
        const s = stream();
        await store.append(s, [ev(), ev(), ev(), ev(), ev()]);
        const part = await store.readStream(s, { fromRevision: 1n, maxCount: 3 });
        expect(part.map((e) => e.revision)).to.deep.equal([1n, 2n, 3n]);
        expect(await store.readStream(s, { fromRevision: 9n })).to.deep.equal([]);
      });

      it("appends at the end with 'any' (the default)", async () => {
        const s = stream();
        expect((await store.append(s, [ev()])).nextExpectedRevision).to.equal(0n);
        expect((await store.append(s, [ev(), ev()], { expectedRevision: 'any' })).nextExpectedRevision).to.equal(2n);
      });
    });

    describe('expected revision', () => {
      it("refuses 'no_stream' on an existing stream", async () => {
        const s = stream();
        await store.append(s, [ev()], { expectedRevision: 'no_stream' });
        const err = await expectConflict(store.append(s, [ev()], { expectedRevision: 'no_stream' }));
        expect(err.streamId).to.equal(s);
        expect(err.expected).to.equal('no_stream');
        expect(err.actual).to.equal(0n);
      });

      it('accepts the current revision and refuses a stale or future one', async () => {
        const s = stream();
        const r = await store.append(s, [ev(), ev()], { expectedRevision: 'no_stream' });
        const r2 = await store.append(s, [ev()], { expectedRevision: r.nextExpectedRevision });
        expect(r2.nextExpectedRevision).to.equal(2n);
        const stale = await expectConflict(store.append(s, [ev()], { expectedRevision: 1n }));
        expect(stale.actual).to.equal(2n);
        await expectConflict(store.append(s, [ev()], { expectedRevision: 7n }));
        expect((await store.readStream(s)).map((e) => e.revision)).to.deep.equal([0n, 1n, 2n]);
      });

      it('refuses a revision on a stream that does not exist', async () => {
        const err = await expectConflict(store.append(stream(), [ev()], { expectedRevision: 0n }));
        expect(err.actual).to.equal('no_stream');
      });

      it("'stream_exists' needs the stream", async () => {
        const s = stream();
        const err = await expectConflict(store.append(s, [ev()], { expectedRevision: 'stream_exists' }));
        expect(err.actual).to.equal('no_stream');
        await store.append(s, [ev()]);
        expect((await store.append(s, [ev()], { expectedRevision: 'stream_exists' })).nextExpectedRevision).to.equal(1n);
      });

      it('a failed multi-event append leaves nothing behind', async () => {
        const s = stream();
        await store.append(s, [ev()]);
        const rejected = [ev(), ev(), ev()];
        await expectConflict(store.append(s, rejected, { expectedRevision: 'no_stream' }));
        const read = await store.readStream(s);
        expect(read).to.have.length(1);
        // The same ids are still free: appended where they fit, they land.
        const r = await store.append(s, rejected, { expectedRevision: 0n });
        expect(r.nextExpectedRevision).to.equal(3n);
      });

      it('lets exactly one of several concurrent appends at the same revision win', async () => {
        const s = stream();
        await store.append(s, [ev()]);
        const results = await Promise.allSettled(Array.from({ length: 10 }, () => store.append(s, [ev(), ev()], { expectedRevision: 0n })));
        expect(results.filter((r) => r.status === 'fulfilled')).to.have.length(1);
        for (const r of results) if (r.status === 'rejected') expect(r.reason).to.be.instanceOf(WrongExpectedRevisionError);
        expect(await store.readStream(s)).to.have.length(3);
      });

      it("never loses an 'any' append under contention", async () => {
        const s = stream();
        const writers = [await open(), await open()];
        await Promise.all(Array.from({ length: 40 }, (_, i) => writers[i % 2].append(s, [ev()], { expectedRevision: 'any' })));
        const read = await store.readStream(s);
        expect(read.map((e) => e.revision)).to.deep.equal(Array.from({ length: 40 }, (_, i) => BigInt(i)));
      });

      it('fails a conflicting append alone among concurrent ones', async () => {
        const taken = stream();
        await store.append(taken, [ev()]);
        const fresh = Array.from({ length: 30 }, () => stream());
        const results = await Promise.allSettled([
          ...fresh.map((s) => store.append(s, [ev()], { expectedRevision: 'no_stream' })),
          store.append(taken, [ev(), ev()], { expectedRevision: 'no_stream' }),
          ...fresh.map((s) => store.append(`${s}x`, [ev(), ev()], { expectedRevision: 'no_stream' })),
        ]);
        const failures = results.filter((r) => r.status === 'rejected');
        expect(failures).to.have.length(1);
        expect((failures[0] as PromiseRejectedResult).reason).to.be.instanceOf(WrongExpectedRevisionError);
        expect(await store.readStream(taken)).to.have.length(1);
      });
    });

    describe('data the store cannot keep', () => {
      const deep = (levels: number): unknown => { let v: unknown = 'leaf'; for (let i = 0; i < levels; i++) v = { v }; return v; };
      const cyclic = (): unknown => { const o: Record<string, unknown> = {}; o.self = o; return o; };
      const bad: Array<[string, unknown, EventData['metadata']?]> = [
        ['U+0000 in a value', { subject: 'a\u0000b' }],
        ['an unpaired high surrogate', { name: 'x\ud800' }],
        ['an unpaired low surrogate in a key', { ['k\udc00']: 1 }],
        ['U+0000 in metadata', { n: 1 }, { actor: 'a\u0000' }],
        ['a BigInt', { n: 10n }],
        ['runaway nesting', deep(500)],
        ['a cycle', cyclic()],
      ];
      for (const [what, data, metadata] of bad) {
        it(`refuses an event with ${what}, whole, with InvalidEventDataError`, async () => {
          const s = stream();
          const err = await store.append(s, [ev('Fine'), ev('Bad', data, metadata)]).then(() => null, (e: unknown) => e);
          expect(err).to.be.instanceOf(InvalidEventDataError);
          expect((err as InvalidEventDataError).eventType).to.equal('Bad');
          expect(await store.readStream(s)).to.deep.equal([]);
        });
      }

      it('keeps well-formed text of every plane as it was', async () => {
        const s = stream();
        const data = { text: 'Grüße, 東京, 😀 \u2028 \ud83d\ude00 tab\t', nested: { list: ['é', { deeper: '\u{10FFFF}' }] } };
        await store.append(s, [ev('Unicode', data)]);
        expect((await store.readStream(s))[0].data).to.deep.equal(data);
      });

      it('fails the unstorable append alone among concurrent ones', async () => {
        const good = Array.from({ length: 30 }, () => stream());
        const poisoned = stream();
        const results = await Promise.allSettled([
          ...good.slice(0, 15).map((s) => store.append(s, [ev()], { expectedRevision: 'no_stream' })),
          store.append(poisoned, [ev('Bad', { subject: '\u0000' })], { expectedRevision: 'no_stream' }),
          ...good.slice(15).map((s) => store.append(s, [ev(), ev()], { expectedRevision: 'no_stream' })),
        ]);
        const failures = results.filter((r) => r.status === 'rejected') as PromiseRejectedResult[];
        expect(failures).to.have.length(1);
        expect(failures[0].reason).to.be.instanceOf(InvalidEventDataError);
        for (const s of good) expect(await store.readStream(s)).to.not.be.empty;
        expect(await store.readStream(poisoned)).to.deep.equal([]);
      });
    });

    describe('idempotent retries', () => {
      it('a retried append of the same events at the same place succeeds with the same result', async () => {
        const s = stream();
        const first = [ev(), ev()];
        const r1 = await store.append(s, first, { expectedRevision: 'no_stream' });
        const again = await store.append(s, first, { expectedRevision: 'no_stream' });
        expect(again).to.deep.equal(r1);
        const second = [ev()];
        const r2 = await store.append(s, second, { expectedRevision: 1n });
        expect(await store.append(s, second, { expectedRevision: 1n })).to.deep.equal(r2);
        expect(await store.readStream(s)).to.have.length(3);
      });

      it('concurrent duplicates of one append all succeed and store it once', async () => {
        const s = stream();
        const events = [ev(), ev()];
        const results = await Promise.all(Array.from({ length: 5 }, () => store.append(s, events, { expectedRevision: 'no_stream' })));
        for (const r of results) expect(r).to.deep.equal(results[0]);
        expect(await store.readStream(s)).to.have.length(2);
      });
    });

    describe('readAll', () => {
      it('returns the log in append order and pages with `after`', async () => {
        const prefix = `order${randomUUID().slice(0, 8)}`;
        const [a, b, c] = [`${prefix}-a`, `${prefix}-b`, `${prefix}-c`];
        const start = await store.append(stream(), [ev()]);
        await store.append(a, [ev(), ev()]);
        await store.append(b, [ev()]);
        await store.append(c, [ev(), ev(), ev()]);
        await store.append(a, [ev()]);
        const expected = [`${a}:0`, `${a}:1`, `${b}:0`, `${c}:0`, `${c}:1`, `${c}:2`, `${a}:2`];
        const label = (e: RecordedEvent): string => `${e.streamId}:${e.revision}`;

        const all = await visibleLog(store, null, prefix, expected.length);
        expect(all.map(label)).to.deep.equal(expected);
        expect(ofStreams(await readAllFrom(store, start.position), prefix).map(label)).to.deep.equal(expected);

        // Paging two at a time from the start position walks the same sequence.
        const paged: RecordedEvent[] = [];
        let after: GlobalPosition = start.position;
        for (;;) {
          const page = await store.readAll({ after, maxCount: 2 });
          if (page.length === 0) break;
          expect(page.length).to.be.at.most(2);
          paged.push(...page);
          after = page[page.length - 1].position;
        }
        expect(ofStreams(paged, prefix).map(label)).to.deep.equal(expected);

        // `after` is exclusive.
        const fromB = ofStreams(await readAllFrom(store, all[2].position), prefix);
        expect(fromB.map(label)).to.deep.equal(expected.slice(3));
      });

      it('comparePositions orders positions as the log does; isPosition knows its own shape', async () => {
        const prefix = `cmp${randomUUID().slice(0, 8)}`;
        await store.append(`${prefix}-a`, [ev(), ev()]);
        await store.append(`${prefix}-b`, [ev()]);
        const log = await visibleLog(store, null, prefix, 3);
        const [p0, p1, p2] = log.map((e) => e.position);
        expect(store.comparePositions(p0, p1)).to.be.below(0);
        expect(store.comparePositions(p2, p1)).to.be.above(0);
        expect(store.comparePositions(p1, p1)).to.equal(0);
        for (const p of [p0, p1, p2]) expect(store.isPosition(p)).to.equal(true);
        // Past 64 bits no store holds a position: such an id cannot be read from (docs/EVENTS.md "Resuming").
        for (const junk of ['', 'x', '1:', ':1', '1:2:3', '-1:2', `${p0} `, '9'.repeat(40), '18446744073709551616:1', '1:18446744073709551616']) expect(store.isPosition(junk), junk).to.equal(false);
      });

      it('headPosition is at or after every position handed out, and moves with each append', async () => {
        const prefix = `head${randomUUID().slice(0, 8)}`;
        const first = await store.append(`${prefix}-a`, [ev()]);
        const h1 = await store.headPosition();
        expect(h1).to.be.a('string');
        expect(store.isPosition(h1!)).to.equal(true);
        expect(store.comparePositions(h1!, first.position)).to.be.at.least(0);
        const second = await store.append(`${prefix}-b`, [ev()]);
        const h2 = (await store.headPosition())!;
        expect(store.comparePositions(h2, second.position)).to.be.at.least(0);
        expect(store.comparePositions(h2, h1!)).to.be.above(0);
        for (const e of await visibleLog(store, null, prefix, 2)) expect(store.comparePositions(h2, e.position), e.position).to.be.at.least(0);
      });

      it('headPosition with types: the position of the last entry of one of those types, null when there is none', async () => {
        const tag = randomUUID().replace(/-/g, '').slice(0, 12);
        const [typeA, typeB, never] = [`HeadA${tag}`, `HeadB${tag}`, `HeadNever${tag}`];
        expect(await store.headPosition({ types: [typeA] })).to.equal(null);
        await store.append(`head${tag}-a`, [ev(typeA), ev(typeA)]);
        await store.append(`head${tag}-b`, [ev(typeB)]);
        await store.append(`head${tag}-c`, [ev()]);
        const [, lastA] = await store.readStream(`head${tag}-a`);
        const [b] = await store.readStream(`head${tag}-b`);
        expect(await store.headPosition({ types: [typeA] }), 'not moved by entries of other types').to.equal(lastA.position);
        expect(await store.headPosition({ types: [typeA, typeB] })).to.equal(b.position);
        expect(await store.headPosition({ types: [never] })).to.equal(null);
        expect(store.comparePositions((await store.headPosition())!, b.position), 'the whole log\'s head is past them').to.be.above(0);
      });

      it('an append result position excludes that append and includes what follows', async () => {
        const s = stream('after');
        const r = await store.append(s, [ev(), ev()]);
        await store.append(s, [ev()]);
        const later = await visibleLog(store, r.position, s, 1);
        expect(later.map((e) => e.revision)).to.deep.equal([2n]);
      });
    });

    describe('subscribeToAll', () => {
      it('catches up, then delivers live events, and ends when aborted', async () => {
        const prefix = `sub${randomUUID().slice(0, 8)}`;
        const s = `${prefix}-${randomUUID()}`;
        await store.append(s, [ev(), ev(), ev()]);
        const ac = new AbortController();
        const seen: RecordedEvent[] = [];
        const subscriber = await open();
        const done = (async () => {
          for await (const batch of subscriber.subscribeToAll({ signal: ac.signal, batchSize: 2 })) {
            expect(batch.events.length).to.be.within(1, 2);
            expect(batch.position).to.equal(batch.events[batch.events.length - 1].position);
            seen.push(...ofStreams(batch.events, prefix));
          }
        })();
        await waitFor(() => seen.length === 3);
        await store.append(s, [ev(), ev()]);
        await waitFor(() => seen.length === 5);
        ac.abort();
        await done;
        expect(seen.map((e) => e.revision)).to.deep.equal([0n, 1n, 2n, 3n, 4n]);
      });

      it('starts after the given position', async () => {
        const prefix = `subafter${randomUUID().slice(0, 8)}`;
        const s = `${prefix}-${randomUUID()}`;
        const r = await store.append(s, [ev(), ev()]);
        await store.append(s, [ev()]);
        const { seen } = await collect(store, { after: r.position, prefix, until: (x) => x.length >= 1 });
        expect(seen.map((e) => e.revision)).to.deep.equal([2n]);
      });

      it('with types, delivers only those types, and resuming after a batch position skips nothing', async () => {
        const tag = randomUUID().slice(0, 8);
        const [wanted, other] = [`Wanted${tag}`, `Other${tag}`];
        const prefix = `subtype${tag}`;
        const s = `${prefix}-${randomUUID()}`;
        const start = await store.append(`${prefix}-start`, [ev(other)]);
        await store.append(s, [ev(other, { n: 1 }), ev(wanted, { n: 2 }), ev(other, { n: 3 }), ev(wanted, { n: 4 })]);
        const ac = new AbortController();
        const timer = setTimeout(() => ac.abort(), 10_000);
        const seen: RecordedEvent[] = [];
        let position: GlobalPosition = start.position;
        try {
          for await (const batch of store.subscribeToAll({ after: start.position, signal: ac.signal, batchSize: 3, types: [wanted] })) {
            expect(batch.events.every((e) => e.type === wanted), 'only the wanted type').to.equal(true);
            seen.push(...ofStreams(batch.events, prefix));
            position = batch.position;
            if (seen.length >= 2) break;
          }
        } finally {
          clearTimeout(timer);
          ac.abort();
        }
        expect(seen.map((e) => (e.data as { n: number }).n)).to.deep.equal([2, 4]);

        // Resumed after the last position handed over: the later events, none of the earlier ones.
        await store.append(s, [ev(other, { n: 5 }), ev(wanted, { n: 6 })]);
        const { seen: later } = await collect(store, { after: position, prefix, until: (x) => x.some((e) => e.type === wanted) });
        expect(later.map((e) => (e.data as { n: number }).n)).to.include(6).and.not.include(4).and.not.include(2);
      });

      it('with omitData, leaves those top-level data keys out and keeps the rest, metadata and readStream whole', async () => {
        const prefix = `subomit${randomUUID().slice(0, 8)}`;
        const s = `${prefix}-${randomUUID()}`;
        const start = await store.append(`${prefix}-start`, [ev()]);
        const body = randomBytes(30_000).toString('base64'); // incompressible: a large event as stored
        const data = { messageId: 'm1', to: ['a@x.test'], text: body, html: `<p>${body}</p>`, nested: { text: 'kept' } };
        await store.append(s, [ev('Big', data, { actor: 'test' }), ev('Small', { n: 7 })]);
        const ac = new AbortController();
        const timer = setTimeout(() => ac.abort(), 10_000);
        const seen: RecordedEvent[] = [];
        try {
          for await (const batch of store.subscribeToAll({ after: start.position, signal: ac.signal, omitData: ['text', 'html', 'absent'] })) {
            seen.push(...ofStreams(batch.events, s));
            if (seen.length >= 2) break;
          }
        } finally {
          clearTimeout(timer);
          ac.abort();
        }
        expect(seen.map((e) => e.type)).to.deep.equal(['Big', 'Small']);
        expect(seen[0].data).to.deep.equal({ messageId: 'm1', to: ['a@x.test'], nested: { text: 'kept' } });
        expect(seen[0].metadata).to.deep.equal({ actor: 'test' });
        expect(seen[1].data).to.deep.equal({ n: 7 });
        // Only the subscription's copy is trimmed: the stored event is whole.
        expect((await store.readStream(s))[0].data).to.deep.equal(data);
      });

      it('close() makes an active subscription finish', async () => {
        const other = await subject.open();
        const ac = new AbortController();
        const done = (async () => {
          for await (const batch of other.subscribeToAll({ signal: ac.signal })) void batch;
        })();
        await new Promise((r) => setTimeout(r, 200));
        await other.close();
        const finished = await Promise.race([done.then(() => true, () => true), new Promise((r) => setTimeout(() => r(false), 5000))]);
        ac.abort();
        expect(finished).to.equal(true);
      });
    });

    describe('deleteStreams', () => {
      it('removes the streams and leaves the others alone', async () => {
        const prefix = `del${randomUUID().slice(0, 8)}`;
        const [gone1, gone2, kept] = [`${prefix}-1`, `${prefix}-2`, `${prefix}-3`];
        await store.append(gone1, [ev(), ev()]);
        await store.append(kept, [ev()]);
        await store.append(gone2, [ev()]);
        await store.deleteStreams([gone1, gone2]);
        await store.deleteStreams([]);
        expect(await store.readStream(gone1)).to.deep.equal([]);
        expect(await store.readStream(gone2)).to.deep.equal([]);
        expect(await store.readStream(kept)).to.have.length(1);
        if (subject.deletesPhysically) {
          const all = await visibleLog(store, null, prefix, 1);
          expect(all.map((e) => e.streamId)).to.deep.equal([kept]);
        }
      });
    });

    it('ping() answers', async () => {
      await store.ping();
    });

    describe('under concurrency', () => {
      const WRITERS = 8;
      const EVENTS_PER_WRITER = 2000;
      const LANES = 4;

      it(`${WRITERS} parallel writers × ${EVENTS_PER_WRITER} events: subscribers see each event once, in one stable order, across a restart`, async function () {
        this.timeout(90_000);
        await subject.enableHeldTransactions?.();
        const prefix = `conc${randomUUID().slice(0, 8)}`;
        const total = WRITERS * EVENTS_PER_WRITER;
        const start = await store.append(stream('concstart'), [ev()]);
        const writers = await Promise.all(Array.from({ length: WRITERS }, () => open()));

        // Subscriber 1 runs throughout; subscriber 2 stops after a quarter and resumes from its checkpoint.
        const continuous = collect(await open(), { after: start.position, prefix, until: (x) => x.length >= total, timeoutMs: 80_000, batchSize: 300 });
        const restarted = (async () => {
          const sub = await open();
          const part1 = await collect(sub, { after: start.position, prefix, until: (x) => x.length >= total / 4, timeoutMs: 80_000, batchSize: 100 });
          const part2 = await collect(await open(), { after: part1.last, prefix, until: (x) => part1.seen.length + x.length >= total, timeoutMs: 80_000, batchSize: 250 });
          return [...part1.seen, ...part2.seen];
        })();

        // Each writer runs LANES sequential loops on its own streams, so its appends also overlap.
        const t0 = Date.now();
        const written = await Promise.all(writers.flatMap((w, i) =>
          Array.from({ length: LANES }, (_, l) => writeMixed(w, `${prefix}-w${i}l${l}`, EVENTS_PER_WRITER / LANES))));
        const writtenIds = new Set(written.flat());
        if (process.env.DEBUG_CONTRACT) console.log(`writers done in ${Date.now() - t0} ms`);
        expect(writtenIds.size).to.equal(total);

        const [one, two] = await Promise.all([continuous, restarted]);
        if (process.env.DEBUG_CONTRACT) console.log(`subscribers done in ${Date.now() - t0} ms`);
        const reference = ofStreams(await readAllFrom(store, start.position, 1000), prefix);
        const again = ofStreams(await readAllFrom(store, start.position, 777), prefix);
        const ids = (events: RecordedEvent[]): string[] => events.map((e) => e.id);

        expect(reference).to.have.length(total);
        expect(new Set(ids(reference))).to.deep.equal(writtenIds);
        expect(ids(again)).to.deep.equal(ids(reference));
        expect(new Set(ids(one.seen)).size).to.equal(one.seen.length, 'continuous subscriber saw a duplicate');
        expect(ids(one.seen)).to.deep.equal(ids(reference));
        expect(ids(two)).to.deep.equal(ids(reference));
        subject.inspectConcurrentLog?.(reference);
        // Inside each stream the global order is the revision order.
        const lastRevision = new Map<string, bigint>();
        for (const e of reference) {
          expect(e.revision).to.equal((lastRevision.get(e.streamId) ?? -1n) + 1n);
          lastRevision.set(e.streamId, e.revision);
        }
      });
    });
  });
}

/**
 * One writer: sequential appends of 1 to 4 events, to new streams ('no_stream') or its own
 * existing ones (exact revision or 'any'); about one append in 50 asks to hold its transaction open.
 */
async function writeMixed(store: EventStore, prefix: string, count: number): Promise<string[]> {
  const ids: string[] = [];
  const streams: Array<{ id: string; revision: bigint }> = [];
  let n = 0;
  while (ids.length < count) {
    const size = Math.min(count - ids.length, Math.random() < 0.5 ? 1 : 2 + Math.floor(Math.random() * 3));
    const hold = Math.random() < 0.02 ? { holdMs: 20 + Math.floor(Math.random() * 150) } : undefined;
    const events = Array.from({ length: size }, (_, k) => ev('Written', { n: n++ }, k === 0 ? hold : undefined));
    if (streams.length === 0 || Math.random() < 0.4) {
      const id = `${prefix}-${randomUUID()}`;
      const r = await store.append(id, events, { expectedRevision: 'no_stream' });
      streams.push({ id, revision: r.nextExpectedRevision });
    } else {
      const target = streams[Math.floor(Math.random() * streams.length)];
      const r = await store.append(target.id, events, { expectedRevision: Math.random() < 0.5 ? target.revision : 'any' });
      target.revision = r.nextExpectedRevision;
    }
    ids.push(...events.map((e) => e.id));
  }
  return ids;
}

async function waitFor(condition: () => boolean, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error('timed out waiting');
    await new Promise((r) => setTimeout(r, 10));
  }
}
