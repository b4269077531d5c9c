import { randomUUID } from 'node:crypto';
import jwt from 'jsonwebtoken';
import { expandScopes, isScope, type Scope } from '../../domain/credentials/scopes';
import { fail } from '../../domain/errors';
import { isUuid } from '../../domain/ids';

/**
 * Public bearer tokens (SPEC "Public bearer tokens"): HS256 JWTs bound to one Motor Block, with
 * the granted scopes, the user and client ids, 60-900 s lifetime, issuer and audience.
 */

export const MIN_TTL = 60;
export const MAX_TTL = 900;
export const DEFAULT_TTL = 300;

/** The `cid` of a token minted with a dashboard JWT: `dashboard:<sessionId>` (an account key's token carries the key id). */
export const DASHBOARD_CLIENT_PREFIX = 'dashboard:';

export interface TokenSettings { secret: string; issuer: string; audience: string }

export interface PublicTokenClaims {
  motorBlockId: string;
  accountId: string;
  scopes: Scope[];
  userId: string;
  clientId: string;
  tokenId: string;
  expiresAt: Date;
}

export interface MintRequestBody { motorBlockId?: unknown; scopes?: unknown; ttlSeconds?: unknown }

export interface ValidMintRequest { motorBlockId: string; scopes: string[] | null; ttlSeconds: number }

const invalid = (message: string, field: string) => fail('validation_error', 422, message, { details: { field } });

/** Body rules of both minting routes; violations are 422 (SPEC "Token minting"). */
export function validateMintRequest(body: MintRequestBody): ValidMintRequest {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) throw invalid('Request body must be a JSON object', 'body');
  const allowed = new Set(['motorBlockId', 'scopes', 'ttlSeconds']);
  for (const k of Object.keys(body)) if (!allowed.has(k)) throw invalid(`Unknown field ${k}`, k);
  if (!isUuid(body.motorBlockId)) throw invalid('motorBlockId is required and must be a uuid', 'motorBlockId');
  let scopes: string[] | null = null;
  if (body.scopes !== undefined) {
    if (!Array.isArray(body.scopes) || body.scopes.some((s) => typeof s !== 'string')) throw invalid('scopes must be an array of strings', 'scopes');
    const unknown = (body.scopes as string[]).filter((s) => !isScope(s));
    if (unknown.length > 0) throw invalid(`Unknown scopes: ${unknown.join(', ')}`, 'scopes');
    scopes = body.scopes as string[];
  }
  let ttl = DEFAULT_TTL;
  if (body.ttlSeconds !== undefined) {
    if (typeof body.ttlSeconds !== 'number' || !Number.isInteger(body.ttlSeconds) || body.ttlSeconds < MIN_TTL || body.ttlSeconds > MAX_TTL) {
      throw invalid(`ttlSeconds must be an integer from ${MIN_TTL} to ${MAX_TTL}`, 'ttlSeconds');
    }
    ttl = body.ttlSeconds;
  }
  return { motorBlockId: body.motorBlockId as string, scopes, ttlSeconds: ttl };
}

/** Requested ∩ allowed (implications expanded on the allowed side); all allowed when none requested. */
export function grantScopes(requested: string[] | null, allowed: readonly string[]): Scope[] {
  const eff = expandScopes(allowed);
  const wanted = requested ?? [...eff];
  return [...new Set(wanted)].filter((s): s is Scope => isScope(s) && eff.has(s)).sort();
}

export function signPublicToken(settings: TokenSettings, c: Omit<PublicTokenClaims, 'tokenId' | 'expiresAt'>, ttlSeconds: number, now: Date): { token: string; claims: PublicTokenClaims } {
  const iat = Math.floor(now.getTime() / 1000);
  const tokenId = randomUUID();
  const token = jwt.sign(
    { mbid: c.motorBlockId, acct: c.accountId, scope: c.scopes.join(' '), uid: c.userId, cid: c.clientId, iat, exp: iat + ttlSeconds },
    settings.secret,
    // iat comes from the injected clock; jsonwebtoken keeps a payload iat (noTimestamp would drop it).
    { algorithm: 'HS256', issuer: settings.issuer, audience: settings.audience, jwtid: tokenId },
  );
  return { token, claims: { ...c, tokenId, expiresAt: new Date((iat + ttlSeconds) * 1000) } };
}

/** Verifies signature, algorithm, issuer, audience and expiry; 401 otherwise. */
export function verifyPublicToken(settings: TokenSettings, token: string, now: Date): PublicTokenClaims {
  let p: jwt.JwtPayload;
  try {
    const decoded = jwt.verify(token, settings.secret, {
      algorithms: ['HS256'], issuer: settings.issuer, audience: settings.audience, clockTimestamp: Math.floor(now.getTime() / 1000),
    });
    if (typeof decoded === 'string') throw new Error('payload');
    p = decoded;
  } catch (e) {
    const expired = e instanceof jwt.TokenExpiredError;
    throw fail(expired ? 'token_expired' : 'invalid_token', 401, expired ? 'Bearer token expired' : 'Bearer token missing or invalid', {
      nextAction: 'Mint a new token at POST /api/public/token/account-key',
    });
  }
  if (!isUuid(p.mbid) || typeof p.acct !== 'string' || typeof p.scope !== 'string' || typeof p.jti !== 'string' || typeof p.exp !== 'number') {
    throw fail('invalid_token', 401, 'Bearer token missing or invalid');
  }
  return {
    motorBlockId: p.mbid, accountId: p.acct, scopes: p.scope.split(' ').filter(isScope), userId: String(p.uid ?? ''),
    clientId: String(p.cid ?? ''), tokenId: p.jti, expiresAt: new Date(p.exp * 1000),
  };
}
