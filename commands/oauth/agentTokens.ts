import { createPrivateKey, createPublicKey, generateKeyPairSync, type JsonWebKey, type KeyObject } from 'node:crypto';
import jwt from 'jsonwebtoken';
import type { EventStore } from '../../domain/eventStore';
import { isUuid, newId } from '../../domain/ids';
import { AGENT_SCOPES, type AgentScope } from '../../domain/oauth/agent';
import { OAUTH_RULES } from '../../domain/oauth/grant';
import type { KeyStore, SigningKeyVersion } from '../../infra/keys/keyStore';
import { currentGrant } from './grantCache';

/**
 * Agent access tokens (SPEC "OAuth 2.1 for agent clients", docs/OAUTH.md): RS256 JWTs (RFC 9068
 * `at+jwt`) signed with the service's current agent key, kept encrypted in the key store and
 * rotated by the operator; the public halves of the keys in use are served at
 * /.well-known/jwks.json and a token names its key by `kid`. `aud` is the one MCP server's
 * canonical URI the grant names (RFC 8707), so a token for one server is refused by every other.
 * A check also reads the grant's stream (the events since this process last read it: grantCache.ts):
 * a revoked connection stops its tokens at once.
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
interface Keyring { at: number; current: SigningKey; published: Map<string, SigningKey> }

/** How long a process trusts its copy of the key list: a rotation made by another process reaches it within this. */
const KEYRING_TTL_MS = 60_000;
/**
 * A superseded key still verifies, and stays in the JWKS, this long after its successor became
 * current: the longest an access token signed just before the rotation lives, plus the keyring TTL
 * and some clock skew.
 */
export const RETIRED_KEY_GRACE_MS = (OAUTH_RULES.accessTtlSeconds + 5 * 60) * 1000;

const parsed = new Map<string, SigningKey>();
function parse(k: { id: string; privateKeyPem: string }): SigningKey {
  let key = parsed.get(k.id);
  if (!key) {
    const privateKey = createPrivateKey(k.privateKeyPem);
    key = { id: k.id, privateKey, publicKey: createPublicKey(privateKey) };
    parsed.set(k.id, key);
  }
  return key;
}

/** The keys in use now: the newest, and each older one whose successor is younger than the grace. */
function keyringOf(versions: SigningKeyVersion[], now: number): Keyring {
  const published = new Map<string, SigningKey>();
  versions.forEach((v, i) => {
    if (i === 0 || now - versions[i - 1].createdAt.getTime() < RETIRED_KEY_GRACE_MS) published.set(v.id, parse(v));
  });
  return { at: now, current: parse(versions[0]), published };
}

const rings = new WeakMap<KeyStore, Promise<Keyring>>();

/** The keyring of this key store, read at most every KEYRING_TTL_MS (or at once with `fresh`). */
function keyring(keys: KeyStore, fresh = false): Promise<Keyring> {
  const cached = rings.get(keys);
  if (cached && !fresh) {
    return cached.then((r) => (Date.now() - r.at < KEYRING_TTL_MS ? r : keyring(keys, true)));
  }
  const loading = keys.signingKeys(PURPOSE, generate).then((v) => keyringOf(v, Date.now()));
  loading.catch(() => rings.delete(keys));
  rings.set(keys, loading);
  return loading;
}

/** The published key a token names by `kid`, re-reading the list once for a kid it does not know (a rotation elsewhere). */
async function verificationKey(keys: KeyStore, kid: unknown): Promise<SigningKey | null> {
  if (typeof kid !== 'string') return null;
  const ring = await keyring(keys);
  const key = ring.published.get(kid);
  if (key || Date.now() - ring.at < 1000) return key ?? null;
  return (await keyring(keys, true)).published.get(kid) ?? null;
}

/**
 * Makes a new current signing key (CLI `oauth rotate-signing-key`). Tokens signed with the previous
 * one keep working until they expire: it stays published for RETIRED_KEY_GRACE_MS.
 */
export async function rotateAgentSigningKey(keys: KeyStore): Promise<{ keyId: string; previousKeyId: string | null; previousPublishedUntil: string | null }> {
  const versions = await keys.rotateSigningKey(PURPOSE, generate);
  rings.delete(keys);
  const previous = versions[1] ?? null;
  return {
    keyId: versions[0].id, previousKeyId: previous?.id ?? null,
    previousPublishedUntil: previous ? new Date(versions[0].createdAt.getTime() + RETIRED_KEY_GRACE_MS).toISOString() : null,
  };
}

/** The key set of /.well-known/jwks.json: the public halves of the current agent key and of those still in their grace. */
export async function agentJwks(keys: KeyStore): Promise<{ keys: (JsonWebKey & { kid: string; use: 'sig'; alg: 'RS256' })[] }> {
  const ring = await keyring(keys);
  return {
    keys: [...ring.published.values()].map((key) => {
      const jwk = key.publicKey.export({ format: 'jwk' });
      return { kty: jwk.kty, n: jwk.n, e: jwk.e, kid: key.id, use: 'sig' as const, alg: 'RS256' as const };
    }),
  };
}

export async function signAgentToken(deps: Pick<AgentTokenDeps, 'keys' | 'config'>, c: Omit<AgentClaims, 'iat' | 'exp'>, now: Date, ttlSeconds: number): Promise<{ token: string; iat: number; exp: number }> {
  const key = (await keyring(deps.keys)).current;
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
  const key = await verificationKey(deps.keys, headerKid(token));
  if (!key) return { ok: false, reason: 'invalid' };
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
  const state = await currentGrant(deps.store, claims.grantId);
  if (!state.exists || state.revoked || state.resource !== resource || !state.tokenIds.includes(claims.tokenId)) return { ok: false, reason: 'revoked' };
  return { ok: true, claims };
}

/** The grant and client of a well-signed agent token of this issuer, whatever its audience or expiry (for revocation); null otherwise. */
export async function agentTokenGrant(deps: Pick<AgentTokenDeps, 'keys' | 'config'>, token: string): Promise<{ grantId: string; clientId: string } | null> {
  if (token.length > 8192) return null;
  const key = await verificationKey(deps.keys, headerKid(token));
  if (!key) return null;
  try {
    const p = jwt.verify(token, key.publicKey, { algorithms: ['RS256'], issuer: deps.config.authPublicUrl, ignoreExpiration: true });
    if (typeof p === 'string' || !isUuid(p.gid) || typeof p.client_id !== 'string') return null;
    return { grantId: p.gid as string, clientId: p.client_id };
  } catch {
    return null;
  }
}

/** The `kid` of a JWT's header, without verifying anything; undefined when it is not a JWT. */
function headerKid(token: string): unknown {
  const dot = token.indexOf('.');
  if (dot <= 0) return undefined;
  try {
    return (JSON.parse(Buffer.from(token.slice(0, dot), 'base64url').toString('utf8')) as { kid?: unknown }).kid;
  } catch {
    return undefined;
  }
}
