/**
 * The suppression list of each Motor Block's transactional mail (schema `rm_blocksuppressions`,
 * docs/DELIVERY.md "Suppressions"): per block and lower-cased address, whether it hard-bounced or
 * complained since its latest lift. The delivery worker reads it (workers/delivery/suppressions.ts)
 * and the block's owner lists and lifts it (read-api/controllers/BlockSuppressionsController.ts).
 *
 * Derived from events alone, so a replay rebuilds it. Outcome events name only the message, so the
 * projection keeps which block each message is of (`message_blocks`, from MessageAccepted, read
 * without its content). Each suppressing outcome is one row of `facts`, keyed by (message, address,
 * reason); each BlockSuppressionLifted one row of `lifts`, keyed by its event id: a re-delivered
 * batch adds nothing. The `suppressions` row of every (block, address) a batch touched is then
 * recomputed from them, so it is what a replay from zero gives, whatever was applied before.
 */
import type { Knex } from 'knex';
import type { RecordedEvent } from '../../domain/eventStore';
import { MESSAGE_CONTENT_FIELDS, type BlockSuppressionLifted } from '../../domain/events';
import { isUuid } from '../../domain/ids';
import { BLOCK_SUPPRESSING_EVENT_TYPES, blockSuppressionAddress, blockSuppressionFactOf, blockSuppressionIdOf } from '../../domain/motorBlock/suppressions';
import { TOMBSTONE, withTombstones } from '../blockTombstone';
import { createMessageOwnersTable, insertMessageOwners, messageOwnerOf, type MessageOwnerRow } from '../messageOwners';
import type { Projection, ProjectionMigration } from '../runner';

export const BLOCK_SUPPRESSIONS_SCHEMA = 'rm_blocksuppressions';
const q = (schema: string, table: string) => `"${schema}"."${table}"`;

const MIGRATIONS: readonly ProjectionMigration[] = [
  {
    name: '001_block_suppressions',
    async up(knex, schema) {
      const s = () => knex.schema.withSchema(schema);
      // Pruned with the account's retention (workers/retention.ts): a complaint about a message
      // older than that finds no block and suppresses nothing.
      await createMessageOwnersTable(knex, schema, 'message_blocks');
      await s().createTable('facts', (t) => {
        t.uuid('message_id').notNullable();
        t.text('address').notNullable();
        t.text('reason').notNullable();
        t.uuid('motor_block_id').notNullable();
        t.timestamp('at', { useTz: true }).notNullable();
        t.text('smtp_code');
        t.text('enhanced_code');
        t.primary(['message_id', 'address', 'reason']);
        t.index(['motor_block_id', 'address']);
      });
      await s().createTable('lifts', (t) => {
        t.uuid('event_id').primary();
        t.uuid('motor_block_id').notNullable();
        t.text('address').notNullable();
        t.timestamp('at', { useTz: true }).notNullable();
        t.index(['motor_block_id', 'address']);
      });
      await s().createTable('suppressions', (t) => {
        t.uuid('motor_block_id').notNullable();
        t.text('address').notNullable();
        // blockSuppressionIdOf(block, address): the keyset cursor's tie-breaker.
        t.uuid('id').notNullable();
        t.text('reason').notNullable();
        t.timestamp('suppressed_at', { useTz: true }).notNullable();
        t.uuid('message_id').notNullable();
        t.text('smtp_code');
        t.text('enhanced_code');
        t.primary(['motor_block_id', 'address']);
        t.index(['motor_block_id', 'suppressed_at', 'id']);
      });
      // How many suppressions each block has (blocks with none have no row): what every delivery
      // worker process reads every few seconds, so its size is that of the blocks, not the addresses.
      await s().createTable('block_counts', (t) => {
        t.uuid('motor_block_id').primary();
        t.integer('suppressions').notNullable();
      });
    },
  },
];

interface Key { motor_block_id: string; address: string }

/**
 * Recomputes the suppressions rows of `keys` from their facts: the facts after the address's
 * latest lift on the block count; the latest of them (by time, then message, then reason) is the
 * row, so `suppressedAt` says when the address last proved bad. No fact left: the row goes.
 */
async function recompute(trx: Knex.Transaction, schema: string, keys: Key[]): Promise<void> {
  if (keys.length === 0) return;
  const withIds = [...new Map(keys.map((k) => [`${k.motor_block_id}:${k.address}`, { ...k, id: blockSuppressionIdOf(k.motor_block_id, k.address) }])).values()];
  await trx.raw(
    `with k as (select motor_block_id, address, id from json_to_recordset(?::json) as x(motor_block_id uuid, address text, id uuid)),
     latest as (
       select distinct on (f.motor_block_id, f.address) k.id, f.motor_block_id, f.address, f.reason, f.at, f.message_id, f.smtp_code, f.enhanced_code
       from ${q(schema, 'facts')} f join k on f.motor_block_id = k.motor_block_id and f.address = k.address
       where f.at > coalesce((select max(l.at) from ${q(schema, 'lifts')} l where l.motor_block_id = f.motor_block_id and l.address = f.address), '-infinity')
       order by f.motor_block_id, f.address, f.at desc, f.message_id desc, f.reason
     ),
     gone as (
       delete from ${q(schema, 'suppressions')} s using k
       where s.motor_block_id = k.motor_block_id and s.address = k.address
         and not exists (select 1 from latest where latest.motor_block_id = k.motor_block_id and latest.address = k.address)
     )
     insert into ${q(schema, 'suppressions')} as t (motor_block_id, address, id, reason, suppressed_at, message_id, smtp_code, enhanced_code)
     select motor_block_id, address, id, reason, at, message_id, smtp_code, enhanced_code from latest
     on conflict (motor_block_id, address) do update set reason = excluded.reason, suppressed_at = excluded.suppressed_at,
       message_id = excluded.message_id, smtp_code = excluded.smtp_code, enhanced_code = excluded.enhanced_code`,
    [JSON.stringify(withIds)],
  );
  await recount(trx, schema, [...new Set(keys.map((k) => k.motor_block_id))]);
}

