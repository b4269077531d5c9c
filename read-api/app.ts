import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import express, { type Express, type RequestHandler } from 'express';
import swaggerUi from 'swagger-ui-express';
import './http/express-augment';
import type { HttpContext } from './http/context';
import { errorMiddleware, notFoundMiddleware, refuseUnstorableInput, requireUtf8 } from './http/errors';
import { ByteBudget } from '../infra/byteBudget';
import { bodyBudget, JSON_TYPES, refuseUnreadBody, requireHostHeader } from './http/requestChecks';
import { lowerCaseUuidParam, UUID_PATH_PARAMS } from './http/params';
import { RegisterRoutes } from './generated/routes';
import { mcpRouter } from './mcp/router';

/** Largest JSON body accepted (a send's text + html + headers are capped at 10 MiB inside it). */
export const MAX_JSON_BODY = '12mb';
/** MAX_JSON_BODY in bytes (body-parser reads 'mb' as MiB). */
export const MAX_JSON_BODY_BYTES = 12 * 1024 * 1024;
/** Largest body of the account, onboarding and email-validation routes (a full validation batch fits). */
export const MAX_ACCOUNT_JSON_BODY = '64kb';

function loadOpenApi(): unknown {
  return JSON.parse(readFileSync(join(__dirname, 'generated', 'openapi.json'), 'utf8'));
}

/** The HTTP surface: tsoa routes (send, tokens, public API), OpenAPI, docs, metrics, health. */
export function createApp(ctx: HttpContext): Express {
  const app = express();
  app.disable('x-powered-by');
  // No ETags (decision, docs/ARCHITECTURE.md "HTTP answers"): Express would hash every JSON answer,
  // POST /v1/send's included, for a validator no Motor answer is conditional on.
  app.set('etag', false);
  app.set('trust proxy', 'loopback');
  app.locals.ctx = ctx;
  const openapi = loadOpenApi();

  // Every request's checks and body parsing, run in order as one router layer (`inSequence`):
  // Express's router costs each layer it enters a match, closures and a trip through `next`,
  // paid on every request, POST /v1/send's included (docs/PERFORMANCE.md, 2026-11-28).
  const direct = directRoute('post', '/v1/send');
  app.use(inSequence([
    requestLog(ctx),
    requireHostHeader,
    // Before the parsers: a body they would not parse is refused, never read as no body.
    refuseUnreadBody,
    // Before the parsers read a byte: the process's room for bodies being read (HTTP_MAX_BUFFERED_BYTES).
    bodyBudget(
      new ByteBudget(ctx.config.http.maxBufferedBytes, (held) => ctx.metrics.httpBufferedBytes.set(held)), MAX_JSON_BODY_BYTES,
      () => ctx.metrics.httpBodyRefusals.inc(),
    ),
    // Account routes take small bodies: refused from Content-Length before any parsing (docs/AUTH.md).
    mountedAt(ACCOUNT_BODY_PATHS, express.json({ limit: MAX_ACCOUNT_JSON_BODY, strict: true, type: JSON_TYPES, verify: requireUtf8 })),
    express.json({ limit: MAX_JSON_BODY, strict: true, type: JSON_TYPES, verify: requireUtf8 }),
    // OAuth clients (agents' SDKs among them) post token requests as forms (RFC 6749 §4.1.3); JSON is accepted too (SPEC).
    // More than 20 fields is refused (400 invalid_request): no request of these endpoints has half as many.
    mountedAt(OAUTH_FORM_PATHS, express.urlencoded({ extended: false, limit: '16kb', parameterLimit: 20 })),
    refuseUnstorableInput,
    // Last: POST /v1/send goes straight to its route (filled in below, once tsoa has registered it).
    direct.handler,
  ]));

  app.get('/healthz', (_req, res) => { res.json({ ok: true }); });
  app.get('/readyz', async (_req, res) => {
    const report = await ctx.health();
    res.status(report.ok ? 200 : 503).json(report);
  });
  app.get('/metrics', async (_req, res) => {
    res.setHeader('Content-Type', ctx.metrics.registry.contentType);
    res.send(await ctx.metrics.exposition());
  });
  app.get('/api/public/openapi.json', (_req, res) => { res.json(openapi); });
  app.use('/api/public/docs', swaggerUi.serve, swaggerUi.setup(undefined, { swaggerOptions: { url: '/api/public/openapi.json' }, customSiteTitle: 'Motor API reference' }));

  // Ids in paths are uuids compared as stored (lower case): read-api/http/params.ts, docs/ARCHITECTURE.md "Ids in paths".
  app.param([...UUID_PATH_PARAMS], lowerCaseUuidParam);
  RegisterRoutes(app);
  direct.resolve(app);
  // After the tsoa routes: the hot routes (POST /v1/send) never walk the MCP router's layers.
  app.use(mcpRouter(ctx));

  app.use(notFoundMiddleware);
  app.use(errorMiddleware);
  return app;
}

