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
  {
    // Domains (docs/DOMAINS.md): ownership token, DKIM mode, sandbox flag, per-record check results.
    name: '004_domains',
    async up(knex: Knex, schema: string) {
      await knex.schema.withSchema(schema).alterTable('domains', (t) => {
        t.text('ownership_token');
        t.text('dkim_mode').notNullable().defaultTo('txt');
        t.boolean('sandbox').notNullable().defaultTo(false);
        t.timestamp('ownership_verified_at', { useTz: true });
        t.jsonb('dns_records');
        t.timestamp('dkim_rotated_at', { useTz: true });
      });
    },
  },
  {
    // Block lifecycle (docs/BLOCKS.md): motor_blocks.status is active | inactive | deletion_queued | deleted.
    name: '005_block_lifecycle',
    async up(knex: Knex, schema: string) {
      await knex.schema.withSchema(schema).alterTable('motor_blocks', (t) => {
        t.timestamp('deleted_at', { useTz: true });
      });
      // Blocks added to a grant by name (MotorBlockCreated.grantId); account-wide grants cover by account.
      await knex.schema.withSchema(schema).createTable('grant_blocks', (t) => {
        t.text('grant_id').notNullable();
        t.uuid('motor_block_id').notNullable().index();
        t.primary(['grant_id', 'motor_block_id']);
      });
      // One row per deletion job; it outlives the block (the block row stays with status deleted).
      await knex.schema.withSchema(schema).createTable('motor_block_deletions', (t) => {
        t.uuid('job_id').primary();
        t.uuid('account_id').notNullable().index();
        t.uuid('motor_block_id').notNullable().index();
        t.boolean('delete_history').notNullable();
        t.text('status').notNullable();
        t.integer('messages_deleted');
        t.integer('streams_deleted');
        t.integer('events_deleted');
        t.text('error');
        t.timestamp('requested_at', { useTz: true }).notNullable();
        t.timestamp('started_at', { useTz: true });
        t.timestamp('completed_at', { useTz: true });
      });
    },
  },
  {
    // Sandbox and free recipients (docs/SANDBOX.md).
    name: '006_sandbox_recipients',
    async up(knex: Knex, schema: string) {
      // One row per account that provisioned a sandbox (SandboxProvisioned on account-<id>).
      await knex.schema.withSchema(schema).createTable('sandboxes', (t) => {
        t.uuid('account_id').primary();
        t.text('handle').notNullable().unique();
        t.uuid('domain_id').notNullable();
        t.uuid('motor_block_id').notNullable().unique();
        t.text('channel').notNullable();
        t.timestamp('provisioned_at', { useTz: true }).notNullable();
        t.timestamp('converted_at', { useTz: true });
      });
      // The sandbox block's outbound allowlist as set (the owner's address is added when read).
      await knex.schema.withSchema(schema).createTable('sandbox_allowlists', (t) => {
        t.uuid('motor_block_id').primary();
        t.uuid('account_id').notNullable().index();
        t.specificType('addresses', 'text[]').notNullable().defaultTo('{}');
        t.timestamp('updated_at', { useTz: true });
      });
      // Free recipients; token_hash is the latest link's (a confirmed row keeps the one that confirmed it).
      await knex.schema.withSchema(schema).createTable('free_recipients', (t) => {
        t.uuid('id').primary();
        t.uuid('account_id').notNullable();
        t.text('email').notNullable();
        t.text('status').notNullable();
        t.text('token_hash').notNullable();
        t.timestamp('token_expires_at', { useTz: true }).notNullable();
        t.timestamp('requested_at', { useTz: true }).notNullable();
        t.timestamp('confirmed_at', { useTz: true });
        t.unique(['account_id', 'email']);
      });
      // Read-your-writes of freeRecipients-<accountId>: the revision the rows above reflect.
      await knex.schema.withSchema(schema).createTable('free_recipient_lists', (t) => {
        t.uuid('id').primary();
        t.bigInteger('revision').notNullable().defaultTo(-1);
      });
    },
  },
  {
    // SMTP mTLS (docs/SMTP.md): the block's registered client certificate (fingerprint only). The
    // auth method switch itself updates motor_blocks.auth_method.
    name: '007_smtp_mtls',
    async up(knex: Knex, schema: string) {
      await knex.schema.withSchema(schema).createTable('smtp_client_certificates', (t) => {
        t.uuid('motor_block_id').primary();
        t.text('fingerprint256').notNullable();
        t.text('subject').notNullable();
        t.text('issuer').notNullable();
        t.timestamp('not_after', { useTz: true }).notNullable();
        t.timestamp('registered_at', { useTz: true }).notNullable();
      });
    },
  },
  {
    // The first claim of an address looks for an older account with it (findAccountByEmail), on
    // the dashboard's sign-up too: an index instead of a scan of every account.
    name: '008_account_email',
    async up(knex: Knex, schema: string) {
      await knex.raw('create index accounts_email_idx on ??.accounts (lower(btrim(email)))', [schema]);
    },
  },
];

