import { randomBytes } from 'node:crypto';
import { streamName } from '../../domain/eventStore';
import { toEventData, type DomainEvent } from '../../domain/events';
import { newId } from '../../domain/ids';
import { resourceUri, type AgentScope } from '../../domain/oauth/agent';
import { OAUTH_RULES } from '../../domain/oauth/grant';
import { signAgentToken } from '../../commands/oauth/agentTokens';
import type { TestMotor } from './motor';

/**
 * An agent's connection as the OAuth 2.1 flow records it (consent, code, token: the grant's
 * events), without the browser and the client metadata document: for tests of what an agent
 * token can do. The flow itself is tested in test/oauth/agent.int.test.ts.
 */
export async function grantAgentAccess(
  motor: TestMotor,
  o: { accountId: string; path: string; scopes: AgentScope[]; userId?: string; clientId?: string; ttlSeconds?: number },
): Promise<{ accessToken: string; grantId: string; resource: string; userId: string }> {
  const grantId = newId();
  const tokenId = newId();
  const userId = o.userId ?? newId();
  const clientId = o.clientId ?? 'https://agent.example.test/client.json';
  const resource = resourceUri(motor.config.mcpPublicUrl, o.path);
  const now = new Date();
  const iso = (ms: number) => new Date(now.getTime() + ms).toISOString();
  const hash = () => randomBytes(32).toString('hex');
  const events: DomainEvent[] = [
    { type: 'OAuthConsentRequested', data: {
      grantId, clientId, accountId: o.accountId, userId, sessionId: newId(), redirectUri: 'https://agent.example.test/callback', scope: o.scopes.join(' '),
      state: null, motorBlockId: null, formTokenHash: hash(), expiresAt: iso(OAUTH_RULES.consentTtlMs), requestedAt: now.toISOString(),
      resource, codeChallenge: randomBytes(32).toString('base64url').slice(0, 43), clientName: 'Test agent',
    } },
    { type: 'OAuthCodeIssued', data: { grantId, motorBlockId: null, codeHash: hash(), expiresAt: iso(OAUTH_RULES.codeTtlMs), issuedAt: now.toISOString() } },
    { type: 'OAuthTokenIssued', data: {
      grantId, tokenId, refreshTokenHash: hash(), accessExpiresAt: iso(OAUTH_RULES.accessTtlSeconds * 1000), refreshExpiresAt: iso(OAUTH_RULES.refreshTtlMs), issuedAt: now.toISOString(),
    } },
  ];
  await motor.rt.store.append(streamName('oauthGrant', grantId), events.map((e) => toEventData(newId(), e)), { expectedRevision: 'no_stream' });
  const { token } = await signAgentToken({ keys: motor.rt.keys, config: motor.config }, {
    tokenId, grantId, clientId, userId, accountId: o.accountId, resource, scopes: o.scopes,
  }, now, o.ttlSeconds ?? OAUTH_RULES.accessTtlSeconds);
  return { accessToken: token, grantId, resource, userId };
}
