import { createHmac, randomUUID } from 'node:crypto';
import jwt from 'jsonwebtoken';
import { fail } from '../../domain/errors';
import { isUuid } from '../../domain/ids';

/**
 * Dashboard JWTs (SPEC "Credential map": about 15 minutes, with a refresh token valid 7 days).
 * HS256 under a key DERIVED from TOKEN_SECRET (HMAC "motor.dashboard-jwt.v1") and with their own
 * audience `<PUBLIC_BASE_URL>/dashboard` and `typ: dashboard`: a dashboard JWT is never a valid
 * public bearer token (other key, other audience) and a public bearer token is never a dashboard
 * JWT, even if TOKEN_AUDIENCE were misconfigured to the same value.
 */

export const DASHBOARD_TTL_SECONDS = 900;

export interface DashboardTokenSettings { secret: string; issuer: string; audience: string }

export function dashboardTokenSettings(c: { tokenSecret: string; tokenIssuer: string; publicBaseUrl: string }): DashboardTokenSettings {
  return {
    secret: createHmac('sha256', c.tokenSecret).update('motor.dashboard-jwt.v1').digest('base64url'),
    issuer: c.tokenIssuer,
    audience: `${c.publicBaseUrl.replace(/\/+$/, '')}/dashboard`,
  };
}

export interface DashboardClaims { userId: string; accountId: string; sessionId: string; tokenId: string; expiresAt: Date }

export function signDashboardToken(s: DashboardTokenSettings, c: { userId: string; accountId: string; sessionId: string }, now: Date, ttlSeconds = DASHBOARD_TTL_SECONDS) {
  const iat = Math.floor(now.getTime() / 1000);
  const tokenId = randomUUID();
  const token = jwt.sign(
    { typ: 'dashboard', acct: c.accountId, sid: c.sessionId, iat, exp: iat + ttlSeconds },
    s.secret,
    { algorithm: 'HS256', issuer: s.issuer, audience: s.audience, subject: c.userId, jwtid: tokenId },
  );
  return { token, expiresIn: ttlSeconds, expiresAt: new Date((iat + ttlSeconds) * 1000) };
}

export function verifyDashboardToken(s: DashboardTokenSettings, token: string, now: Date): DashboardClaims {
  let p: jwt.JwtPayload;
  try {
    const decoded = jwt.verify(token, s.secret, { algorithms: ['HS256'], issuer: s.issuer, audience: s.audience, clockTimestamp: Math.floor(now.getTime() / 1000) });
    if (typeof decoded === 'string') throw new Error('payload');
    p = decoded;
  } catch (e) {
    const expired = e instanceof jwt.TokenExpiredError;
    throw fail(expired ? 'token_expired' : 'invalid_token', 401, expired ? 'Dashboard token expired' : 'Dashboard token missing or invalid', {
      nextAction: expired ? 'Refresh it: POST /api/auth/refresh' : 'Log in: POST /api/auth/login',
    });
  }
  if (p.typ !== 'dashboard' || !isUuid(p.sub) || !isUuid(p.acct) || !isUuid(p.sid) || typeof p.jti !== 'string' || typeof p.exp !== 'number') {
    throw fail('invalid_token', 401, 'Dashboard token missing or invalid');
  }
  return { userId: p.sub, accountId: p.acct as string, sessionId: p.sid as string, tokenId: p.jti, expiresAt: new Date(p.exp * 1000) };
}
