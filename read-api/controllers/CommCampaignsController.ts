import type { Request as ExpressRequest } from 'express';
import { Body, Controller, Delete, Get, Header, Patch, Path, Post, Query, Request, Response, Route, Security, SuccessResponse, Tags } from 'tsoa';
import type { ErrorResponse } from '../../commands/http/SendController';
import { cancelCampaign, createCampaign, deleteCampaign, getCampaign, sendCampaign, updateCampaign, type CampaignDeps } from '../../commands/comms/campaigns';
import type { CampaignStatus } from '../../domain/comms/campaigns';
import { campaignMessages, listCampaigns, type CampaignMessagePage, type CampaignPage, type CampaignView } from '../../projections/campaigns/queries';
import { ctxOf } from '../http/context';
import { tenantOf, type Tenant } from '../http/tenant';

// The handlers (domain/comms/campaigns.ts) check these bodies, so every rule answers 400 validation_error with its
// field; tsoa leaves them to it (read-api/http/checkedByHandler.ts). The types are for the document.
export interface CampaignBody {
  /**
   * Trimmed, 1 to 200 characters, one line.
   * @minLength 1
   * @maxLength 200
   */
  name: string;
  /**
   * A template of the tenant.
   * @format uuid
   */
  template_id: string;
  /**
   * A contact list of the tenant: its subscribed contacts receive the campaign.
   * @format uuid
   */
  list_id: string;
  /**
   * A marketing or general_purpose Motor Block of the tenant.
   * @format uuid
   */
  motor_block_id: string;
  /**
   * Bare address on the block's domain.
   * @format email
   */
  from: string;
  /**
   * Optional display name, at most 78 characters, no line breaks.
   * @maxLength 78
   */
  from_name?: string | null;
  /** Default true: an open pixel in the HTML part. */
  track_opens?: boolean | null;
  /** Default true: links rewritten through the click redirect. */
  track_clicks?: boolean | null;
}
/** PATCH: any of the create's fields, at least one, each with the create's rule; a null from_name clears it, a null flag is true. */
export interface CampaignUpdateBody {
  /**
   * @minLength 1
   * @maxLength 200
   */
  name?: string;
  /** @format uuid */
  template_id?: string;
  /** @format uuid */
  list_id?: string;
  /** @format uuid */
  motor_block_id?: string;
  /** @format email */
  from?: string;
  /** @maxLength 78 */
  from_name?: string | null;
  track_opens?: boolean | null;
  track_clicks?: boolean | null;
}
export interface CampaignSendBody {
  /**
   * ISO 8601 time with `Z` or an offset, in the future and at most 90 days ahead: the send starts then. Absent or null: now.
   * @format date-time
   */
  scheduled_at?: string | null;
}
export interface CampaignResponse { success: true; data: CampaignView }
export interface CampaignDeletedResponse { success: true; data: { id: string; deleted: true } }
export interface CampaignPageResponse { success: true; data: CampaignPage }
export interface CampaignMessagePageResponse { success: true; data: CampaignMessagePage }

const deps = (req: ExpressRequest, t: Tenant): CampaignDeps => ({ ...t.deps, directory: ctxOf(req).directory });

/**
 * Campaigns of the communications product (docs/COMMUNICATIONS.md "Campaigns"), base
 * {auth_url}/comm-api/api: a template sent to the subscribed contacts of a list through a marketing
 * or general_purpose block. Same rule as the other communications routes: a dashboard JWT
 * authorizes, `X-Tenant-Id` must be the signed-in user's account.
 */
@Route('comm-api/api')
@Tags('Communications')
@Security('dashboardJwt')
@Response<ErrorResponse>(400, 'tenant_required, invalid_query, invalid_cursor, invalid_id, validation_error')
@Response<ErrorResponse>(401, 'Dashboard token missing, invalid or expired')
@Response<ErrorResponse>(403, 'tenant_forbidden: X-Tenant-Id is not the signed-in account')
export class CommCampaignsController extends Controller {
  /**
   * Creates a draft campaign. Nothing is sent until POST /campaigns/{id}/send.
   */
  @Post('campaigns')
  @SuccessResponse(201, 'Created')
  @Response<ErrorResponse>(403, 'motor_block_inactive, from_domain_mismatch, DOMAIN_DNS_INCOMPLETE')
  @Response<ErrorResponse>(404, 'template_not_found, list_not_found, motor_block_not_found')
  @Response<ErrorResponse>(409, 'campaign_block_type_not_allowed')
  public async createCampaign(@Request() req: ExpressRequest, @Header('X-Tenant-Id') tenant: string | undefined, @Body() body: CampaignBody): Promise<CampaignResponse> {
    const t = tenantOf(req, tenant);
    const campaign = await createCampaign(deps(req, t), t.tenantId, t.actor, body);
    this.setStatus(201);
    return { success: true, data: campaign };
  }

  /**
   * The tenant's campaigns, newest first.
   * @param status `draft`, `scheduled`, `sending`, `sent` or `cancelled`
   * @param limit 1 to 100, default 50
   * @param cursor `next_cursor` of the previous page
   * @isInt limit
   */
  @Get('campaigns')
  public async campaigns(
    @Request() req: ExpressRequest, @Header('X-Tenant-Id') tenant: string | undefined,
    @Query() status?: CampaignStatus, @Query() limit?: number, @Query() cursor?: string,
  ): Promise<CampaignPageResponse> {
    const t = tenantOf(req, tenant);
    return { success: true, data: await listCampaigns(t.deps.db, t.tenantId, { status, limit, cursor }) };
  }

