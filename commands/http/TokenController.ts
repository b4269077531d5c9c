import type { Request as ExpressRequest } from 'express';
import { Body, Controller, Post, Request, Response, Route, Security, Tags } from 'tsoa';
import { fail } from '../../domain/errors';
import { ctxOf, principalOf } from '../../read-api/http/context';
import type { PrincipalOf } from '../../read-api/http/principal';
import { grantScopes, signPublicToken, validateMintRequest } from '../tokens/publicTokens';
import type { ErrorResponse } from './SendController';

export interface MintTokenRequest {
  /** The Motor Block the token is bound to. */
  motorBlockId: string;
  /** Requested scopes; intersected with the scopes allowed on the key. Omitted = all allowed. */
  scopes?: string[];
  /**
   * Token lifetime in seconds: 60 to 900, default 300.
   * @isInt
   * @minimum 60
   * @maximum 900
   * @default 300
   */
  ttlSeconds?: number;
}

export interface MintedToken {
  token: string;
  tokenType: 'Bearer';
  expiresIn: number;
  expiresAt: string;
  motorBlockId: string;
  scopes: string[];
}
export interface MintTokenResponse { success: true; data: MintedToken }

@Route('api/public/token')
@Tags('Tokens')
export class TokenController extends Controller {
  /** Mints a public bearer token for /api/public/v1 with an account API key. */
  @Post('account-key')
  @Security('accountApiKey')
  @Response<ErrorResponse>(401, 'Credential missing or invalid')
  @Response<ErrorResponse>(403, 'motor_block_not_authorized: the block is not in this account')
  @Response<ErrorResponse>(422, 'Validation error')
  @Response<ErrorResponse>(429, 'rate_limited: API request limit of this key exceeded')
  public async mintWithAccountKey(@Request() req: ExpressRequest, @Body() body: MintTokenRequest): Promise<MintTokenResponse> {
    const ctx = ctxOf(req);
    const principal = principalOf<PrincipalOf<'accountApiKey'>>(req);
    const mint = validateMintRequest(body);
    const block = await ctx.directory.block(mint.motorBlockId);
    if (!block || block.accountId !== principal.accountId || block.status === 'deleted') {
      throw fail('motor_block_not_authorized', 403, 'This credential does not cover that Motor Block');
    }
    const scopes = grantScopes(mint.scopes, principal.scopes);
    if (scopes.length === 0) {
      throw fail('validation_error', 422, 'None of the requested scopes is allowed on this key', { details: { field: 'scopes', allowedScopes: principal.scopes } });
    }
    const now = ctx.clock.now();
    const { token, claims } = signPublicToken(
      { secret: ctx.config.tokenSecret, issuer: ctx.config.tokenIssuer, audience: ctx.config.tokenAudience },
      { motorBlockId: block.id, accountId: block.accountId, scopes, userId: principal.accountId, clientId: principal.keyId },
      mint.ttlSeconds,
      now,
    );
    return {
      success: true,
      data: { token, tokenType: 'Bearer', expiresIn: mint.ttlSeconds, expiresAt: claims.expiresAt.toISOString(), motorBlockId: block.id, scopes },
    };
  }
}
