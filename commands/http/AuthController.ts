import type { Request as ExpressRequest } from 'express';
import { Body, Controller, Post, Request, Response, Route, Security, Tags } from 'tsoa';
import { ctxOf, principalOf } from '../../read-api/http/context';
import { applyClientIpLimit } from '../../read-api/http/authentication';
import type { PrincipalOf } from '../../read-api/http/principal';
import { authDepsOf } from '../auth/deps';
import { issueWebHandoff, login, redeemWebHandoff, refreshSession, register, setPassword, verifyCode, type SessionTokens } from '../auth/onboarding';
import type { ErrorResponse } from './SendController';

export interface RegisterRequest {
  /** The address to register; a 6-digit code is mailed to it (also the way to reset a forgotten password). */
  email: string;
}
export interface RegisterResponse { success: true; data: { email: string; codeSent: true; expiresInSeconds: number }; message: string }

export interface VerifyCodeRequest { email: string; /** The 6 digits from the mail. */ code: string }
export interface VerifyCodeResponse { success: true; data: { setupToken: string; expiresInSeconds: number; expiresAt: string } }

export interface SetPasswordRequest {
  email: string;
  /** 10 to 256 characters. */
  password: string;
  setupToken: string;
  /** Where the user signs up from, e.g. `agent` or `web` (default `web`). */
  channel?: string;
}
export interface LoginRequest { email: string; password: string }
export interface RefreshRequest { refreshToken: string }
/** A dashboard session: `token` is the dashboard JWT (15 minutes), `refreshToken` rotates on every use (7 days). */
export interface SessionResponse { success: true; data: SessionTokens }

export interface WebHandoffRequest {
  /** Where the browser lands after the handoff; a path on this site (default /dashboard). */
  redirectPath?: string;
}
export interface WebHandoffResponse { success: true; data: { url: string; code: string; expiresIn: number; expiresAt: string } }
export interface WebHandoffRedeemRequest { /** The `code` of the handoff URL's fragment. */ code: string }
export interface WebHandoffRedeemResponse { success: true; data: SessionTokens & { redirectPath: string } }

/** Onboarding and dashboard sessions (SPEC "Onboarding routes"; docs/AUTH.md). */
@Route('api/auth')
@Tags('Onboarding')
@Response<ErrorResponse>(400, 'validation_error, invalid_email, email_reserved (SYSTEM_MAIL_FROM: register, set-password), invalid_code, code_expired, weak_password')
@Response<ErrorResponse>(429, 'rate_limited (per client IP), too_many_attempts, verification_locked, login_throttled')
export class AuthController extends Controller {
  /** Mails a 6-digit verification code (10 minutes, single use, at most 5 per hour per address) from SYSTEM_MAIL_FROM. */
  @Post('register')
  @Response<ErrorResponse>(502, 'email_send_failed')
  public async register(@Request() req: ExpressRequest, @Body() body: RegisterRequest): Promise<RegisterResponse> {
    await applyClientIpLimit(req);
    const ctx = ctxOf(req);
    const r = await register(authDepsOf(ctx), body.email, ctx.clock.now());
    return { success: true, data: { email: r.email, codeSent: true, expiresInSeconds: r.expiresInSeconds }, message: 'A 6-digit code was sent to this address' };
  }

  /** Checks the code; returns a single-use setup token valid 30 minutes. Wrong codes slow down, then burn the code. */
  @Post('verify-code')
  public async verifyCode(@Request() req: ExpressRequest, @Body() body: VerifyCodeRequest): Promise<VerifyCodeResponse> {
    await applyClientIpLimit(req);
    const ctx = ctxOf(req);
    return { success: true, data: await verifyCode(authDepsOf(ctx), body, ctx.clock.now()) };
  }

  /**
   * Sets the password (scrypt) with the setup token and signs in. The first password makes the
   * user's account, or gives the user the account the address has already (one made by the
   * operator's bootstrap): one account per email (docs/AUTH.md).
   */
  @Post('set-password')
  @Response<ErrorResponse>(401, 'invalid_setup_token, setup_token_expired')
  public async setPassword(@Request() req: ExpressRequest, @Body() body: SetPasswordRequest): Promise<SessionResponse> {
    await applyClientIpLimit(req);
    const ctx = ctxOf(req);
    return { success: true, data: await setPassword(authDepsOf(ctx), body, ctx.clock.now()) };
  }

  /** Email and password; answers like set-password. Repeated failures are slowed (429 login_throttled), then locked (423 account_locked). */
  @Post('login')
  @Response<ErrorResponse>(401, 'invalid_credentials')
  @Response<ErrorResponse>(423, 'account_locked')
  public async login(@Request() req: ExpressRequest, @Body() body: LoginRequest): Promise<SessionResponse> {
    await applyClientIpLimit(req);
    const ctx = ctxOf(req);
    return { success: true, data: await login(authDepsOf(ctx), body, req.ip ?? null, ctx.clock) };
  }

  /** Spends the refresh token and returns a new pair. A spent token presented again revokes the whole session. */
  @Post('refresh')
  @Response<ErrorResponse>(401, 'invalid_refresh_token, refresh_token_reused, refresh_token_expired')
  public async refresh(@Request() req: ExpressRequest, @Body() body: RefreshRequest): Promise<SessionResponse> {
    await applyClientIpLimit(req);
    const ctx = ctxOf(req);
    return { success: true, data: await refreshSession(authDepsOf(ctx), body, ctx.clock.now()) };
  }

  /** A one-time browser handoff URL (60 seconds, single use) that opens the dashboard signed in as the caller. */
  @Post('web-handoff')
  @Security('dashboardJwt')
  @Response<ErrorResponse>(401, 'Dashboard token missing, invalid or expired')
  public async webHandoff(@Request() req: ExpressRequest, @Body() body?: WebHandoffRequest): Promise<WebHandoffResponse> {
    const ctx = ctxOf(req);
    const p = principalOf<PrincipalOf<'dashboard'>>(req);
    return { success: true, data: await issueWebHandoff(authDepsOf(ctx), p, body ?? {}, ctx.clock.now()) };
  }

  /** Redeems a handoff code (what the dashboard page behind the URL calls): a new dashboard session. */
  @Post('web-handoff/redeem')
  @Response<ErrorResponse>(401, 'invalid_handoff')
  public async redeemWebHandoff(@Request() req: ExpressRequest, @Body() body: WebHandoffRedeemRequest): Promise<WebHandoffRedeemResponse> {
    await applyClientIpLimit(req);
    const ctx = ctxOf(req);
    return { success: true, data: await redeemWebHandoff(authDepsOf(ctx), body, ctx.clock.now()) };
  }
}
