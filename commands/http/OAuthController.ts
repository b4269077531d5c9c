import type { Request as ExpressRequest } from 'express';
import { Body, Controller, Get, Post, Request, Response, Route, Security, SuccessResponse, Tags } from 'tsoa';
import { ctxOf, principalOf } from '../../read-api/http/context';
import { applyClientIpLimit, bearerToken } from '../../read-api/http/authentication';
import type { PrincipalOf } from '../../read-api/http/principal';
import { DASHBOARD_TTL_SECONDS } from '../auth/dashboardTokens';
import { decideConsent, issueToken, startAuthorization, validateToken, type TokenMetadata, type TokenResponse } from '../oauth/authorization';
import { agentConsentHtml, consentHtml, dashboardUserOf, formBody, oauthDeps, protectPage, sendOAuthError, SESSION_COOKIE } from '../oauth/http';
import type { AgentTokenResponse } from '../oauth/agentAuthorization';
import { revokeToken } from '../oauth/revocation';

/** RFC 6749 §5.2 error body. */
export interface OAuthErrorResponse { error: string; error_description?: string }

/**
 * POST /api/oauth2/token's body (SPEC "OAuth 2.0 authorization server"; JSON or a form). grant_type
 * and client_id are required, client_secret too for SMTP clients (agent clients are public and send
 * code_verifier and resource instead); they are optional in the schema so that a missing one is
 * answered the OAuth way (invalid_request / invalid_client) rather than as a validation error.
 */
export interface OAuthTokenRequest {
  /** `authorization_code` or `refresh_token` (required). */
  grant_type?: string;
  /** Required. */
  client_id?: string;
  /** Required for SMTP clients (uuid client_id); compared in constant time. Agent clients send none. */
  client_secret?: string;
  /** For authorization_code: the `code` of the redirect (60 s, single use). */
  code?: string;
  /** For authorization_code: exactly the redirect_uri of the authorization request. */
  redirect_uri?: string;
  /** For refresh_token: the latest refresh token (rotated on every use). */
  refresh_token?: string;
  /**
   * For authorization_code: the PKCE verifier of the authorization request's code_challenge (S256).
   * Required of agent clients (client_id is a metadata document URL); an SMTP client sends it exactly
   * when its authorization request had a code_challenge (otherwise it is refused: invalid_grant).
   */
  code_verifier?: string;
  /** Agent clients: the canonical URI of the MCP server, equal to the authorization request's (both grant types). */
  resource?: string;
  /** Any other parameter (`scope` on a refresh, RFC 6749 §6; an extension's) is ignored, as RFC 6749 §3.2 requires. */
  [parameter: string]: unknown;
}

/** POST /api/oauth2/revoke's body (RFC 7009). */
export interface OAuthRevocationRequest {
  /** The refresh token or access token to revoke (required). */
  token?: string;
  /** `refresh_token` or `access_token`; a hint only (every kind is recognised by its form). */
  token_type_hint?: string;
  /** Required: the client the token was issued to. */
  client_id?: string;
  /** Required for SMTP clients (uuid client_id); agent clients send none. */
  client_secret?: string;
  /** Any other parameter is ignored (RFC 7009 §2.1 sends the token endpoint's client authentication; RFC 6749 §3.2). */
  [parameter: string]: unknown;
}

/**
 * The OAuth 2.0 authorization server for SMTP access tokens (SPEC, host {auth_url};
 * docs/OAUTH.md). Authorization-code grant: authorize (consent page for a signed-in dashboard
 * user), consent, token, validate. The access_token alone is the SMTP password / XOAUTH2 token.
 */
@Route('api/oauth2')
@Tags('OAuth 2.0 (SMTP)')
export class OAuthController extends Controller {
  /**
   * Consent page (HTML) for a signed-in dashboard user: dashboard JWT as `Authorization: Bearer`
   * or the `motor_dashboard` cookie. Query: client_id, response_type=code, redirect_uri (exactly as
   * registered), scope (optional, `email.send`), state (optional), motor_block_id (optional: without
   * it the page lets the user pick one of the account's blocks), code_challenge with
   * code_challenge_method=S256 (PKCE: optional for SMTP clients, required of agent clients; `plain`
   * is refused). Errors are JSON and never redirect.
   */
  @Get('authorize')
  @SuccessResponse(200, 'Consent page (text/html)')
  @Response<OAuthErrorResponse>(400, 'invalid_request, invalid_client, invalid_scope')
  @Response<OAuthErrorResponse>(401, 'Not signed in to the dashboard (invalid_token, token_expired, session_revoked)')
  public async authorize(@Request() req: ExpressRequest): Promise<void> {
    const ctx = ctxOf(req);
    const res = req.res!;
    protectPage(res);
    try {
      const user = await dashboardUserOf(ctx, req);
      const page = await startAuthorization(oauthDeps(ctx), user, req.query as Record<string, unknown>, ctx.clock.now());
      res.status(200).type('html').send(page.kind === 'agent' ? agentConsentHtml(page) : consentHtml(page));
    } catch (e) {
      if (!sendOAuthError(res, e)) throw e;
    }
  }

