import type { Knex } from 'knex';

export const OAUTH_CONNECTIONS_SCHEMA = 'rm_oauthconnections';

export interface OAuthConnection {
  /** The grant's id: DELETE /api/oauth2/connections/{id} revokes it. */
  id: string;
  kind: 'agent' | 'smtp';
  clientId: string;
  /** The agent's `client_name` at consent; null for SMTP clients (see GET /api/oauth2/clients). */
  clientName: string | null;
  /** Agent connections: the MCP server the tokens are for. */
  resource: string | null;
  scope: string;
  /** SMTP connections: the block the tokens send as. */
  motorBlockId: string | null;
  userId: string;
  connectedAt: string;
  lastRefreshedAt: string | null;
  status: 'active' | 'revoked';
  revokedAt: string | null;
  revokedReason: string | null;
}

const iso = (v: Date | string | null): string | null => (v === null ? null : new Date(v).toISOString());

/** The account's connections (a token was issued), newest first; revoked ones included with their reason. */
export async function listConnections(db: Knex, accountId: string): Promise<OAuthConnection[]> {
  const rows = await db.withSchema(OAUTH_CONNECTIONS_SCHEMA).table('connections')
    .where({ account_id: accountId }).whereNotNull('connected_at').orderBy('connected_at', 'desc').limit(500);
  return rows.map((r) => ({
    id: r.grant_id, kind: r.kind, clientId: r.client_id, clientName: r.client_name, resource: r.resource, scope: r.scope, motorBlockId: r.motor_block_id,
    userId: r.user_id, connectedAt: iso(r.connected_at)!, lastRefreshedAt: iso(r.last_refreshed_at),
    status: r.revoked_at ? 'revoked' : 'active', revokedAt: iso(r.revoked_at), revokedReason: r.revoked_reason,
  }));
}
