import type { Request as ExpressRequest } from 'express';
import { Body, Controller, Delete, Get, Path, Post, Request, Response, Route, Security, Tags } from 'tsoa';
import type { ErrorResponse } from '../../commands/http/SendController';
import { authDepsOf } from '../../commands/auth/deps';
import { listFreeRecipients, removeFreeRecipient, requestFreeRecipient, type FreeRecipientList } from '../../commands/freeRecipients/freeRecipients';
import { ctxOf, principalOf } from '../http/context';
import type { PrincipalOf } from '../http/principal';

export interface FreeRecipientListResponse { success: true; data: FreeRecipientList }
export interface FreeRecipientRequestResponse { success: true; data: { recipient: { email: string; status: 'pending' | 'confirmed' } }; message: string }
export interface FreeRecipientRemovedResponse { success: true; data: { id: string; email: string; removed: true } }
/** Checked by the handler (missing: 400 validation_error; not an address: 400 invalid_email); read-api/http/checkedByHandler.ts. */
export interface FreeRecipientBody {
  /**
   * The address that may receive test mail once it confirms.
   * @format email
   * @maxLength 254
   */
  email: string;
}

function callerOf(req: ExpressRequest) {
  const ctx = ctxOf(req);
  const p = principalOf<PrincipalOf<'publicBearer'>>(req);
  return { ctx, caller: { accountId: p.accountId, actor: `token:${p.tokenId}` } };
}

/**
 * Free recipients (SPEC "Free recipients", docs/SANDBOX.md): the addresses a Free account may send
 * test mail to besides its own, each confirmed by its owner through an emailed link. The API never
 * confirms; only the page at /free-recipients/confirm does, with the emailed token.
 */
@Route('api/public/v1/account/free-recipients')
@Tags('Free recipients')
@Security('publicBearer', ['recipients.manage'])
@Response<ErrorResponse>(401, 'Token missing, invalid or expired')
@Response<ErrorResponse>(403, 'insufficient_scope (recipients.manage)')
export class FreeRecipientsController extends Controller {
  /** The asked addresses with their status, the limit, the usage (null when unreadable) and limitsNote. */
  @Get()
  public async list(@Request() req: ExpressRequest): Promise<FreeRecipientListResponse> {
    const { ctx, caller } = callerOf(req);
    return { success: true, data: await listFreeRecipients(authDepsOf(ctx), caller.accountId) };
  }

  /**
   * Asks `email` to confirm (a link is mailed). The answer is the same whether a mail was sent or
   * withheld (already confirmed, or asked again within the cooldown).
   */
  @Post()
  @Response<ErrorResponse>(400, 'invalid_email, own_address')
  @Response<ErrorResponse>(409, 'recipient_limit, free_recipients_conflict')
  @Response<ErrorResponse>(429, 'rate_limited')
  @Response<ErrorResponse>(502, 'email_send_failed')
  public async request(@Request() req: ExpressRequest, @Body() body: FreeRecipientBody): Promise<FreeRecipientRequestResponse> {
    const { ctx, caller } = callerOf(req);
    const recipient = await requestFreeRecipient({ ...authDepsOf(ctx), limiter: ctx.limiter }, caller, body ?? {}, ctx.clock.now());
    return { success: true, data: { recipient }, message: 'If the address can receive it, a confirmation link is on its way; sends are allowed once it is opened' };
  }

  /** Removes an address (pending or confirmed); Free-plan sends to it are refused again. */
  @Delete('{id}')
  @Response<ErrorResponse>(400, 'invalid_id')
  @Response<ErrorResponse>(404, 'not_found')
  @Response<ErrorResponse>(409, 'free_recipients_conflict')
  public async remove(@Request() req: ExpressRequest, @Path() id: string): Promise<FreeRecipientRemovedResponse> {
    const { ctx, caller } = callerOf(req);
    return { success: true, data: await removeFreeRecipient(authDepsOf(ctx), caller, id, ctx.clock.now()) };
  }
}
