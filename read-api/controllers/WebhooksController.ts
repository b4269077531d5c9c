import type { Request as ExpressRequest } from 'express';
import { Body, Controller, Delete, Get, Path, Post, Put, Query, Request, Response, Route, Security, SuccessResponse, Tags } from 'tsoa';
import type { ErrorResponse } from '../../commands/http/SendController';
import {
  createWebhook, deleteWebhook, listDeliveries, listWebhooks, rotateWebhookSecret, testWebhook, updateWebhook, webhookStats,
  type WebhookDeliveryView, type WebhookStats, type WebhookView,
} from '../../commands/webhooks/webhooks';
import type { WebhookEventName } from '../../domain/events';
import { requireBlock } from '../http/authorize';
import { ctxOf, principalOf } from '../http/context';
import { intParam } from '../http/params';
import { retentionDaysOfAccount } from '../http/plan';
import type { PrincipalOf } from '../http/principal';

// The handlers (commands/webhooks/webhooks.ts) check these bodies, so every rule answers with its documented
// code (400 invalid_webhook_url, invalid_webhook_events, validation_error); tsoa leaves them to it
// (read-api/http/checkedByHandler.ts). The types are the SPEC's, for the document.
export interface CreateWebhookBody {
  /**
   * http or https URL the events are POSTed to; not a loopback, private or reserved address, no credentials in it.
   * @format uri
   * @maxLength 2048
   */
  url: string;
  /**
   * Event names; omitted or null means all six.
   * @minItems 1
   */
  events?: WebhookEventName[] | null;
  /** Ignored on create: a new webhook is enabled. */
  enabled?: boolean;
}
/** Any of the three, at least one; what is left out keeps its value. */
export interface UpdateWebhookBody {
  /**
   * http or https URL the events are POSTed to; not a loopback, private or reserved address, no credentials in it.
   * @format uri
   * @maxLength 2048
   */
  url?: string;
  /**
   * Event names.
   * @minItems 1
   */
  events?: WebhookEventName[];
  /** Pause (false) or resume (true) deliveries. */
  enabled?: boolean;
}
export interface RotateSecretBody {
  /**
   * Seconds the replaced secret still signs X-Service-Signature-Previous: 0 to 604800, default 86400.
   * @isInt
   * @minimum 0
   * @maximum 604800
   */
  previousSecretValidForSeconds?: number;
}
export interface WebhookListResponse { success: true; data: WebhookView[] }
export interface WebhookResponse { success: true; data: WebhookView }
export interface WebhookCreatedResponse {
  success: true;
  /** `secret` is shown here once: it signs every delivery (X-Service-Signature). */
  data: WebhookView & { secret: string };
  message: string;
}
export interface WebhookSecretRotatedResponse {
  success: true;
  /** The new `secret` is shown here once: it signs X-Service-Signature from now on. */
  data: WebhookView & { secret: string };
  message: string;
}
export interface WebhookDeletedResponse { success: true; data: { id: string; deleted: true } }
export interface WebhookTestResponse { success: true; data: { deliveryId: string; status: 'queued' }; message: string }
export interface WebhookDeliveriesResponse { success: true; data: { deliveries: WebhookDeliveryView[]; limit: number } }
export interface WebhookStatsResponse { success: true; data: WebhookStats }

/** Re-exported for the OpenAPI document: the names a webhook subscribes to. */
export type WebhookEvent = WebhookEventName;

function callerOf(req: ExpressRequest, motorBlockId: string) {
  const ctx = ctxOf(req);
  const p = principalOf<PrincipalOf<'publicBearer'>>(req);
  requireBlock(p, motorBlockId);
  return {
    ctx,
    deps: { store: ctx.store, db: ctx.db, logger: ctx.logger, metrics: ctx.metrics, keys: ctx.keys, clock: ctx.clock, allowPrivateAddresses: ctx.config.webhooks.allowPrivateAddresses },
    caller: { accountId: p.accountId, motorBlockId, actor: `token:${p.tokenId}` },
  };
}

