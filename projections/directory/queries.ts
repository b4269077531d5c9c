import type { Knex } from 'knex';
import type { DkimAlgorithm, DomainRecordCheck } from '../../domain/events';
import { dkimTxtValue, managedDkimTarget } from '../../domain/sendingDomain/records';

/** Rows of the directory read model as the rest of the product sees them (camelCase, no secrets but hashes). */

export const DIRECTORY_SCHEMA = 'rm_directory';

export interface BlockRecord {
  id: string; accountId: string; name: string; type: string; description: string | null;
  domainId: string; smtpUsername: string; authMethod: string; status: 'active' | 'inactive' | 'deletion_queued' | 'deleted';
  /** SHA-256 (hex) of the current SMTP password; null before one is generated. */
  smtpPasswordHash: string | null;
  limits: { burst: number | null; hourly: number | null; daily: number | null };
  createdAt: Date;
}
export interface DomainRecord {
  id: string; accountId: string; name: string; dkimSelector: string; dkimAlgorithm: 'rsa-sha256' | 'ed25519-sha256';
  dkimPublicKey: string; dkimKeyId: string; ownershipVerified: boolean; spfConfigured: boolean; dkimConfigured: boolean;
  dmarcConfigured: boolean; dnsCheckedAt: Date | null; addedAt: Date;
  /** docs/DOMAINS.md: null on domains added before ownership tokens existed. */
  ownershipToken: string | null; dkimMode: 'txt' | 'cname_managed'; sandbox: boolean;
  ownershipVerifiedAt: Date | null;
  /** Per-record results of the last DNS check (null before one). */
  dnsRecords: DomainRecordCheck[] | null;
  dkimRotatedAt: Date | null;
}
export interface ApiKeyRecord {
  id: string; kind: 'block' | 'account'; accountId: string; motorBlockId: string | null; prefix: string;
  secretHash: string; scopes: string[]; revokedAt: Date | null;
}

/* eslint-disable @typescript-eslint/no-explicit-any */
const toBlock = (r: any): BlockRecord => ({
  id: r.id, accountId: r.account_id, name: r.name, type: r.type, description: r.description, domainId: r.domain_id,
  smtpUsername: r.smtp_username, authMethod: r.auth_method, status: r.status, smtpPasswordHash: r.smtp_password_hash ?? null,
  limits: { burst: r.limit_burst, hourly: r.limit_hourly, daily: r.limit_daily }, createdAt: r.created_at,
});
const toDomain = (r: any): DomainRecord => ({
  id: r.id, accountId: r.account_id, name: r.name, dkimSelector: r.dkim_selector, dkimAlgorithm: r.dkim_algorithm,
  dkimPublicKey: r.dkim_public_key, dkimKeyId: r.dkim_key_id, ownershipVerified: r.ownership_verified,
  spfConfigured: r.spf_configured, dkimConfigured: r.dkim_configured, dmarcConfigured: r.dmarc_configured,
  dnsCheckedAt: r.dns_checked_at, addedAt: r.added_at,
  ownershipToken: r.ownership_token ?? null, dkimMode: r.dkim_mode ?? 'txt', sandbox: r.sandbox ?? false,
  ownershipVerifiedAt: r.ownership_verified_at ?? null, dnsRecords: r.dns_records ?? null, dkimRotatedAt: r.dkim_rotated_at ?? null,
});
const toKey = (r: any): ApiKeyRecord => ({
  id: r.id, kind: r.kind, accountId: r.account_id, motorBlockId: r.motor_block_id, prefix: r.prefix,
  secretHash: r.secret_hash, scopes: r.scopes, revokedAt: r.revoked_at,
});
/* eslint-enable @typescript-eslint/no-explicit-any */

const tbl = (db: Knex, name: string) => db.withSchema(DIRECTORY_SCHEMA).table(name);

