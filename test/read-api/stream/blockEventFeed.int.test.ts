import { randomUUID } from 'node:crypto';
import { EventEmitter } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { expect } from 'chai';
import type { Response } from 'express';
import { Redis } from 'ioredis';
import type { Knex } from 'knex';
import { EventStoreUnavailableError, type EventStore, type GlobalPosition, type LogBatch, type RecordedEvent, type SubscribeOptions } from '../../../domain/eventStore';
import { createDb } from '../../../infra/db';
import { PostgresEventStore } from '../../../infra/eventstore/postgres/postgresEventStore';
import { createLogger } from '../../../infra/logger';
import { messagesProjection } from '../../../projections/messages/projection';
import { MESSAGES_SCHEMA } from '../../../projections/messages/queries';
import { migrateProjection } from '../../../projections/runner';
import type { BlockEventFeed, StreamMessageEvent } from '../../../read-api/stream/blockEventFeed';
import { EventStreams } from '../../../read-api/stream/eventStreams';
import { acceptedEvent } from '../../projections/fixtures';
import { createTestDatabase, TEST_REDIS_URL } from '../../support/db';
import { eventually } from '../../support/motor';
import { openSseStream } from '../../support/sse';

/** An SSE stream of the feed's test server, with its `message` events at hand. */
async function openStream(url: string) {
  const stream = await openSseStream(url);
  return { events: stream.events, messages: () => stream.events.filter((e) => e.event === 'message'), close: stream.close };
}

/** Logs kept in memory: the feed's restarts and failures are asserted on. */
function memoryLogger() {
  const lines: Array<{ level: number; msg: string }> = [];
  const logger = createLogger('info', {}, { write: (line: string) => { lines.push(JSON.parse(line)); } });
  const count = (msg: string) => lines.filter((l) => l.msg === msg).length;
  return { logger, count, restarts: () => count('event stream feed failed; retrying'), listenerFailures: () => count('event stream listener failed') };
}

/**
 * The live feed behind the event stream (read-api/stream/blockEventFeed.ts, docs/EVENTS.md "How it
 * works") across its own restarts: when the store's subscription or the feed's handling fails, the
 * feed starts again right after the last position it handed to its listeners, so a connected
 * client sees every event exactly once, whatever the messages projection's checkpoint says then.
 */
