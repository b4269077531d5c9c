import type { Request as ExpressRequest } from 'express';
import { Controller, Get, Path, Post, Request, Response, Route, SuccessResponse, Tags } from 'tsoa';
import { ctxOf } from '../../read-api/http/context';
import { applyClientIpLimit } from '../../read-api/http/authentication';
import { unsubscribeSecret, verifyUnsubscribeToken } from '../../domain/comms/unsubscribe';
import { inspectUnsubscribe, unsubscribeContact, type UnsubscribePage } from '../comms/contacts';
import { formBody, protectPage } from '../oauth/http';

const esc = (s: string): string => s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);

function page(p: UnsubscribePage): string {
  const body = ((): string => {
    switch (p.kind) {
      case 'confirm':
        // action="": the form posts back to this very URL, token included.
        return `<h1>Unsubscribe?</h1><p>Stop mail to <strong>${esc(p.email)}</strong> from this sender's lists.</p>
<form method="post" action=""><button type="submit">Unsubscribe</button></form>`;
      case 'unsubscribed':
        return `<h1>You are unsubscribed</h1><p><strong>${esc(p.email)}</strong> will receive no more campaign mail from this sender. You can close this page.</p>`;
      case 'invalid':
        return '<h1>Invalid link</h1><p>This unsubscribe link is not valid. Check that it was copied whole.</p>';
    }
  })();
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1"><meta name="robots" content="noindex"><title>Unsubscribe</title></head>
<body data-outcome="${p.kind}">
${body}
</body></html>
`;
}

/**
 * The unsubscribe link of campaign mail (docs/COMMUNICATIONS.md "Unsubscribe"):
 * `{auth_url}/comm-api/u/{token}`, no credential (the signed token is one). The GET shows a page
 * and changes nothing (mail scanners prefetch links); its button POSTs to the same URL. A mail
 * client's RFC 8058 one-click POST (`List-Unsubscribe=One-Click`) gets a short text answer.
 * Either POST unsubscribes, once. A forged or malformed token: 404 page.
 */
@Route('comm-api/u')
@Tags('Communications unsubscribe')
export class CommUnsubscribeController extends Controller {
  @Get('{token}')
  @SuccessResponse(200, 'Confirmation page (text/html)')
  @Response(404, 'Invalid link page (text/html)')
  public async unsubscribePage(@Request() req: ExpressRequest, @Path() token: string): Promise<void> {
    await applyClientIpLimit(req);
    const ctx = ctxOf(req);
    const t = verifyUnsubscribeToken(unsubscribeSecret(ctx.config.tokenSecret), token);
    const p: UnsubscribePage = t === null ? { kind: 'invalid' } : await inspectUnsubscribe(ctx.store, t);
    protectPage(req.res!);
    req.res!.status(p.kind === 'invalid' ? 404 : 200).type('html').send(page(p));
  }

  /** The page's button (any form body) or RFC 8058 one-click (`List-Unsubscribe=One-Click`, application/x-www-form-urlencoded). */
  @Post('{token}')
  @SuccessResponse(200, 'Unsubscribed (text/html; text/plain for one-click)')
  @Response(404, 'Invalid link (text/html; text/plain for one-click)')
  public async unsubscribe(@Request() req: ExpressRequest, @Path() token: string): Promise<void> {
    const ctx = ctxOf(req);
    const res = req.res!;
    const form = await formBody(req);
    const oneClick = form['List-Unsubscribe'] === 'One-Click';
    const t = verifyUnsubscribeToken(unsubscribeSecret(ctx.config.tokenSecret), token);
    const p: UnsubscribePage = t === null ? { kind: 'invalid' } : await unsubscribeContact({ store: ctx.store, db: ctx.db, clock: ctx.clock, logger: ctx.logger, metrics: ctx.metrics }, t, oneClick ? 'one_click' : 'page');
    protectPage(res);
    res.status(p.kind === 'invalid' ? 404 : 200);
    if (oneClick) res.type('text/plain').send(p.kind === 'invalid' ? 'Invalid unsubscribe link\n' : 'Unsubscribed\n');
    else res.type('html').send(page(p));
  }
}