export const DIRECTORY_EVENTS = [
  'AccountCreated', 'AccountPlanChanged',
  // Nothing to apply; the account row's revision follows them, and the listing of an older
  // account's blocks waits for that (commands/blocks/accountBlockList.ts).
  'AccountBlockListingStarted', 'AccountBlocksListed', 'AccountBlockAdded',
  'DomainAdded', 'DomainOwnershipVerified', 'DomainDnsChecked', 'DomainDkimKeyRotated',
  'MotorBlockCreated', 'MotorBlockLimitsSet', 'MotorBlockDeactivated', 'MotorBlockReactivated', 'SmtpPasswordSet',
  // block lifecycle (docs/BLOCKS.md)
  'MotorBlockRenamed', 'MotorBlockTypeChanged', 'MotorBlockDomainAssigned', 'MotorBlockDeletionRequested',
  'MotorBlockDeletionStarted', 'MotorBlockDeletionFailed', 'MotorBlockDeleted',
  'ApiKeyCreated', 'ApiKeyRevoked',
  // sandbox and free recipients (docs/SANDBOX.md)
  'SandboxProvisioned', 'SandboxAllowlistUpdated', 'SandboxConverted',
  'FreeRecipientRequested', 'FreeRecipientConfirmed', 'FreeRecipientRemoved', 'FreeRecipientMailFailed',
  'SmtpClientCertificateRegistered', 'MotorBlockAuthMethodChanged',
] as const;

