import type { Request as ExpressRequest } from 'express';
import { Controller, Delete, Get, Path, Request, Response, Route, Security, SuccessResponse, Tags } from 'tsoa';
import { fail } from '../../domain/errors';
import { isUuid } from '../../domain/ids';
import { ctxOf, principalOf } from '../../read-api/http/context';
import type { PrincipalOf } from '../../read-api/http/principal';
import { listConnections, type OAuthConnection } from '../../projections/oauthConnections/queries';
import { revokeConnection } from '../oauth/agentAuthorization';
import type { ErrorResponse } from './SendController';

export interface OAuthConnectionListResponse { success: true; data: OAuthConnection[] }

/**
 * The apps and agents a dashboard user's account has connected through OAuth (docs/OAUTH.md
 * "Connections"), and revocation: it takes effect at once and does not end the user's own login
 * sessions (SPEC "OAuth 2.1 for agent clients").
 */
@Route('api/oauth2/connections')
@Tags('OAuth 2.1 (agents)')
@Security('dashboardJwt')
@Response<ErrorResponse>(401, 'Dashboard token missing, invalid or expired')
export class OAuthConnectionsController extends Controller {
  /** Connections of the account (agents' and SMTP clients'), newest first, revoked ones included (read model `oauthconnections`). */
  @Get()
  public async list(@Request() req: ExpressRequest): Promise<OAuthConnectionListResponse> {
    const ctx = ctxOf(req);
    return { success: true, data: await listConnections(ctx.db, principalOf<PrincipalOf<'dashboard'>>(req).accountId) };
  }

  /** Revokes a connection: every access and refresh token of it stops working immediately. Idempotent. */
  @Delete('{id}')
  @SuccessResponse(204, 'Revoked')
  @Response<ErrorResponse>(400, 'invalid_id')
  @Response<ErrorResponse>(404, 'not_found: no connection with this id in the account')
  public async revoke(@Request() req: ExpressRequest, @Path() id: string): Promise<void> {
    const ctx = ctxOf(req);
    const p = principalOf<PrincipalOf<'dashboard'>>(req);
    if (!isUuid(id)) throw fail('invalid_id', 400, 'Connection id must be a uuid');
    // A uuid in capitals arrives here in lower case, as its stream is named (read-api/http/params.ts).
    await revokeConnection(ctx.store, { userId: p.userId, accountId: p.accountId, sessionId: p.sessionId }, id, ctx.clock.now());
    this.setStatus(204);
  }
}
