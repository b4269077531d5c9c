import type { Request as ExpressRequest } from 'express';
import { Body, Controller, Delete, Get, Path, Post, Request, Response, Route, Security, SuccessResponse, Tags } from 'tsoa';
import { ctxOf, principalOf } from '../../read-api/http/context';
import type { PrincipalOf } from '../../read-api/http/principal';
import { listBlockApiKeys } from '../../projections/accounts/queries';
import { createBlockKey, ownedBlock, resetSmtpPassword, revokeBlockKey, rotateBlockKey, type CreatedKey } from '../auth/credentials';
import type { ErrorResponse } from './SendController';
import type { ApiKeyListResponse, RevokedKeyResponse } from './CredentialsController';

export interface CreateBlockKeyRequest { /** A label for the dashboard, 1 to 100 characters. */ name?: string }
export interface CreatedBlockKeyResponse { success: true; data: CreatedKey }
export interface RotatedBlockKeyResponse { success: true; data: CreatedKey & { replaces: string } }
/** The password is in this answer only; it replaces the previous one at once. */
export interface SmtpPasswordResponse { success: true; data: { motorBlockId: string; smtpUsername: string; password: string; setAt: string } }

/** A Motor Block's API keys (mk_live_...) and SMTP password, managed with a dashboard JWT. docs/AUTH.md. */
@Route('api/motor-blocks/{id}')
@Tags('Credentials')
@Security('dashboardJwt')
@Response<ErrorResponse>(401, 'Dashboard token missing, invalid or expired')
@Response<ErrorResponse>(404, 'motor_block_not_found (also for blocks of other accounts), api_key_not_found')
export class CredentialsBlockController extends Controller {
  /** The block's keys, masked, revoked ones included (status). */
  @Get('api-keys')
  public async list(@Request() req: ExpressRequest, @Path() id: string): Promise<ApiKeyListResponse> {
    const ctx = ctxOf(req);
    await ownedBlock(ctx.store, principalOf<PrincipalOf<'dashboard'>>(req).accountId, id);
    return { success: true, data: await listBlockApiKeys(ctx.db, id) };
  }

  /** Creates a block API key (for POST /v1/send); the key is in this answer only. */
  @Post('api-keys')
  @SuccessResponse(201, 'Created')
  public async create(@Request() req: ExpressRequest, @Path() id: string, @Body() body?: CreateBlockKeyRequest): Promise<CreatedBlockKeyResponse> {
    const ctx = ctxOf(req);
    const data = await createBlockKey(ctx.store, principalOf<PrincipalOf<'dashboard'>>(req), id, body ?? {}, ctx.clock.now());
    this.setStatus(201);
    return { success: true, data };
  }

  /** Replaces a key: a new one (shown once) and the old one revoked. */
  @Post('api-keys/{keyId}/rotate')
  @Response<ErrorResponse>(409, 'api_key_revoked')
  public async rotate(@Request() req: ExpressRequest, @Path() id: string, @Path() keyId: string): Promise<RotatedBlockKeyResponse> {
    const ctx = ctxOf(req);
    return { success: true, data: await rotateBlockKey(ctx.store, principalOf<PrincipalOf<'dashboard'>>(req), id, keyId, ctx.clock.now()) };
  }

  @Delete('api-keys/{keyId}')
  public async revoke(@Request() req: ExpressRequest, @Path() id: string, @Path() keyId: string): Promise<RevokedKeyResponse> {
    const ctx = ctxOf(req);
    return { success: true, data: await revokeBlockKey(ctx.store, principalOf<PrincipalOf<'dashboard'>>(req), id, keyId, ctx.clock.now()) };
  }

  /** Generates the block's SMTP password (for SMTP AUTH PLAIN/LOGIN with the block's smtp username). */
  @Post('smtp-password')
  public async smtpPassword(@Request() req: ExpressRequest, @Path() id: string): Promise<SmtpPasswordResponse> {
    const ctx = ctxOf(req);
    return { success: true, data: await resetSmtpPassword(ctx.store, principalOf<PrincipalOf<'dashboard'>>(req), id, ctx.clock.now()) };
  }
}
