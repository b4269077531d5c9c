/**
 * The suppression list of the communications product (schema `rm_commsuppressions`,
 * docs/COMMUNICATIONS.md "Suppressions"): per tenant (account) and lower-cased address, whether it
 * hard-bounced or complained, across every block of the account.
 *
 * Outcome events name only the message, so the projection keeps which account and block each
 * message belongs to (`message_owners`, from MessageAccepted). Each suppressing outcome is one row
 * of `facts`, keyed by (message, address, reason): a re-delivered batch or a replayed event adds
 * nothing. The `suppressions` row of every (account, address) a batch touched is then recomputed
 * from its facts, so it is what a replay from zero gives, whatever was applied before.
 *
 * A contact's unsubscribe (ContactUnsubscribed) is one row of `unsubscribes`, keyed by the event's
 * id, and counts among the facts of its address: it names the tenant itself, no message. A manual
 * suppression by the tenant (SuppressionAdded) is one row of `manual_adds`, likewise. A lift
 * (SuppressionLifted) is one row of `lifts`: the address's hard bounces up to its time, and the
 * manual adds before it on the suppression's stream, stop counting.
 */
import type { Knex } from 'knex';
import type { RecordedEvent } from '../../domain/eventStore';
import { MESSAGE_CONTENT_FIELDS, type ContactUnsubscribed, type SuppressionAdded, type SuppressionLifted } from '../../domain/events';
import { isUuid } from '../../domain/ids';
import { SUPPRESSING_EVENT_TYPES, suppressionAddress, suppressionFactOf } from '../../domain/comms/suppressions';
import { TOMBSTONE, withTombstones } from '../blockTombstone';
import { createMessageOwnersTable, insertMessageOwners, messageOwnerOf, type MessageOwnerRow } from '../messageOwners';
import type { Projection, ProjectionMigration } from '../runner';

export const SUPPRESSIONS_SCHEMA = 'rm_commsuppressions';
const q = (schema: string, table: string) => `"${schema}"."${table}"`;

const MIGRATIONS: readonly ProjectionMigration[] = [
  {
    name: '001_suppressions',
    async up(knex, schema) {
      const s = () => knex.schema.withSchema(schema);
      // No index on motor_block_id: read only when a block's history is deleted (rare; a scan then).
      // Pruned with the account's retention (workers/retention.ts): a complaint about a message older
      // than that finds no owner and suppresses nothing.
      await createMessageOwnersTable(knex, schema, 'message_owners');
      await s().createTable('facts', (t) => {
        t.uuid('message_id').notNullable();
        t.text('email').notNullable();
        t.text('reason').notNullable();
        t.uuid('account_id').notNullable();
        t.uuid('motor_block_id').notNullable();
        t.timestamp('at', { useTz: true }).notNullable();
        t.text('smtp_code');
        t.text('enhanced_code');
        t.primary(['message_id', 'email', 'reason']);
        t.index(['account_id', 'email']);
        t.index(['motor_block_id']);
      });
      await s().createTable('suppressions', (t) => {
        t.uuid('id').primary();
        t.uuid('account_id').notNullable();
        t.text('email').notNullable();
        t.text('reason').notNullable();
        t.integer('count').notNullable();
        t.timestamp('first_at', { useTz: true }).notNullable();
        t.timestamp('last_at', { useTz: true }).notNullable();
        t.uuid('last_message_id').notNullable();
        t.uuid('last_motor_block_id').notNullable();
        t.text('smtp_code');
        t.text('enhanced_code');
        t.unique(['account_id', 'email']);
        t.index(['account_id', 'first_at', 'id']);
      });
    },
  },
  {
    name: '002_unsubscribes',
    async up(knex, schema) {
      await knex.schema.withSchema(schema).createTable('unsubscribes', (t) => {
        t.uuid('event_id').primary();
        t.uuid('account_id').notNullable();
        t.text('email').notNullable();
        t.uuid('list_id').notNullable();
        t.uuid('contact_id').notNullable();
        t.timestamp('at', { useTz: true }).notNullable();
        t.index(['account_id', 'email']);
      });
      // An address that only unsubscribed has no message or block.
      await knex.schema.withSchema(schema).alterTable('suppressions', (t) => {
        t.uuid('last_message_id').nullable().alter();
        t.uuid('last_motor_block_id').nullable().alter();
      });
    },
  },
  {
    name: '003_lifts',
    async up(knex, schema) {
      // One row per SuppressionLifted, keyed by the event's id: the hard bounces of (account, email)
      // up to `at` no longer count.
      await knex.schema.withSchema(schema).createTable('lifts', (t) => {
        t.uuid('event_id').primary();
        t.uuid('account_id').notNullable();
        t.text('email').notNullable();
        t.timestamp('at', { useTz: true }).notNullable();
        t.index(['account_id', 'email']);
      });
    },
  },
  {
    name: '004_manual_adds',
    async up(knex, schema) {
      // One row per SuppressionAdded, keyed by the event's id. `revision` is the event's revision on
      // the suppression's stream: a lift drops the adds before it in stream order, not by clock, so
      // an add right after a lift (the same millisecond) is never taken for one before it.
      await knex.schema.withSchema(schema).createTable('manual_adds', (t) => {
        t.uuid('event_id').primary();
        t.uuid('account_id').notNullable();
        t.text('email').notNullable();
        t.text('note');
        t.timestamp('at', { useTz: true }).notNullable();
        t.bigInteger('revision').notNullable();
        t.index(['account_id', 'email']);
      });
      // Lifts recorded before this migration keep a null revision: they precede every manual add.
      await knex.schema.withSchema(schema).alterTable('lifts', (t) => { t.bigInteger('revision'); });
      // The note of the active manual add (null without one). `reason` is free text (no check constraint), so 'manual' needs no change.
      await knex.schema.withSchema(schema).alterTable('suppressions', (t) => { t.text('note'); });
    },
  },
];

