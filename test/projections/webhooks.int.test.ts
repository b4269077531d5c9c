import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import type { Knex } from 'knex';
import { webhookStats } from '../../commands/webhooks/webhooks.js';
import { streamName, type EventData, type RecordedEvent } from '../../domain/eventStore.js';
import { createDb } from '../../infra/db.js';
import { PostgresEventStore } from '../../infra/eventstore/postgres/postgresEventStore.js';
import { webhooksProjection } from '../../projections/webhooks/projection.js';
import { ProjectionRunner, migrateProjection } from '../../projections/runner.js';
import { createTestDatabase } from '../support/db.js';
import { catchUpAll, waitFor } from './fixtures.js';

/** The webhooks read model from its events (projections/webhooks), read through the stats route's query. */
describe('webhooks projection (int)', () => {
  let dbh: { url: string; drop: () => Promise<void> };
  let db: Knex;
  let store: PostgresEventStore;

  before(async () => {
    dbh = await createTestDatabase('proj_webhooks');
    db = createDb(dbh.url);
    store = new PostgresEventStore(dbh.url);
    await store.init();
  });
  after(async () => {
    await store?.close();
    await db?.destroy();
    await dbh?.drop();
  });

  const event = (type: string, data: Record<string, unknown>): EventData => ({ id: randomUUID(), type, version: 1, data });

  it('latency counts the requests made: not the final record of a delivery to a paused or deleted endpoint, nor attempts refused before a request', async () => {
    const webhookId = randomUUID();
    const motorBlockId = randomUUID();
    const now = new Date();
    const at = new Date(now.getTime() - 60_000).toISOString();
    await store.append(streamName('webhook', webhookId), [event('WebhookCreated', {
      webhookId, motorBlockId, accountId: randomUUID(), url: 'https://hooks.example.test/x', events: ['message.delivered'], secretKeyId: randomUUID(), createdAt: at,
    })]);
    const delivery = async (attempts: Array<{ outcome: string; error: string | null; durationMs: number; httpStatus: number | null }>) => {
      const deliveryId = randomUUID();
      await store.append(streamName('webhookDelivery', deliveryId), [
        event('WebhookDeliveryQueued', { deliveryId, webhookId, motorBlockId, event: 'message.delivered', messageId: randomUUID(), payload: {}, queuedAt: at }),
        ...attempts.map((a, i) => event('WebhookDeliveryAttempted', {
          deliveryId, webhookId, motorBlockId, attempt: i + 1, ...a, responseBody: null, nextAttemptAt: null, attemptedAt: at,
        })),
      ]);
    };
    await delivery([{ outcome: 'delivered', error: null, durationMs: 120, httpStatus: 200 }]);
    await delivery([{ outcome: 'retrying', error: 'http_503', durationMs: 80, httpStatus: 503 }, { outcome: 'failed', error: 'webhook_disabled', durationMs: 0, httpStatus: null }]);
    await delivery([{ outcome: 'failed', error: 'webhook_deleted', durationMs: 0, httpStatus: null }]);
    // Refused before any request: the host name did not resolve, resolved to a private address, or the URL is unusable.
    await delivery([{ outcome: 'retrying', error: 'dns_error', durationMs: 4000, httpStatus: null }, { outcome: 'retrying', error: 'blocked_address', durationMs: 3, httpStatus: null },
      { outcome: 'failed', error: 'invalid_url', durationMs: 0, httpStatus: null }]);
    const runner = new ProjectionRunner(db, store, webhooksProjection);
    await runner.init();
    // 12 events: the endpoint's and its four deliveries' (one catchUp may stop short: fixtures.ts).
    await catchUpAll(runner, 12);

    const stats = await webhookStats(db, motorBlockId, webhookId, 1, { retentionDays: 30, now });
    expect(stats).to.include({ delivered: 1, failed: 3 });
    expect(stats.latency).to.deep.equal({ attempts: 2, avgMs: 100, p50Ms: 100, p95Ms: 118 });
  });

  it('the failure clock: one UPDATE per endpoint a batch, with its latest success (tests left out), never moving it back', async () => {
    const schema = 'rm_webhooks_clock_test';
    await db.raw(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
    await migrateProjection(db, webhooksProjection, schema);
    const motorBlockId = randomUUID();
    const at = (h: number) => new Date(Date.UTC(2026, 10, 20, h)).toISOString();
    const [a, b, c] = [randomUUID(), randomUUID(), randomUUID()];
    /** The next batch: the `n` events appended since the last one (once the store shows them all: catchUpAll), applied as one. */
    let after = await store.headPosition();
    const applyNext = async (n: number) => {
      let events: RecordedEvent[] = [];
      await waitFor(async () => (events = await store.readAll({ after, maxCount: 1000 })).length >= n);
      after = events[events.length - 1].position;
      let updates = 0;
      const count = (q: { sql: string }) => { if (/^update .*"endpoints" set "last_success_at"/i.test(q.sql)) updates++; };
      db.on('query', count);
      try {
        await db.transaction((trx) => webhooksProjection.applyBatch(trx, schema, events));
      } finally {
        db.removeListener('query', count);
      }
      return updates;
    };
    /** A delivery with its attempts; `legacy`: attempts recorded before they named the delivery's event. */
    const delivery = async (webhookId: string, name: string, attempts: Array<[string, number]>, legacy = false) => {
      const deliveryId = randomUUID();
      await store.append(streamName('webhookDelivery', deliveryId), [
        event('WebhookDeliveryQueued', { deliveryId, webhookId, motorBlockId, event: name, messageId: randomUUID(), payload: {}, queuedAt: at(0) }),
        ...attempts.map(([outcome, h], i) => event('WebhookDeliveryAttempted', {
          deliveryId, webhookId, motorBlockId, attempt: i + 1, outcome, httpStatus: null, error: null, responseBody: null, durationMs: 5, nextAttemptAt: null, attemptedAt: at(h),
          ...(legacy ? {} : { event: name }),
        })),
      ]);
    };
    for (const webhookId of [a, b, c]) {
      await store.append(streamName('webhook', webhookId), [event('WebhookCreated', {
        webhookId, motorBlockId, accountId: randomUUID(), url: 'https://hooks.example.test/x', events: ['message.delivered'], secretKeyId: randomUUID(), createdAt: at(0),
      })]);
    }
    // In log order, not in time order: a worker whose attempt took longer records it later.
    await delivery(a, 'message.delivered', [['delivered', 5]]);
    await delivery(a, 'message.delivered', [['delivered', 3]]);
    await delivery(a, 'webhook.test', [['delivered', 9]]);
    await delivery(b, 'message.delivered', [['retrying', 1], ['delivered', 2]]);
    await delivery(b, 'webhook.test', [['delivered', 8]], true);
    await delivery(c, 'message.delivered', [['failed', 4]]);
    const lastSuccess = async () => Object.fromEntries((await db.withSchema(schema).table('endpoints').select('id', 'last_success_at')).map((r) => [r.id, r.last_success_at?.toISOString() ?? null]));
    expect(await applyNext(3 + 13), 'one UPDATE for a, one for b').to.equal(2);
    expect(await lastSuccess()).to.deep.equal({ [a]: at(5), [b]: at(2), [c]: null });

    await delivery(a, 'message.delivered', [['delivered', 4]]);
    await delivery(b, 'message.delivered', [['delivered', 6]]);
    expect(await applyNext(4)).to.equal(2);
    expect(await lastSuccess(), 'a keeps its later success').to.deep.equal({ [a]: at(5), [b]: at(6), [c]: null });
    await db.raw(`DROP SCHEMA ${schema} CASCADE`);
  });

  it('a read model made before the failure clock learns each endpoint\'s last success from the attempts it holds (tests left out)', async () => {
    const schema = 'rm_webhooks_backfill_test';
    const [before, add] = webhooksProjection.migrations;
    await db.raw(`DROP SCHEMA IF EXISTS ${schema} CASCADE; CREATE SCHEMA ${schema}`);
    await before.up(db, schema);
    const t = (table: string) => db.withSchema(schema).table(table);
    const [a, b] = [randomUUID(), randomUUID()];
    const at = (h: number) => new Date(Date.UTC(2026, 10, 20, h));
    for (const id of [a, b]) {
      await t('endpoints').insert({ id, motor_block_id: randomUUID(), account_id: randomUUID(), url: 'https://x.test/', events: ['message.delivered'], enabled: true, secret_key_id: randomUUID(), created_at: at(0), updated_at: at(0), revision: 0 });
    }
    const delivery = async (webhookId: string, event: string, attempts: Array<[string, number]>) => {
      const id = randomUUID();
      await t('deliveries').insert({ id, webhook_id: webhookId, motor_block_id: randomUUID(), event, status: 'delivered', queued_at: at(0) });
      for (const [i, [outcome, h]] of attempts.entries()) await t('attempts').insert({ delivery_id: id, attempt: i + 1, webhook_id: webhookId, motor_block_id: randomUUID(), outcome, duration_ms: 5, attempted_at: at(h) });
    };
    await delivery(a, 'message.delivered', [['retrying', 1], ['delivered', 2]]);
    await delivery(a, 'message.delivered', [['delivered', 5]]);
    await delivery(a, 'webhook.test', [['delivered', 9]]);
    await delivery(b, 'webhook.test', [['delivered', 9]]);
    await delivery(b, 'message.delivered', [['failed', 10]]);
    await add.up(db, schema);
    const rows = await t('endpoints').select('id', 'last_success_at');
    expect(Object.fromEntries(rows.map((r) => [r.id, r.last_success_at?.toISOString() ?? null]))).to.deep.equal({ [a]: at(5).toISOString(), [b]: null });
    await db.raw(`DROP SCHEMA ${schema} CASCADE`);
  });
});
