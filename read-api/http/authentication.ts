import type { Request, Response } from 'express';
import { authenticateApiKey, extractApiKey } from '../../commands/credentials/apiKeyAuth';
import { verifyPublicToken } from '../../commands/tokens/publicTokens';
import { dashboardTokenSettings, verifyDashboardToken } from '../../commands/auth/dashboardTokens';
import { assertSessionActive } from '../../commands/auth/onboarding';
import { hasScopes } from '../../domain/credentials/scopes';
import { DomainError, fail } from '../../domain/errors';
import { isUuid } from '../../domain/ids';
import { DASHBOARD_CLIENT_PREFIX } from '../../commands/tokens/publicTokens';
import type { RequestLimiter, RequestLimitReading } from '../../commands/quota/requestLimiter';
import { ctxOf, type HttpContext } from './context';
import { credentialId, type Principal } from './principal';

/**
 * The one authentication function of every tsoa route (tsoa calls it for @Security). It decides
 * the credential type and the scope; block ownership is checked by `requireBlock` in
 * read-api/http/authorize.ts once the route knows which block is asked for. It also applies the
 * API request limit per credential and sets the X-RateLimit-* headers: once the credential is
 * known and before its scope is checked, so a valid token refused for its scope is counted and
 * told its numbers like any other request of it (SPEC "Limits"; the agent-tool servers do the
 * same, read-api/mcp/router.ts).
 *
 * Security names: blockApiKey (POST /v1/send, /v1/test-email), accountApiKey (token minting),
 * publicBearer (all of /api/public/v1; the listed scopes are ALL required), dashboardJwt (the
 * dashboard routes: onboarding's web-handoff, token minting, credential management; a dashboard
 * user acts on its whole account, so no scopes).
 */
export async function expressAuthentication(request: Request, securityName: string, scopes: string[] = []): Promise<Principal> {
  const ctx = ctxOf(request);
  const principal = await identify(ctx, request, securityName);
  await applyRequestLimit(ctx, request, principal);
  if (principal.kind === 'publicBearer') requireScopes(principal.scopes, scopes);
  return principal;
}

/** The route's scopes are ALL required (implications included): 403 insufficient_scope otherwise. */
function requireScopes(granted: readonly string[], required: string[]): void {
  if (hasScopes(granted, required)) return;
  throw fail('insufficient_scope', 403, `This route needs the scope${required.length > 1 ? 's' : ''} ${required.join(', ')}`, {
    nextAction: 'Mint a token that includes the missing scopes',
    details: { requiredScopes: required },
  });
}

async function identify(ctx: HttpContext, request: Request, securityName: string): Promise<Principal> {
  switch (securityName) {
    case 'blockApiKey': {
      const key = await authenticateApiKey(ctx.directory, extractApiKey(request.headers), 'block');
      if (!key.motorBlockId) throw fail('invalid_api_key', 401, 'Invalid API key format');
      return { kind: 'blockApiKey', keyId: key.id, accountId: key.accountId, motorBlockId: key.motorBlockId };
    }
    case 'accountApiKey': {
      const key = await authenticateApiKey(ctx.directory, extractApiKey(request.headers), 'account');
      return { kind: 'accountApiKey', keyId: key.id, accountId: key.accountId, scopes: key.scopes };
    }
    case 'publicBearer': {
      const token = bearerToken(request) ?? streamQueryToken(request);
      if (token === null) throw fail('invalid_token', 401, 'Bearer token missing or invalid', { nextAction: 'Send Authorization: Bearer <token> minted at POST /api/public/token/account-key' });
      const claims = verifyPublicToken(
        { secret: ctx.config.tokenSecret, issuer: ctx.config.tokenIssuer, audience: ctx.config.tokenAudience },
        token,
        ctx.clock.now(),
      );
      await assertMinterActive(ctx, claims.clientId);
      return { kind: 'publicBearer', ...claims };
    }
    case 'dashboardJwt': {
      const token = bearerToken(request);
      if (token === null) throw fail('invalid_token', 401, 'Dashboard token missing or invalid', { nextAction: 'Send Authorization: Bearer <token> from POST /api/auth/login' });
      const claims = verifyDashboardToken(dashboardTokenSettings(ctx.config), token, ctx.clock.now());
      await assertSessionActive(ctx.store, claims.sessionId);
      return { kind: 'dashboard', ...claims };
    }
    default:
      throw new Error(`Unknown security scheme ${securityName}`);
  }
}

