import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { Router, type Request, type Response } from 'express';
import { activeAgentToken, type AgentClaims } from '../../commands/oauth/agentTokens';
import { effectiveScopes, MCP_SERVERS, resourceUri, type McpServerSpec } from '../../domain/oauth/agent';
import type { Config } from '../../infra/config';
import { bearerToken, setRateLimitHeaders } from '../http/authentication';
import type { HttpContext } from '../http/context';
import { missingScopes, toolsOf } from './catalogue';
import { agentMcpServer, mcpEndpoint, protocolRefusal, type McpEndpoint } from './server';
import { agentCaller, type AgentTool } from './tool';

/**
 * The agent-tool (MCP) servers of SPEC "OAuth 2.1 for agent clients" (docs/MCP.md): for each
 * server, its RFC 9728 protected-resource metadata and its Streamable HTTP endpoint (stateless,
 * POST only). Before the MCP transport sees a request: the agent access token (RS256, audience =
 * this server, grant not revoked), the API request limit per grant, and the scope of every tool
 * call in the body. Each answer of that edge is an OAuth bearer answer (RFC 6750 §3).
 */

const RESOURCE_NAMES: Record<string, string> = {
  '/v1/service/mcp': 'Motor: all agent tools',
  '/v1/service_transactional/mcp': 'Motor: transactional sending',
  '/v1/service_analytics/mcp': 'Motor: analytics',
  '/v1/service_domains/mcp': 'Motor: domains',
  '/v1/service_sandbox/mcp': 'Motor: account sandbox',
  '/v1/service_webhooks/mcp': 'Motor: webhooks',
};

export const metadataPath = (server: McpServerSpec): string => `/.well-known/oauth-protected-resource${server.path}`;
export const metadataUrl = (config: Pick<Config, 'mcpPublicUrl'>, server: McpServerSpec): string => `${config.mcpPublicUrl}${metadataPath(server)}`;

export function protectedResourceMetadata(config: Pick<Config, 'mcpPublicUrl' | 'authPublicUrl'>, server: McpServerSpec) {
  return {
    resource: resourceUri(config.mcpPublicUrl, server.path),
    authorization_servers: [config.authPublicUrl],
    scopes_supported: [...server.scopes],
    bearer_methods_supported: ['header'],
    resource_name: RESOURCE_NAMES[server.path] ?? 'Motor',
  };
}

/** `Bearer k="v", ...`; every value here is fixed text, urls or scope names (no quote or backslash). */
const challenge = (params: Array<[string, string]>): string => `Bearer ${params.map(([k, v]) => `${k}="${v}"`).join(', ')}`;

const TOKEN_PROBLEMS = {
  malformed: 'The Authorization header is not a bearer token',
  invalid: 'The access token is invalid or was not issued for this server',
  expired: 'The access token expired',
  revoked: 'The connection of this access token was revoked',
} as const;

/** The token's claims, or null once the 401 is written. */
async function authenticate(ctx: HttpContext, server: McpServerSpec, req: Request, res: Response): Promise<AgentClaims | null> {
  const header = req.headers.authorization;
  const presented = typeof header === 'string' && /^Bearer(\s|$)/i.test(header);
  const token = bearerToken(req);
  let problem: keyof typeof TOKEN_PROBLEMS;
  if (!presented) {
    // RFC 6750 §3.1: a request without credentials gets no error code, only where to learn more.
    res.setHeader('WWW-Authenticate', challenge([['resource_metadata', metadataUrl(ctx.config, server)]]));
    res.status(401).json({ error: 'invalid_token', error_description: 'An agent access token is required: Authorization: Bearer <token>' });
    return null;
  }
  if (token === null) problem = 'malformed';
  else {
    const check = await activeAgentToken({ store: ctx.store, keys: ctx.keys, config: ctx.config }, token, resourceUri(ctx.config.mcpPublicUrl, server.path), ctx.clock.now());
    if (check.ok) return check.claims;
    problem = check.reason;
  }
  res.setHeader('WWW-Authenticate', challenge([
    ['error', 'invalid_token'], ['error_description', TOKEN_PROBLEMS[problem]], ['resource_metadata', metadataUrl(ctx.config, server)],
  ]));
  res.status(401).json({ error: 'invalid_token', error_description: TOKEN_PROBLEMS[problem] });
  return null;
}

