import type { Request as ExpressRequest } from 'express';
import { Body, Controller, Delete, Get, Path, Post, Request, Response, Route, Security, SuccessResponse, Tags } from 'tsoa';
import { ctxOf, principalOf } from '../../read-api/http/context';
import type { PrincipalOf } from '../../read-api/http/principal';
import { listAccountApiKeys, type ApiKeyListItem } from '../../projections/accounts/queries';
import { createAccountKey, revokeAccountKey, type CreatedKey } from '../auth/credentials';
import type { ErrorResponse } from './SendController';

export interface CreateAccountKeyRequest {
  /** A label for the dashboard, 1 to 100 characters. */
  name?: string;
  /** Scopes the key may grant when minting public tokens (SPEC "Scopes"); default all. */
  scopes?: string[];
}
/** `key` is shown here once; lists show `masked`, which is never usable as a key. */
export interface CreatedKeyResponse { success: true; data: CreatedKey }
export interface ApiKeyListResponse { success: true; data: ApiKeyListItem[] }
export interface RevokedKeyResponse { success: true; data: { id: string; revokedAt: string } }

/** Account API keys (ak_live_...), managed with a dashboard JWT. docs/AUTH.md. */
@Route('api/account/api-keys')
@Tags('Credentials')
@Security('dashboardJwt')
@Response<ErrorResponse>(401, 'Dashboard token missing, invalid or expired')
export class CredentialsController extends Controller {
  /** The account's keys, masked, revoked ones included (status). */
  @Get()
  public async list(@Request() req: ExpressRequest): Promise<ApiKeyListResponse> {
    const ctx = ctxOf(req);
    return { success: true, data: await listAccountApiKeys(ctx.db, principalOf<PrincipalOf<'dashboard'>>(req).accountId) };
  }

  /** Creates an account API key with the scopes it may grant; the key is in this answer only. */
  @Post()
  @SuccessResponse(201, 'Created')
  @Response<ErrorResponse>(400, 'validation_error')
  public async create(@Request() req: ExpressRequest, @Body() body: CreateAccountKeyRequest): Promise<CreatedKeyResponse> {
    const ctx = ctxOf(req);
    const data = await createAccountKey(ctx.store, principalOf<PrincipalOf<'dashboard'>>(req), body, ctx.clock.now());
    this.setStatus(201);
    return { success: true, data };
  }

  /** Revokes a key of this account (at once for new requests; caches expire within 2 s). */
  @Delete('{keyId}')
  @Response<ErrorResponse>(404, 'api_key_not_found')
  public async revoke(@Request() req: ExpressRequest, @Path() keyId: string): Promise<RevokedKeyResponse> {
    const ctx = ctxOf(req);
    return { success: true, data: await revokeAccountKey(ctx.store, principalOf<PrincipalOf<'dashboard'>>(req), keyId, ctx.clock.now()) };
  }
}
