import type { Request as ExpressRequest, Response as ExpressResponse } from 'express';
import { Controller, Get, Path, Produces, Request, Response, Route, SuccessResponse, Tags } from 'tsoa';
import { ctxOf } from '../../read-api/http/context';
import { TRANSPARENT_GIF, isPrefetch, trackingSecret, verifyTrackingToken, type TrackingKind, type TrackingTarget } from '../../domain/comms/tracking';
import { recordTrackingHit } from '../comms/tracking';
import { protectPage } from '../oauth/http';

const NOT_FOUND_PAGE = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1"><meta name="robots" content="noindex"><title>Link not found</title></head>
<body data-outcome="invalid">
<h1>Link not found</h1><p>This link is not valid: it may have been copied incompletely. Open it again from the original email.</p>
</body></html>
`;

/** The derived key of the last TOKEN_SECRET seen (one per process in practice): not re-derived per request. */
let keyCache: { tokenSecret: string; key: Buffer } | null = null;
function keyOf(tokenSecret: string): Buffer {
  if (keyCache?.tokenSecret !== tokenSecret) keyCache = { tokenSecret, key: trackingSecret(tokenSecret) };
  return keyCache.key;
}

/** Verifies the token; records the hit unless the request is a HEAD or a prefetch (never throws). */
async function hit(req: ExpressRequest, token: string, kind: TrackingKind): Promise<TrackingTarget | null> {
  const ctx = ctxOf(req);
  const target = verifyTrackingToken(keyOf(ctx.config.tokenSecret), token, kind);
  if (target === null) {
    ctx.metrics.trackingHits.inc({ type: kind, outcome: 'invalid_token' });
    return null;
  }
  if (req.method !== 'GET' || isPrefetch(req.headers)) {
    ctx.metrics.trackingHits.inc({ type: kind, outcome: 'skipped' });
    return target;
  }
  await recordTrackingHit(ctx, target, { userAgent: req.headers['user-agent'], ip: req.ip });
  return target;
}

/**
 * The open pixel and the click redirect of campaign mail (docs/COMMUNICATIONS.md "Tracking"),
 * reached from the links Motor wrote into the mail, with no credential: the signed token in the
 * path is the authority. The reader always gets the gif or the redirect, even when the event
 * store is down (the hit is then logged and counted, not recorded).
 */
@Route('comm-api/t')
@Tags('Communications tracking')
export class CommTrackingHitsController extends Controller {
  /**
   * The open pixel: always 200 with a 43-byte transparent GIF, `Cache-Control: no-store, private`.
   * Records `EmailOpened` when the token verifies (GET only; not HEAD, not a prefetch).
   * @param token the token Motor wrote into the mail
   */
  @Get('o/{token}.gif')
  @Produces('image/gif')
  @SuccessResponse(200, 'image/gif (1×1, transparent)')
  public async open(@Request() req: ExpressRequest, @Path() token: string): Promise<void> {
    await hit(req, token, 'open');
    const res = req.res as ExpressResponse;
    res.writeHead(200, {
      'Content-Type': 'image/gif', 'Content-Length': String(TRANSPARENT_GIF.length), 'Cache-Control': 'no-store, private',
      Pragma: 'no-cache', Expires: '0', 'X-Content-Type-Options': 'nosniff', 'Referrer-Policy': 'no-referrer',
    });
    res.end(req.method === 'HEAD' ? undefined : TRANSPARENT_GIF);
  }

  /**
   * The click redirect: 302 to the URL the token signed (never any other), recording
   * `LinkClicked` (GET only; not HEAD, not a prefetch). A token that does not verify: 404 with a
   * small HTML page, never a redirect.
   * @param token the token Motor wrote into the mail
   */
  @Get('c/{token}')
  @Produces('text/html')
  @SuccessResponse(302, 'Redirect to the signed destination')
  @Response(404, 'The token does not verify (text/html page)')
  public async click(@Request() req: ExpressRequest, @Path() token: string): Promise<void> {
    const target = await hit(req, token, 'click');
    const res = req.res as ExpressResponse;
    if (target === null || target.kind !== 'click') {
      protectPage(res);
      res.status(404).type('html').send(NOT_FOUND_PAGE);
      return;
    }
    res.setHeader('Cache-Control', 'no-store, private');
    res.setHeader('Referrer-Policy', 'no-referrer');
    // The URL is already WHATWG-serialised ASCII (verifyTrackingToken checks it): sent as is.
    res.status(302).setHeader('Location', target.url);
    res.end();
  }
}
