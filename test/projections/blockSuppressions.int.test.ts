import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import type { Knex } from 'knex';
import type { RecordedEvent } from '../../domain/eventStore';
import { createDb } from '../../infra/db';
import { BLOCK_SUPPRESSIONS_SCHEMA, blockSuppressionsProjection } from '../../projections/blockSuppressions/projection';
import { blockSuppressionsAmong, getBlockSuppression, listBlockSuppressions } from '../../projections/blockSuppressions/queries';
import { migrateProjection } from '../../projections/runner';
import { BlockSuppressionCache } from '../../workers/delivery/suppressions';
import { liftBlockSuppression, type BlockSuppressionDeps } from '../../commands/blocks/suppressions';
import { isDomainError } from '../../domain/errors';
import { createTestDatabase } from '../support/db';
import { acceptedEvent, dumpTables, iso, recipientEvent } from './fixtures';

const BLOCK_A = '11111111-1111-4111-8111-111111111111';
const BLOCK_B = '22222222-2222-4222-8222-222222222222';
const TABLES = ['message_blocks', 'facts', 'lifts', 'suppressions', 'block_counts'] as const;

/** The block suppression list from events alone (docs/DELIVERY.md "Suppressions"): classification, lifts, rebuilds. */
describe('blocksuppressions projection (int)', function () {
  this.timeout(60_000);
  let dbh: { url: string; drop: () => Promise<void> };
  let db: Knex;
  let revision = 0n;
  const log: RecordedEvent[] = [];

  const recorded = (e: { id: string; type: string; data: unknown }): RecordedEvent =>
    ({ id: e.id, type: e.type, data: e.data, streamId: 'x', revision: revision++, position: String(revision), createdAt: new Date(), metadata: {} }) as unknown as RecordedEvent;
  const apply = (schema: string, events: RecordedEvent[]) => db.transaction((trx) => blockSuppressionsProjection.applyBatch(trx, schema, events));
  /** Appends to the log and applies to the live schema, as the projector would. */
  const happen = async (...events: Array<{ id: string; type: string; data: unknown }>) => {
    const r = events.map(recorded);
    log.push(...r);
    await apply(BLOCK_SUPPRESSIONS_SCHEMA, r);
  };
  const send = async (block: string, to: string[], atMs: number) => {
    const id = randomUUID();
    await happen(acceptedEvent(id, block, to, atMs));
    return id;
  };
  const bounced = (messageId: string, recipient: string, atMs: number, smtpCode: string | null, enhancedCode: string | null) =>
    happen(recipientEvent('DeliveryBounced', messageId, recipient, atMs, { smtpCode, enhancedCode, smtpResponse: `${smtpCode} ${enhancedCode ?? ''} no` }));
  const lifted = (block: string, address: string, atMs: number) =>
    happen({ id: randomUUID(), type: 'BlockSuppressionLifted', data: { motorBlockId: block, address, liftedAt: iso(atMs) } });
  const addresses = async (block: string) => (await listBlockSuppressions(db, block, { limit: 1000 })).items.map((i) => `${i.address} ${i.reason}`).sort();

  before(async () => {
    dbh = await createTestDatabase('blocksupp');
    db = createDb(dbh.url);
    await migrateProjection(db, blockSuppressionsProjection);
  });
  after(async () => {
    await db?.destroy();
    await dbh?.drop();
  });

  it('hard bounces (5.1.x, 5.2.1, bare 550/551/553) and complaints suppress; 5.2.2, 5.7.x, 4xx and failures do not', async () => {
    const m = await send(BLOCK_A, ['a@x.test'], 0);
    await bounced(m, 'Unknown@X.test', 1000, '550', '5.1.1');
    await bounced(m, 'disabled@x.test', 1000, '550', '5.2.1');
    await bounced(m, 'bare@x.test', 1000, '551', null);
    await bounced(m, 'full@x.test', 1000, '552', '5.2.2');
    await bounced(m, 'spam@x.test', 1000, '550', '5.7.1');
    await bounced(m, 'odd@x.test', 1000, '554', null);
    await happen(recipientEvent('DeliveryFailed', m, 'gaveup@x.test', 1000));
    await happen(recipientEvent('DeliveryDeferred', m, 'later@x.test', 1000));
    await happen(recipientEvent('ComplaintReceived', m, 'angry@x.test', 1000));
    expect(await addresses(BLOCK_A)).to.deep.equal(['angry@x.test complaint', 'bare@x.test hard_bounce', 'disabled@x.test hard_bounce', 'unknown@x.test hard_bounce']);
    expect(await getBlockSuppression(db, BLOCK_A, 'UNKNOWN@x.test')).to.deep.equal({
      address: 'unknown@x.test', reason: 'hard_bounce', suppressedAt: iso(1000), messageId: m, smtpCode: '550', enhancedCode: '5.1.1',
    });
    expect([...(await blockSuppressionsAmong(db, BLOCK_A, ['Unknown@x.TEST', 'full@x.test', 'angry@x.test'])).keys()].sort()).to.deep.equal(['angry@x.test', 'unknown@x.test']);
    // The list is the block's: the same address on another block is not suppressed there.
    expect(await addresses(BLOCK_B)).to.deep.equal([]);
    expect((await blockSuppressionsAmong(db, BLOCK_B, ['unknown@x.test'])).size).to.equal(0);
  });

  it('a lift drops what was recorded up to it; a hard bounce or complaint after it suppresses again', async () => {
    const m1 = await send(BLOCK_B, ['back@y.test'], 0);
    await bounced(m1, 'back@y.test', 2000, '550', '5.1.1');
    await happen(recipientEvent('ComplaintReceived', m1, 'back@y.test', 2500));
    await lifted(BLOCK_B, 'BACK@y.test', 3000);
    expect(await getBlockSuppression(db, BLOCK_B, 'back@y.test')).to.equal(null);
    const m2 = await send(BLOCK_B, ['back@y.test'], 4000);
    await bounced(m2, 'back@y.test', 5000, '553', null);
    expect(await getBlockSuppression(db, BLOCK_B, 'back@y.test')).to.deep.include({ reason: 'hard_bounce', suppressedAt: iso(5000), messageId: m2, smtpCode: '553', enhancedCode: null });
    // A lift of block B leaves block A's list alone.
    await lifted(BLOCK_B, 'unknown@x.test', 6000);
    expect(await getBlockSuppression(db, BLOCK_A, 'unknown@x.test')).to.not.equal(null);
  });

  it('pages newest first with a cursor', async () => {
    const first = await listBlockSuppressions(db, BLOCK_A, { limit: 3 });
    expect(first.items).to.have.length(3);
    expect(first.nextCursor).to.be.a('string');
    const rest = await listBlockSuppressions(db, BLOCK_A, { limit: 3, cursor: first.nextCursor! });
    expect(rest.items).to.have.length(1);
    expect(rest.nextCursor).to.equal(null);
    expect(new Set([...first.items, ...rest.items].map((i) => i.address)).size).to.equal(4);
  });

  it('a rebuild from the log gives the same rows: all at once, one event at a time, and a batch re-delivered', async () => {
    const live = await dumpTables(db, BLOCK_SUPPRESSIONS_SCHEMA, TABLES);
    expect(live.suppressions).to.have.length(5);
    expect(live.block_counts.map((j) => JSON.parse(j))).to.have.deep.members([{ motor_block_id: BLOCK_A, suppressions: 4 }, { motor_block_id: BLOCK_B, suppressions: 1 }]);
    for (const [schema, batches] of [['rm_bs_whole', [log, log]], ['rm_bs_single', log.map((e) => [e])]] as const) {
      await migrateProjection(db, blockSuppressionsProjection, schema);
      for (const b of batches) await apply(schema, b as RecordedEvent[]);
      expect(await dumpTables(db, schema, TABLES), schema).to.deep.equal(live);
    }
  });

  it('a deleted block\'s history (tombstone) takes its rows, and only its', async () => {
    await apply('rm_bs_whole', [recorded({ id: randomUUID(), type: 'MotorBlockDeleted', data: { motorBlockId: BLOCK_B, historyDeleted: true } })]);
    const rows = (await db.raw('select distinct motor_block_id from rm_bs_whole.suppressions')).rows.map((r: { motor_block_id: string }) => r.motor_block_id);
    expect(rows).to.deep.equal([BLOCK_A]);
    expect((await db.raw('select motor_block_id, suppressions from rm_bs_whole.block_counts')).rows).to.deep.equal([{ motor_block_id: BLOCK_A, suppressions: 4 }]);
  });

  it('the delivery worker\'s cache: a block without suppressions costs no query until the counts are refreshed', async () => {
    let now = 0;
    const cache = new BlockSuppressionCache(db, 5000, () => now);
    expect([...(await cache.among(BLOCK_A, ['UNKNOWN@x.test', 'ok@x.test'])).keys()]).to.deep.equal(['unknown@x.test']);
    const C = '33333333-3333-4333-8333-333333333333';
    const m = await send(C, ['new@z.test'], 0);
    await bounced(m, 'new@z.test', 1000, '550', '5.1.1');
    expect((await cache.among(C, ['new@z.test'])).size, 'within the staleness window').to.equal(0);
    now = 5000;
    expect([...(await cache.among(C, ['new@z.test'])).keys()], 'after a refresh').to.deep.equal(['new@z.test']);
    // A lift on a block that has suppressions is read live.
    await lifted(BLOCK_A, 'unknown@x.test', 9000);
    expect((await cache.among(BLOCK_A, ['unknown@x.test'])).size).to.equal(0);
  });
  it('an address the recipient complained about is not lifted (409 suppression_not_liftable, nothing appended), also when a hard bounce came after the complaint', async () => {
    const appended: string[] = [];
    // The block's own stream (the lift's deletion guard reads it): a live block.
    const blockStream = [recorded({ id: randomUUID(), type: 'MotorBlockCreated', data: {
      motorBlockId: BLOCK_B, accountId: randomUUID(), name: 'B', type: 'transactional', domainId: randomUUID(), smtpUsername: 'mb_b',
      authMethod: 'smtp_password', grantId: randomUUID(), idempotencyKey: 'k', inputFingerprint: 'f', createdAt: iso(0),
    } })];
    const store = { readStream: async () => blockStream, append: async (stream: string) => { appended.push(stream); } };
    const deps = { db, store, clock: { now: () => new Date() } } as unknown as BlockSuppressionDeps;
    const refusal = (address: string) => liftBlockSuppression(deps, BLOCK_B, 'token:test', address).then(() => null, (e: unknown) => e);
    const m1 = await send(BLOCK_B, ['spam@z.test', 'later@z.test'], 10_000);
    await happen(recipientEvent('ComplaintReceived', m1, 'spam@z.test', 11_000));
    await happen(recipientEvent('ComplaintReceived', m1, 'later@z.test', 11_000));
    const m2 = await send(BLOCK_B, ['later@z.test'], 12_000);
    await bounced(m2, 'later@z.test', 13_000, '550', '5.1.1');
    expect((await getBlockSuppression(db, BLOCK_B, 'later@z.test'))?.reason, 'the row shows the latest fact').to.equal('hard_bounce');
    for (const address of ['SPAM@z.test', 'later@z.test']) {
      const err = await refusal(address);
      expect(isDomainError(err) && [err.status, err.code, err.details?.reason], address).to.deep.equal([409, 'suppression_not_liftable', 'complaint']);
    }
    expect(appended).to.deep.equal([]);
  });
});