/**
 * Recomputes the suppressions rows of `keys` (account, email) from their facts, unsubscribes and
 * manual adds: upserted when any remain, deleted when none do. Hard bounces up to the time of the
 * address's latest lift (SuppressionLifted), and manual adds before it on the stream, do not count.
 * `reason` by precedence: `complaint` once any complaint is among them (the strongest signal),
 * else `unsubscribed` once the address unsubscribed (the recipient's own choice), else `manual`
 * when the tenant suppressed it by hand (its explicit decision, stronger than a bounce), else
 * `hard_bounce`; the message and block are those of the latest bounce or complaint (null
 * without one), the SMTP codes those of the latest hard bounce, the note that of the manual add.
 */
async function recompute(trx: Knex.Transaction, schema: string, keys: Array<{ account_id: string; email: string }>): Promise<void> {
  if (keys.length === 0) return;
  await trx.raw(
    `with k as (select distinct account_id, email from json_to_recordset(?::json) as x(account_id uuid, email text)),
     f as (
       select f.account_id, f.email, f.reason, f.at, f.message_id, f.motor_block_id, f.smtp_code, f.enhanced_code, null::text as note
       from ${q(schema, 'facts')} f join k on f.account_id = k.account_id and f.email = k.email
       where not (f.reason = 'hard_bounce' and f.at <= coalesce(
         (select max(l.at) from ${q(schema, 'lifts')} l where l.account_id = f.account_id and l.email = f.email), '-infinity'))
       union all
       select u.account_id, u.email, 'unsubscribed', u.at, null::uuid, null::uuid, null, null, null
       from ${q(schema, 'unsubscribes')} u join k on u.account_id = k.account_id and u.email = k.email
       union all
       select m.account_id, m.email, 'manual', m.at, null::uuid, null::uuid, null, null, m.note
       from ${q(schema, 'manual_adds')} m join k on m.account_id = k.account_id and m.email = k.email
       where m.revision > coalesce(
         (select max(l.revision) from ${q(schema, 'lifts')} l where l.account_id = m.account_id and l.email = m.email), -1)
     ),
     agg as (
       select f.account_id, f.email, count(*)::int as count, min(f.at) as first_at, max(f.at) as last_at,
         bool_or(f.reason = 'complaint') as complained, bool_or(f.reason = 'unsubscribed') as unsubscribed, bool_or(f.reason = 'manual') as manual,
         (array_agg(f.message_id order by f.at desc, f.message_id desc, f.reason desc) filter (where f.message_id is not null))[1] as last_message_id,
         (array_agg(f.motor_block_id order by f.at desc, f.message_id desc, f.reason desc) filter (where f.message_id is not null))[1] as last_motor_block_id,
         (array_agg(f.smtp_code order by f.at desc, f.message_id desc) filter (where f.reason = 'hard_bounce'))[1] as smtp_code,
         (array_agg(f.enhanced_code order by f.at desc, f.message_id desc) filter (where f.reason = 'hard_bounce'))[1] as enhanced_code,
         (array_agg(f.note order by f.at desc) filter (where f.reason = 'manual'))[1] as note
       from f
       group by f.account_id, f.email
     ),
     gone as (
       delete from ${q(schema, 'suppressions')} s using k
       where s.account_id = k.account_id and s.email = k.email
         and not exists (select 1 from agg where agg.account_id = k.account_id and agg.email = k.email)
     )
     insert into ${q(schema, 'suppressions')} as t
       (id, account_id, email, reason, count, first_at, last_at, last_message_id, last_motor_block_id, smtp_code, enhanced_code, note)
     select md5('suppression:' || account_id || ':' || email)::uuid, account_id, email,
       case when complained then 'complaint' when unsubscribed then 'unsubscribed' when manual then 'manual' else 'hard_bounce' end,
       count, first_at, last_at, last_message_id, last_motor_block_id, smtp_code, enhanced_code, note
     from agg
     on conflict (account_id, email) do update set reason = excluded.reason, count = excluded.count, first_at = excluded.first_at,
       last_at = excluded.last_at, last_message_id = excluded.last_message_id, last_motor_block_id = excluded.last_motor_block_id,
       smtp_code = excluded.smtp_code, enhanced_code = excluded.enhanced_code, note = excluded.note`,
    [JSON.stringify(keys)],
  );
}

