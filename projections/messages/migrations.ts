import type { ProjectionMigration } from '../runner.js';

/** Tables of the messages read model. Every statement is schema-qualified by the runner's `schema`. */
export const messagesMigrations: readonly ProjectionMigration[] = [
  {
    name: '001_messages',
    async up(knex, schema) {
      // A fresh builder per statement: knex schema builders accumulate their statements.
      const s = () => knex.schema.withSchema(schema);
      await s().createTable('messages', (t) => {
        t.uuid('id').primary();
        t.boolean('accepted').notNullable();
        t.uuid('motor_block_id');
        t.uuid('account_id');
        t.uuid('domain_id');
        t.text('from_address');
        t.text('from_name');
        t.text('subject');
        t.text('smtp_message_id');
        t.specificType('recipients', 'text[]').notNullable();
        t.specificType('recipient_domains', 'text[]').notNullable();
        t.integer('expected_count').notNullable();
        t.text('current_outcome').notNullable();
        t.boolean('is_terminal').notNullable();
        t.timestamp('queued_at', { useTz: true }).notNullable();
        t.timestamp('processed_at', { useTz: true });
        t.timestamp('delivered_at', { useTz: true });
        t.timestamp('bounced_at', { useTz: true });
        t.text('smtp_code');
        t.text('smtp_response');
        t.timestamp('smtp_at', { useTz: true });
        t.jsonb('metadata').notNullable();
        t.text('source');
        t.timestamp('updated_at', { useTz: true }).notNullable();
      });
      await s().createTable('message_recipients', (t) => {
        t.uuid('message_id').notNullable();
        t.text('recipient').notNullable();
        t.text('domain').notNullable();
        t.integer('ordinal').notNullable();
        t.text('outcome').notNullable();
        t.boolean('is_terminal').notNullable();
        t.timestamp('outcome_at', { useTz: true }).notNullable();
        t.integer('attempts').notNullable();
        t.text('smtp_code');
        t.text('enhanced_code');
        t.text('smtp_response');
        t.text('mx');
        t.timestamp('reply_at', { useTz: true });
        t.timestamp('last_event_at', { useTz: true }).notNullable();
        t.timestamp('next_attempt_at', { useTz: true });
        t.primary(['message_id', 'recipient']);
      });
      await s().createTable('message_events', (t) => {
        t.uuid('event_id').primary();
        t.uuid('message_id').notNullable();
        t.bigInteger('revision');
        t.text('recipient');
        t.text('type').notNullable();
        t.text('outcome').notNullable();
        t.timestamp('at', { useTz: true }).notNullable();
        t.integer('attempt');
        t.text('smtp_code');
        t.text('enhanced_code');
        t.text('smtp_response');
        t.text('mx');
        t.timestamp('next_attempt_at', { useTz: true });
        t.text('reason');
        t.text('feedback_type');
        t.index(['message_id', 'at', 'revision'], 'message_events_timeline');
      });
      // One index per logs filter; the block + time + id index also serves the keyset cursor.
      const q = (name: string) => `"${schema}"."${name}"`;
      await knex.raw(`create index messages_block_queued on ${q('messages')} (motor_block_id, queued_at desc, id desc)`);
      await knex.raw(`create index messages_block_outcome_queued on ${q('messages')} (motor_block_id, current_outcome, queued_at desc, id desc)`);
      await knex.raw(`create index messages_recipients on ${q('messages')} using gin (recipients)`);
      await knex.raw(`create index messages_recipient_domains on ${q('messages')} using gin (recipient_domains)`);
      await knex.raw(`create index messages_metadata on ${q('messages')} using gin (metadata jsonb_path_ops)`);
      await knex.raw(`create index messages_smtp_message_id on ${q('messages')} (smtp_message_id)`);
      await knex.raw(`create index messages_account_queued on ${q('messages')} (account_id, queued_at desc, id desc)`);
    },
  },
  {
    // The message's content bytes (MessageAccepted.contentBytes): the sweeper's jobs carry it, so
    // they wait for room in the delivery memory budget before reading the message (docs/DELIVERY.md
    // "Memory for messages being delivered"). Rows made before this column stay null until a
    // replay (`npm run replay -- messages`); their sweeper jobs go without the size, as before.
    name: '002_content_bytes',
    async up(knex, schema) {
      await knex.schema.withSchema(schema).alterTable('messages', (t) => {
        t.integer('content_bytes');
      });
    },
  },
];
