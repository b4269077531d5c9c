import type { Request as ExpressRequest } from 'express';
import { Controller, Get, Header, Path, Produces, Query, Request, Response, Route, Security, SuccessResponse, Tags } from 'tsoa';
import type { ErrorResponse } from '../../commands/http/SendController';
import { piiAllowed, requireBlock } from '../http/authorize';
import { ctxOf, principalOf } from '../http/context';
import { retentionDaysOfAccount } from '../http/plan';
import type { PrincipalOf } from '../http/principal';
import { resumeCursor } from '../stream/eventStreams';

@Route('api/public/v1/motor-blocks')
@Tags('Event stream')
@Response<ErrorResponse>(401, 'Token missing, invalid or expired')
@Response<ErrorResponse>(403, 'Scope missing or token bound to another block; includePII without logs.pii')
export class EventStreamController extends Controller {
  /**
   * The block's message events live, as Server-Sent Events: `ready` once, then a `message` per
   * recipient outcome (queued, processed, deferred, delivered, bounced, failed, complained) with
   * an id of its own (its log position; with the recipient's index for a message's `queued` events
   * when it has several), and `keepalive` every 15 s. The stream ends when the token expires.
   * Recipients are masked unless `includePII=true` with the logs.pii scope. With `Last-Event-ID`
   * (or `lastEventId`, for an EventSource opened anew with a fresh token) the stream first replays
   * what came after that event, then goes on live without a gap or a repeat. Nothing older than the
   * plan's retention window goes out: a resume from before it says `gap` and goes on from the
   * window's first event. docs/EVENTS.md.
   * @param lastEventId the id of the last event seen, when the Last-Event-ID header cannot be sent (or is sent empty)
   * @param token the bearer token, for clients that cannot send headers (EventSource); this route only
   * @param access_token the same, by its OAuth name
   */
  @Get('{id}/events/stream')
  @Security('publicBearer', ['logs.read'])
  @Produces('text/event-stream')
  @SuccessResponse(200, 'text/event-stream')
  @Response<ErrorResponse>(400, 'invalid_last_event_id')
  @Response<ErrorResponse>(429, 'stream_limit: 3 streams of this token are open; rate_limited')
  // token / access_token are read by the authentication module (read-api/http/authentication.ts); declared here for the OpenAPI document.
  public async stream(@Request() req: ExpressRequest, @Path() id: string, @Query() includePII?: boolean, @Query() token?: string, @Query() access_token?: string,
    @Header('Last-Event-ID') lastEventIdHeader?: string, @Query() lastEventId?: string): Promise<void> {
    const ctx = ctxOf(req);
    const p = principalOf<PrincipalOf<'publicBearer'>>(req);
    requireBlock(p, id);
    const unmasked = piiAllowed(p, includePII);
    // An empty header counts as absent: an EventSource sends it only when it has an id, but a proxy may pass an empty one on.
    const resumeAfter = lastEventIdHeader?.trim() || lastEventId?.trim() || undefined;
    if (resumeAfter !== undefined) resumeCursor(resumeAfter, ctx.store);
    // The window the logs route lists (SPEC "Data retention"): nothing older goes out, live or replayed.
    const retention = { days: await retentionDaysOfAccount(ctx, p.accountId), now: () => ctx.clock.now() };
    await ctx.streams.serve(req.res!, { motorBlockId: id, tokenId: p.tokenId, endsAt: p.expiresAt, unmasked, resumeAfter, retention });
  }
}
