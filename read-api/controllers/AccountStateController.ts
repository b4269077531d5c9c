import type { Request as ExpressRequest } from 'express';
import { Controller, Get, Request, Response, Route, Security, Tags } from 'tsoa';
import type { ErrorResponse } from '../../commands/http/SendController';
import { domainActor } from '../../commands/domains/http';
import { accountState, type AccountState } from '../../commands/domains/reads';
import { ctxOf, principalOf } from '../http/context';

export interface AccountStateResponse { success: true; data: AccountState }

@Route('api/public/v1/account')
@Tags('Account')
@Response<ErrorResponse>(401, 'Token missing, invalid or expired')
@Response<ErrorResponse>(403, 'Scope missing')
export class AccountStateController extends Controller {
  /** One composed answer: domain verification, DNS readiness, block existence, sandbox status and the next step. */
  @Get('state')
  @Security('publicBearer', ['config.read'])
  public async state(@Request() req: ExpressRequest): Promise<AccountStateResponse> {
    const ctx = ctxOf(req);
    return { success: true, data: await accountState(ctx.db, ctx.store, ctx.config, domainActor(principalOf(req)).accountId) };
  }
}