export async function applySuppressionEvents(trx: Knex.Transaction, schema: string, events: RecordedEvent[]): Promise<void> {
  const owners: MessageOwnerRow[] = [];
  const facts: Array<{ message_id: string; email: string; reason: string; at: string; smtp_code: string | null; enhanced_code: string | null }> = [];
  const unsubscribes: Array<{ event_id: string; account_id: string; email: string; list_id: string; contact_id: string; at: string }> = [];
  const lifts: Array<{ event_id: string; account_id: string; email: string; at: string; revision: string }> = [];
  const manualAdds: Array<{ event_id: string; account_id: string; email: string; note: string | null; at: string; revision: string }> = [];
  for (const e of events) {
    if (e.type === 'SuppressionLifted') {
      const d = e.data as Partial<SuppressionLifted> | null;
      const email = typeof d?.email === 'string' ? suppressionAddress(d.email) : '';
      if (isUuid(e.id) && isUuid(d?.tenantId) && email !== '' && typeof d.liftedAt === 'string') {
        lifts.push({ event_id: e.id, account_id: d.tenantId, email, at: d.liftedAt, revision: e.revision.toString() });
      }
      continue;
    }
    if (e.type === 'SuppressionAdded') {
      const d = e.data as Partial<SuppressionAdded> | null;
      const email = typeof d?.email === 'string' ? suppressionAddress(d.email) : '';
      if (isUuid(e.id) && isUuid(d?.tenantId) && email !== '' && typeof d.addedAt === 'string') {
        manualAdds.push({ event_id: e.id, account_id: d.tenantId, email, note: typeof d.note === 'string' ? d.note : null, at: d.addedAt, revision: e.revision.toString() });
      }
      continue;
    }
    if (e.type === 'ContactUnsubscribed') {
      const d = e.data as Partial<ContactUnsubscribed> | null;
      const email = typeof d?.email === 'string' ? suppressionAddress(d.email) : '';
      if (isUuid(e.id) && isUuid(d?.tenantId) && isUuid(d.listId) && isUuid(d.contactId) && email !== '' && typeof d.unsubscribedAt === 'string') {
        unsubscribes.push({ event_id: e.id, account_id: d.tenantId, email, list_id: d.listId, contact_id: d.contactId, at: d.unsubscribedAt });
      }
      continue;
    }
    if (e.type === 'MessageAccepted') {
      const owner = messageOwnerOf(e);
      if (owner) owners.push(owner);
      continue;
    }
    const f = suppressionFactOf(e);
    if (f === null || !isUuid(f.messageId)) continue;
    facts.push({ message_id: f.messageId, email: f.email, reason: f.reason, at: f.at.toISOString(), smtp_code: f.smtpCode, enhanced_code: f.enhancedCode });
  }
  await insertMessageOwners(trx, schema, 'message_owners', owners);
  // Lifts, manual adds and unsubscribes are keyed by their event's id: a re-delivered event adds
  // nothing (and recomputes to the same row).
  const touched: Array<{ account_id: string; email: string }> = [
    ...await insertByEventId(trx, schema, 'lifts', { account_id: 'uuid', email: 'text', at: 'timestamptz', revision: 'bigint' }, lifts),
    ...await insertByEventId(trx, schema, 'manual_adds', { account_id: 'uuid', email: 'text', note: 'text', at: 'timestamptz', revision: 'bigint' }, manualAdds),
    ...await insertByEventId(trx, schema, 'unsubscribes', { account_id: 'uuid', email: 'text', list_id: 'uuid', contact_id: 'uuid', at: 'timestamptz' }, unsubscribes),
  ];
  if (facts.length === 0) {
    await recompute(trx, schema, touched);
    return;
  }
  // A fact of a message whose MessageAccepted was never seen (its history deleted) belongs to no tenant: dropped by the join.
  const inserted = await trx.raw(
    `insert into ${q(schema, 'facts')} (message_id, email, reason, account_id, motor_block_id, at, smtp_code, enhanced_code)
     select x.message_id, x.email, x.reason, o.account_id, o.motor_block_id, x.at, x.smtp_code, x.enhanced_code
     from json_to_recordset(?::json) as x(message_id uuid, email text, reason text, at timestamptz, smtp_code text, enhanced_code text)
     join ${q(schema, 'message_owners')} o on o.message_id = x.message_id
     on conflict (message_id, email, reason) do nothing
     returning account_id, email`,
    [JSON.stringify(facts)],
  );
  await recompute(trx, schema, [...touched, ...inserted.rows]);
}

