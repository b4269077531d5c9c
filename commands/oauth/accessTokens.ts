import { createHmac } from 'node:crypto';
import jwt from 'jsonwebtoken';
import { isUuid } from '../../domain/ids';

/**
 * SMTP access tokens (docs/OAUTH.md): HS256 JWTs under a key derived from TOKEN_SECRET (HMAC
 * "motor.oauth-access.v1"), audience `<PUBLIC_BASE_URL>/smtp`, `typ: smtp_access`. Other key and
 * audience than public bearer tokens and dashboard JWTs, so none of the three is ever taken for
 * another.
 */

export interface AccessTokenSettings { secret: string; issuer: string; audience: string }

export function accessTokenSettings(c: { tokenSecret: string; tokenIssuer: string; publicBaseUrl: string }): AccessTokenSettings {
  return {
    secret: createHmac('sha256', c.tokenSecret).update('motor.oauth-access.v1').digest('base64url'),
    issuer: c.tokenIssuer,
    audience: `${c.publicBaseUrl.replace(/\/+$/, '')}/smtp`,
  };
}

export interface AccessClaims { tokenId: string; grantId: string; clientId: string; userId: string; accountId: string; motorBlockId: string; scope: string; iat: number; exp: number }

export function signAccessToken(s: AccessTokenSettings, c: Omit<AccessClaims, 'iat' | 'exp'>, now: Date, ttlSeconds: number): { token: string; iat: number; exp: number } {
  const iat = Math.floor(now.getTime() / 1000);
  const exp = iat + ttlSeconds;
  const token = jwt.sign(
    { typ: 'smtp_access', gid: c.grantId, cid: c.clientId, acct: c.accountId, mbid: c.motorBlockId, scope: c.scope, iat, exp },
    s.secret,
    { algorithm: 'HS256', issuer: s.issuer, audience: s.audience, subject: c.userId, jwtid: c.tokenId },
  );
  return { token, iat, exp };
}

/** The claims, or a reason (`expired` or `invalid`); never throws. */
export function verifyAccessToken(s: AccessTokenSettings, token: string, now: Date): { ok: true; claims: AccessClaims } | { ok: false; reason: 'expired' | 'invalid' } {
  if (token.length > 4096) return { ok: false, reason: 'invalid' };
  try {
    const p = jwt.verify(token, s.secret, { algorithms: ['HS256'], issuer: s.issuer, audience: s.audience, clockTimestamp: Math.floor(now.getTime() / 1000) });
    if (typeof p === 'string' || p.typ !== 'smtp_access' || !isUuid(p.gid) || !isUuid(p.cid) || !isUuid(p.acct) || !isUuid(p.mbid) || !isUuid(p.sub) || !isUuid(p.jti)
      || typeof p.scope !== 'string' || typeof p.iat !== 'number' || typeof p.exp !== 'number') return { ok: false, reason: 'invalid' };
    return { ok: true, claims: { tokenId: p.jti!, grantId: p.gid as string, clientId: p.cid as string, userId: p.sub!, accountId: p.acct as string, motorBlockId: p.mbid as string, scope: p.scope, iat: p.iat, exp: p.exp } };
  } catch (e) {
    return { ok: false, reason: e instanceof jwt.TokenExpiredError ? 'expired' : 'invalid' };
  }
}
