import type { Request as ExpressRequest } from 'express';
import { Controller, Get, Header, Query, Request, Response, Route, Security, Tags } from 'tsoa';
import type { ErrorResponse } from '../../commands/http/SendController';
import { listTrackingEvents, type TrackingEventPage, type TrackingEventType } from '../../projections/commTracking/queries';
import { ctxOf } from '../http/context';
import { retentionDaysOfAccount } from '../http/plan';
import { retentionRange } from '../http/retention';
import { tenantOf } from '../http/tenant';

export interface TrackingEventPageResponse { success: true; data: TrackingEventPage }

/**
 * Opens and clicks of the tenant's campaign mail (docs/COMMUNICATIONS.md "Tracking"), base
 * {auth_url}/comm-api/api. Same rule as the other communications routes: a dashboard JWT
 * authorizes, `X-Tenant-Id` must be the signed-in user's account.
 */
@Route('comm-api/api')
@Tags('Communications')
@Security('dashboardJwt')
@Response<ErrorResponse>(400, 'tenant_required, invalid_query, invalid_cursor, outside_retention_window')
@Response<ErrorResponse>(401, 'Dashboard token missing, invalid or expired')
@Response<ErrorResponse>(403, 'tenant_forbidden: X-Tenant-Id is not the signed-in account')
export class CommTrackingController extends Controller {
  /**
   * The tenant's opens and clicks, newest first, within the plan's retention.
   * @param type `open` or `click`
   * @param campaign_id a campaign's id
   * @param message_id a message's id (one recipient of a campaign)
   * @param email the recipient, exact, case-insensitive
   * @param from ISO 8601, inclusive (default: the start of the retention window)
   * @param to ISO 8601, inclusive
   * @param limit 1 to 500, default 100
   * @param cursor `next_cursor` of the previous page
   * @isInt limit
   */
  @Get('tracking/events')
  public async trackingEvents(
    @Request() req: ExpressRequest, @Header('X-Tenant-Id') tenant: string | undefined,
    @Query() type?: TrackingEventType, @Query() campaign_id?: string, @Query() message_id?: string, @Query() email?: string,
    @Query() from?: string, @Query() to?: string, @Query() limit?: number, @Query() cursor?: string,
  ): Promise<TrackingEventPageResponse> {
    const t = tenantOf(req, tenant);
    const range = retentionRange({ from, to }, await retentionDaysOfAccount(ctxOf(req), t.tenantId), t.deps.clock.now());
    return {
      success: true,
      data: await listTrackingEvents(t.deps.db, t.tenantId, { type, campaignId: campaign_id, messageId: message_id, email, from: range.from, to: range.to, limit, cursor }),
    };
  }
}
