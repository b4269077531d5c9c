import { createHash, timingSafeEqual } from 'node:crypto';

/**
 * The OAuth 2.1 profile for agent clients (SPEC "OAuth 2.1 for agent clients", docs/OAUTH.md):
 * the agent-tool (MCP) servers, the scopes each one can be granted, and the rules a client id,
 * a PKCE challenge and a `resource` must follow. Pure.
 */

export const AGENT_SCOPES = [
  'send:transactional', 'read:analytics', 'read:domains', 'manage:domains', 'manage:sandbox',
  'read:webhooks', 'manage:webhooks', 'manage:recipients', 'manage:motor-blocks',
] as const;
export type AgentScope = (typeof AGENT_SCOPES)[number];

export interface McpServerSpec {
  /** Path under MCP_PUBLIC_URL; also the path suffix of its protected-resource metadata. */
  path: string;
  /** Scopes a grant for this server may carry (SPEC's table, plus the two lifecycle scopes on the full server). */
  scopes: readonly AgentScope[];
  /** Granted when the authorization request names no scope: the SPEC's list for the server. */
  defaultScopes: readonly AgentScope[];
}

const FULL_DEFAULT: readonly AgentScope[] = ['send:transactional', 'read:analytics', 'read:domains', 'manage:domains', 'manage:sandbox', 'read:webhooks', 'manage:webhooks'];

/** The agent-tool servers (SPEC table); each is its own audience and consent. */
export const MCP_SERVERS: readonly McpServerSpec[] = [
  { path: '/v1/service/mcp', scopes: [...FULL_DEFAULT, 'manage:recipients', 'manage:motor-blocks'], defaultScopes: FULL_DEFAULT },
  { path: '/v1/service_transactional/mcp', scopes: ['send:transactional', 'read:analytics'], defaultScopes: ['send:transactional', 'read:analytics'] },
  { path: '/v1/service_analytics/mcp', scopes: ['read:analytics'], defaultScopes: ['read:analytics'] },
  { path: '/v1/service_domains/mcp', scopes: ['read:domains', 'manage:domains'], defaultScopes: ['read:domains', 'manage:domains'] },
  { path: '/v1/service_sandbox/mcp', scopes: ['manage:sandbox'], defaultScopes: ['manage:sandbox'] },
  { path: '/v1/service_webhooks/mcp', scopes: ['read:webhooks', 'manage:webhooks'], defaultScopes: ['read:webhooks', 'manage:webhooks'] },
];

/** The canonical URI of a server (RFC 8707 `resource`, the token's `aud`): MCP_PUBLIC_URL + path, no trailing slash. */
export const resourceUri = (mcpPublicUrl: string, path: string): string => `${mcpPublicUrl.replace(/\/+$/, '')}${path}`;

/** The server a `resource` names, or null. Compared exactly: the canonical form is the only one. */
export function serverOfResource(mcpPublicUrl: string, resource: unknown): McpServerSpec | null {
  if (typeof resource !== 'string') return null;
  return MCP_SERVERS.find((s) => resourceUri(mcpPublicUrl, s.path) === resource) ?? null;
}

/** The scopes of the manage:* scope that implies a read:* one (a manage grant can read what it manages). */
export function effectiveScopes(granted: readonly string[]): Set<string> {
  const out = new Set(granted);
  if (out.has('manage:domains')) out.add('read:domains');
  if (out.has('manage:webhooks')) out.add('read:webhooks');
  return out;
}

/**
 * The `scope` of an agent authorization request for a server: space-separated, each one the server
 * offers; absent = the server's default list. `logs.pii` (or any other) is refused: it is never
 * granted to an agent client. Returns the sorted list, or the scopes refused.
 */
export function parseAgentScope(server: McpServerSpec, scope: unknown): { ok: true; scopes: AgentScope[] } | { ok: false; refused: string[] } {
  if (scope === undefined || scope === '') return { ok: true, scopes: [...server.defaultScopes].sort() };
  if (typeof scope !== 'string') return { ok: false, refused: [] };
  const parts = [...new Set(scope.split(' ').filter(Boolean))];
  const refused = parts.filter((p) => !(server.scopes as readonly string[]).includes(p));
  if (parts.length === 0 || refused.length > 0) return { ok: false, refused };
  return { ok: true, scopes: (parts as AgentScope[]).sort() };
}

/**
 * A client id that is a client metadata document URL: https, a host, a path other than `/`, no
 * fragment, no user info, no dot segments, at most 2000 characters.
 */
export function isClientMetadataUrl(clientId: unknown): clientId is string {
  if (typeof clientId !== 'string' || clientId.length > 2000 || !clientId.startsWith('https://')) return false;
  let u: URL;
  try { u = new URL(clientId); } catch { return false; }
  if (u.protocol !== 'https:' || u.hash || u.username || u.password || u.pathname === '/' || u.pathname === '') return false;
  if (/(^|\/)\.\.?(\/|$)/.test(clientId.slice(clientId.indexOf('/', 8)))) return false;
  return u.href === clientId;
}

/** RFC 7636: a code_challenge (S256) is 43 base64url characters; a code_verifier 43 to 128 unreserved ones. */
export const isCodeChallenge = (v: unknown): v is string => typeof v === 'string' && /^[A-Za-z0-9_-]{43}$/.test(v);
export const isCodeVerifier = (v: unknown): v is string => typeof v === 'string' && /^[A-Za-z0-9\-._~]{43,128}$/.test(v);

/**
 * The PKCE parameters of an authorization request (RFC 7636 §4.3), for both profiles: S256 only
 * (the discovery document says so, and `plain` protects nothing once the request leaks). `required`
 * for agent clients; for SMTP clients PKCE is optional, so neither parameter → no challenge (null),
 * but whatever is sent must be a whole, valid S256 pair. A parameter sent empty counts as omitted
 * (RFC 6749 §3.1). Returns the challenge to record, or why the request is refused (invalid_request).
 */
export function codeChallengeOf(methodParam: string | undefined, challengeParam: string | undefined, required: boolean): { ok: true; challenge: string | null } | { ok: false; reason: string } {
  const method = methodParam === '' ? undefined : methodParam;
  const challenge = challengeParam === '' ? undefined : challengeParam;
  if (!required && method === undefined && challenge === undefined) return { ok: true, challenge: null };
  if (method === 'plain') return { ok: false, reason: 'code_challenge_method plain is not supported: use S256' };
  if (method === undefined && challenge !== undefined) return { ok: false, reason: 'code_challenge without code_challenge_method means plain (RFC 7636 §4.3), which is not supported: send code_challenge_method=S256' };
  if (method !== 'S256') return { ok: false, reason: required ? 'PKCE is required: code_challenge_method=S256 and a code_challenge' : 'code_challenge_method must be S256' };
  if (!isCodeChallenge(challenge)) return { ok: false, reason: 'code_challenge must be the 43-character base64url SHA-256 of the code_verifier' };
  return { ok: true, challenge };
}

/** BASE64URL(SHA256(verifier)) === challenge, in constant time. */
export function pkceMatches(challenge: string, verifier: string): boolean {
  const computed = Buffer.from(createHash('sha256').update(verifier, 'ascii').digest('base64url'));
  const expected = Buffer.from(challenge);
  return computed.length === expected.length && timingSafeEqual(computed, expected);
}
