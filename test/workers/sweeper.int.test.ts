import { randomBytes, randomUUID } from 'node:crypto';
import { getEventListeners } from 'node:events';
import { expect } from 'chai';
import type { Knex } from 'knex';
import { createDb } from '../../infra/db';
import { createEventStore } from '../../infra/eventstore';
import { createLogger } from '../../infra/logger';
import type { EventStore } from '../../domain/eventStore';
import { messagesProjection } from '../../projections/messages/projection';
import { ProjectionRunner, migrateProjection } from '../../projections/runner';
import { DeliverySweeper, firstSweepDelayMs } from '../../workers/sweeper';
import { createDeliveryQueue } from '../../workers/queue';
import { catchUpUntil } from '../../scripts/runtime';
import { getMessage } from '../../projections/messages/queries';
import { createTestDatabase, TEST_REDIS_URL } from '../support/db';
import { acceptedEvent, recipientEvent } from '../projections/fixtures';

describe('delivery sweeper (integration)', () => {
  let drop: () => Promise<void>;
  let db: Knex;
  let store: EventStore;
  const queue = createDeliveryQueue(TEST_REDIS_URL, `motor-sweep-${randomBytes(4).toString('hex')}`);

  before(async () => {
    const t = await createTestDatabase('sweeper');
    drop = t.drop;
    db = createDb(t.url);
    store = await createEventStore({ databaseUrl: t.url, eventstoreUrl: null });
    await migrateProjection(db, messagesProjection);
  });
  after(async () => {
    await queue.obliterate({ force: true }).catch(() => {});
    await queue.close();
    await store.close();
    await db.destroy();
    await drop();
  });

  it('re-queues only messages whose recipients stalled, once per sweep window', async () => {
    const block = randomUUID();
    const stalled = randomUUID();
    const delivered = randomUUID();
    const fresh = randomUUID();
    await store.append(`message-${stalled}`, [acceptedEvent(stalled, block, ['a@x.test'], 0)]);
    await store.append(`message-${delivered}`, [acceptedEvent(delivered, block, ['b@x.test'], 0), recipientEvent('DeliverySucceeded', delivered, 'b@x.test', 1000)]);
    const freshEvent = acceptedEvent(fresh, block, ['c@x.test'], 0);
    (freshEvent.data as { acceptedAt: string }).acceptedAt = new Date().toISOString();
    await store.append(`message-${fresh}`, [freshEvent]);
    const runner = new ProjectionRunner(db, store, messagesProjection);
    await catchUpUntil(runner, async () => (await getMessage(db, fresh)) !== null);

    const sweeper = new DeliverySweeper(db, queue, createLogger('silent'), { everyMs: 60_000, stalledAfterMs: 15 * 60_000 });
    const now = new Date();
    expect(await sweeper.sweepOnce(now)).to.equal(1);
    const window = Math.floor(now.getTime() / 60_000);
    expect(await queue.getJob(`${stalled}-sweep-${window}`)).to.not.equal(undefined);
    expect(await queue.getJob(`${delivered}-sweep-${window}`)).to.equal(undefined);
    expect(await queue.getJob(`${fresh}-sweep-${window}`)).to.equal(undefined);
    // A second sweep in the same window adds nothing new.
    await sweeper.sweepOnce(now);
    expect(await queue.getJobCountByTypes('waiting', 'delayed')).to.equal(1);
  });

  it('puts the message\'s size in the job when the read model has it (waits for room before reading), none for a row without it', async () => {
    const block = randomUUID();
    const sized = randomUUID();
    const unsized = randomUUID();
    const accepted = acceptedEvent(sized, block, ['e@x.test'], 0);
    (accepted.data as { contentBytes: number }).contentBytes = 4321;
    await store.append(`message-${sized}`, [accepted]);
    await store.append(`message-${unsized}`, [acceptedEvent(unsized, block, ['f@x.test'], 0)]);
    const runner = new ProjectionRunner(db, store, messagesProjection);
    await catchUpUntil(runner, async () => (await getMessage(db, sized)) !== null && (await getMessage(db, unsized)) !== null);
    // As a row made before the content_bytes column is, until a replay.
    await db.withSchema('rm_messages').table('messages').where({ id: unsized }).update({ content_bytes: null });

    const sweeper = new DeliverySweeper(db, queue, createLogger('silent'), { everyMs: 120_000, stalledAfterMs: 15 * 60_000 });
    const now = new Date();
    await sweeper.sweepOnce(now);
    const window = Math.floor(now.getTime() / 120_000);
    expect((await queue.getJob(`${sized}-sweep-${window}`))?.data).to.deep.equal({ messageId: sized, contentBytes: 4321 });
    expect((await queue.getJob(`${unsized}-sweep-${window}`))?.data).to.deep.equal({ messageId: unsized });
  });

  it('sweeps first soon after start, not a whole interval later', async function () {
    this.timeout(20_000);
    const block = randomUUID();
    const stalled = randomUUID();
    await store.append(`message-${stalled}`, [acceptedEvent(stalled, block, ['d@x.test'], 0)]);
    const runner = new ProjectionRunner(db, store, messagesProjection);
    await catchUpUntil(runner, async () => (await getMessage(db, stalled)) !== null);

    // The production interval: before, the first sweep came 5 minutes after start.
    const sweeper = new DeliverySweeper(db, queue, createLogger('silent'), { everyMs: 5 * 60_000, stalledAfterMs: 15 * 60_000, firstSweepAfterMs: 300 });
    const abort = new AbortController();
    const started = Date.now();
    const running = sweeper.run(abort.signal);
    try {
      const queued = async () => (await queue.getJobs(['waiting', 'delayed'])).some((j) => j?.data.messageId === stalled);
      while (!(await queued())) {
        expect(Date.now() - started, 'first sweep within a few seconds of start').to.be.below(5000);
        await new Promise((r) => setTimeout(r, 50));
      }
    } finally {
      abort.abort();
      await running;
    }
  });

  it('by default the first sweep comes 30 to 60 s after start, well inside the interval', () => {
    expect(firstSweepDelayMs(() => 0)).to.equal(30_000);
    expect(firstSweepDelayMs(() => 0.999999)).to.be.within(59_000, 59_999);
    const drawn = Array.from({ length: 50 }, () => firstSweepDelayMs());
    expect(drawn.every((d) => d >= 30_000 && d < 60_000)).to.equal(true);
    expect(new Set(drawn).size, 'spread, not one fixed delay').to.be.above(1);
  });

  it('does not leave an abort listener per sweep on the shared signal', async () => {
    const sweeper = new DeliverySweeper(db, queue, createLogger('silent'), { everyMs: 10, stalledAfterMs: 1e13, firstSweepAfterMs: 0 });
    const abort = new AbortController();
    const running = sweeper.run(abort.signal);
    await new Promise((r) => setTimeout(r, 400));
    const listeners = getEventListeners(abort.signal, 'abort').length;
    abort.abort();
    await running;
    expect(listeners).to.be.at.most(1);
  });
});
