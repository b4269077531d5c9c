import type { Request as ExpressRequest } from 'express';
import { Controller, Get, Path, Query, Request, Response, Route, Security, Tags } from 'tsoa';
import type { ErrorResponse } from '../../commands/http/SendController';
import { fail } from '../../domain/errors';
import type { Anomaly } from '../../domain/analytics/anomalies';
import type { Reputation } from '../../domain/analytics/reputation';
import {
  anomalies, blockSeries, blockTotals, byProvider, dailySummary, deliverabilityByDomain, errorCodes, hourRange, reputation, withRates,
  type DailyRow, type DomainRow, type ErrorCodeRow, type HourRange, type ProviderRow, type SeriesPoint, type TotalsWithRates,
} from '../../projections/analytics';
import { requireBlock } from '../http/authorize';
import { ctxOf, principalOf, type HttpContext } from '../http/context';
import type { Principal } from '../http/principal';
import { retentionDaysOfAccount } from '../http/plan';
import { requireSpanInsideRetention, retentionRange } from '../http/retention';

export interface OverviewData {
  motorBlockId: string;
  /** Effective range: whole UTC hours of acceptance, both included. */
  from: string;
  to: string;
  totals: TotalsWithRates;
}
export interface OverviewResponse { success: true; data: OverviewData }
export interface DailySummaryResponse { success: true; data: { days: number; retentionDays: number; items: DailyRow[] } }
export interface MetricsResponse { success: true; data: { interval: 'hour' | 'day'; from: string; to: string; points: SeriesPoint[] } }
export interface DeliverabilityResponse { success: true; data: DomainRow[] }
export interface ProvidersResponse { success: true; data: Array<Omit<ProviderRow, 'domain'>> }
export interface ErrorCodesResponse { success: true; data: { total: number; codes: ErrorCodeRow[] } }
export interface ReputationResponse { success: true; data: Reputation }
export interface AnomaliesResponse { success: true; data: { anomalies: Anomaly[]; windowDays: number } }

const HOUR_MS = 3_600_000;

/** limit: absent = default; otherwise an integer in [1, max] (400 invalid_query). */
function limitParam(value: number | undefined, fallback: number, max: number): number {
  if (value === undefined) return fallback;
  if (!Number.isInteger(value) || value < 1 || value > max) throw fail('invalid_query', 400, `limit must be an integer from 1 to ${max}`);
  return value;
}

const retentionDaysOf = (ctx: HttpContext, p: Principal): Promise<number> =>
  retentionDaysOfAccount(ctx, p.kind === 'accountApiKey' || p.kind === 'publicBearer' ? p.accountId : null);

/** Authorizes the block and turns from/to into whole hours inside the plan's retention window. */
async function scopedRange(req: ExpressRequest, id: string, from: string | undefined, to: string | undefined): Promise<{ ctx: HttpContext; range: HourRange; retentionDays: number }> {
  const ctx = ctxOf(req);
  const p = principalOf(req);
  requireBlock(p, id);
  const retentionDays = await retentionDaysOf(ctx, p);
  const now = ctx.clock.now();
  const r = retentionRange({ from, to }, retentionDays, now);
  return { ctx, range: hourRange(r.from, r.to ?? now), retentionDays };
}

const iso = (range: HourRange) => ({ from: range.fromHour.toISOString(), to: new Date(range.toHour.getTime() + HOUR_MS - 1).toISOString() });

/**
 * Block analytics from the `analytics` read model (docs/ANALYTICS.md). Every recipient of a send
 * counts once, in the UTC hour its send was accepted, with its current outcome. `from` / `to` are
 * ISO 8601 inside the plan's retention window (default: the whole window up to now); they are
 * widened to whole UTC hours.
 */
@Route('api/public/v1/motor-blocks')
@Tags('Motor Block analytics')
@Response<ErrorResponse>(400, 'Bad parameter (invalid_query) or time outside the retention window (outside_retention_window)')
@Response<ErrorResponse>(401, 'Token missing, invalid or expired')
@Response<ErrorResponse>(403, 'Scope missing or token bound to another block')
export class AnalyticsController extends Controller {
  /** Totals and rates over a range. Needs analytics.read and usage.read. */
  @Get('{id}/overview')
  @Security('publicBearer', ['analytics.read', 'usage.read'])
  public async overview(@Request() req: ExpressRequest, @Path() id: string, @Query() from?: string, @Query() to?: string): Promise<OverviewResponse> {
    const { ctx, range } = await scopedRange(req, id, from, to);
    const totals = await blockTotals(ctx.db, id, range);
    return { success: true, data: { motorBlockId: id, ...iso(range), totals: withRates(totals) } };
  }

