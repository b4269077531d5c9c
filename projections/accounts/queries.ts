import type { Knex } from 'knex';
import { maskApiKey } from '../../domain/credentials/apiKeys';

export const ACCOUNTS_SCHEMA = 'rm_accounts';

/** A key as the dashboard lists it: never the secret, the masked display is not a usable key. */
export interface ApiKeyListItem {
  id: string; kind: 'block' | 'account'; motorBlockId: string | null; name: string | null;
  masked: string; prefix: string; scopes: string[]; createdAt: string; revokedAt: string | null; status: 'active' | 'revoked';
}

/* eslint-disable @typescript-eslint/no-explicit-any */
const toItem = (r: any): ApiKeyListItem => ({
  id: r.id, kind: r.kind, motorBlockId: r.motor_block_id, name: r.name, masked: maskApiKey(r.kind, r.prefix), prefix: r.prefix,
  scopes: r.scopes, createdAt: new Date(r.created_at).toISOString(), revokedAt: r.revoked_at ? new Date(r.revoked_at).toISOString() : null,
  status: r.revoked_at ? 'revoked' : 'active',
});
/* eslint-enable @typescript-eslint/no-explicit-any */

export async function listAccountApiKeys(db: Knex, accountId: string): Promise<ApiKeyListItem[]> {
  return (await db.withSchema(ACCOUNTS_SCHEMA).table('api_keys').where({ account_id: accountId, kind: 'account' }).orderBy('created_at')).map(toItem);
}

export async function listBlockApiKeys(db: Knex, motorBlockId: string): Promise<ApiKeyListItem[]> {
  return (await db.withSchema(ACCOUNTS_SCHEMA).table('api_keys').where({ motor_block_id: motorBlockId, kind: 'block' }).orderBy('created_at')).map(toItem);
}

export async function smtpPasswordSetAt(db: Knex, motorBlockId: string): Promise<string | null> {
  const r = await db.withSchema(ACCOUNTS_SCHEMA).table('smtp_passwords').where({ motor_block_id: motorBlockId }).first();
  return r ? new Date(r.set_at).toISOString() : null;
}

export async function findUserByEmail(db: Knex, email: string) {
  const r = await db.withSchema(ACCOUNTS_SCHEMA).table('users').where({ email }).first();
  return r ? { id: r.id as string, accountId: r.account_id as string, email: r.email as string, status: r.status as string } : null;
}
