import type { Request as ExpressRequest } from 'express';
import { Body, Controller, Post, Request, Response, Route, Security, Tags } from 'tsoa';
import { SCOPES } from '../../domain/credentials/scopes';
import { fail } from '../../domain/errors';
import { ctxOf, principalOf } from '../../read-api/http/context';
import type { PrincipalOf } from '../../read-api/http/principal';
import { DASHBOARD_CLIENT_PREFIX, grantScopes, signPublicToken, validateMintRequest } from '../tokens/publicTokens';
import type { ErrorResponse } from './SendController';
import type { MintTokenRequest, MintTokenResponse } from './TokenController';

@Route('api/public/token')
@Tags('Tokens')
export class AuthTokenController extends Controller {
  /**
   * Mints a public bearer token for /api/public/v1 with a dashboard JWT: same body and rules as
   * the account-key route. The block must belong to the signed-in user's account; a dashboard
   * user may grant every scope.
   */
  @Post()
  @Security('dashboardJwt')
  @Response<ErrorResponse>(401, 'Dashboard token missing, invalid or expired')
  @Response<ErrorResponse>(403, 'motor_block_not_authorized: the block is not in this account')
  @Response<ErrorResponse>(422, 'Validation error')
  public async mintWithDashboardToken(@Request() req: ExpressRequest, @Body() body: MintTokenRequest): Promise<MintTokenResponse> {
    const ctx = ctxOf(req);
    const principal = principalOf<PrincipalOf<'dashboard'>>(req);
    const mint = validateMintRequest(body);
    const block = await ctx.directory.block(mint.motorBlockId);
    if (!block || block.accountId !== principal.accountId || block.status === 'deleted') {
      throw fail('motor_block_not_authorized', 403, 'This credential does not cover that Motor Block');
    }
    const scopes = grantScopes(mint.scopes, SCOPES);
    if (scopes.length === 0) throw fail('validation_error', 422, 'No scope requested', { details: { field: 'scopes' } });
    const { token, claims } = signPublicToken(
      { secret: ctx.config.tokenSecret, issuer: ctx.config.tokenIssuer, audience: ctx.config.tokenAudience },
      { motorBlockId: block.id, accountId: block.accountId, scopes, userId: principal.userId, clientId: `${DASHBOARD_CLIENT_PREFIX}${principal.sessionId}` },
      mint.ttlSeconds,
      ctx.clock.now(),
    );
    return {
      success: true,
      data: { token, tokenType: 'Bearer', expiresIn: mint.ttlSeconds, expiresAt: claims.expiresAt.toISOString(), motorBlockId: block.id, scopes },
    };
  }
}