  /**
   * The consent form's POST (application/x-www-form-urlencoded, or JSON): `form_token` (one-time,
   * from the page, bound to the signed-in user, 10 minutes), `decision` (`approve` | `deny`),
   * `motor_block_id` (when the authorize request did not name one). 302 to the redirect_uri with
   * `code` and `state` (or `error=access_denied`).
   */
  @Post('consent')
  @SuccessResponse(302, 'Redirect to the client')
  @Response<OAuthErrorResponse>(400, 'invalid_request (form token expired, used, or of another user; block not in the account)')
  public async consent(@Request() req: ExpressRequest): Promise<void> {
    const ctx = ctxOf(req);
    const res = req.res!;
    protectPage(res);
    try {
      const user = await dashboardUserOf(ctx, req);
      const { location } = await decideConsent(oauthDeps(ctx), user, await formBody(req), ctx.clock.now());
      res.redirect(302, location);
    } catch (e) {
      if (!sendOAuthError(res, e)) throw e;
    }
  }

  /**
   * Code or refresh token → SMTP access token (JWT, 1 hour) and a new refresh token (30 days,
   * rotated on every use; a spent one presented again revokes the whole authorization).
   * Agent clients (OAuth 2.1; client_id is a metadata document URL) send no secret but
   * `code_verifier` and `resource`, and get an RS256 token for that MCP server. JSON or
   * application/x-www-form-urlencoded.
   */
  @Post('token')
  @Response<OAuthErrorResponse>(400, 'invalid_grant, invalid_client, invalid_request, unsupported_grant_type')
  public async token(@Request() req: ExpressRequest, @Body() body: OAuthTokenRequest): Promise<TokenResponse | AgentTokenResponse> {
    await applyClientIpLimit(req);
    const ctx = ctxOf(req);
    const res = req.res!;
    res.setHeader('Cache-Control', 'no-store');
    res.setHeader('Pragma', 'no-cache');
    try {
      return await issueToken(oauthDeps(ctx), body as unknown as Record<string, unknown>, ctx.clock.now());
    } catch (e) {
      if (!sendOAuthError(res, e)) throw e;
      return undefined as never;
    }
  }

  /**
   * RFC 7009 revocation, JSON or a form: `token` (a refresh token or an access token of this
   * client), `client_id`, and `client_secret` for SMTP clients (agent clients are public). The whole
   * connection is revoked at once. 200 with an empty object also for a token that is unknown,
   * malformed, expired or another client's (RFC 7009 §2.2).
   */
  @Post('revoke')
  @Response<OAuthErrorResponse>(400, 'invalid_request (no token), invalid_client')
  public async revoke(@Request() req: ExpressRequest, @Body() body: OAuthRevocationRequest): Promise<Record<string, never>> {
    await applyClientIpLimit(req);
    const ctx = ctxOf(req);
    const res = req.res!;
    res.setHeader('Cache-Control', 'no-store');
    try {
      await revokeToken(oauthDeps(ctx), body as unknown as Record<string, unknown>, ctx.clock.now());
      return {};
    } catch (e) {
      if (!sendOAuthError(res, e)) throw e;
      return undefined as never;
    }
  }

  /**
   * Token metadata: the token as `token` query, `access_token` query, or `Authorization: Bearer`.
   * 401 `invalid_token` when it is malformed, expired, or its authorization was revoked.
   */
  @Get('validate')
  @Response<OAuthErrorResponse>(401, 'invalid_token')
  public async validate(@Request() req: ExpressRequest): Promise<TokenMetadata | OAuthErrorResponse> {
    const ctx = ctxOf(req);
    const q = req.query;
    const token = typeof q.token === 'string' ? q.token : typeof q.access_token === 'string' ? q.access_token : bearerToken(req);
    const meta = await validateToken({ store: ctx.store, config: ctx.config }, token, ctx.clock.now());
    req.res!.setHeader('Cache-Control', 'no-store');
    if (!meta) {
      this.setStatus(401);
      this.setHeader('WWW-Authenticate', 'Bearer error="invalid_token"');
      return { error: 'invalid_token', error_description: 'The access token is invalid, expired or revoked' };
    }
    return meta;
  }

  /**
   * Puts the caller's dashboard JWT in the `motor_dashboard` cookie (HttpOnly, SameSite=Lax, path
   * /api/oauth2, as long as the JWT lives), so a browser can open the authorize URL. 204.
   */
  @Post('session')
  @Security('dashboardJwt')
  @SuccessResponse(204, 'Cookie set')
  public async session(@Request() req: ExpressRequest): Promise<void> {
    const ctx = ctxOf(req);
    principalOf<PrincipalOf<'dashboard'>>(req);
    const token = bearerToken(req)!;
    const secure = ctx.config.publicBaseUrl.startsWith('https:') ? '; Secure' : '';
    this.setHeader('Set-Cookie', `${SESSION_COOKIE}=${token}; Path=/api/oauth2; HttpOnly; SameSite=Lax; Max-Age=${DASHBOARD_TTL_SECONDS}${secure}`);
    this.setStatus(204);
  }
}