/** The directory table whose row reflects a stream of this category (its `revision` column is kept). */
const ROW_OF_CATEGORY: Record<string, { table: string; idField: string }> = {
  account: { table: 'accounts', idField: 'accountId' },
  sendingDomain: { table: 'domains', idField: 'domainId' },
  motorBlock: { table: 'motor_blocks', idField: 'motorBlockId' },
  freeRecipients: { table: 'free_recipient_lists', idField: 'accountId' },
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
    case 'AccountPlanChanged':
      // Every reader of the plan but the block limit (ceilings, retention, the Free-plan rule) reads this column.
      await t('accounts').where({ id: event.data.accountId }).update({ plan: event.data.plan });
      return;
    case 'DomainAdded': {
      const d = event.data;
      await t('domains')
        .insert({
          id: d.domainId, account_id: d.accountId, name: d.name, dkim_selector: d.dkimSelector, dkim_algorithm: d.dkimAlgorithm,
          dkim_public_key: d.dkimPublicKey, dkim_key_id: d.dkimKeyId, added_at: d.addedAt,
          ownership_token: d.ownershipToken ?? null, dkim_mode: d.dkimMode ?? 'txt', sandbox: d.sandbox ?? false,
        })
        // Any conflict (the id, or the (account, name) pair) keeps the first row: a projector never stops on it.
        .onConflict().ignore();
      return;
    }
    case 'DomainOwnershipVerified':
      await t('domains').where({ id: event.data.domainId }).update({ ownership_verified: true, ownership_verified_at: event.data.verifiedAt });
      return;
    case 'DomainDnsChecked': {
      const d = event.data;
      await t('domains').where({ id: d.domainId }).update({
        spf_configured: d.spfConfigured, dkim_configured: d.dkimConfigured, dmarc_configured: d.dmarcConfigured, dns_checked_at: d.checkedAt,
        ...(d.records ? { dns_records: JSON.stringify(d.records) } : {}),
      });
      return;
    }
    case 'DomainDkimKeyRotated': {
      const d = event.data;
      // Signing follows the row (workers/deliveryWorker.ts reads the key id and selector here).
      await t('domains').where({ id: d.domainId }).update({
        dkim_selector: d.dkimSelector, dkim_algorithm: d.dkimAlgorithm, dkim_public_key: d.dkimPublicKey, dkim_key_id: d.dkimKeyId,
        dkim_rotated_at: d.rotatedAt,
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
      if (d.grantId) await t('grant_blocks').insert({ grant_id: d.grantId, motor_block_id: d.motorBlockId }).onConflict(['grant_id', 'motor_block_id']).ignore();
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
    case 'MotorBlockAuthMethodChanged':
      await t('motor_blocks').where({ id: event.data.motorBlockId }).update({ auth_method: event.data.authMethod });
      return;
    case 'SmtpClientCertificateRegistered': {
      const d = event.data;
      const row = { fingerprint256: d.fingerprint256, subject: d.subject, issuer: d.issuer, not_after: d.notAfter, registered_at: d.registeredAt };
      await t('smtp_client_certificates').insert({ motor_block_id: d.motorBlockId, ...row }).onConflict('motor_block_id').merge(row);
      return;
    }
    case 'SmtpPasswordSet':
      await t('motor_blocks').where({ id: event.data.motorBlockId }).update({ smtp_password_hash: event.data.passwordHash });
      return;
    // ---- block lifecycle (docs/BLOCKS.md)
    case 'MotorBlockRenamed':
      await t('motor_blocks').where({ id: event.data.motorBlockId }).update({ name: event.data.name });
      return;
    case 'MotorBlockTypeChanged':
      await t('motor_blocks').where({ id: event.data.motorBlockId }).update({ type: event.data.type });
      return;
    case 'MotorBlockDomainAssigned':
      await t('motor_blocks').where({ id: event.data.motorBlockId }).update({ domain_id: event.data.domainId });
      return;
    case 'MotorBlockDeletionRequested': {
      const d = event.data;
      await t('motor_blocks').where({ id: d.motorBlockId }).update({ status: 'deletion_queued' });
      await t('motor_block_deletions')
        .insert({ job_id: d.jobId, account_id: d.accountId, motor_block_id: d.motorBlockId, delete_history: d.deleteHistory, status: 'queued', requested_at: d.requestedAt })
        .onConflict('job_id').ignore();
      return;
    }
    case 'MotorBlockDeletionStarted':
      await t('motor_block_deletions').where({ job_id: event.data.jobId }).whereNot({ status: 'completed' }).update({ status: 'running', started_at: event.data.at, error: null });
      return;
    case 'MotorBlockDeletionFailed':
      await t('motor_block_deletions').where({ job_id: event.data.jobId }).whereNot({ status: 'completed' }).update({ status: 'failed', error: event.data.reason });
      return;
    case 'MotorBlockDeleted': {
      // The tombstone: the block stops working everywhere (keys, SMTP login, sends) and leaves every grant.
      const d = event.data;
      await t('motor_blocks').where({ id: d.motorBlockId }).update({ status: 'deleted', smtp_password_hash: null, deleted_at: d.deletedAt });
      await t('api_keys').where({ motor_block_id: d.motorBlockId }).whereNull('revoked_at').update({ revoked_at: d.deletedAt });
      await t('grant_blocks').where({ motor_block_id: d.motorBlockId }).delete();
      await t('motor_block_deletions').where({ job_id: d.jobId }).update({
        status: 'completed', messages_deleted: d.messagesDeleted, streams_deleted: d.streamsDeleted, events_deleted: d.eventsDeleted, completed_at: d.deletedAt, error: null,
      });
      return;
    }
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
    // ------------------------------------------------------------ sandbox and free recipients (docs/SANDBOX.md)
    case 'SandboxProvisioned': {
      const d = event.data;
      await t('sandboxes')
        .insert({ account_id: d.accountId, handle: d.handle, domain_id: d.domainId, motor_block_id: d.motorBlockId, channel: d.channel, provisioned_at: d.provisionedAt })
        .onConflict('account_id').ignore();
      await t('sandbox_allowlists').insert({ motor_block_id: d.motorBlockId, account_id: d.accountId }).onConflict('motor_block_id').ignore();
      return;
    }
    case 'SandboxAllowlistUpdated': {
      const d = event.data;
      await t('sandbox_allowlists')
        .insert({ motor_block_id: d.motorBlockId, account_id: d.accountId, addresses: d.addresses, updated_at: d.updatedAt })
        .onConflict('motor_block_id').merge(['addresses', 'updated_at']);
      return;
    }
    case 'SandboxConverted': {
      const d = event.data;
      await t('motor_blocks').where({ id: d.motorBlockId }).update({ type: d.type, name: d.name, domain_id: d.domainId, smtp_username: d.smtpUsername });
      await t('sandboxes').where({ motor_block_id: d.motorBlockId }).update({ converted_at: d.convertedAt });
      return;
    }
    case 'FreeRecipientRequested': {
      const d = event.data;
      await t('free_recipient_lists').insert({ id: d.accountId }).onConflict('id').ignore();
      await t('free_recipients')
        .insert({ id: d.recipientId, account_id: d.accountId, email: d.email, status: 'pending', token_hash: d.tokenHash, token_expires_at: d.expiresAt, requested_at: d.requestedAt })
        .onConflict('id').merge(['token_hash', 'token_expires_at', 'requested_at']);
      return;
    }
    case 'FreeRecipientConfirmed':
      await t('free_recipient_lists').insert({ id: event.data.accountId }).onConflict('id').ignore();
      await t('free_recipients').where({ id: event.data.recipientId }).update({ status: 'confirmed', confirmed_at: event.data.confirmedAt });
      return;
    case 'FreeRecipientRemoved':
      await t('free_recipient_lists').insert({ id: event.data.accountId }).onConflict('id').ignore();
      await t('free_recipients').where({ id: event.data.recipientId }).delete();
      return;
    case 'FreeRecipientMailFailed':
      await t('free_recipient_lists').insert({ id: event.data.accountId }).onConflict('id').ignore();
      await t('free_recipients').where({ id: event.data.recipientId, status: 'pending', token_hash: event.data.tokenHash }).delete();
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