/** A deleted block's history goes (projections/blockTombstone.ts): its facts, and the rows they made, are recomputed without it. */
async function forgetBlock(trx: Knex.Transaction, schema: string, motorBlockId: string): Promise<void> {
  await trx.raw(`delete from ${q(schema, 'message_owners')} where motor_block_id = ?`, [motorBlockId]);
  const removed = await trx.raw(`delete from ${q(schema, 'facts')} where motor_block_id = ? returning account_id, email`, [motorBlockId]);
  await recompute(trx, schema, removed.rows);
}

export const commSuppressionsProjection: Projection = {
  name: 'commsuppressions',
  migrations: MIGRATIONS,
  handles: ['MessageAccepted', ...SUPPRESSING_EVENT_TYPES, 'ContactUnsubscribed', 'SuppressionAdded', 'SuppressionLifted', TOMBSTONE],
  followsMessageTraffic: true,
  // Only messageId, accountId and motorBlockId of MessageAccepted are read.
  // The same keys as the messages and analytics projections leave out (not also to, subject and
  // metadata, which it does not read either): subscriptions that leave out the same keys share
  // their reads of the log (infra/eventstore/postgres/sharedWindows.ts).
  ignoresData: MESSAGE_CONTENT_FIELDS,
  applyBatch: withTombstones(applySuppressionEvents, forgetBlock),
};

/** Inserts rows keyed by `event_id` (`columns`: the others, with their SQL types); returns the (account, address) pairs inserted. */
async function insertByEventId(
  trx: Knex.Transaction, schema: string, table: string, columns: Record<string, string>, rows: ReadonlyArray<Record<string, unknown>>,
): Promise<Array<{ account_id: string; email: string }>> {
  if (rows.length === 0) return [];
  const names = ['event_id', ...Object.keys(columns)];
  const types = ['event_id uuid', ...Object.entries(columns).map(([c, t]) => `${c} ${t}`)];
  const r = await trx.raw(
    `insert into ${q(schema, table)} (${names.join(', ')})
     select ${names.join(', ')} from json_to_recordset(?::json) as x(${types.join(', ')})
     on conflict (event_id) do nothing
     returning account_id, email`,
    [JSON.stringify(rows)],
  );
  return r.rows;
}
