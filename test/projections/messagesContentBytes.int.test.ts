import { randomBytes, randomUUID } from 'node:crypto';
import { expect } from 'chai';
import type { Knex } from 'knex';
import type { EventData } from '../../domain/eventStore.js';
import { createDb } from '../../infra/db.js';
import { PostgresEventStore } from '../../infra/eventstore/postgres/postgresEventStore.js';
import { messagesMigrations } from '../../projections/messages/migrations.js';
import { messagesProjection } from '../../projections/messages/projection.js';
import { getMessage, searchLogs } from '../../projections/messages/queries.js';
import { messageRowOf } from '../../projections/messages/rows.js';
import { foldMessageView } from '../../projections/messages/view.js';
import { ProjectionRunner, migrateProjection, rebuild } from '../../projections/runner.js';
import { createTestDatabase } from '../support/db.js';
import { acceptedEvent, catchUpAll, waitFor } from './fixtures.js';

const BLOCK = '22222222-2222-4222-8222-222222222222';

/** The fixture's acceptance is one older than the field; this one is as acceptMessage writes it now. */
function withContentBytes(e: EventData, contentBytes: number): EventData {
  return { ...e, data: { ...(e.data as object), contentBytes } };
}

/** Content too large for a live subscription to carry (the store leaves it out above 2 KB stored). */
function withLargeText(e: EventData): EventData {
  return { ...e, data: { ...(e.data as object), text: randomBytes(6000).toString('base64') } };
}

describe('messages read model: content_bytes (PostgreSQL)', function () {
  this.timeout(60_000);
  let dbh: { url: string; drop: () => Promise<void> };
  let db: Knex;
  let store: PostgresEventStore;

  const contentBytesOf = async (id: string): Promise<number | null> =>
    (await db.withSchema('rm_messages').table('messages').where({ id }).first('content_bytes')).content_bytes;

  beforeEach(async () => {
    dbh = await createTestDatabase('proj_content_bytes');
    db = createDb(dbh.url);
    store = new PostgresEventStore(dbh.url, { pollIntervalMs: 100 });
    await store.init();
  });
  afterEach(async () => {
    await store.close();
    await db.destroy();
    await dbh.drop();
  });

  it('stores MessageAccepted.contentBytes, counts the content of an acceptance older than the field, and no API record shows it', async () => {
    const current = randomUUID();
    const older = randomUUID();
    await store.append(`message-${current}`, [withContentBytes(acceptedEvent(current, BLOCK, ['a@x.test'], 0), 12_345)]);
    // The fixture's content: text 'hello', no html, no headers.
    await store.append(`message-${older}`, [acceptedEvent(older, BLOCK, ['b@x.test'], 1000)]);
    const runner = new ProjectionRunner(db, store, messagesProjection);
    await runner.init();
    await catchUpAll(runner, 2);

    expect(await contentBytesOf(current)).to.equal(12_345);
    expect(await contentBytesOf(older)).to.equal(5);
    // Internal to the sweeper: the records the API shapes its answers from do not carry it.
    expect(Object.keys((await getMessage(db, current))!)).to.not.include('contentBytes');
    const page = await searchLogs(db, { motorBlockId: BLOCK, limit: 10 });
    expect(page.items).to.have.length(2);
    for (const item of page.items) expect(Object.keys(item)).to.not.include('contentBytes');
  });

  it('a live subscription that leaves an older large acceptance\'s content out stores null, not a size counted from nothing; a replay counts it', async () => {
    const current = randomUUID();
    const older = randomUUID();
    const runner = new ProjectionRunner(db, store, messagesProjection);
    await runner.init();
    const ctl = new AbortController();
    const running = runner.run(ctl.signal);
    try {
      await store.append(`message-${current}`, [withContentBytes(withLargeText(acceptedEvent(current, BLOCK, ['a@x.test'], 0)), 8000)]);
      await store.append(`message-${older}`, [withLargeText(acceptedEvent(older, BLOCK, ['b@x.test'], 1000))]);
      await waitFor(async () => (await getMessage(db, current)) !== null && (await getMessage(db, older)) !== null);
    } finally {
      ctl.abort();
      await running;
    }
    expect(await contentBytesOf(current)).to.equal(8000);
    expect(await contentBytesOf(older)).to.equal(null);

    // A replay reads whole events.
    await rebuild(db, store, messagesProjection);
    expect(await contentBytesOf(current)).to.equal(8000);
    expect(await contentBytesOf(older)).to.equal(8000);
  });

  it('a read model made before the column: the migration adds it, its rows null, and a replay fills them', async () => {
    const id = randomUUID();
    const accepted = withContentBytes(acceptedEvent(id, BLOCK, ['a@x.test'], 0), 321);
    await store.append(`message-${id}`, [accepted]);
    // The row as the first migration's table held it.
    await migrateProjection(db, { ...messagesProjection, migrations: messagesMigrations.slice(0, 1) });
    const { content_bytes: _, ...row } = messageRowOf(foldMessageView([accepted])!);
    await db.withSchema('rm_messages').table('messages').insert({ ...row, metadata: JSON.stringify(row.metadata) });

    await migrateProjection(db, messagesProjection);
    expect(await contentBytesOf(id)).to.equal(null);
    expect((await getMessage(db, id))?.subject).to.equal((accepted.data as { subject: string }).subject);

    await rebuild(db, store, messagesProjection);
    expect(await contentBytesOf(id)).to.equal(321);
  });
});
