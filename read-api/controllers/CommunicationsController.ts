import type { Request as ExpressRequest } from 'express';
import { Body, Controller, Delete, Get, Header, Path, Post, Query, Request, Response, Route, Security, SuccessResponse, Tags } from 'tsoa';
import type { ErrorResponse } from '../../commands/http/SendController';
import { createContactList } from '../../commands/comms/contactLists';
import { addManualSuppression, addManualSuppressionsBatch, liftSuppression, type SuppressionBatchResult } from '../../commands/comms/suppressions';
import type { SuppressionReason } from '../../domain/comms/suppressions';
import { accountOverview, overviewDays, type AccountOverview } from '../../projections/analytics/accountOverview';
import { listSuppressions, type SuppressionPage, type SuppressionView } from '../../projections/commSuppressions/queries';
import { listContactLists, type ContactListPage, type ContactListView } from '../../projections/contactLists/queries';
import { listBlocksOfAccount } from '../../projections/directory/queries';
import { ctxOf } from '../http/context';
import { retentionDaysOfAccount } from '../http/plan';
import { tenantOf } from '../http/tenant';

// The handlers (domain/comms/) check these bodies, so every rule answers 400 validation_error with its field;
// tsoa leaves them to it (read-api/http/checkedByHandler.ts). The types are for the document.
export interface ContactListBody {
  /**
   * Trimmed, 1 to 100 characters, one line, unique in the tenant regardless of case.
   * @minLength 1
   * @maxLength 100
   */
  name: string;
  /**
   * Trimmed, at most 500 characters.
   * @maxLength 500
   */
  description?: string | null;
}
export interface ContactListResponse { success: true; data: ContactListView }
export interface ContactListPageResponse { success: true; data: ContactListPage }
export interface SuppressionPageResponse { success: true; data: SuppressionPage }
export interface ManualSuppressionBody {
  /**
   * Trimmed and lower-cased, a valid address of at most 320 characters.
   * @format email
   * @maxLength 320
   */
  email: string;
  /**
   * Trimmed, at most 500 characters, one line.
   * @maxLength 500
   */
  note?: string | null;
}
export interface SuppressionResponse { success: true; data: SuppressionView }
export interface SuppressionBatchBody {
  /**
   * 1 to 1,000 suppressions, each checked as POST /suppressions (an invalid one is that item's outcome, not the call's).
   * @minItems 1
   * @maxItems 1000
   */
  suppressions: ManualSuppressionBody[];
}
export interface SuppressionBatchResponse { success: true; data: SuppressionBatchResult }
export interface SuppressionLiftedResponse { success: true; data: { id: string; email: string; lifted: true } }
export interface CommAnalyticsOverviewResponse { success: true; data: AccountOverview }

/**
 * Lists, suppressions and the analytics overview of the communications product
 * (docs/COMMUNICATIONS.md), base {auth_url}/comm-api/api. Same rule as the templates: a dashboard
 * JWT authorizes, `X-Tenant-Id` must be the signed-in user's account.
 */
@Route('comm-api/api')
@Tags('Communications')
@Security('dashboardJwt')
@Response<ErrorResponse>(400, 'tenant_required, invalid_query, invalid_cursor, validation_error')
@Response<ErrorResponse>(401, 'Dashboard token missing, invalid or expired')
@Response<ErrorResponse>(403, 'tenant_forbidden: X-Tenant-Id is not the signed-in account')
export class CommunicationsController extends Controller {
  /**
   * Creates a contact list (`contact_count` 0; contacts are added with POST /lists/{listId}/contacts).
   */
  @Post('lists')
  @SuccessResponse(201, 'Created')
  @Response<ErrorResponse>(409, 'list_name_taken, list_limit_reached (100 lists), list_conflict')
  public async createList(@Request() req: ExpressRequest, @Header('X-Tenant-Id') tenant: string | undefined, @Body() body: ContactListBody): Promise<ContactListResponse> {
    const t = tenantOf(req, tenant);
    const list = await createContactList(t.deps, t.tenantId, t.actor, body);
    this.setStatus(201);
    return { success: true, data: list };
  }

  /**
   * The tenant's contact lists, newest first.
   * @param limit 1 to 100, default 50
   * @param cursor `next_cursor` of the previous page
   * @isInt limit
   */
  @Get('lists')
  public async lists(@Request() req: ExpressRequest, @Header('X-Tenant-Id') tenant: string | undefined, @Query() limit?: number, @Query() cursor?: string): Promise<ContactListPageResponse> {
    const t = tenantOf(req, tenant);
    return { success: true, data: await listContactLists(t.deps.db, t.tenantId, { limit, cursor }) };
  }

