import type { ProjectionMigration } from '../runner';

/**
 * Tables of the analytics read model (schema rm_analytics):
 * - recipient_stats: the per-recipient state the projector needs for transitions (never queried by the API);
 * - block_hourly: per block × UTC hour of acceptance — messages, recipients and outcomes;
 * - domain_hourly / domain_daily: the same per recipient domain and provider (daily for long ranges);
 * - code_hourly: recipients by (smtp code, enhanced code, outcome) for bounced, failed and deferred ones;
 * - domain_first_send: per sending domain, its earliest accepted send (start of its warm-up schedule).
 */
export const analyticsMigrations: readonly ProjectionMigration[] = [
  {
    name: '001_analytics',
    async up(knex, schema) {
      const s = () => knex.schema.withSchema(schema);
      await s().createTable('recipient_stats', (t) => {
        t.uuid('message_id').notNullable();
        t.text('recipient').notNullable();
        t.integer('ordinal').notNullable();
        t.uuid('motor_block_id');
        t.uuid('account_id');
        t.timestamp('accepted_at', { useTz: true });
        t.text('domain').notNullable();
        t.text('mx');
        t.timestamp('mx_at', { useTz: true });
        t.text('outcome').notNullable();
        t.timestamp('outcome_at', { useTz: true }).notNullable();
        t.text('smtp_code');
        t.text('enhanced_code');
        t.timestamp('reply_at', { useTz: true });
        t.primary(['message_id', 'recipient']);
      });
      const counters = (t: import('knex').Knex.CreateTableBuilder, withMessages: boolean) => {
        if (withMessages) t.integer('messages').notNullable().defaultTo(0);
        for (const c of ['total', 'delivered', 'bounced', 'complained', 'failed', 'deferred']) t.integer(c).notNullable().defaultTo(0);
      };
      await s().createTable('block_hourly', (t) => {
        t.uuid('motor_block_id').notNullable();
        t.timestamp('hour', { useTz: true }).notNullable();
        t.uuid('account_id');
        counters(t, true);
        t.primary(['motor_block_id', 'hour']);
      });
      await s().createTable('domain_hourly', (t) => {
        t.uuid('motor_block_id').notNullable();
        t.timestamp('hour', { useTz: true }).notNullable();
        t.text('domain').notNullable();
        t.text('provider').notNullable();
        counters(t, false);
        t.primary(['motor_block_id', 'hour', 'domain', 'provider']);
      });
      await s().createTable('domain_daily', (t) => {
        t.uuid('motor_block_id').notNullable();
        t.timestamp('day', { useTz: true }).notNullable();
        t.text('domain').notNullable();
        t.text('provider').notNullable();
        counters(t, false);
        t.primary(['motor_block_id', 'day', 'domain', 'provider']);
      });
      await s().createTable('code_hourly', (t) => {
        t.uuid('motor_block_id').notNullable();
        t.timestamp('hour', { useTz: true }).notNullable();
        t.text('smtp_code').notNullable();
        t.text('enhanced_code').notNullable();
        t.text('outcome').notNullable();
        t.integer('count').notNullable().defaultTo(0);
        t.primary(['motor_block_id', 'hour', 'smtp_code', 'enhanced_code', 'outcome']);
      });
    },
  },
  {
    // The first accepted send of each sending domain: day 1 of its warm-up schedule (docs/ANALYTICS.md).
    name: '002_domain_first_send',
    async up(knex, schema) {
      await knex.schema.withSchema(schema).createTable('domain_first_send', (t) => {
        t.uuid('domain_id').primary();
        t.timestamp('first_send_at', { useTz: true }).notNullable();
      });
    },
  },
  {
    // The retention sweeper (workers/retention.ts) deletes states per account, oldest first.
    name: '003_recipient_stats_retention',
    async up(knex, schema) {
      await knex.raw(`create index recipient_stats_account_accepted on "${schema}"."recipient_stats" (account_id, accepted_at)`);
    },
  },
];
