import type { Knex } from 'knex';

export const OAUTH_CLIENTS_SCHEMA = 'rm_oauthclients';

export interface OAuthClientListItem { clientId: string; name: string; redirectUris: string[]; registeredBy: string; createdAt: string }

export async function listOAuthClients(db: Knex, accountId: string): Promise<OAuthClientListItem[]> {
  const rows = await db.withSchema(OAUTH_CLIENTS_SCHEMA).table('clients').where({ account_id: accountId }).orderBy('registered_at');
  return rows.map((r) => ({ clientId: r.id, name: r.name, redirectUris: r.redirect_uris, registeredBy: r.registered_by, createdAt: new Date(r.registered_at).toISOString() }));
}
