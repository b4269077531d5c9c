import type { Request as ExpressRequest } from 'express';
import { Controller, Get, Path, Query, Request, Response, Route, Security, Tags } from 'tsoa';
import type { ErrorResponse } from '../../commands/http/SendController';
import { fail } from '../../domain/errors';
import { searchLogs } from '../../projections/messages';
import { piiAllowed, requireBlock } from '../http/authorize';
import { ctxOf, principalOf } from '../http/context';
import { retentionDaysOfAccount } from '../http/plan';
import { retentionRange } from '../http/retention';
import { messageDto, type MessageDto } from '../messages/present';

export interface MotorBlockSummary {
  id: string;
  name: string;
  type: string;
  /** null when none was given. */
  description: string | null;
  status: string;
  domain: { id: string; name: string | null };
  activeAuthMethod: string;
  credentialsAvailable: false;
  smtp_username: string;
}
export interface MotorBlockListResponse { success: true; data: MotorBlockSummary[] }

export interface LogsPage {
  items: MessageDto[];
  nextCursor: string | null;
  limit: number;
  pii_masked: boolean;
}
export interface LogsResponse { success: true; data: LogsPage }

@Route('api/public/v1/motor-blocks')
@Tags('Motor Blocks')
@Response<ErrorResponse>(401, 'Token missing, invalid or expired')
@Response<ErrorResponse>(403, 'Scope missing or token bound to another block')
@Response<ErrorResponse>(429, 'rate_limited: API request limit of this token exceeded')
export class MotorBlocksController extends Controller {
  /** The Motor Blocks this token may access (a public token is bound to one block). Any scope. */
  @Get()
  @Security('publicBearer', [])
  public async list(@Request() req: ExpressRequest): Promise<MotorBlockListResponse> {
    const ctx = ctxOf(req);
    const p = principalOf(req);
    if (p.kind !== 'publicBearer') return { success: true, data: [] };
    const block = await ctx.directory.block(p.motorBlockId);
    if (!block || block.accountId !== p.accountId) return { success: true, data: [] };
    const domain = await ctx.directory.domain(block.domainId);
    return {
      success: true,
      data: [{
        id: block.id, name: block.name, type: block.type, description: block.description, status: block.status, domain: { id: block.domainId, name: domain?.name ?? null },
        activeAuthMethod: block.authMethod, credentialsAvailable: false, smtp_username: block.smtpUsername,
      }],
    };
  }

  /**
   * Delivery logs, newest first, keyset-paginated. `query` filters with `recipient:<EMAIL>`,
   * `domain:<recipient_domain>`, `status:<outcome>`, `metadata.<key>:<value>` (terms ANDed).
   * @param limit 1 to 1000, default 100
   * @param status queued, processed, deferred, delivered, bounced, failed, complained or sent; a comma-separated list is ORed
   * @param currentOutcome alias of status
   * @param from ISO 8601; inside the plan's retention window (default: the window's start)
   * @param to ISO 8601
   * @isInt limit
   */
  @Get('{id}/logs')
  @Security('publicBearer', ['logs.read'])
  @Response<ErrorResponse>(400, 'Bad logs query, time outside the retention window, bad cursor')
  public async logs(
    @Request() req: ExpressRequest,
    @Path() id: string,
    @Query() from?: string,
    @Query() to?: string,
    @Query() query?: string,
    @Query() status?: string,
    @Query() currentOutcome?: string,
    @Query() limit?: number,
    @Query() cursor?: string,
    @Query() includePII?: boolean,
  ): Promise<LogsResponse> {
    const ctx = ctxOf(req);
    const p = principalOf(req);
    requireBlock(p, id);
    const unmasked = piiAllowed(p, includePII);
    if (status !== undefined && currentOutcome !== undefined && status !== currentOutcome) {
      throw fail('invalid_query', 400, 'status and currentOutcome are the same filter: give one of them');
    }
    const range = retentionRange({ from, to }, await retentionDaysOfAccount(ctx, p.kind === 'publicBearer' ? p.accountId : null), ctx.clock.now());
    const page = await searchLogs(ctx.db, { motorBlockId: id, from: range.from, to: range.to, query, status: status ?? currentOutcome, limit, cursor });
    return { success: true, data: { items: page.items.map((m) => messageDto(m, unmasked)), nextCursor: page.nextCursor, limit: limit ?? 100, pii_masked: !unmasked } };
  }
}
