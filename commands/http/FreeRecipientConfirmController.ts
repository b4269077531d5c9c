import type { Request as ExpressRequest } from 'express';
import { Controller, Get, Post, Request, Route, SuccessResponse, Tags } from 'tsoa';
import { ctxOf } from '../../read-api/http/context';
import { applyClientIpLimit } from '../../read-api/http/authentication';
import { confirmFreeRecipient, inspectConfirmation, CONFIRM_PATH, type ConfirmPage } from '../freeRecipients/freeRecipients';
import { formBody, protectPage } from '../oauth/http';

const esc = (s: string): string => s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);

const STATUS: Record<ConfirmPage['kind'], number> = { confirm: 200, confirmed: 200, already_used: 409, expired: 410, invalid: 404 };

function page(p: ConfirmPage, token: string): string {
  const body = ((): string => {
    switch (p.kind) {
      case 'confirm':
        return `<h1>Receive test mail?</h1><p>A Motor account asked to send test mail to <strong>${esc(p.email)}</strong>.</p>
<form method="post" action="${CONFIRM_PATH}"><input type="hidden" name="token" value="${esc(token)}"><button type="submit">Yes, allow test mail</button></form>
<p>If you did not expect this, close this page: nothing will be sent to you.</p>`;
      case 'confirmed':
        return `<h1>Confirmed</h1><p><strong>${esc(p.email)}</strong> may now receive test mail from that account. You can close this page.</p>`;
      case 'already_used':
        return `<h1>Already confirmed</h1><p>This link was already used: <strong>${esc(p.email)}</strong> is confirmed.</p>`;
      case 'expired':
        return '<h1>Link expired</h1><p>This confirmation link has expired. Ask the sender for a new one.</p>';
      case 'invalid':
        return '<h1>Invalid link</h1><p>This confirmation link is not valid (it may have been replaced by a newer one, or the address was removed).</p>';
    }
  })();
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1"><meta name="robots" content="noindex"><title>Motor: confirm test mail</title></head>
<body data-outcome="${p.kind}">
${body}
</body></html>
`;
}

/**
 * The free-recipient confirmation page (docs/SANDBOX.md), reached only through the emailed link
 * `GET /free-recipients/confirm?token=fr_...`. The GET changes nothing (mail scanners prefetch
 * links); its button POSTs the token back, which confirms once. Answers are HTML; the outcome is
 * also in `<body data-outcome>` and the status (200, 404 invalid, 409 already used, 410 expired).
 */
@Route('free-recipients')
@Tags('Free recipients')
export class FreeRecipientConfirmController extends Controller {
  @Get('confirm')
  @SuccessResponse(200, 'Confirmation page (text/html)')
  public async show(@Request() req: ExpressRequest): Promise<void> {
    await applyClientIpLimit(req);
    const ctx = ctxOf(req);
    const res = req.res!;
    const token = typeof req.query.token === 'string' ? req.query.token : '';
    const p = await inspectConfirmation(ctx.store, token, ctx.clock.now());
    protectPage(res);
    res.status(STATUS[p.kind]).type('html').send(page(p, token));
  }

  /** The page's form (application/x-www-form-urlencoded `token`). */
  @Post('confirm')
  @SuccessResponse(200, 'Confirmed page (text/html)')
  public async confirm(@Request() req: ExpressRequest): Promise<void> {
    await applyClientIpLimit(req);
    const ctx = ctxOf(req);
    const res = req.res!;
    const form = await formBody(req);
    const token = form.token ?? '';
    const p = await confirmFreeRecipient(ctx, token, ctx.clock.now());
    protectPage(res);
    res.status(STATUS[p.kind]).type('html').send(page(p, token));
  }
}
