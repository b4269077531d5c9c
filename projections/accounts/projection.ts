import type { Knex } from 'knex';
import type { RecordedEvent } from '../../domain/eventStore';
import { asDomainEvent, type DomainEvent } from '../../domain/events';
import type { Projection } from '../runner';

/**
 * The accounts read model (schema `rm_accounts`): dashboard users, their sessions, and the API
 * keys as the dashboard lists them (masked: prefix only, with name and scopes). Decisions never
 * read it (the streams are the truth for single-use secrets); listing and the dashboard do.
 */

export const ACCOUNTS_EVENTS = [
  'AccountRegistered', 'EmailVerified', 'PasswordSet', 'LoginSucceeded', 'UserLockedOut',
  'SessionStarted', 'RefreshTokenRotated', 'SessionRevoked',
  'ApiKeyCreated', 'ApiKeyRevoked', 'SmtpPasswordSet',
] as const;

const MIGRATIONS = [
  {
    name: '001_accounts',
    async up(knex: Knex, schema: string) {
      await knex.schema.withSchema(schema).createTable('users', (t) => {
        t.uuid('id').primary();
        t.uuid('account_id').notNullable().index();
        t.text('email').notNullable().unique();
        t.text('status').notNullable();
        t.timestamp('registered_at', { useTz: true }).notNullable();
        t.timestamp('verified_at', { useTz: true });
        t.timestamp('password_set_at', { useTz: true });
        t.text('channel');
        t.timestamp('last_login_at', { useTz: true });
        t.timestamp('locked_until', { useTz: true });
      });
      await knex.schema.withSchema(schema).createTable('sessions', (t) => {
        t.uuid('id').primary();
        t.uuid('user_id').notNullable().index();
        t.uuid('account_id').notNullable();
        t.text('channel').notNullable();
        t.timestamp('started_at', { useTz: true }).notNullable();
        t.timestamp('last_refreshed_at', { useTz: true });
        t.integer('rotations').notNullable().defaultTo(0);
        t.timestamp('revoked_at', { useTz: true });
        t.text('revoke_reason');
      });
      await knex.schema.withSchema(schema).createTable('api_keys', (t) => {
        t.uuid('id').primary();
        t.text('kind').notNullable();
        t.uuid('account_id').notNullable().index();
        t.uuid('motor_block_id').index();
        t.text('prefix').notNullable();
        t.text('name');
        t.specificType('scopes', 'text[]').notNullable();
        t.timestamp('created_at', { useTz: true }).notNullable();
        t.timestamp('revoked_at', { useTz: true });
      });
      await knex.schema.withSchema(schema).createTable('smtp_passwords', (t) => {
        t.uuid('motor_block_id').primary();
        t.timestamp('set_at', { useTz: true }).notNullable();
      });
    },
  },
];

async function apply(trx: Knex.Transaction, schema: string, event: DomainEvent): Promise<void> {
  const t = (table: string) => trx.withSchema(schema).table(table);
  switch (event.type) {
    case 'AccountRegistered': {
      const d = event.data;
      await t('users').insert({ id: d.userId, account_id: d.accountId, email: d.email, status: 'pending', registered_at: d.registeredAt }).onConflict('id').ignore();
      return;
    }
    case 'EmailVerified':
      await t('users').where({ id: event.data.userId }).update({ verified_at: event.data.verifiedAt, status: trx.raw(`case when status = 'pending' then 'verified' else status end`) });
      return;
    case 'PasswordSet':
      // The first password may give the user the account its address had already (a bootstrap's), not the registered one.
      await t('users').where({ id: event.data.userId }).update({
        status: 'active', account_id: event.data.accountId, password_set_at: event.data.setAt, channel: trx.raw('coalesce(channel, ?)', [event.data.channel]), locked_until: null,
      });
      return;
    case 'LoginSucceeded':
      await t('users').where({ id: event.data.userId }).update({ last_login_at: event.data.at });
      return;
    case 'UserLockedOut':
      await t('users').where({ id: event.data.userId }).update({ locked_until: event.data.until });
      return;
    case 'SessionStarted': {
      const d = event.data;
      await t('sessions').insert({ id: d.sessionId, user_id: d.userId, account_id: d.accountId, channel: d.channel, started_at: d.startedAt }).onConflict('id').ignore();
      return;
    }
    case 'RefreshTokenRotated':
      await t('sessions').where({ id: event.data.sessionId }).update({ last_refreshed_at: event.data.at, rotations: trx.raw('rotations + 1') });
      return;
    case 'SessionRevoked':
      await t('sessions').where({ id: event.data.sessionId }).update({ revoked_at: event.data.at, revoke_reason: event.data.reason });
      return;
    case 'ApiKeyCreated': {
      const d = event.data;
      await t('api_keys').insert({
        id: d.keyId, kind: d.kind, account_id: d.accountId, motor_block_id: d.motorBlockId ?? null, prefix: d.prefix, name: d.name ?? null,
        scopes: d.scopes, created_at: d.createdAt,
      }).onConflict('id').ignore();
      return;
    }
    case 'ApiKeyRevoked':
      await t('api_keys').where({ id: event.data.keyId }).update({ revoked_at: event.data.revokedAt });
      return;
    case 'SmtpPasswordSet':
      await t('smtp_passwords').insert({ motor_block_id: event.data.motorBlockId, set_at: event.data.setAt }).onConflict('motor_block_id').merge();
      return;
    default:
      return;
  }
}

export const accountsProjection: Projection = {
  name: 'accounts',
  migrations: MIGRATIONS,
  handles: ACCOUNTS_EVENTS,
  async applyBatch(trx, schema, events: RecordedEvent[]) {
    for (const e of events) {
      const event = asDomainEvent(e);
      if (event) await apply(trx, schema, event);
    }
  },
};