/** Sets block_counts of `blocks` from their suppressions rows (a separate statement: it must see the rows just written). */
async function recount(trx: Knex.Transaction, schema: string, blocks: string[]): Promise<void> {
  await trx.raw(
    `with b as (select unnest(?::uuid[]) as motor_block_id),
     n as (select b.motor_block_id, (select count(*)::int from ${q(schema, 'suppressions')} s where s.motor_block_id = b.motor_block_id) as suppressions from b),
     gone as (delete from ${q(schema, 'block_counts')} c using n where c.motor_block_id = n.motor_block_id and n.suppressions = 0)
     insert into ${q(schema, 'block_counts')} (motor_block_id, suppressions) select motor_block_id, suppressions from n where suppressions > 0
     on conflict (motor_block_id) do update set suppressions = excluded.suppressions`,
    [blocks],
  );
}

interface Collected {
  owners: MessageOwnerRow[];
  facts: Array<{ message_id: string; address: string; reason: string; at: string; smtp_code: string | null; enhanced_code: string | null }>;
  lifts: Array<{ event_id: string; motor_block_id: string; address: string; at: string }>;
}

/** Sorts a batch's events into the rows they add; malformed or soft ones add nothing (skipped, never thrown on). */
function collect(events: RecordedEvent[]): Collected {
  const c: Collected = { owners: [], facts: [], lifts: [] };
  for (const e of events) {
    if (e.type === 'MessageAccepted') {
      const owner = messageOwnerOf(e);
      if (owner) c.owners.push(owner);
    } else if (e.type === 'BlockSuppressionLifted') {
      const d = e.data as Partial<BlockSuppressionLifted> | null;
      const address = typeof d?.address === 'string' ? blockSuppressionAddress(d.address) : '';
      if (isUuid(e.id) && isUuid(d?.motorBlockId) && address !== '' && typeof d.liftedAt === 'string') {
        c.lifts.push({ event_id: e.id, motor_block_id: d.motorBlockId.toLowerCase(), address, at: d.liftedAt });
      }
    } else {
      const f = blockSuppressionFactOf(e);
      if (f !== null && isUuid(f.messageId)) {
        c.facts.push({ message_id: f.messageId, address: f.address, reason: f.reason, at: f.at.toISOString(), smtp_code: f.smtpCode, enhanced_code: f.enhancedCode });
      }
    }
  }
  return c;
}

export async function applyBlockSuppressionEvents(trx: Knex.Transaction, schema: string, events: RecordedEvent[]): Promise<void> {
  const { owners, facts, lifts } = collect(events);
  // Owners first: a bounce in the same batch as its message's acceptance finds its block.
  await insertMessageOwners(trx, schema, 'message_blocks', owners);
  const touched: Key[] = [];
  if (lifts.length > 0) {
    const r = await trx.raw(
      `insert into ${q(schema, 'lifts')} (event_id, motor_block_id, address, at)
       select event_id, motor_block_id, address, at from json_to_recordset(?::json) as x(event_id uuid, motor_block_id uuid, address text, at timestamptz)
       on conflict (event_id) do nothing
       returning motor_block_id, address`,
      [JSON.stringify(lifts)],
    );
    touched.push(...r.rows);
  }
  if (facts.length > 0) {
    // A fact of a message whose MessageAccepted was never seen (its history deleted, or pruned past retention) belongs to no block: dropped by the join.
    const r = await trx.raw(
      `insert into ${q(schema, 'facts')} (message_id, address, reason, motor_block_id, at, smtp_code, enhanced_code)
       select x.message_id, x.address, x.reason, o.motor_block_id, x.at, x.smtp_code, x.enhanced_code
       from json_to_recordset(?::json) as x(message_id uuid, address text, reason text, at timestamptz, smtp_code text, enhanced_code text)
       join ${q(schema, 'message_blocks')} o on o.message_id = x.message_id
       on conflict (message_id, address, reason) do nothing
       returning motor_block_id, address`,
      [JSON.stringify(facts)],
    );
    touched.push(...r.rows);
  }
  await recompute(trx, schema, touched);
}

/** A deleted block's history goes (projections/blockTombstone.ts): every row of the block with it. */
async function forgetBlock(trx: Knex.Transaction, schema: string, motorBlockId: string): Promise<void> {
  for (const table of ['message_blocks', 'facts', 'lifts', 'suppressions', 'block_counts']) {
    await trx.raw(`delete from ${q(schema, table)} where motor_block_id = ?`, [motorBlockId]);
  }
}

export const blockSuppressionsProjection: Projection = {
  name: 'blocksuppressions',
  migrations: MIGRATIONS,
  handles: ['MessageAccepted', ...BLOCK_SUPPRESSING_EVENT_TYPES, 'BlockSuppressionLifted', TOMBSTONE],
  followsMessageTraffic: true,
  // Only messageId, accountId, motorBlockId and acceptedAt of MessageAccepted are read; leaving out
  // the same keys as the messages, analytics and commsuppressions projections lets their reads of
  // the log be shared (infra/eventstore/postgres/sharedWindows.ts).
  ignoresData: MESSAGE_CONTENT_FIELDS,
  applyBatch: withTombstones(applyBlockSuppressionEvents, forgetBlock),
};