export async function findApiKeyByPrefix(db: Knex, prefix: string): Promise<ApiKeyRecord | null> {
  const r = await tbl(db, 'api_keys').where({ prefix }).first();
  return r ? toKey(r) : null;
}
export async function getApiKey(db: Knex, id: string): Promise<ApiKeyRecord | null> {
  const r = await tbl(db, 'api_keys').where({ id }).first();
  return r ? toKey(r) : null;
}
export async function getBlock(db: Knex, id: string): Promise<BlockRecord | null> {
  const r = await tbl(db, 'motor_blocks').where({ id }).first();
  return r ? toBlock(r) : null;
}
export async function findBlockBySmtpUsername(db: Knex, smtpUsername: string): Promise<BlockRecord | null> {
  const r = await tbl(db, 'motor_blocks').where({ smtp_username: smtpUsername }).first();
  return r ? toBlock(r) : null;
}
export async function listBlocksOfAccount(db: Knex, accountId: string): Promise<BlockRecord[]> {
  return (await tbl(db, 'motor_blocks').where({ account_id: accountId }).orderBy('created_at')).map(toBlock);
}
export async function getDomain(db: Knex, id: string): Promise<DomainRecord | null> {
  const r = await tbl(db, 'domains').where({ id }).first();
  return r ? toDomain(r) : null;
}
export async function getAccount(db: Knex, id: string): Promise<{ id: string; email: string; plan: string } | null> {
  const r = await tbl(db, 'accounts').where({ id }).first();
  return r ? { id: r.id, email: r.email, plan: r.plan } : null;
}
/**
 * The oldest account whose email is `email`, compared trimmed and case-insensitively: bootstrap
 * keeps the case it was given, dashboard sign-up stores lower case. Asked only when an address is
 * claimed for the first time (commands/auth/accountEmail.ts: an account of an older release has no
 * claim), through the index of migration 008.
 */
export async function findAccountByEmail(db: Knex, email: string): Promise<{ id: string; email: string } | null> {
  const r = await tbl(db, 'accounts').whereRaw('lower(btrim(email)) = lower(btrim(?))', [email]).orderBy('created_at').orderBy('id').first('id', 'email');
  return r ? { id: r.id, email: r.email } : null;
}
export async function findDomainOfAccountByName(db: Knex, accountId: string, name: string): Promise<DomainRecord | null> {
  const r = await tbl(db, 'domains').where({ account_id: accountId, name: name.toLowerCase() }).first();
  return r ? toDomain(r) : null;
}

// ---------------------------------------------------------------- block lifecycle (docs/BLOCKS.md)

/** Blocks of an account that are not deleted (inactive and deletion_queued included), oldest first. */
export async function listLiveBlocksOfAccount(db: Knex, accountId: string): Promise<BlockRecord[]> {
  return (await tbl(db, 'motor_blocks').where({ account_id: accountId }).whereNot({ status: 'deleted' }).orderBy('created_at').orderBy('id')).map(toBlock);
}

/** Ids of the blocks added to a grant by name (narrow grants; account grants cover by account). */
export async function blockIdsOfGrant(db: Knex, grantId: string): Promise<string[]> {
  return (await tbl(db, 'grant_blocks').where({ grant_id: grantId }).select('motor_block_id')).map((r: { motor_block_id: string }) => r.motor_block_id);
}

export interface BlockDeletionRecord {
  jobId: string; accountId: string; motorBlockId: string; deleteHistory: boolean;
  status: 'queued' | 'running' | 'completed' | 'failed';
  messagesDeleted: number | null; streamsDeleted: number | null; eventsDeleted: number | null; error: string | null;
  requestedAt: Date; startedAt: Date | null; completedAt: Date | null;
}

export async function getBlockDeletion(db: Knex, jobId: string): Promise<BlockDeletionRecord | null> {
  const r = await tbl(db, 'motor_block_deletions').where({ job_id: jobId }).first();
  return r ? {
    jobId: r.job_id, accountId: r.account_id, motorBlockId: r.motor_block_id, deleteHistory: r.delete_history, status: r.status,
    messagesDeleted: r.messages_deleted, streamsDeleted: r.streams_deleted, eventsDeleted: r.events_deleted, error: r.error,
    requestedAt: r.requested_at, startedAt: r.started_at, completedAt: r.completed_at,
  } : null;
}

