import type { Knex } from 'knex';
import { streamCategory, type RecordedEvent } from '../../domain/eventStore';
import { asDomainEvent, type DomainEvent } from '../../domain/events';

/**
 * The directory read model: accounts, sending domains, Motor Blocks and API keys. The send path,
 * authentication and the CLI read it. Schema `rm_directory`.
 */

export const DIRECTORY_MIGRATIONS = [
  {
    name: '001_directory',
    async up(knex: Knex, schema: string) {
      await knex.schema.withSchema(schema).createTable('accounts', (t) => {
        t.uuid('id').primary();
        t.text('email').notNullable();
        t.text('plan').notNullable();
        t.timestamp('created_at', { useTz: true }).notNullable();
      });
      await knex.schema.withSchema(schema).createTable('domains', (t) => {
        t.uuid('id').primary();
        t.uuid('account_id').notNullable().index();
        t.text('name').notNullable();
        t.text('dkim_selector').notNullable();
        t.text('dkim_algorithm').notNullable();
        t.text('dkim_public_key').notNullable();
        t.uuid('dkim_key_id').notNullable();
        t.boolean('ownership_verified').notNullable().defaultTo(false);
        t.boolean('spf_configured').notNullable().defaultTo(false);
        t.boolean('dkim_configured').notNullable().defaultTo(false);
        t.boolean('dmarc_configured').notNullable().defaultTo(false);
        t.timestamp('dns_checked_at', { useTz: true });
        t.timestamp('added_at', { useTz: true }).notNullable();
        t.unique(['account_id', 'name']);
      });
      await knex.schema.withSchema(schema).createTable('motor_blocks', (t) => {
        t.uuid('id').primary();
        t.uuid('account_id').notNullable().index();
        t.text('name').notNullable();
        t.text('type').notNullable();
        t.text('description');
        t.uuid('domain_id').notNullable();
        t.text('smtp_username').notNullable().unique();
        t.text('auth_method').notNullable();
        t.text('status').notNullable();
        t.integer('limit_burst');
        t.integer('limit_hourly');
        t.integer('limit_daily');
        t.timestamp('created_at', { useTz: true }).notNullable();
      });
      await knex.schema.withSchema(schema).createTable('api_keys', (t) => {
        t.uuid('id').primary();
        t.text('kind').notNullable();
        t.uuid('account_id').notNullable().index();
        t.uuid('motor_block_id').index();
        t.text('prefix').notNullable().unique();
        t.text('secret_hash').notNullable();
        t.specificType('scopes', 'text[]').notNullable();
        t.timestamp('created_at', { useTz: true }).notNullable();
        t.timestamp('revoked_at', { useTz: true });
      });
    },
  },
  {
    name: '002_smtp_password',
    async up(knex: Knex, schema: string) {
      await knex.schema.withSchema(schema).alterTable('motor_blocks', (t) => {
        t.text('smtp_password_hash');
      });
    },
  },
  {
    // Read-your-writes for the management routes: each row remembers the revision of its stream
    // that it reflects (commands/readYourWrites.ts waits for it).
    name: '003_stream_revisions',
    async up(knex: Knex, schema: string) {
      for (const table of ['accounts', 'domains', 'motor_blocks']) {
        await knex.schema.withSchema(schema).alterTable(table, (t) => {
          t.bigInteger('revision').notNullable().defaultTo(-1);
        });
      }
    },
  },
  // Issue 4 work areas, one migration each (owned by: domains / block lifecycle / sandbox & free recipients).
  { name: '004_domains', async up() { /* domains: DNS records, ownership token, DKIM mode, check results */ } },
  { name: '005_block_lifecycle', async up() { /* block lifecycle: deletions, grants, idempotency */ } },
  { name: '006_sandbox_recipients', async up() { /* sandbox: allowlist; free recipients */ } },
];

export const DIRECTORY_EVENTS = [
  'AccountCreated', 'DomainAdded', 'DomainOwnershipVerified', 'DomainDnsChecked',
  'MotorBlockCreated', 'MotorBlockLimitsSet', 'MotorBlockDeactivated', 'MotorBlockReactivated', 'SmtpPasswordSet',
  'ApiKeyCreated', 'ApiKeyRevoked',
] as const;