/**
 * A public bearer token lives as long as the credential that minted it (its `cid` claim): an
 * account API key revoked since (through the directory cache, so within its 2 s), or a dashboard
 * session revoked or ended by a new password, takes its tokens with it: 401 `token_revoked`.
 * Tokens name their minter since they were first issued; a `cid` of neither form (none is
 * minted) is not looked up.
 */
async function assertMinterActive(ctx: HttpContext, clientId: string): Promise<void> {
  let active = true;
  if (clientId.startsWith(DASHBOARD_CLIENT_PREFIX)) {
    active = await assertSessionActive(ctx.store, clientId.slice(DASHBOARD_CLIENT_PREFIX.length))
      .then(() => true, (err) => { if (err instanceof DomainError && err.code === 'session_revoked') return false; throw err; });
  } else if (isUuid(clientId)) {
    const key = await ctx.directory.apiKey(clientId);
    active = key !== null && key.revokedAt === null;
  }
  if (!active) {
    throw fail('token_revoked', 401, 'The credential that minted this bearer token was revoked', {
      nextAction: 'Mint a new token with a valid account API key or dashboard session',
    });
  }
}

/**
 * SPEC "Public bearer tokens": only the event stream also takes the token as `?token=` or
 * `?access_token=` (a browser's EventSource cannot send headers). The header wins when both are there.
 */
function streamQueryToken(request: Request): string | null {
  if (request.method !== 'GET' || !/^\/api\/public\/v1\/motor-blocks\/[^/]+\/events\/stream$/.test(request.path)) return null;
  const value = request.query.token ?? request.query.access_token;
  return typeof value === 'string' && /^[A-Za-z0-9_\-.]+$/.test(value) ? value : null;
}

/** `Authorization: Bearer <token>`; anything else (an API key, Basic) is not a bearer token. */
export function bearerToken(request: Request): string | null {
  const auth = request.headers.authorization;
  if (typeof auth !== 'string') return null;
  const m = /^Bearer\s+([A-Za-z0-9_\-.]+)\s*$/i.exec(auth);
  return m ? m[1] : null;
}

/**
 * Routes without a credential (onboarding, POST /api/email/validate) are limited per client IP,
 * at ANONYMOUS_REQUEST_LIMIT per minute, with the same X-RateLimit-* headers and 429.
 */
const anonymousLimiters = new WeakMap<HttpContext, RequestLimiter>();
export async function applyClientIpLimit(request: Request): Promise<void> {
  const ctx = ctxOf(request);
  let limiter = anonymousLimiters.get(ctx);
  if (!limiter) {
    limiter = ctx.limiter.withLimit(ctx.config.anonymousRequestLimit);
    anonymousLimiters.set(ctx, limiter);
  }
  await applyLimit(limiter, ctx, request, `ip:${request.ip ?? 'unknown'}`);
}

async function applyRequestLimit(ctx: HttpContext, request: Request, principal: Principal): Promise<void> {
  await applyLimit(ctx.limiter, ctx, request, credentialId(principal));
}

/**
 * The X-RateLimit-* headers of a limiter reading: all three always (SPEC "Limits"), Remaining the
 * literal `unknown` when the limiter is unavailable (the window, and so its Reset, is the clock's).
 */
export function setRateLimitHeaders(res: Response, reading: RequestLimitReading): void {
  res.setHeader('X-RateLimit-Limit', String(reading.limit));
  res.setHeader('X-RateLimit-Remaining', reading.kind === 'unavailable' ? 'unknown' : String(reading.remaining));
  res.setHeader('X-RateLimit-Reset', String(reading.resetSeconds));
}

async function applyLimit(limiter: RequestLimiter, ctx: HttpContext, request: Request, id: string): Promise<void> {
  const reading = await limiter.hit(id, ctx.clock.now());
  const res = request.res;
  if (!res) return;
  setRateLimitHeaders(res, reading);
  if (reading.kind === 'exceeded') {
    throw fail('rate_limited', 429, `API request limit of ${reading.limit} per minute exceeded for this credential`, {
      details: { retryAfterSeconds: reading.resetSeconds },
      nextAction: `Retry after ${reading.resetSeconds} seconds`,
    });
  }
}