const ACCOUNT_BODY_PATHS = ['/api/auth', '/api/account', '/api/motor-blocks', '/api/email'];
const OAUTH_FORM_PATHS = ['/api/oauth2/token', '/api/oauth2/revoke'];

/** Request id, and on finish the duration metric and the log line. */
function requestLog(ctx: HttpContext): RequestHandler {
  return (req, res, next) => {
    const incoming = req.headers['x-request-id'];
    req.id = typeof incoming === 'string' && /^[\w.:-]{1,128}$/.test(incoming) ? incoming : randomUUID();
    res.setHeader('X-Request-Id', req.id);
    const started = process.hrtime.bigint();
    res.on('finish', () => {
      const seconds = Number(process.hrtime.bigint() - started) / 1e9;
      const route = (req.route?.path as string | undefined) ?? 'unmatched';
      ctx.metrics.httpDuration.observe({ method: req.method, route, status: String(res.statusCode) }, seconds);
      if (res.statusCode >= 500) ctx.logger.error({ reqId: req.id, method: req.method, path: req.path, status: res.statusCode, ms: seconds * 1000 }, 'request failed');
      else if (ctx.logger.isLevelEnabled('debug')) ctx.logger.debug({ reqId: req.id, method: req.method, path: req.path, status: res.statusCode, ms: seconds * 1000 }, 'request');
    });
    next();
  };
}

/**
 * The handlers run one after the other, as consecutive `app.use` layers would: a handler that
 * calls `next(err)` or throws hands the error to the router (its error middleware), one that
 * answers and does not call `next` ends the request.
 */
export function inSequence(handlers: RequestHandler[]): RequestHandler {
  return (req, res, next) => {
    let i = 0;
    const step = (err?: unknown): void => {
      if (err !== undefined && err !== null) {
        next(err);
        return;
      }
      const handler = handlers[i++];
      if (handler === undefined) {
        next();
        return;
      }
      try {
        const ret: unknown = handler(req, res, step);
        // A handler returning a promise (Express 5 style) is awaited for its rejection, as the router does.
        if (ret instanceof Promise) ret.catch((e: unknown) => step(e ?? new Error('Rejected promise')));
      } catch (e) {
        next(e);
      }
    };
    step();
  };
}

interface DispatchableRoute { path: string; methods: Record<string, boolean | undefined>; dispatch: (req: unknown, res: unknown, done: (err?: unknown) => void) => void }

/**
 * The hot route's request handed straight to its route: a request whose method and URL are exactly
 * `method` and `path` (no query, no trailing slash, as written) skips the router's walk over the
 * layers before it (the router's per-request closures, match objects and one `next` trip per layer;
 * docs/PERFORMANCE.md, 2026-11-28). Every other request, spelled differently or not, takes the
 * router as before, to the same route. The route's handlers are tsoa's, unchanged: authentication,
 * validation, the controller; an error they pass on goes to the error middleware as from the
 * router. They always answer or fail: one that passed the request on without answering would be a
 * bug, reported as a 500 rather than dispatched a second time.
 */
export function directRoute(method: string, path: string): { handler: RequestHandler; resolve: (app: Express) => void } {
  const upper = method.toUpperCase();
  let route: DispatchableRoute | undefined;
  return {
    handler: (req, res, next) => {
      if (route === undefined || req.method !== upper || req.url !== path) {
        next();
        return;
      }
      req.params = {};
      route.dispatch(req, res, (err?: unknown) => {
        next(err ?? new Error(`${upper} ${path} passed the request on without answering`));
      });
    },
    resolve: (app) => {
      const layers = (app.router as unknown as { stack: { route?: DispatchableRoute }[] }).stack;
      route = layers.find((l) => l.route?.path === path && l.route.methods[method] === true)?.route;
      if (route === undefined) throw new Error(`No ${upper} ${path} route to dispatch directly`);
    },
  };
}

/**
 * `handler` for requests whose path is one of `paths` or below it (Express's mount matching: case
 * insensitive, on a segment boundary); the others pass by.
 */
export function mountedAt(paths: string[], handler: RequestHandler): RequestHandler {
  const prefixes = paths.map((p) => p.toLowerCase());
  return (req, res, next) => {
    const path = req.path.toLowerCase();
    for (const prefix of prefixes) {
      if (path.startsWith(prefix) && (path.length === prefix.length || path[prefix.length] === '/')) return handler(req, res, next);
    }
    next();
  };
}
