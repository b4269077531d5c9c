import type { Request, Response } from 'express';
import { dashboardTokenSettings, verifyDashboardToken } from '../auth/dashboardTokens';
import { assertSessionActive } from '../auth/onboarding';
import { fail, isDomainError } from '../../domain/errors';
import type { HttpContext } from '../../read-api/http/context';
import type { ConsentPage, DashboardUser, OAuthDeps } from './authorization';
import type { AgentConsentPage } from './agentAuthorization';
import { ClientMetadataFetcher } from './clientMetadata';

const fetchers = new WeakMap<object, ClientMetadataFetcher>();

/** The flow's dependencies; one client-metadata cache per HTTP context (per process). */
export function oauthDeps(ctx: HttpContext): OAuthDeps {
  let clients = fetchers.get(ctx);
  if (!clients) {
    clients = new ClientMetadataFetcher(ctx.config.agentClients);
    fetchers.set(ctx, clients);
  }
  return { store: ctx.store, db: ctx.db, config: ctx.config, agents: { clients, keys: ctx.keys } };
}

/**
 * HTTP helpers of the OAuth endpoints (docs/OAUTH.md): the browser's dashboard credential, the
 * consent page, form bodies, RFC 6749 error bodies.
 */

export const SESSION_COOKIE = 'motor_dashboard';

function cookie(req: Request, name: string): string | null {
  const header = req.headers.cookie;
  if (typeof header !== 'string') return null;
  for (const part of header.split(';')) {
    const i = part.indexOf('=');
    if (i > 0 && part.slice(0, i).trim() === name) return decodeURIComponent(part.slice(i + 1).trim());
  }
  return null;
}

/** The dashboard JWT as `Authorization: Bearer`, else the `motor_dashboard` cookie (set by POST /api/oauth2/session). */
export async function dashboardUserOf(ctx: HttpContext, req: Request): Promise<DashboardUser> {
  const auth = req.headers.authorization;
  const bearer = typeof auth === 'string' ? /^Bearer\s+([A-Za-z0-9_\-.]+)\s*$/i.exec(auth)?.[1] ?? null : null;
  const token = bearer ?? cookie(req, SESSION_COOKIE);
  if (!token) throw fail('invalid_token', 401, 'Sign in to the dashboard first', { nextAction: 'Send the dashboard JWT as Authorization: Bearer, or as the motor_dashboard cookie (POST /api/oauth2/session)' });
  const claims = verifyDashboardToken(dashboardTokenSettings(ctx.config), token, ctx.clock.now());
  await assertSessionActive(ctx.store, claims.sessionId);
  return { userId: claims.userId, accountId: claims.accountId, sessionId: claims.sessionId };
}

/** OAuth errors as RFC 6749 §5.2 bodies; other DomainErrors and failures go to the error middleware. */
export function sendOAuthError(res: Response, err: unknown): boolean {
  if (!isDomainError(err) || !err.details?.oauth) return false;
  res.status(err.status).setHeader('Cache-Control', 'no-store');
  res.json({ error: err.code, error_description: err.message });
  return true;
}

/** A form body (application/x-www-form-urlencoded), read here because the app parses only JSON; at most 16 KiB. */
export async function formBody(req: Request): Promise<Record<string, string>> {
  if (req.body && typeof req.body === 'object' && Object.keys(req.body).length > 0) {
    return Object.fromEntries(Object.entries(req.body as Record<string, unknown>).filter(([, v]) => typeof v === 'string')) as Record<string, string>;
  }
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > 16 * 1024) {
      // The rest of the body stays unread: the connection cannot carry another request, so the
      // answer closes it (otherwise the client's next request on it would wait forever).
      req.res?.setHeader('Connection', 'close');
      throw fail('payload_too_large', 413, 'Form body over 16 KiB');
    }
    chunks.push(chunk);
  }
  const out: Record<string, string> = {};
  for (const [k, v] of new URLSearchParams(Buffer.concat(chunks).toString('utf8'))) if (!(k in out)) out[k] = v;
  return out;
}

const esc = (s: string): string => s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);

export function consentHtml(p: ConsentPage): string {
  const blockField = p.block
    ? `<p>Motor Block: <strong>${esc(p.block.name)}</strong></p><input type="hidden" name="motor_block_id" value="${esc(p.block.id)}">`
    : `<label>Motor Block <select name="motor_block_id" required>${p.blocks.map((b) => `<option value="${esc(b.id)}">${esc(b.name)}${b.authMethod === 'oauth2' ? '' : ` (auth: ${esc(b.authMethod)})`}</option>`).join('')}</select></label>`;
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1"><title>Authorize ${esc(p.clientName)}</title></head>
<body>
<h1>Authorize ${esc(p.clientName)}</h1>
<p><strong>${esc(p.clientName)}</strong> asks to send mail over SMTP as one of your Motor Blocks (scope <code>${esc(p.scope)}</code>).</p>
<p>You will be returned to <code>${esc(p.redirectUri)}</code>.</p>
<form method="post" action="/api/oauth2/consent">
<input type="hidden" name="form_token" value="${esc(p.formToken)}">
${blockField}
<button type="submit" name="decision" value="approve">Approve</button>
<button type="submit" name="decision" value="deny">Deny</button>
</form>
</body></html>
`;
}

/** What each agent scope lets the agent do, as the consent page says it. */
const AGENT_SCOPE_TEXT: Record<string, string> = {
  'send:transactional': 'send transactional email from your Motor Blocks',
  'read:analytics': 'read delivery logs (recipient addresses masked), messages and metrics',
  'read:domains': 'read your sending domains and their DNS status',
  'manage:domains': 'add, verify and check your sending domains',
  'manage:sandbox': 'provision and manage your developer sandbox',
  'read:webhooks': 'read your webhooks and their deliveries',
  'manage:webhooks': 'create, change, delete and test your webhooks',
  'manage:recipients': 'manage your free-account test recipients',
  'manage:motor-blocks': 'create, rename, deactivate, reactivate and delete your Motor Blocks',
};

export function agentConsentHtml(p: AgentConsentPage): string {
  const host = new URL(p.clientId).host;
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1"><title>Connect ${esc(p.clientName)}</title></head>
<body>
<h1>Connect ${esc(p.clientName)}</h1>
<p><strong>${esc(p.clientName)}</strong> (client <code>${esc(p.clientId)}</code>, served by <strong>${esc(host)}</strong>) asks for access to your account through the agent-tool server <code>${esc(p.resource)}</code>. It will be able to:</p>
<ul>${p.scopes.map((sc) => `<li><code>${esc(sc)}</code>: ${esc(AGENT_SCOPE_TEXT[sc] ?? sc)}</li>`).join('')}</ul>
<p>It never sees unmasked recipient addresses. You can revoke this connection at any time; that does not sign you out.</p>
<p>You will be returned to <code>${esc(p.redirectUri)}</code>.</p>
<form method="post" action="/api/oauth2/consent">
<input type="hidden" name="form_token" value="${esc(p.formToken)}">
<button type="submit" name="decision" value="approve">Approve</button>
<button type="submit" name="decision" value="deny">Deny</button>
</form>
</body></html>
`;
}

/** Pages and redirects of this flow must never be cached, framed or leak their URL in a Referer. */
export function protectPage(res: Response): void {
  res.setHeader('Cache-Control', 'no-store');
  res.setHeader('Pragma', 'no-cache');
  res.setHeader('X-Frame-Options', 'DENY');
  res.setHeader('Content-Security-Policy', "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'");
  res.setHeader('Referrer-Policy', 'no-referrer');
}
