import type { Request as ExpressRequest } from 'express';
import { Controller, Get, Path, Query, Request, Response, Route, Security, Tags } from 'tsoa';
import type { ErrorResponse } from '../../commands/http/SendController';
import { listSmtpAuthFailures, type SmtpAuthFailureItem } from '../../projections/smtpAuth/queries';
import { requireBlock } from '../http/authorize';
import { ctxOf, principalOf, type HttpContext } from '../http/context';
import { retentionDaysOfAccount } from '../http/plan';
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
   * @isInt limit
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
    return smtpAuthFailuresPage(ctx, p.kind === 'publicBearer' ? p.accountId : null, id, { from, to, limit, cursor });
  }
}

/** One page of a block's failed SMTP logins inside the account plan's retention window (public and dashboard routes). */
export async function smtpAuthFailuresPage(
  ctx: HttpContext, accountId: string | null, motorBlockId: string,
  q: { from?: string; to?: string; limit?: number; cursor?: string },
): Promise<SmtpAuthFailuresResponse> {
  const range = retentionRange({ from: q.from, to: q.to }, await retentionDaysOfAccount(ctx, accountId), ctx.clock.now());
  const page = await listSmtpAuthFailures(ctx.db, { motorBlockId, from: range.from, to: range.to, limit: q.limit, cursor: q.cursor });
  return { success: true, data: { ...page, limit: q.limit ?? 100 } };
}