/**
 * Outgoing webhooks of a Motor Block (SPEC "Webhooks", docs/WEBHOOKS.md): each endpoint gets the
 * block's message outcome events it subscribes to, signed with its secret.
 */
@Route('api/public/v1/motor-blocks')
@Tags('Webhooks')
@Response<ErrorResponse>(401, 'Token missing, invalid or expired; a dashboard JWT is not accepted')
@Response<ErrorResponse>(403, 'Scope missing or token bound to another block')
@Response<ErrorResponse>(429, 'rate_limited: API request limit of this token exceeded')
export class WebhooksController extends Controller {
  /** The block's webhooks, oldest first (never their secrets). */
  @Get('{id}/webhooks')
  @Security('publicBearer', ['webhooks.read'])
  public async list(@Request() req: ExpressRequest, @Path() id: string): Promise<WebhookListResponse> {
    const { ctx, caller } = callerOf(req, id);
    return { success: true, data: await listWebhooks(ctx.db, caller.motorBlockId) };
  }

  /** Creates an endpoint; the answer carries its signing secret, once. */
  @Post('{id}/webhooks')
  @Security('publicBearer', ['webhooks.manage'])
  @SuccessResponse(201, 'Created')
  @Response<ErrorResponse>(400, 'invalid_webhook_url, invalid_webhook_events, validation_error')
  @Response<ErrorResponse>(404, 'motor_block_not_found: the block is deleted')
  @Response<ErrorResponse>(409, 'webhook_limit; motor_block_delete_in_progress')
  @Response<ErrorResponse>(422, 'validation_error: no body, not a JSON object, or a field other than url, events, enabled')
  public async create(@Request() req: ExpressRequest, @Path() id: string, @Body() body: CreateWebhookBody): Promise<WebhookCreatedResponse> {
    const { deps, caller } = callerOf(req, id);
    const { webhook, secret } = await createWebhook(deps, caller, body);
    this.setStatus(201);
    return { success: true, data: { ...webhook, secret }, message: 'Keep the secret: it is not shown again. Verify X-Service-Signature (hex HMAC-SHA256 of the raw body) on every delivery' };
  }

  /** Changes url, events or enabled (what is left out keeps its value). */
  @Put('{id}/webhooks/{webhookId}')
  @Security('publicBearer', ['webhooks.manage'])
  @Response<ErrorResponse>(400, 'invalid_webhook_url, invalid_webhook_events, validation_error, invalid_id')
  @Response<ErrorResponse>(404, 'webhook_not_found; motor_block_not_found (the block is deleted)')
  @Response<ErrorResponse>(409, 'webhook_conflict; motor_block_delete_in_progress')
  @Response<ErrorResponse>(422, 'validation_error: no body, not a JSON object, or a field other than url, events, enabled')
  public async update(@Request() req: ExpressRequest, @Path() id: string, @Path() webhookId: string, @Body() body: UpdateWebhookBody): Promise<WebhookResponse> {
    const { deps, caller } = callerOf(req, id);
    return { success: true, data: await updateWebhook(deps, caller, webhookId, body) };
  }

  /** Deletes the endpoint: nothing more is queued for it; deliveries in flight stop at their next attempt. */
  @Delete('{id}/webhooks/{webhookId}')
  @Security('publicBearer', ['webhooks.manage'])
  @Response<ErrorResponse>(400, 'invalid_id')
  @Response<ErrorResponse>(404, 'webhook_not_found; motor_block_not_found (the block is deleted)')
  @Response<ErrorResponse>(409, 'motor_block_delete_in_progress')
  public async remove(@Request() req: ExpressRequest, @Path() id: string, @Path() webhookId: string): Promise<WebhookDeletedResponse> {
    const { deps, caller } = callerOf(req, id);
    return { success: true, data: await deleteWebhook(deps, caller, webhookId) };
  }

