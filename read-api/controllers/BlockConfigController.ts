import type { Request as ExpressRequest } from 'express';
import { Controller, Get, Path, Query, Request, Response, Route, Security, Tags } from 'tsoa';
import type { ErrorResponse } from '../../commands/http/SendController';
import { domainDeps } from '../../commands/domains/http';
import { domainHealth, refresherFor, type DomainHealth } from '../../commands/domains/health';
import { blockConfig, type BlockConfig } from '../../commands/domains/reads';
import { requireBlock } from '../http/authorize';
import { ctxOf, principalOf } from '../http/context';

export interface BlockConfigResponse { success: true; data: BlockConfig }
export interface DomainHealthResponse { success: true; data: DomainHealth }

@Route('api/public/v1/motor-blocks')
@Tags('Motor Blocks')
@Response<ErrorResponse>(401, 'Token missing, invalid or expired; a dashboard JWT is not accepted')
@Response<ErrorResponse>(403, 'Scope missing or token bound to another block')
@Response<ErrorResponse>(429, 'rate_limited: API request limit of this token exceeded')
export class BlockConfigController extends Controller {
  /** Non-sensitive snapshot of the block and its domain status; never a credential (a dashboard link instead). */
  @Get('{id}/config')
  @Security('publicBearer', ['config.read'])
  @Response<ErrorResponse>(404, 'motor_block_not_found')
  public async config(@Request() req: ExpressRequest, @Path() id: string): Promise<BlockConfigResponse> {
    const ctx = ctxOf(req);
    const p = principalOf(req);
    requireBlock(p, id);
    return { success: true, data: await blockConfig(ctx.db, ctx.config, p.accountId, id) };
  }

  /**
   * The block's domain DNS health, cache-first: stale or never-checked domains schedule an
   * asynchronous re-check that the next call sees. `refresh=true` waits for a live, time-capped check.
   */
  @Get('{id}/domain-health')
  @Security('publicBearer', ['config.read'])
  @Response<ErrorResponse>(404, 'motor_block_not_found')
  public async domainHealth(@Request() req: ExpressRequest, @Path() id: string, @Query() refresh?: boolean): Promise<DomainHealthResponse> {
    const ctx = ctxOf(req);
    const p = principalOf(req);
    requireBlock(p, id);
    return { success: true, data: await domainHealth(domainDeps(ctx), refresherFor(ctx), p.accountId, id, refresh === true) };
  }
}