// ---------------------------------------------------------------- sandbox and free recipients (docs/SANDBOX.md)
export interface SandboxRecord {
  accountId: string; handle: string; domainId: string; motorBlockId: string; channel: string; provisionedAt: Date; convertedAt: Date | null;
}
export interface FreeRecipientRecord { id: string; accountId: string; email: string; status: 'pending' | 'confirmed'; requestedAt: Date; confirmedAt: Date | null }

export async function getSandboxOfAccount(db: Knex, accountId: string): Promise<SandboxRecord | null> {
  const r = await tbl(db, 'sandboxes').where({ account_id: accountId }).first();
  return r ? {
    accountId: r.account_id, handle: r.handle, domainId: r.domain_id, motorBlockId: r.motor_block_id, channel: r.channel,
    provisionedAt: r.provisioned_at, convertedAt: r.converted_at,
  } : null;
}
/** The addresses set with PATCH outbound for a sandbox block (null: not a sandbox block). */
export async function getSandboxAllowlist(db: Knex, motorBlockId: string): Promise<string[] | null> {
  const r = await tbl(db, 'sandbox_allowlists').where({ motor_block_id: motorBlockId }).first('addresses');
  return r ? (r.addresses as string[]) : null;
}
/** Whether the account has an active block of a production type (transactional or general_purpose). */
export async function hasActiveProductionBlock(db: Knex, accountId: string): Promise<boolean> {
  const r = await tbl(db, 'motor_blocks').where({ account_id: accountId, status: 'active' }).whereIn('type', ['transactional', 'general_purpose']).first('id');
  return Boolean(r);
}
export async function listFreeRecipients(db: Knex, accountId: string): Promise<FreeRecipientRecord[]> {
  const rows = await tbl(db, 'free_recipients').where({ account_id: accountId }).orderBy([{ column: 'requested_at' }, { column: 'id' }]);
  return rows.map((r) => ({ id: r.id, accountId: r.account_id, email: r.email, status: r.status, requestedAt: r.requested_at, confirmedAt: r.confirmed_at }));
}
/** Confirmed free recipients of an account, lower-case (the Free-plan send rule). */
export async function confirmedFreeRecipients(db: Knex, accountId: string): Promise<string[]> {
  return (await tbl(db, 'free_recipients').where({ account_id: accountId, status: 'confirmed' }).select('email')).map((r) => r.email as string);
}

// ---------------------------------------------------------------- domains (docs/DOMAINS.md)

/** The account's domains, oldest first (sandbox domains included). */
export async function listDomainsOfAccount(db: Knex, accountId: string): Promise<DomainRecord[]> {
  return (await tbl(db, 'domains').where({ account_id: accountId }).orderBy('added_at').orderBy('id')).map(toDomain);
}

/**
 * Tenants' domains (sandbox domains are the service's) named `domain` (normalised) or under it, of
 * every account, oldest first: those added before BOUNCE_DOMAIN named them (docs/DOMAINS.md "Bounce domain").
 */
export async function tenantDomainsAtOrUnder(db: Knex, domain: string): Promise<DomainRecord[]> {
  const rows = await tbl(db, 'domains').where({ sandbox: false })
    .andWhere((q) => q.where('name', domain).orWhereRaw('right(name, ?) = ?', [domain.length + 1, `.${domain}`]))
    .orderBy('added_at').orderBy('id');
  return rows.map(toDomain);
}

/**
 * The DKIM TXT records the service must serve for cname_managed domains (the targets of the
 * owners' CNAMEs), for the operator's DNS: `name` is `<selector>.<domainId>.dkim.<SERVICE_DOMAIN>`.
 */
export async function managedDkimRecords(db: Knex, serviceDomain: string): Promise<Array<{ domainId: string; name: string; value: string }>> {
  const rows = await tbl(db, 'domains').where({ dkim_mode: 'cname_managed', sandbox: false }).orderBy('id');
  return rows.map((r: { id: string; dkim_selector: string; dkim_algorithm: string; dkim_public_key: string }) => ({
    domainId: r.id,
    name: managedDkimTarget(r.dkim_selector, r.id, serviceDomain),
    value: dkimTxtValue(r.dkim_algorithm as DkimAlgorithm, r.dkim_public_key),
  }));
}
