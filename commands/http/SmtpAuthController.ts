import type { Request as ExpressRequest } from 'express';
import { Body, Controller, Get, Path, Put, Query, Request, Response, Route, Security, Tags } from 'tsoa';
import { ctxOf, principalOf } from '../../read-api/http/context';
import type { PrincipalOf } from '../../read-api/http/principal';
import { smtpAuthFailuresPage, type SmtpAuthFailuresResponse } from '../../read-api/controllers/SmtpAuthFailuresController';
import { changeAuthMethod, registerClientCertificate, smtpAuthSettings, type SmtpAuthSettingsDto } from '../../smtp/mtls';
import { ownedBlock } from '../auth/credentials';
import type { ErrorResponse } from './SendController';

export interface SmtpAuthSettingsResponse { success: true; data: SmtpAuthSettingsDto }
// Fields are checked by the command after the ownership check (a block of another account is 404 whatever the body).
export interface ChangeAuthMethodRequest { /** smtp_password, api_key, oauth2 or mtls (mtls needs a registered client certificate). Required. */ authMethod?: string }
export interface ClientCertificateRequest { /** PEM of the client certificate (no private key, no chain). Required. */ certificate?: string }

/**
 * A Motor Block's SMTP authentication, managed with a dashboard JWT (docs/SMTP.md): its auth method,
 * its mTLS client certificate, and its failed SMTP logins. Blocks of other accounts answer 404.
 */
@Route('api/motor-blocks/{id}')
@Tags('Credentials')
@Security('dashboardJwt')
@Response<ErrorResponse>(400, 'invalid_id, validation_error')
@Response<ErrorResponse>(401, 'Dashboard token missing, invalid or expired')
@Response<ErrorResponse>(404, 'motor_block_not_found (also for blocks of other accounts)')
export class SmtpAuthController extends Controller {
  /** The block's SMTP auth method and registered client certificate (fingerprint and description only). */
  @Get('smtp/auth-method')
  public async getAuthMethod(@Request() req: ExpressRequest, @Path() id: string): Promise<SmtpAuthSettingsResponse> {
    return { success: true, data: await smtpAuthSettings(mtlsDeps(req), principalOf<PrincipalOf<'dashboard'>>(req), id) };
  }

  /** Switches the block's SMTP auth method; the same method again changes nothing. */
  @Put('smtp/auth-method')
  @Response<ErrorResponse>(409, 'client_certificate_missing: register a client certificate before switching to mtls')
  public async setAuthMethod(@Request() req: ExpressRequest, @Path() id: string, @Body() body?: ChangeAuthMethodRequest): Promise<SmtpAuthSettingsResponse> {
    const ctx = ctxOf(req);
    return { success: true, data: await changeAuthMethod(mtlsDeps(req), principalOf<PrincipalOf<'dashboard'>>(req), id, body ?? {}, ctx.clock.now()) };
  }

  /** Registers (or replaces) the block's mTLS client certificate from its PEM. Only its fingerprint, subject, issuer, serial and validity are stored. */
  @Put('smtp/client-certificate')
  @Response<ErrorResponse>(409, 'mtls_not_configured: the operator has not set SMTP_CLIENT_CA')
  @Response<ErrorResponse>(422, 'client_certificate_untrusted, client_certificate_expired')
  public async setClientCertificate(@Request() req: ExpressRequest, @Path() id: string, @Body() body?: ClientCertificateRequest): Promise<SmtpAuthSettingsResponse> {
    const ctx = ctxOf(req);
    return { success: true, data: await registerClientCertificate(mtlsDeps(req), principalOf<PrincipalOf<'dashboard'>>(req), id, body ?? {}, ctx.clock.now()) };
  }

  /**
   * The block's failed SMTP logins, newest first (the dashboard twin of
   * GET /api/public/v1/motor-blocks/{id}/smtp-auth-failures).
   * @param limit 1 to 1000, default 100
   * @param from ISO 8601; inside the plan's retention window (default: the window's start)
   * @param to ISO 8601
   * @isInt limit
   */
  @Get('smtp-auth-failures')
  public async smtpAuthFailures(
    @Request() req: ExpressRequest,
    @Path() id: string,
    @Query() from?: string,
    @Query() to?: string,
    @Query() limit?: number,
    @Query() cursor?: string,
  ): Promise<SmtpAuthFailuresResponse> {
    const ctx = ctxOf(req);
    const p = principalOf<PrincipalOf<'dashboard'>>(req);
    await ownedBlock(ctx.store, p.accountId, id);
    return smtpAuthFailuresPage(ctx, p.accountId, id, { from, to, limit, cursor });
  }
}

function mtlsDeps(req: ExpressRequest) {
  const ctx = ctxOf(req);
  return { store: ctx.store, db: ctx.db, logger: ctx.logger, metrics: ctx.metrics, clientCaPath: ctx.config.smtp.clientCaPath };
}
