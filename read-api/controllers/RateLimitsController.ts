import type { Request as ExpressRequest } from 'express';
import { Controller, Get, Path, Request, Response, Route, Security, Tags } from 'tsoa';
import type { ErrorResponse } from '../../commands/http/SendController';
import { resetIn } from '../../commands/quota/sendQuota';
import { fail } from '../../domain/errors';
import { percent } from '../../domain/analytics/rates';
import type { BlockLimits } from '../../domain/analytics/throttle';
import { planOf } from '../../infra/config';
import { loadSendPolicy } from '../../projections/analytics';
import { requireBlock } from '../http/authorize';
import { ctxOf, principalOf } from '../http/context';

export interface RateBucket { used: number; limit: number; remaining: number; percentage: number; resetIn: number }
export interface AccountRateBucket { used: number; limit: number; remaining: number; resetIn: number }

export interface BlockRateLimits {
  burst: RateBucket; hourly: RateBucket; daily: RateBucket;
  /** Configured limits (block's own, else the plan's), unaffected by throttling. */
  limits: BlockLimits;
  throttled: boolean;
  /** reputation_low, reputation_critical or domain_warmup; null when not throttled. */
  throttleReason: string | null;
  timestamp: string;
}
export interface BlockRateLimitsResponse { success: true; data: BlockRateLimits; warning?: string }

export interface AccountRateLimits {
  source: 'plan' | 'fallback';
  timestamp: string;
  hourly: AccountRateBucket;
  daily: AccountRateBucket;
  /** False while account-wide refusal is rolling out (ENFORCE_ACCOUNT_LIMIT): measured only. */
  enforced: boolean;
  warning?: string;
}
export interface AccountRateLimitsResponse { success: true; data: AccountRateLimits }

const UNAVAILABLE = 'Usage counters are temporarily unavailable; values are ceiling-only estimates';
const WINDOW = { burst: 60, hourly: 3600, daily: 86400 } as const;

@Route('api/public/v1')
@Tags('Rate limits')
@Security('publicBearer', ['usage.read'])
@Response<ErrorResponse>(401, 'Token missing, invalid or expired')
@Response<ErrorResponse>(403, 'Scope missing or token bound to another block')
export class RateLimitsController extends Controller {
  /**
   * The block's send quota: per bucket the effective ceiling (configured limits lowered by any
   * reputation throttle or domain warm-up) and the usage of the current UTC minute, hour and day.
   */
  @Get('motor-blocks/{id}/rate-limits')
  @Response<ErrorResponse>(404, 'Motor Block not found')
  public async blockRateLimits(@Request() req: ExpressRequest, @Path() id: string): Promise<BlockRateLimitsResponse> {
    const ctx = ctxOf(req);
    const p = principalOf(req);
    requireBlock(p, id);
    const block = await ctx.directory.block(id);
    if (!block) throw fail('motor_block_not_found', 404, 'Motor Block not found');
    const [account, domain] = await Promise.all([ctx.directory.account(block.accountId), ctx.directory.domain(block.domainId)]);
    const now = ctx.clock.now();
    const policy = await loadSendPolicy(ctx.db, ctx.config, { block, accountPlan: account?.plan ?? null, domainId: domain?.id ?? null }, now);
    const counters = await ctx.quota.read(block.id, block.accountId, now, domain?.id ?? null);
    const bucket = (name: keyof typeof WINDOW): RateBucket => {
      const limit = policy.block.effective[name];
      // While the warm-up cap binds, the daily bucket is the domain's buffer, shared by its blocks.
      const used = !counters ? 0 : name === 'daily' && policy.warmupBinding ? counters.domainDaily : counters[name];
      return { used, limit, remaining: Math.max(0, limit - used), percentage: percent(used, limit), resetIn: resetIn(now, WINDOW[name]) };
    };
    return {
      success: true,
      data: {
        burst: bucket('burst'), hourly: bucket('hourly'), daily: bucket('daily'),
        limits: policy.block.limits, throttled: policy.block.throttled, throttleReason: policy.block.throttleReason, timestamp: now.toISOString(),
      },
      ...(counters ? {} : { warning: UNAVAILABLE }),
    };
  }

  /** Account-wide send quota, aggregated across all blocks of the token's account. */
  @Get('account/rate-limits')
  public async accountRateLimits(@Request() req: ExpressRequest): Promise<AccountRateLimitsResponse> {
    const ctx = ctxOf(req);
    const p = principalOf(req);
    if (p.kind !== 'publicBearer') throw fail('invalid_token', 401, 'Bearer token missing or invalid');
    const now = ctx.clock.now();
    const account = await ctx.directory.account(p.accountId);
    const { plan, source } = planOf(ctx.config, account?.plan ?? null);
    const counters = await ctx.quota.read(p.motorBlockId, p.accountId, now);
    const bucket = (used: number, limit: number, seconds: number): AccountRateBucket => ({ used, limit, remaining: Math.max(0, limit - used), resetIn: resetIn(now, seconds) });
    return {
      success: true,
      data: {
        source,
        timestamp: now.toISOString(),
        hourly: bucket(counters?.acctHourly ?? 0, plan.accountHourly, 3600),
        daily: bucket(counters?.acctDaily ?? 0, plan.accountDaily, 86400),
        enforced: ctx.config.enforceAccountLimit,
        ...(counters ? {} : { warning: UNAVAILABLE }),
      },
    };
  }
}