  /**
   * One row per UTC day, today included, oldest first.
   * @param days 1 up to the plan's retention in days (default 7, or the retention if shorter)
   * @isInt days
   */
  @Get('{id}/daily-summary')
  @Security('publicBearer', ['analytics.read'])
  public async dailySummary(@Request() req: ExpressRequest, @Path() id: string, @Query() days?: number): Promise<DailySummaryResponse> {
    const ctx = ctxOf(req);
    const p = principalOf(req);
    requireBlock(p, id);
    const retentionDays = await retentionDaysOf(ctx, p);
    const n = days ?? Math.min(7, retentionDays);
    if (!Number.isInteger(n) || n < 1) throw fail('invalid_query', 400, 'days must be an integer of at least 1');
    requireSpanInsideRetention('days', n, 86_400_000, retentionDays);
    return { success: true, data: { days: n, retentionDays, items: await dailySummary(ctx.db, id, n, ctx.clock.now()) } };
  }

  /**
   * A time series, zero-filled, oldest first.
   * @param interval `hour` or `day` (required)
   */
  @Get('{id}/metrics')
  @Security('publicBearer', ['analytics.read'])
  public async metrics(@Request() req: ExpressRequest, @Path() id: string, @Query() interval: 'hour' | 'day', @Query() from?: string, @Query() to?: string): Promise<MetricsResponse> {
    // tsoa refuses a missing or unknown interval (400 invalid_query); this guards direct calls.
    if (interval !== 'hour' && interval !== 'day') throw fail('invalid_query', 400, 'interval is required: hour or day');
    const { ctx, range } = await scopedRange(req, id, from, to);
    return { success: true, data: { interval, ...iso(range), points: await blockSeries(ctx.db, id, range, interval) } };
  }

  /**
   * Per recipient domain, most recipients first.
   * @param limit 1 to 200, default 50
   * @isInt limit
   */
  @Get('{id}/deliverability')
  @Security('publicBearer', ['analytics.read'])
  public async deliverability(@Request() req: ExpressRequest, @Path() id: string, @Query() from?: string, @Query() to?: string, @Query() limit?: number): Promise<DeliverabilityResponse> {
    const n = limitParam(limit, 50, 200);
    const { ctx, range } = await scopedRange(req, id, from, to);
    return { success: true, data: await deliverabilityByDomain(ctx.db, id, range, n) };
  }

  /**
   * Per mailbox provider (gmail, outlook, yahoo, other), classified by the MX host that answered
   * (by the domain name for recipients never reached).
   * @param limit 1 to 200, default 20
   * @isInt limit
   */
  @Get('{id}/providers')
  @Security('publicBearer', ['analytics.read'])
  public async providers(@Request() req: ExpressRequest, @Path() id: string, @Query() from?: string, @Query() to?: string, @Query() limit?: number): Promise<ProvidersResponse> {
    const n = limitParam(limit, 20, 200);
    const { ctx, range } = await scopedRange(req, id, from, to);
    return { success: true, data: await byProvider(ctx.db, id, range, n) };
  }

  /**
   * Bounced, failed and deferred recipients by their latest SMTP reply code and enhanced code.
   * @param limit 1 to 200, default 50
   * @isInt limit
   */
  @Get('{id}/error-codes')
  @Security('publicBearer', ['analytics.read'])
  public async errorCodes(@Request() req: ExpressRequest, @Path() id: string, @Query() from?: string, @Query() to?: string, @Query() limit?: number): Promise<ErrorCodesResponse> {
    const n = limitParam(limit, 50, 200);
    const { ctx, range } = await scopedRange(req, id, from, to);
    return { success: true, data: await errorCodes(ctx.db, id, range, n) };
  }

  /** Score 0 to 100 from the bounce, complaint and failure rates over the retention window (formula: docs/ANALYTICS.md). */
  @Get('{id}/reputation')
  @Security('publicBearer', ['analytics.read'])
  public async reputation(@Request() req: ExpressRequest, @Path() id: string): Promise<ReputationResponse> {
    const ctx = ctxOf(req);
    const p = principalOf(req);
    requireBlock(p, id);
    return { success: true, data: await reputation(ctx.db, id, await retentionDaysOf(ctx, p), ctx.clock.now()) };
  }

  /** Flags today's (UTC) bounce rate when it exceeds 2 × the 14-day average by more than 2 percentage points. */
  @Get('{id}/anomalies')
  @Security('publicBearer', ['analytics.read'])
  public async anomalies(@Request() req: ExpressRequest, @Path() id: string): Promise<AnomaliesResponse> {
    const ctx = ctxOf(req);
    requireBlock(principalOf(req), id);
    return { success: true, data: await anomalies(ctx.db, id, ctx.clock.now()) };
  }
}
