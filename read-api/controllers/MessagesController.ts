import type { Request as ExpressRequest } from 'express';
import { Controller, Get, Path, Query, Request, Response, Route, Security, Tags } from 'tsoa';
import { fail } from '../../domain/errors';
import type { ErrorResponse } from '../../commands/http/SendController';
import { stripAngleBrackets, type MessageRecord } from '../../projections/messages';
import { piiAllowed, requireBlock } from '../http/authorize';
import { ctxOf, principalOf, type HttpContext } from '../http/context';
import { retentionDaysOfAccount } from '../http/plan';
import { requireInsideRetention } from '../http/retention';
import { readMessage, readMessageBySmtpId, readRecipients, readTimeline } from '../messages/messageReads';
import { messageDto, recipientsDto, timelineDto, type MessageDto, type RecipientsDto, type TimelineEventDto } from '../messages/present';

export interface MessageResponse { success: true; data: MessageDto; pii_masked: boolean }
export interface RecipientsResponse { success: true; data: RecipientsDto }
export interface TimelineResponse { success: true; data: { messageId: string; events: TimelineEventDto[]; pii_masked: boolean } }

const notFound = () => fail('message_not_found', 404, 'Message not found');

/** 400 outside_retention_window for a message older than the plan's window (docs/ERRORS.md), whether or not the read model still holds it. */
async function requireRetained(ctx: HttpContext, accountId: string, m: MessageRecord): Promise<void> {
  requireInsideRetention(m.queuedAt, await retentionDaysOfAccount(ctx, accountId), ctx.clock.now());
}

/** The message `id` if it exists (404), belongs to the token's block (403) and is inside retention (400), and whether PII may be shown. */
async function ownedMessage(req: ExpressRequest, id: string, includePII: boolean | undefined): Promise<{ m: MessageRecord; unmasked: boolean }> {
  const ctx = ctxOf(req);
  const p = principalOf(req);
  const unmasked = piiAllowed(p, includePII);
  const m = await readMessage(ctx.db, ctx.store, id);
  if (!m) throw notFound();
  requireBlock(p, m.motorBlockId ?? '');
  await requireRetained(ctx, p.accountId, m);
  return { m, unmasked };
}

@Route('api/public/v1/messages')
@Tags('Messages')
@Security('publicBearer', ['logs.read'])
@Response<ErrorResponse>(401, 'Token missing, invalid or expired')
@Response<ErrorResponse>(400, 'invalid_query: a query parameter is malformed; outside_retention_window: the message is older than the plan\'s retention window')
@Response<ErrorResponse>(403, 'Scope missing, token bound to another block, or includePII without logs.pii')
@Response<ErrorResponse>(429, 'rate_limited: API request limit of this token exceeded')
export class MessagesController extends Controller {
  /** Looks a message up by its RFC Message-ID (with or without angle brackets). Not a collection. */
  @Get()
  @Response<ErrorResponse>(404, 'Message not found')
  public async bySmtpMessageId(@Request() req: ExpressRequest, @Query() smtpMessageId: string, @Query() includePII?: boolean): Promise<MessageResponse> {
    const ctx = ctxOf(req);
    const p = principalOf(req);
    const unmasked = piiAllowed(p, includePII);
    if (p.kind !== 'publicBearer') throw fail('invalid_token', 401, 'Bearer token missing or invalid');
    if (stripAngleBrackets(smtpMessageId) === '' || smtpMessageId.length > 998) throw fail('invalid_query', 400, 'smtpMessageId is required');
    const m = await readMessageBySmtpId(ctx.db, ctx.store, p.motorBlockId, smtpMessageId);
    if (!m) throw notFound();
    await requireRetained(ctx, p.accountId, m);
    return { success: true, data: messageDto(m, unmasked), pii_masked: !unmasked };
  }

  /** One message by its send id; a multi-recipient send collapses to one row. */
  @Get('{id}')
  @Response<ErrorResponse>(404, 'Message not found')
  public async get(@Request() req: ExpressRequest, @Path() id: string, @Query() includePII?: boolean): Promise<MessageResponse> {
    const { m, unmasked } = await ownedMessage(req, id, includePII);
    return { success: true, data: messageDto(m, unmasked), pii_masked: !unmasked };
  }

  /**
   * Lifecycle events of the message, from queued to its final result, oldest first: one row per step of
   * the message's outcome; a multi-recipient send collapses to one timeline (see /recipients for each recipient).
   */
  @Get('{id}/events')
  @Response<ErrorResponse>(404, 'Message not found')
  public async events(@Request() req: ExpressRequest, @Path() id: string, @Query() includePII?: boolean): Promise<TimelineResponse> {
    const ctx = ctxOf(req);
    const { unmasked } = await ownedMessage(req, id, includePII);
    const events = await readTimeline(ctx.db, ctx.store, id);
    return { success: true, data: { messageId: id, events: timelineDto(events, unmasked), pii_masked: !unmasked } };
  }

  /** Per-recipient outcomes: the only view that shows each recipient of a multi-recipient send. */
  @Get('{id}/recipients')
  @Response<ErrorResponse>(404, 'Message not found')
  public async recipients(@Request() req: ExpressRequest, @Path() id: string, @Query() includePII?: boolean): Promise<RecipientsResponse> {
    const ctx = ctxOf(req);
    const { unmasked } = await ownedMessage(req, id, includePII);
    const r = await readRecipients(ctx.db, ctx.store, id);
    if (!r) throw notFound();
    return { success: true, data: recipientsDto(r, unmasked, `/api/public/v1/messages/${id}/recipients?includePII=true`) };
  }
}