  /** One campaign with its counts and its open and click totals. */
  @Get('campaigns/{id}')
  @Response<ErrorResponse>(404, 'campaign_not_found')
  public async campaign(@Request() req: ExpressRequest, @Header('X-Tenant-Id') tenant: string | undefined, @Path() id: string): Promise<CampaignResponse> {
    const t = tenantOf(req, tenant);
    return { success: true, data: await getCampaign(t.deps.db, t.tenantId, id) };
  }

  /**
   * What became of each message of the campaign (one per contact it reached), newest first: its
   * address, current outcome and SMTP answer.
   * @param status an outcome (`delivered`, `bounced`, `deferred`, `failed`, `sent`...) or several, comma-separated
   * @param limit 1 to 500, default 100
   * @param cursor `next_cursor` of the previous page
   * @isInt limit
   */
  @Get('campaigns/{id}/messages')
  @Response<ErrorResponse>(404, 'campaign_not_found')
  public async campaignMessages(
    @Request() req: ExpressRequest, @Header('X-Tenant-Id') tenant: string | undefined, @Path() id: string,
    @Query() status?: string, @Query() limit?: number, @Query() cursor?: string,
  ): Promise<CampaignMessagePageResponse> {
    const t = tenantOf(req, tenant);
    const campaign = await getCampaign(t.deps.db, t.tenantId, id);
    return { success: true, data: await campaignMessages(t.deps.db, campaign, { status, limit, cursor }) };
  }

  /**
   * Edits a draft: any of the create's fields, with the create's checks for those given.
   */
  @Patch('campaigns/{id}')
  @Response<ErrorResponse>(403, 'motor_block_inactive, from_domain_mismatch, DOMAIN_DNS_INCOMPLETE')
  @Response<ErrorResponse>(404, 'campaign_not_found, template_not_found, list_not_found, motor_block_not_found')
  @Response<ErrorResponse>(409, 'campaign_not_draft, campaign_block_type_not_allowed, campaign_conflict')
  public async updateCampaign(
    @Request() req: ExpressRequest, @Header('X-Tenant-Id') tenant: string | undefined, @Path() id: string, @Body() body: CampaignUpdateBody,
  ): Promise<CampaignResponse> {
    const t = tenantOf(req, tenant);
    return { success: true, data: await updateCampaign(deps(req, t), t.tenantId, t.actor, id, body) };
  }

  /** Deletes a draft, sent or cancelled campaign (a scheduled or sending one: cancel it first). Messages it sent stay. */
  @Delete('campaigns/{id}')
  @Response<ErrorResponse>(404, 'campaign_not_found')
  @Response<ErrorResponse>(409, 'campaign_not_deletable, campaign_conflict')
  public async deleteCampaign(@Request() req: ExpressRequest, @Header('X-Tenant-Id') tenant: string | undefined, @Path() id: string): Promise<CampaignDeletedResponse> {
    const t = tenantOf(req, tenant);
    return { success: true, data: await deleteCampaign(deps(req, t), t.tenantId, t.actor, id) };
  }

  /**
   * Starts sending a draft: 202 with the campaign in `sending`; the worker sends in the background,
   * page by page, and the counts grow as it goes. With `scheduled_at`: 202 with the campaign in
   * `scheduled`; the worker starts it then. On a scheduled campaign: moves it to the new
   * `scheduled_at`, or without one starts it now.
   */
  @Post('campaigns/{id}/send')
  @SuccessResponse(202, 'Accepted')
  @Response<ErrorResponse>(403, 'motor_block_inactive, from_domain_mismatch, DOMAIN_DNS_INCOMPLETE')
  @Response<ErrorResponse>(404, 'campaign_not_found, template_not_found, list_not_found, motor_block_not_found')
  @Response<ErrorResponse>(409, 'campaign_not_draft, campaign_block_type_not_allowed, campaign_conflict')
  public async sendCampaign(
    @Request() req: ExpressRequest, @Header('X-Tenant-Id') tenant: string | undefined, @Path() id: string, @Body() body?: CampaignSendBody,
  ): Promise<CampaignResponse> {
    const t = tenantOf(req, tenant);
    const campaign = await sendCampaign(deps(req, t), t.tenantId, t.actor, id, body);
    this.setStatus(202);
    return { success: true, data: campaign };
  }

  /** Cancels a draft, a scheduled or a sending campaign; messages already accepted are still delivered. */
  @Post('campaigns/{id}/cancel')
  @Response<ErrorResponse>(404, 'campaign_not_found')
  @Response<ErrorResponse>(409, 'campaign_not_cancellable, campaign_conflict')
  public async cancelCampaign(@Request() req: ExpressRequest, @Header('X-Tenant-Id') tenant: string | undefined, @Path() id: string): Promise<CampaignResponse> {
    const t = tenantOf(req, tenant);
    return { success: true, data: await cancelCampaign(deps(req, t), t.tenantId, t.actor, id) };
  }
}