  /**
   * Addresses that hard-bounced (5xx) or complained on any block of the tenant, unsubscribed from
   * any of its lists, or were suppressed by the tenant itself, most recently suppressed first.
   * Addresses are shown whole: they are the tenant's own data.
   * @param email exact address, case-insensitive
   * @param reason `hard_bounce`, `complaint`, `unsubscribed` or `manual`
   * @param limit 1 to 500, default 100
   * @param cursor `next_cursor` of the previous page
   * @isInt limit
   */
  @Get('suppressions')
  public async suppressions(
    @Request() req: ExpressRequest, @Header('X-Tenant-Id') tenant: string | undefined,
    @Query() email?: string, @Query() reason?: SuppressionReason, @Query() limit?: number, @Query() cursor?: string,
  ): Promise<SuppressionPageResponse> {
    const t = tenantOf(req, tenant);
    return { success: true, data: await listSuppressions(t.deps.db, t.tenantId, { email, reason, limit, cursor }) };
  }

  /**
   * Suppresses an address by hand (reason `manual`): campaigns skip it until the tenant lifts it.
   * 201 with the record when a manual suppression is added; 200 with the record, nothing added,
   * when one is active already.
   */
  @Post('suppressions')
  @SuccessResponse(201, 'Created')
  @Response<SuppressionResponse>(200, 'A manual suppression of the address was active already')
  @Response<ErrorResponse>(409, 'suppression_conflict')
  @Response<ErrorResponse>(422, 'validation_error: the body is not an object or has another property')
  public async addSuppression(@Request() req: ExpressRequest, @Header('X-Tenant-Id') tenant: string | undefined, @Body() body: ManualSuppressionBody): Promise<SuppressionResponse> {
    const t = tenantOf(req, tenant);
    const { created, suppression } = await addManualSuppression(t.deps, t.tenantId, t.actor, body);
    this.setStatus(created ? 201 : 200);
    return { success: true, data: suppression };
  }

  /**
   * Imports up to 1,000 manual suppressions in one call, with an outcome per item (created, exists,
   * invalid, duplicate) rather than all or nothing. Safe to retry: what was added answers `exists`.
   */
  @Post('suppressions/batch')
  @Response<ErrorResponse>(409, 'suppression_conflict')
  @Response<ErrorResponse>(422, 'validation_error: the body is not an object or has another property')
  public async addSuppressionsBatch(@Request() req: ExpressRequest, @Header('X-Tenant-Id') tenant: string | undefined, @Body() body: SuppressionBatchBody): Promise<SuppressionBatchResponse> {
    const t = tenantOf(req, tenant);
    return { success: true, data: await addManualSuppressionsBatch(t.deps, t.tenantId, t.actor, body) };
  }

  /**
   * Lifts a hard-bounce or manual suppression: the address can be mailed again (the hard bounces
   * and manual adds recorded for it until now stop counting; a new one suppresses it again).
   * Complaints and unsubscribes are the recipient's decision and are never lifted.
   * @param id the suppression's `id`
   */
  @Delete('suppressions/{id}')
  @Response<ErrorResponse>(404, 'suppression_not_found')
  @Response<ErrorResponse>(409, 'suppression_not_liftable: the address complained or unsubscribed')
  public async liftSuppression(@Request() req: ExpressRequest, @Header('X-Tenant-Id') tenant: string | undefined, @Path() id: string): Promise<SuppressionLiftedResponse> {
    const t = tenantOf(req, tenant);
    return { success: true, data: await liftSuppression(t.deps, t.tenantId, t.actor, id) };
  }

  /**
   * Totals, rates and a daily series over the last `days` UTC days (today included) across every
   * block of the tenant, from the analytics rollups (figures as in docs/ANALYTICS.md).
   * @param days 1 to 90 and within the plan's retention; default 30 (or the retention if shorter)
   * @isInt days
   */
  @Get('analytics/overview')
  public async analyticsOverview(@Request() req: ExpressRequest, @Header('X-Tenant-Id') tenant: string | undefined, @Query() days?: number): Promise<CommAnalyticsOverviewResponse> {
    const t = tenantOf(req, tenant);
    const n = overviewDays(days, await retentionDaysOfAccount(ctxOf(req), t.tenantId));
    const blocks = await listBlocksOfAccount(t.deps.db, t.tenantId);
    return { success: true, data: await accountOverview(t.deps.db, blocks.map((b) => b.id), n, t.deps.clock.now()) };
  }
}