/** The API request limit per grant (SPEC "Limits", limiter 1), with the X-RateLimit-* headers of every route; false once the 429 is written. */
async function withinRequestLimit(ctx: HttpContext, claims: AgentClaims, res: Response): Promise<boolean> {
  const reading = await ctx.limiter.hit(`agent:${claims.grantId}`, ctx.clock.now());
  setRateLimitHeaders(res, reading);
  if (reading.kind !== 'exceeded') return true;
  res.setHeader('Retry-After', String(reading.resetSeconds));
  res.status(429).json({ error: 'rate_limited', error_description: `API request limit of ${reading.limit} per minute exceeded for this connection`, retry_after_seconds: reading.resetSeconds });
  return false;
}

/** Scope of every tool call in the body; false once the 403 (one challenge naming every missing scope) is written. */
function scopesGranted(ctx: HttpContext, server: McpServerSpec, tools: ReadonlyMap<string, AgentTool>, claims: AgentClaims, req: Request, res: Response): boolean {
  const missing = missingScopes(server, tools, req.body, effectiveScopes(claims.scopes));
  if (missing.length === 0) return true;
  const description = `This call needs the scope${missing.length > 1 ? 's' : ''} ${missing.join(' ')}, which the connection was not granted`;
  res.setHeader('WWW-Authenticate', challenge([['error', 'insufficient_scope'], ['scope', missing.join(' ')], ['resource_metadata', metadataUrl(ctx.config, server)]]));
  res.status(403).json({ error: 'insufficient_scope', error_description: description, missing_scopes: missing });
  return false;
}

/** What the SDK's stateless servers answer to GET (no SSE stream to resume) and DELETE (no session to end). */
function methodNotAllowed(res: Response): void {
  res.setHeader('Allow', 'POST');
  res.status(405).json({ jsonrpc: '2.0', error: { code: -32000, message: 'Method not allowed.' }, id: null });
}

async function serve(ctx: HttpContext, endpoint: McpEndpoint, req: Request, res: Response): Promise<void> {
  const { spec: server, tools } = endpoint;
  const claims = await authenticate(ctx, server, req, res);
  if (claims === null || !(await withinRequestLimit(ctx, claims, res))) return;
  if (req.method !== 'POST') {
    methodNotAllowed(res);
    return;
  }
  if (Array.isArray(req.body) && req.body.length === 0) {
    // JSON-RPC 2.0 §6: an empty batch is one Invalid Request error (the SDK would answer 202 with no body).
    res.status(400).json({ jsonrpc: '2.0', error: { code: -32600, message: 'Invalid Request: empty batch' }, id: null });
    return;
  }
  if (!scopesGranted(ctx, server, tools, claims, req, res)) return;
  const mcp = agentMcpServer(endpoint, { ctx, agent: agentCaller(claims) });
  // Stateless: no session id; the answer is one JSON body (no SSE stream) since no tool streams.
  const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
  res.on('close', () => {
    void transport.close();
    void mcp.close();
  });
  await mcp.connect(transport);
  // Requests the SDK would answer -32603 Internal error (bad params, a tool call as a task) are answered here.
  const deliver = transport.onmessage!;
  transport.onmessage = (message, extra) => {
    const refused = protocolRefusal(message);
    if (refused) void transport.send(refused);
    else deliver(message, extra);
  };
  // express.json has parsed the body already (app.ts); the transport takes it as is.
  await transport.handleRequest(req, res, req.body);
}

export function mcpRouter(ctx: HttpContext): Router {
  const router = Router();
  for (const server of MCP_SERVERS) {
    const endpoint = mcpEndpoint(server, toolsOf(server));
    const metadata = protectedResourceMetadata(ctx.config, server);
    router.get(metadataPath(server), (_req, res) => {
      res.setHeader('Cache-Control', 'public, max-age=3600');
      // Browser-based MCP clients read it across origins; it holds nothing private.
      res.setHeader('Access-Control-Allow-Origin', '*');
      res.json(metadata);
    });
    router.all(server.path, (req, res) => serve(ctx, endpoint, req, res));
  }
  return router;
}
