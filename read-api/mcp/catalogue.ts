import type { AgentScope, McpServerSpec } from '../../domain/oauth/agent';
import type { AgentTool } from './tool';
import { ANALYTICS_TOOLS } from './tools/analytics';
import { BLOCK_TOOLS } from './tools/blocks';
import { DOMAIN_TOOLS } from './tools/domains';
import { RECIPIENT_TOOLS } from './tools/recipients';
import { SANDBOX_TOOLS } from './tools/sandbox';
import { SEND_TOOLS } from './tools/send';
import { WEBHOOK_TOOLS } from './tools/webhooks';

/**
 * Every agent tool, and which of them a server offers: exactly those whose scope is one the
 * server can be granted (SPEC's table; docs/MCP.md lists them). Pure.
 */
export const AGENT_TOOLS: readonly AgentTool[] = [
  ...SEND_TOOLS, ...ANALYTICS_TOOLS, ...DOMAIN_TOOLS, ...SANDBOX_TOOLS, ...WEBHOOK_TOOLS, ...RECIPIENT_TOOLS, ...BLOCK_TOOLS,
];

/** The tools of one server, by name. */
export function toolsOf(server: McpServerSpec): ReadonlyMap<string, AgentTool> {
  return new Map(AGENT_TOOLS.filter((t) => server.scopes.includes(t.scope)).map((t) => [t.name, t]));
}

/**
 * The scopes a JSON-RPC body (one message or a batch) needs that `granted` lacks: the scope of
 * every `tools/call` of a tool this server offers. A call of a tool the server does not offer
 * needs nothing here (the MCP server answers it with its own error). In the server's scope order.
 */
export function missingScopes(server: McpServerSpec, tools: ReadonlyMap<string, AgentTool>, body: unknown, granted: ReadonlySet<string>): AgentScope[] {
  const missing = new Set<AgentScope>();
  for (const message of Array.isArray(body) ? body : [body]) {
    if (typeof message !== 'object' || message === null || (message as { method?: unknown }).method !== 'tools/call') continue;
    const name = (message as { params?: { name?: unknown } }).params?.name;
    const tool = typeof name === 'string' ? tools.get(name) : undefined;
    if (tool && !granted.has(tool.scope)) missing.add(tool.scope);
  }
  return server.scopes.filter((s) => missing.has(s));
}
