import { createPrivateKey, createPublicKey, generateKeyPairSync, type JsonWebKey, type KeyObject } from 'node:crypto';
import jwt from 'jsonwebtoken';
import type { EventStore } from '../../domain/eventStore';
import { streamName } from '../../domain/eventStore';
import { isUuid, newId } from '../../domain/ids';
import { AGENT_SCOPES, type AgentScope } from '../../domain/oauth/agent';
import { foldGrant, GRANT_TYPES, type GrantEvent, type GrantState } from '../../domain/oauth/grant';
import type { KeyStore } from '../../infra/keys/keyStore';
import { load } from '../auth/streams';

/**
 * Agent access tokens (SPEC "OAuth 2.1 for agent clients", docs/OAUTH.md): RS256 JWTs (RFC 9068
 * `at+jwt`) signed with the service's agent key, which is made once and kept encrypted in the key
 * store; its public half is served at /.well-known/jwks.json. `aud` is the one MCP server's
 * canonical URI the grant names (RFC 8707), so a token for one server is refused by every other.
 * A check also folds the grant's stream: a revoked connection stops its tokens at once.
 */

const PURPOSE = 'agent-access-token';

export interface AgentTokenDeps { store: EventStore; keys: KeyStore; config: { authPublicUrl: string } }

export interface AgentClaims {
  tokenId: string; grantId: string; clientId: string; userId: string; accountId: string;
  /** The MCP server's canonical URI (`aud`). */
  resource: string;
  scopes: AgentScope[];
  iat: number; exp: number;
}

const generate = () => {
  const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  return { id: newId(), algorithm: 'RS256', privateKeyPem: privateKey.export({ type: 'pkcs8', format: 'pem' }) as string };
};

interface SigningKey { id: string; privateKey: KeyObject; publicKey: KeyObject }
/** The current key per key store, parsed once: there is no rotation yet, so it never changes in a process. */
const loaded = new WeakMap<KeyStore, Promise<SigningKey>>();

function signingKey(keys: KeyStore): Promise<SigningKey> {
  let key = loaded.get(keys);
  if (!key) {
    key = keys.signingKey(PURPOSE, generate).then((k) => {
      const privateKey = createPrivateKey(k.privateKeyPem);
      return { id: k.id, privateKey, publicKey: createPublicKey(privateKey) };
    });
    key.catch(() => loaded.delete(keys));
    loaded.set(keys, key);
  }
  return key;
}

/** The key set of /.well-known/jwks.json: the public half of the current agent key. */
export async function agentJwks(keys: KeyStore): Promise<{ keys: (JsonWebKey & { kid: string; use: 'sig'; alg: 'RS256' })[] }> {
  const key = await signingKey(keys);
  const jwk = key.publicKey.export({ format: 'jwk' });
  return { keys: [{ kty: jwk.kty, n: jwk.n, e: jwk.e, kid: key.id, use: 'sig', alg: 'RS256' }] };
}

export async function signAgentToken(deps: Pick<AgentTokenDeps, 'keys' | 'config'>, c: Omit<AgentClaims, 'iat' | 'exp'>, now: Date, ttlSeconds: number): Promise<{ token: string; iat: number; exp: number }> {
  const key = await signingKey(deps.keys);
  const iat = Math.floor(now.getTime() / 1000);
  const exp = iat + ttlSeconds;
  const token = jwt.sign(
    { client_id: c.clientId, scope: c.scopes.join(' '), acct: c.accountId, gid: c.grantId, iat, exp },
    key.privateKey,
    { algorithm: 'RS256', keyid: key.id, header: { alg: 'RS256', typ: 'at+jwt', kid: key.id }, issuer: deps.config.authPublicUrl, audience: c.resource, subject: c.userId, jwtid: c.tokenId },
  );
  return { token, iat, exp };
}

export type AgentTokenCheck = { ok: true; claims: AgentClaims } | { ok: false; reason: 'expired' | 'invalid' | 'revoked' };

/**
 * A token for `resource`: signed by the agent key, `typ` at+jwt, this issuer, this audience,
 * unexpired, and its grant neither revoked nor missing the token id. Never throws for a bad token.
 */
export async function activeAgentToken(deps: AgentTokenDeps, token: string, resource: string, now: Date): Promise<AgentTokenCheck> {
  if (token.length > 8192) return { ok: false, reason: 'invalid' };
  const key = await signingKey(deps.keys);
  let claims: AgentClaims;
  try {
    const decoded = jwt.verify(token, key.publicKey, {
      algorithms: ['RS256'], issuer: deps.config.authPublicUrl, audience: resource, clockTimestamp: Math.floor(now.getTime() / 1000), complete: true,
    });
    const p = decoded.payload;
    if (typeof p === 'string' || decoded.header.typ !== 'at+jwt' || !isUuid(p.gid) || !isUuid(p.acct) || !isUuid(p.sub) || !isUuid(p.jti)
      || typeof p.client_id !== 'string' || typeof p.scope !== 'string' || typeof p.iat !== 'number' || typeof p.exp !== 'number') return { ok: false, reason: 'invalid' };
    const scopes = p.scope.split(' ').filter(Boolean);
    if (scopes.some((s) => !(AGENT_SCOPES as readonly string[]).includes(s))) return { ok: false, reason: 'invalid' };
    claims = { tokenId: p.jti!, grantId: p.gid as string, clientId: p.client_id, userId: p.sub!, accountId: p.acct as string, resource, scopes: scopes as AgentScope[], iat: p.iat, exp: p.exp };
  } catch (e) {
    return { ok: false, reason: e instanceof jwt.TokenExpiredError ? 'expired' : 'invalid' };
  }
  const { state } = await load<GrantState, GrantEvent>(deps.store, streamName('oauthGrant', claims.grantId), GRANT_TYPES, foldGrant);
  if (!state.exists || state.revoked || state.resource !== resource || !state.tokenIds.includes(claims.tokenId)) return { ok: false, reason: 'revoked' };
  return { ok: true, claims };
}

/** The grant and client of a well-signed agent token of this issuer, whatever its audience or expiry (for revocation); null otherwise. */
export async function agentTokenGrant(deps: Pick<AgentTokenDeps, 'keys' | 'config'>, token: string): Promise<{ grantId: string; clientId: string } | null> {
  if (token.length > 8192) return null;
  const key = await signingKey(deps.keys);
  try {
    const p = jwt.verify(token, key.publicKey, { algorithms: ['RS256'], issuer: deps.config.authPublicUrl, ignoreExpiration: true });
    if (typeof p === 'string' || !isUuid(p.gid) || typeof p.client_id !== 'string') return null;
    return { grantId: p.gid as string, clientId: p.client_id };
  } catch {
    return null;
  }
}