  /**
   * Replaces the signing secret; the answer carries the new one, once. The replaced secret still signs
   * X-Service-Signature-Previous for `previousSecretValidForSeconds` (default one day), so the receiver
   * can accept either while it switches.
   */
  @Post('{id}/webhooks/{webhookId}/rotate-secret')
  @Security('publicBearer', ['webhooks.manage'])
  @Response<ErrorResponse>(400, 'validation_error, invalid_id')
  @Response<ErrorResponse>(404, 'webhook_not_found; motor_block_not_found (the block is deleted)')
  @Response<ErrorResponse>(409, 'webhook_conflict; motor_block_delete_in_progress')
  @Response<ErrorResponse>(422, 'validation_error: not a JSON object, or a field other than previousSecretValidForSeconds')
  public async rotateSecret(@Request() req: ExpressRequest, @Path() id: string, @Path() webhookId: string, @Body() body?: RotateSecretBody): Promise<WebhookSecretRotatedResponse> {
    const { deps, caller } = callerOf(req, id);
    const { webhook, secret } = await rotateWebhookSecret(deps, caller, webhookId, body);
    return { success: true, data: { ...webhook, secret }, message: 'Keep the new secret: it is not shown again. The previous one signs X-Service-Signature-Previous until its window ends' };
  }

  /** Queues a synthetic `webhook.test` delivery (also to a disabled endpoint); read its outcome in the deliveries. */
  @Post('{id}/webhooks/{webhookId}/test')
  @Security('publicBearer', ['webhooks.manage'])
  @SuccessResponse(202, 'Queued')
  @Response<ErrorResponse>(400, 'invalid_id')
  @Response<ErrorResponse>(404, 'webhook_not_found; motor_block_not_found (the block is deleted)')
  @Response<ErrorResponse>(409, 'motor_block_delete_in_progress')
  public async test(@Request() req: ExpressRequest, @Path() id: string, @Path() webhookId: string): Promise<WebhookTestResponse> {
    const { deps, caller } = callerOf(req, id);
    const queued = await testWebhook(deps, caller, webhookId);
    this.setStatus(202);
    return { success: true, data: queued, message: 'Test delivery queued' };
  }

  /**
   * The endpoint's deliveries queued inside the plan's retention window, newest first, with the last attempt's answer.
   * @param limit 1 to 200, default 50
   * @isInt limit
   */
  @Get('{id}/webhooks/{webhookId}/deliveries')
  @Security('publicBearer', ['webhooks.read'])
  @Response<ErrorResponse>(400, 'validation_error, invalid_id')
  @Response<ErrorResponse>(404, 'webhook_not_found')
  public async deliveries(@Request() req: ExpressRequest, @Path() id: string, @Path() webhookId: string, @Query() limit?: number): Promise<WebhookDeliveriesResponse> {
    const { ctx, caller } = callerOf(req, id);
    const n = intParam('limit', limit, 1, 200, 50);
    const window = { retentionDays: await retentionDaysOfAccount(ctx, caller.accountId), now: ctx.clock.now() };
    return { success: true, data: { deliveries: await listDeliveries(ctx.db, caller.motorBlockId, webhookId, n, window), limit: n } };
  }

  /**
   * Delivered, failed, queued and retrying deliveries, failure rate and attempt latency over the last `hours`.
   * @param hours 1 to 168 and within the plan's retention, default 24
   * @isInt hours
   */
  @Get('{id}/webhooks/{webhookId}/stats')
  @Security('publicBearer', ['webhooks.read'])
  @Response<ErrorResponse>(400, 'validation_error, invalid_id; outside_retention_window: hours beyond the plan\'s retention window')
  @Response<ErrorResponse>(404, 'webhook_not_found')
  public async stats(@Request() req: ExpressRequest, @Path() id: string, @Path() webhookId: string, @Query() hours?: number): Promise<WebhookStatsResponse> {
    const { ctx, caller } = callerOf(req, id);
    const h = intParam('hours', hours, 1, 168, 24);
    const window = { retentionDays: await retentionDaysOfAccount(ctx, caller.accountId), now: ctx.clock.now() };
    return { success: true, data: await webhookStats(ctx.db, caller.motorBlockId, webhookId, h, window) };
  }
}
