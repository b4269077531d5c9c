import type { Request as ExpressRequest } from 'express';
import { Controller, Get, Path, Query, Request, Response, Route, Security, Tags } from 'tsoa';
import type { ErrorResponse } from '../../commands/http/SendController';
import { planOf } from '../../infra/config';
import { listSmtpAuthFailures, type SmtpAuthFailureItem } from '../../projections/smtpAuth/queries';
import { requireBlock } from '../http/authorize';
import { ctxOf, principalOf } from '../http/context';
import { retentionRange } from '../http/retention';

export interface SmtpAuthFailuresPage {
  items: SmtpAuthFailureItem[];
  nextCursor: string | null;
  limit: number;
}
export interface SmtpAuthFailuresResponse { success: true; data: SmtpAuthFailuresPage }

/**
 * Failed SMTP logins of a Motor Block (docs/SMTP.md "Failed logins"). Scope `logs.read`: they are
 * log records of the block (the SMTP side of its logs); the username and client address are the
 * caller's own client's, not recipient data, so `logs.pii` is not needed.
 */
@Route('api/public/v1/motor-blocks')
@Tags('Motor Blocks')
@Response<ErrorResponse>(401, 'Token missing, invalid or expired')
@Response<ErrorResponse>(403, 'Scope missing or token bound to another block')
@Response<ErrorResponse>(429, 'rate_limited: API request limit of this token exceeded')
export class SmtpAuthFailuresController extends Controller {
  /**
   * Refused SMTP AUTH attempts of the block, newest first, keyset-paginated: at, username (as
   * given), mechanism, remoteAddress, reason. Attempts with a username of no block are not here.
   * @param limit 1 to 1000, default 100
   * @param from ISO 8601; inside the plan's retention window (default: the window's start)
   * @param to ISO 8601
   */
  @Get('{id}/smtp-auth-failures')
  @Security('publicBearer', ['logs.read'])
  @Response<ErrorResponse>(400, 'Bad query, time outside the retention window, bad cursor')
  public async smtpAuthFailures(
    @Request() req: ExpressRequest,
    @Path() id: string,
    @Query() from?: string,
    @Query() to?: string,
    @Query() limit?: number,
    @Query() cursor?: string,
  ): Promise<SmtpAuthFailuresResponse> {
    const ctx = ctxOf(req);
    const p = principalOf(req);
    requireBlock(p, id);
    const account = p.kind === 'publicBearer' ? await ctx.directory.account(p.accountId) : null;
    const range = retentionRange({ from, to }, planOf(ctx.config, account?.plan ?? null).plan.retentionDays, ctx.clock.now());
    const page = await listSmtpAuthFailures(ctx.db, { motorBlockId: id, from: range.from, to: range.to, limit, cursor });
    return { success: true, data: { ...page, limit: limit ?? 100 } };
  }
}
