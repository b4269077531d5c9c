import type { EventStore } from '../../domain/eventStore';
import { newId } from '../../domain/ids';
import { codeChallengeOf, parseAgentScope, serverOfResource, type AgentScope } from '../../domain/oauth/agent';
import { decideUserRevoke, OAUTH_RULES, oauthError } from '../../domain/oauth/grant';
import { fail } from '../../domain/errors';
import type { KeyStore } from '../../infra/keys/keyStore';
import { appendEvents } from '../auth/streams';
import { signAgentToken } from './agentTokens';
import type { DashboardUser } from './authorization';
import { opaque, redeemGrant } from './authorization';
import { decideOnGrant, grantStream } from './grantCache';
import type { ClientMetadataFetcher } from './clientMetadata';

/**
 * The OAuth 2.1 agent profile of the authorization server (SPEC "OAuth 2.1 for agent clients",
 * docs/OAUTH.md): the same authorize, consent and token endpoints as SMTP clients, for a client
 * whose client_id is a metadata document URL. PKCE S256 is mandatory, `resource` names the one
 * MCP server the tokens are for, the grant is account-wide (no block), the client is public (no
 * secret), and access tokens are RS256 JWTs bound to the resource.
 */

export interface AgentOAuthDeps {
  store: EventStore;
  keys: KeyStore;
  clients: ClientMetadataFetcher;
  config: { authPublicUrl: string; mcpPublicUrl: string };
}

export interface AgentConsentPage {
  grantId: string; formToken: string; clientName: string; clientId: string; redirectUri: string;
  resource: string; scopes: AgentScope[];
}

/** GET /api/oauth2/authorize for an agent client: checks everything, records the consent page's form token. */
export async function startAgentAuthorization(deps: AgentOAuthDeps, user: DashboardUser, one: (name: string) => string | undefined, now: Date): Promise<AgentConsentPage> {
  const clientId = one('client_id')!;
  const client = await deps.clients.get(clientId);
  const redirectUri = one('redirect_uri');
  if (!redirectUri) throw oauthError('invalid_request', 'redirect_uri is required');
  if (!client.redirectUris.includes(redirectUri)) throw oauthError('invalid_request', 'redirect_uri is not one of the client metadata document\'s redirect_uris');
  if (one('response_type') !== 'code') throw oauthError('invalid_request', 'response_type must be code');
  const pkce = codeChallengeOf(one('code_challenge_method'), one('code_challenge'), true);
  if (!pkce.ok) throw oauthError('invalid_request', pkce.reason);
  const codeChallenge = pkce.challenge!;
  const resource = one('resource');
  if (resource === undefined) throw oauthError('invalid_request', 'resource is required: the canonical URI of the MCP server');
  const server = serverOfResource(deps.config.mcpPublicUrl, resource);
  if (!server) throw oauthError('invalid_target', 'resource is not the canonical URI of one of this service\'s MCP servers');
  const scope = parseAgentScope(server, one('scope'));
  if (!scope.ok) {
    const pii = scope.refused.includes('logs.pii') ? ' (logs.pii is never granted to an agent client)' : '';
    throw oauthError('invalid_scope', `Scope not offered by ${resource}: ${scope.refused.join(' ') || 'malformed'}${pii}; it offers ${server.scopes.join(' ')}`);
  }
  const state = one('state');
  if (state !== undefined && state.length > 1024) throw oauthError('invalid_request', 'state is longer than 1024 characters');

  const grantId = newId();
  const form = opaque('oct', grantId);
  await appendEvents(deps.store, grantStream(grantId), [{
    type: 'OAuthConsentRequested',
    data: {
      grantId, clientId, accountId: user.accountId, userId: user.userId, sessionId: user.sessionId, redirectUri, scope: scope.scopes.join(' '),
      state: state ?? null, motorBlockId: null, formTokenHash: form.hash,
      expiresAt: new Date(now.getTime() + OAUTH_RULES.consentTtlMs).toISOString(), requestedAt: now.toISOString(),
      resource, codeChallenge, clientName: client.name,
    },
  }], 'no_stream', `user:${user.userId}`);
  return { grantId, formToken: form.value, clientName: client.name, clientId, redirectUri, resource, scopes: scope.scopes };
}

/** The token response of an agent client (RFC 6749 §5.1; no motor_block: the grant is account-wide). */
export interface AgentTokenResponse {
  access_token: string; token_type: 'Bearer';
  /** Seconds. @isInt */
  expires_in: number;
  refresh_token: string; scope: string;
}

/** POST /api/oauth2/token for an agent client: public (no secret), PKCE and `resource` required. */
export async function issueAgentToken(deps: AgentOAuthDeps, body: Record<string, unknown>, now: Date): Promise<AgentTokenResponse> {
  const clientId = body.client_id as string;
  if (typeof body.resource !== 'string') throw oauthError('invalid_request', 'resource is required: the canonical URI of the MCP server');
  const resource = body.resource;
  if (!serverOfResource(deps.config.mcpPublicUrl, resource)) throw oauthError('invalid_target', 'resource is not the canonical URI of one of this service\'s MCP servers');
  const { grantId, tokenId, refresh, state } = await redeemGrant(deps.store, body, clientId, now, { resource });
  const scopes = state.scope.split(' ').filter(Boolean) as AgentScope[];
  const access = await signAgentToken(deps, {
    tokenId, grantId, clientId, userId: state.userId!, accountId: state.accountId!, resource: state.resource!, scopes,
  }, now, OAUTH_RULES.accessTtlSeconds);
  return { access_token: access.token, token_type: 'Bearer', expires_in: OAUTH_RULES.accessTtlSeconds, refresh_token: refresh.value, scope: state.scope };
}

/**
 * DELETE /api/oauth2/connections/{grantId}: the connection's tokens stop at once (every check folds
 * the grant). The user's own dashboard sessions are other streams and are not touched.
 */
export async function revokeConnection(store: EventStore, user: DashboardUser, grantId: string, now: Date): Promise<void> {
  const { result: revoked } = await decideOnGrant(store, grantId, `user:${user.userId}`, (s) => {
    const events = decideUserRevoke(s, { accountId: user.accountId, userId: user.userId, now });
    return { events: events ?? [], result: events !== null };
  });
  if (!revoked) throw fail('not_found', 404, 'No connection with this id in your account');
}
