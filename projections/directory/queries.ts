import type { Knex } from 'knex';

/** Rows of the directory read model as the rest of the product sees them (camelCase, no secrets but hashes). */

export const DIRECTORY_SCHEMA = 'rm_directory';

export interface BlockRecord {
  id: string; accountId: string; name: string; type: string; description: string | null;
  domainId: string; smtpUsername: string; authMethod: string; status: 'active' | 'inactive';
  /** SHA-256 (hex) of the current SMTP password; null before one is generated. */
  smtpPasswordHash: string | null;
  limits: { burst: number | null; hourly: number | null; daily: number | null };
  createdAt: Date;
}
export interface DomainRecord {
  id: string; accountId: string; name: string; dkimSelector: string; dkimAlgorithm: 'rsa-sha256' | 'ed25519-sha256';
  dkimPublicKey: string; dkimKeyId: string; ownershipVerified: boolean; spfConfigured: boolean; dkimConfigured: boolean;
  dmarcConfigured: boolean; dnsCheckedAt: Date | null; addedAt: Date;
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
export async function findDomainOfAccountByName(db: Knex, accountId: string, name: string): Promise<DomainRecord | null> {
  const r = await tbl(db, 'domains').where({ account_id: accountId, name: name.toLowerCase() }).first();
  return r ? toDomain(r) : null;
}