describe('event stream feed restarts (int)', function () {
  this.timeout(30_000);
  const BLOCK = '55555555-5555-4555-8555-555555555555';
  let dbh: { url: string; drop: () => Promise<void> };
  let db: Knex;
  let store: PostgresEventStore;
  let redis: Redis;
  let server: Server | undefined;
  let streams: EventStreams | undefined;

  beforeEach(async () => {
    dbh = await createTestDatabase('feed_restart');
    db = createDb(dbh.url, { pool: { min: 0, max: 4 } });
    store = new PostgresEventStore(dbh.url, { pollIntervalMs: 100 });
    await store.init();
    await migrateProjection(db, messagesProjection);
    redis = new Redis(TEST_REDIS_URL);
  });
  afterEach(async () => {
    streams?.closeAll();
    server?.close();
    redis.disconnect();
    await store.close();
    await db.destroy();
    await dbh.drop();
  });

  /** Serves the block's stream on a bare HTTP server (resumed after `?after=`, when given); returns its URL. */
  async function serve(s: EventStreams): Promise<string> {
    streams = s;
    const tokenId = randomUUID();
    server = createServer((req, res) => {
      const resumeAfter = new URL(req.url ?? '/', 'http://x').searchParams.get('after') ?? undefined;
      void s.serve(res as unknown as Response, { motorBlockId: BLOCK, tokenId, endsAt: new Date(Date.now() + 25_000), unmasked: true, resumeAfter });
    });
    await new Promise<void>((r) => server!.listen(0, '127.0.0.1', () => r()));
    return `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
  }

  /** Appends one message accepted for one recipient (or those given); returns its id and log position. */
  async function accept(to?: string[]): Promise<{ id: string; position: GlobalPosition }> {
    const id = randomUUID();
    const { position } = await store.append(`message-${id}`, [acceptedEvent(id, BLOCK, to ?? [`${id.slice(0, 8)}@rcpt.test`], 0)]);
    return { id, position };
  }

  const seen = (c: Awaited<ReturnType<typeof openStream>>, id: string) => eventually(async () => c.messages().some((e) => e.data.messageId === id), 10_000);

  /** Sends m1, fails the feed once around m2 (through `arm`), sends m3; returns what the client saw and what it should have. */
  async function acrossOneFailure(url: string, arm: () => void, failures: () => number) {
    const c = await openStream(url);
    await eventually(async () => c.events.some((e) => e.event === 'ready'), 5000);
    const m1 = await accept();
    await seen(c, m1.id);
    arm();
    const m2 = await accept();
    await eventually(async () => failures() === 1, 10_000);
    const m3 = await accept();
    await seen(c, m3.id);
    // A repeat (or a late m2) would come before m3 in log order; wait a little for anything in flight.
    await new Promise((r) => setTimeout(r, 300));
    c.close();
    return { got: c.messages().map((e) => [e.id, e.data.messageId]), want: [m1, m2, m3].map((m) => [m.position, m.id]) };
  }

  it('the store\'s subscription failing: resumes after the last batch handed over (no repeat of what came before)', async () => {
    // The messages projection has applied nothing (checkpoint null): a restart from the checkpoint
    // would read the whole log again and repeat m1 to the client.
    let armed = false;
    let failures = 0;
    const subscribedAfter: Array<GlobalPosition | null | undefined> = [];
    const failing: EventStore = Object.create(store, {
      subscribeToAll: {
        value: (o: SubscribeOptions) => (async function* (): AsyncIterable<LogBatch> {
          subscribedAfter.push(o.after);
          for await (const batch of store.subscribeToAll(o)) {
            if (armed && batch.events.length > 0) {
              armed = false;
              failures += 1;
              throw new EventStoreUnavailableError('injected: the store failed while reading');
            }
            yield batch;
          }
        })(),
      },
    });
    const log = memoryLogger();
    const url = await serve(new EventStreams(db, failing, redis, log.logger, 60));
    const { got, want } = await acrossOneFailure(url, () => { armed = true; }, () => failures);
    expect(got, 'every event once, in log order').to.deep.equal(want);
    expect(log.restarts()).to.equal(1);
    expect(subscribedAfter, 'first from the checkpoint, then after m1').to.deep.equal([null, want[0][0]]);
  });

  it('the feed\'s own handling failing: resumes after the last batch handed over (no gap when the projection is ahead)', async () => {
    const log = memoryLogger();
    const s = new EventStreams(db, store, redis, log.logger, 60);
    const feed = (s as unknown as { feed: BlockEventFeed }).feed;
    const resolve = feed.resolve.bind(feed);
    let armed = false;
    let failures = 0;
    feed.resolve = async (events: RecordedEvent[], wanted: (motorBlockId: string) => boolean): Promise<StreamMessageEvent[]> => {
      if (armed && events.length > 0) {
        armed = false;
        failures += 1;
        // Meanwhile the messages projection applies the batch, as it does in a running deployment:
        // a restart from its checkpoint would skip m2.
        await db.withSchema(MESSAGES_SCHEMA).table('projection_checkpoint').where({ id: 1 }).update({ position: events[events.length - 1].position });
        throw new Error('injected: the feed failed handling a batch');
      }
      return resolve(events, wanted);
    };
    const url = await serve(s);
    const { got, want } = await acrossOneFailure(url, () => { armed = true; }, () => failures);
    expect(got, 'every event once, in log order').to.deep.equal(want);
    expect(log.restarts()).to.equal(1);
  });

  it('a listener that throws neither restarts the feed nor keeps the batch from the other listeners', async () => {
    const log = memoryLogger();
    const s = new EventStreams(db, store, redis, log.logger, 60);
    const feed = (s as unknown as { feed: BlockEventFeed }).feed;
    const url = await serve(s);
    let armed = false;
    let thrown = 0;
    const c = await openStream(url);
    await eventually(async () => c.events.some((e) => e.event === 'ready'), 5000);
    // Listens after the client: the client has the batch before this one throws.
    const unlisten = feed.listen(BLOCK, () => {
      if (!armed) return;
      armed = false;
      thrown += 1;
      throw new Error('injected: a listener failed');
    });
    const m1 = await accept();
    await seen(c, m1.id);
    armed = true;
    const m2 = await accept();
    await eventually(async () => thrown === 1, 10_000);
    const m3 = await accept();
    await seen(c, m3.id);
    await new Promise((r) => setTimeout(r, 300));
    unlisten();
    c.close();
    expect(c.messages().map((e) => [e.id, e.data.messageId])).to.deep.equal([m1, m2, m3].map((m) => [m.position, m.id]));
    expect(log.restarts()).to.equal(0);
    expect(log.listenerFailures()).to.equal(1);
  });

  it('starts from the messages projection\'s checkpoint, and anew from it after every listener left', async () => {
    const subscribedAfter: Array<GlobalPosition | null | undefined> = [];
    const watched: EventStore = Object.create(store, {
      subscribeToAll: { value: (o: SubscribeOptions) => { subscribedAfter.push(o.after); return store.subscribeToAll(o); } },
    });
    const s = new EventStreams(db, watched, redis, memoryLogger().logger, 60);
    const feed = (s as unknown as { feed: BlockEventFeed }).feed;
    streams = s;
    const checkpoint = async (position: GlobalPosition) => db.withSchema(MESSAGES_SCHEMA).table('projection_checkpoint').where({ id: 1 }).update({ position });
    const m1 = await accept();
    await checkpoint(m1.position);
    const got: string[] = [];
    let unlisten = feed.listen(BLOCK, (events) => { for (const e of events) got.push(e.messageId); });
    const m2 = await accept();
    await eventually(async () => got.includes(m2.id), 10_000);
    unlisten();
    await checkpoint(m2.position);
    unlisten = feed.listen(BLOCK, (events) => { for (const e of events) got.push(e.messageId); });
    const m3 = await accept();
    await eventually(async () => got.includes(m3.id), 10_000);
    unlisten();
    expect(got).to.deep.equal([m2.id, m3.id]);
    expect(subscribedAfter).to.deep.equal([m1.position, m2.position]);
  });

  it('a run stopped while it hands a batch over does not hand it to a listener that came since (the new run does, once)', async () => {
    const s = new EventStreams(db, store, redis, memoryLogger().logger, 60);
    const feed = (s as unknown as { feed: BlockEventFeed }).feed;
    streams = s;
    // The first run's first batch waits in resolve (its read of the messages read model, say)
    // until the test lets it go: the last listener leaves and a new one comes meanwhile.
    const resolve = feed.resolve.bind(feed);
    let reached!: () => void;
    const atGate = new Promise<void>((r) => { reached = r; });
    let open!: () => void;
    const gate = new Promise<void>((r) => { open = r; });
    let gated = false;
    const calls: Array<Promise<unknown>> = [];
    feed.resolve = (events: RecordedEvent[], wanted: (motorBlockId: string) => boolean): Promise<StreamMessageEvent[]> => {
      const call = (async () => {
        if (!gated && events.length > 0) {
          gated = true;
          reached();
          await gate;
        }
        return resolve(events, wanted);
      })();
      calls.push(call.catch(() => undefined));
      return call;
    };
    const got: string[] = [];
    const first = feed.listen(BLOCK, () => undefined);
    const m = await accept();
    await atGate;
    first();
    // The messages projection has applied nothing: the new run reads m again, from the checkpoint.
    const second = feed.listen(BLOCK, (events) => { for (const e of events) got.push(e.messageId); });
    await eventually(async () => got.includes(m.id), 10_000);
    open();
    await Promise.all(calls);
    await new Promise((r) => setImmediate(r));
    second();
    expect(got, 'm once').to.deep.equal([m.id]);
  });

  describe('ids of the events of one log entry (a message to several recipients)', () => {
    const to = ['a@rcpt.test', 'b@rcpt.test', 'c@rcpt.test'];
    const resumed = async (url: string, after: string, until: (c: Awaited<ReturnType<typeof openStream>>) => boolean) => {
      const c = await openStream(`${url}?after=${encodeURIComponent(after)}`);
      await eventually(async () => until(c), 10_000);
      await new Promise((r) => setTimeout(r, 300));
      c.close();
      return c;
    };

    it('a gap inside the entry says the id of the last event sent, and a resume from it gives the entry\'s rest', async () => {
      const start = await accept();
      const m = await accept(to);
      const end = await accept();
      const url = await serve(new EventStreams(db, store, redis, memoryLogger().logger, 60, { maxCatchUp: 2 }));
      const first = await resumed(url, start.position, (c) => c.events.some((e) => e.event === 'gap'));
      const gap = first.events.find((e) => e.event === 'gap')!;
      const sent = first.events.slice(0, first.events.indexOf(gap)).filter((e) => e.event === 'message');
      expect(sent.map((e) => e.data.recipient)).to.deep.equal(to.slice(0, 2));
      expect(sent.map((e) => e.id)).to.deep.equal([0, 1].map((i) => `${m.position}/${m.id}/${i}`));
      expect(gap.data.after).to.equal(sent[1].id);
      const second = await resumed(url, gap.data.after!, (c) => c.messages().some((e) => e.data.messageId === end.id));
      expect(second.messages().map((e) => [e.id, e.data.recipient])).to.deep.equal([[`${m.position}/${m.id}/2`, 'c@rcpt.test'], [end.position, `${end.id.slice(0, 8)}@rcpt.test`]]);
    });

    it('a store that cannot say where its head is: the stream resumes from the id as before (logged), not refused', async () => {
      const m = await accept();
      const end = await accept();
      // Every call reaches the store but headPosition, which fails as a store that is away does.
      const blind = new Proxy(store, {
        get: (target, key) => {
          if (key === 'headPosition') return () => Promise.reject(new EventStoreUnavailableError('PostgreSQL event store unavailable: test'));
          const v = Reflect.get(target, key, target) as unknown;
          return typeof v === 'function' ? v.bind(target) : v;
        },
      });
      const log = memoryLogger();
      const url = await serve(new EventStreams(db, blind, redis, log.logger, 60));
      const c = await resumed(url, m.position, (x) => x.messages().some((e) => e.data.messageId === end.id));
      expect(c.messages().map((e) => e.id)).to.deep.equal([end.position]);
      expect(log.count('event stream: the log\'s head could not be read to check Last-Event-ID; resuming from it')).to.equal(1);
    });

    it('an id whose message is not the entry at its position resumes after the whole entry', async () => {
      const m = await accept(to);
      const other = await accept(to);
      const end = await accept();
      const url = await serve(new EventStreams(db, store, redis, memoryLogger().logger, 60));
      const c = await resumed(url, `${m.position}/${other.id}/0`, (x) => x.messages().some((e) => e.data.messageId === end.id));
      expect(c.messages().map((e) => e.id)).to.deep.equal([0, 1, 2].map((i) => `${other.position}/${other.id}/${i}`).concat(end.position));
    });
  });
  describe('a resumed stream bounded in time (docs/EVENTS.md "Resuming")', () => {
    /** The server side of a client that stopped reading: every write stays unread, 'drain' never comes. */
    function stalledResponse() {
      const r = Object.assign(new EventEmitter(), {
        writableLength: 0, writableEnded: false, destroyed: false, req: { method: 'GET', destroyed: false }, chunks: [] as string[],
        writeHead: () => r,
        write: (chunk: string) => { r.writableLength += Buffer.byteLength(chunk); r.chunks.push(chunk); return false; },
        end: () => { r.writableEnded = true; },
      });
      return r;
    }

    it('a client that stops reading during its replay gives the replay place back when the time is up', async () => {
      const s = new EventStreams(db, store, redis, memoryLogger().logger, 60, { maxReplays: 1, maxCatchUpMs: 500 });
      const url = await serve(s);
      const before = await accept();
      // 2,000 queued events: far more than a client may leave unread (256 KiB) before the replay waits for it.
      const big = await accept(Array.from({ length: 2000 }, (_, i) => `someone.${i}@rcpt.test`));
      const stalled = stalledResponse();
      void s.serve(stalled as unknown as Response, { motorBlockId: BLOCK, tokenId: randomUUID(), endsAt: new Date(Date.now() + 25_000), unmasked: true, resumeAfter: before.position });
      await eventually(async () => (stalled.writableLength > 256 * 1024 ? true : null), 10_000);
      // Another client's resume waits for the one replay place, then gets its events.
      const later = await accept();
      const c = await openStream(`${url}?after=${encodeURIComponent(big.position)}`);
      await seen(c, later.id);
      c.close();
      expect(stalled.chunks.join(''), 'the stalled stream was told of its gap').to.include('event: gap');
    });

    it('stopped by the time budget, the gap carries the position reached as its id: a reconnect resumes from there', async () => {
      const start = await accept();
      const others = [await store.append(`message-${randomUUID()}`, [acceptedEvent(randomUUID(), '66666666-6666-4666-8666-666666666666', ['x@rcpt.test'], 0)])];
      // The replay's read of the log as a long log of other blocks' entries, never at its head (the live feed reads the real one).
      const slow = Object.create(store, {
        subscribeToAll: {
          value: (o: SubscribeOptions) => {
            if (o.after !== start.position) return store.subscribeToAll(o);
            return (async function* () {
              while (!o.signal.aborted) {
                await new Promise((r) => setTimeout(r, 20));
                yield { events: [], position: others[0].position, more: true } satisfies LogBatch;
              }
            })();
          },
        },
      }) as EventStore;
      const url = await serve(new EventStreams(db, slow, redis, memoryLogger().logger, 60, { maxCatchUpMs: 300 }));
      const c = await openStream(`${url}?after=${encodeURIComponent(start.position)}`);
      const gap = await eventually(async () => c.events.find((e) => e.event === 'gap'), 10_000);
      c.close();
      expect(gap.data.after, 'nothing of the block was sent').to.equal(start.position);
      expect(gap.id, 'where the next resume starts').to.equal(others[0].position);
    });
  });
});
