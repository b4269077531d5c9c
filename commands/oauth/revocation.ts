import { oauthError, decideClientRevoke } from '../../domain/oauth/grant';
import { sha256Hex } from '../auth/secrets';
import { accessTokenSettings, verifyAccessToken } from './accessTokens';
import { agentTokenGrant } from './agentTokens';
import type { OAuthDeps } from './authorization';
import { grantOf } from './authorization';
import { authenticateClient } from './clients';
import { decideOnGrant } from './grantCache';

/**
 * POST /api/oauth2/revoke (RFC 7009; docs/OAUTH.md "Revocation"): a client gives up a token it
 * holds. A refresh token or an access token revokes the whole grant at once (every token of it,
 * as when the user revokes the connection). SMTP clients authenticate with their secret; agent
 * clients are public and name themselves by client_id. An unknown, malformed or foreign token is
 * answered like a revoked one (200), so the endpoint tells nothing about tokens it did not issue
 * to this client.
 */
export async function revokeToken(deps: OAuthDeps, body: Record<string, unknown>, now: Date): Promise<void> {
  const clientId = body.client_id;
  if (typeof clientId !== 'string' || clientId === '') throw oauthError('invalid_client', 'client_id is required');
  if (!clientId.startsWith('https://')) await authenticateClient(deps.store, clientId, body.client_secret);
  if (typeof body.token !== 'string' || body.token === '') throw oauthError('invalid_request', 'token is required');
  const token = body.token;

  let grantId = grantOf('ort', token);
  const refreshTokenHash = grantId === null ? undefined : sha256Hex(token);
  if (grantId === null) {
    const agent = await agentTokenGrant({ keys: deps.agents.keys, config: deps.config }, token);
    const smtp = agent ? null : verifyAccessToken(accessTokenSettings(deps.config), token, now);
    const owner = agent ?? (smtp?.ok ? { grantId: smtp.claims.grantId, clientId: smtp.claims.clientId } : null);
    if (owner === null || owner.clientId !== clientId) return;
    grantId = owner.grantId;
  }
  await decideOnGrant(deps.store, grantId, `oauthClient:${clientId}`, (s) => ({ events: decideClientRevoke(s, { clientId, now, refreshTokenHash }), result: undefined }));
}