/** The directory table whose row reflects a stream of this category (its `revision` column is kept). */
const ROW_OF_CATEGORY: Record<string, { table: string; idField: string }> = {
  account: { table: 'accounts', idField: 'accountId' },
  sendingDomain: { table: 'domains', idField: 'domainId' },
  motorBlock: { table: 'motor_blocks', idField: 'motorBlockId' },
};

async function apply(trx: Knex.Transaction, schema: string, event: DomainEvent, recorded: RecordedEvent): Promise<void> {
  await applyEvent(trx, schema, event);
  const row = ROW_OF_CATEGORY[streamCategory(recorded.streamId)];
  const id = row ? (event.data as unknown as Record<string, unknown>)[row.idField] : undefined;
  if (row && typeof id === 'string') {
    await trx.withSchema(schema).table(row.table).where({ id }).andWhere('revision', '<', recorded.revision.toString()).update({ revision: recorded.revision.toString() });
  }
}

async function applyEvent(trx: Knex.Transaction, schema: string, event: DomainEvent): Promise<void> {
  const t = (table: string) => trx.withSchema(schema).table(table);
  switch (event.type) {
    case 'AccountCreated': {
      const d = event.data;
      await t('accounts').insert({ id: d.accountId, email: d.email, plan: d.plan, created_at: d.createdAt }).onConflict('id').ignore();
      return;
    }
    case 'DomainAdded': {
      const d = event.data;
      await t('domains')
        .insert({
          id: d.domainId, account_id: d.accountId, name: d.name, dkim_selector: d.dkimSelector, dkim_algorithm: d.dkimAlgorithm,
          dkim_public_key: d.dkimPublicKey, dkim_key_id: d.dkimKeyId, added_at: d.addedAt,
        })
        .onConflict('id').ignore();
      return;
    }
    case 'DomainOwnershipVerified':
      await t('domains').where({ id: event.data.domainId }).update({ ownership_verified: true });
      return;
    case 'DomainDnsChecked': {
      const d = event.data;
      await t('domains').where({ id: d.domainId }).update({
        spf_configured: d.spfConfigured, dkim_configured: d.dkimConfigured, dmarc_configured: d.dmarcConfigured, dns_checked_at: d.checkedAt,
      });
      return;
    }
    case 'MotorBlockCreated': {
      const d = event.data;
      await t('motor_blocks')
        .insert({
          id: d.motorBlockId, account_id: d.accountId, name: d.name, type: d.type, description: d.description ?? null,
          domain_id: d.domainId, smtp_username: d.smtpUsername, auth_method: d.authMethod, status: 'active', created_at: d.createdAt,
        })
        .onConflict('id').ignore();
      return;
    }
    case 'MotorBlockLimitsSet': {
      const { limits } = event.data;
      await t('motor_blocks').where({ id: event.data.motorBlockId }).update({ limit_burst: limits.burst, limit_hourly: limits.hourly, limit_daily: limits.daily });
      return;
    }
    case 'MotorBlockDeactivated':
      await t('motor_blocks').where({ id: event.data.motorBlockId }).update({ status: 'inactive' });
      return;
    case 'MotorBlockReactivated':
      await t('motor_blocks').where({ id: event.data.motorBlockId }).update({ status: 'active' });
      return;
    case 'SmtpPasswordSet':
      await t('motor_blocks').where({ id: event.data.motorBlockId }).update({ smtp_password_hash: event.data.passwordHash });
      return;
    case 'ApiKeyCreated': {
      const d = event.data;
      await t('api_keys')
        .insert({
          id: d.keyId, kind: d.kind, account_id: d.accountId, motor_block_id: d.motorBlockId ?? null, prefix: d.prefix,
          secret_hash: d.secretHash, scopes: d.scopes, created_at: d.createdAt,
        })
        .onConflict('id').ignore();
      return;
    }
    case 'ApiKeyRevoked':
      await t('api_keys').where({ id: event.data.keyId }).update({ revoked_at: event.data.revokedAt });
      return;
    default:
      return;
  }
}

export const directoryProjection = {
  name: 'directory',
  migrations: DIRECTORY_MIGRATIONS,
  handles: DIRECTORY_EVENTS,
  async applyBatch(trx: Knex.Transaction, schema: string, events: RecordedEvent[]): Promise<void> {
    for (const e of events) {
      const event = asDomainEvent(e);
      if (event) await apply(trx, schema, event, e);
    }
  },
};
