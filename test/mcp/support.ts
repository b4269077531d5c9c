import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { streamName } from '../../domain/eventStore';
import { toEventData } from '../../domain/events';
import { newId } from '../../domain/ids';
import type { TestMotor } from '../support/motor';

/** Helpers of the agent-tool (MCP) tests (not a test file). */

export const MCP = 'https://mcp.example.test';
export const AUTH = 'https://auth.example.test';
export const MCP_ENV = { MCP_PUBLIC_URL: MCP, AUTH_PUBLIC_URL: AUTH };

export const metadataUrlOf = (path: string) => `${MCP}/.well-known/oauth-protected-resource${path}`;

/** An MCP client connected over Streamable HTTP with the agent's bearer token, as an agent's SDK does it. */
export async function connectAgent(motor: TestMotor, path: string, accessToken: string): Promise<Client> {
  const client = new Client({ name: 'motor-test-agent', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(`${motor.baseUrl}${path}`), {
    requestInit: { headers: { authorization: `Bearer ${accessToken}` } },
  }));
  return client;
}

/** A tool call's JSON answer, and whether it is an error result. */
export async function call(client: Client, name: string, args: Record<string, unknown> = {}): Promise<{ isError: boolean; json: any }> { // eslint-disable-line @typescript-eslint/no-explicit-any
  const r = (await client.callTool({ name, arguments: args })) as CallToolResult;
  const text = r.content.map((c) => (c.type === 'text' ? c.text : '')).join('');
  let json: unknown;
  try { json = JSON.parse(text); } catch { json = text; }
  return { isError: r.isError === true, json };
}

/** The answer of a successful call (throws with the error result otherwise). */
export async function ok(client: Client, name: string, args: Record<string, unknown> = {}): Promise<any> { // eslint-disable-line @typescript-eslint/no-explicit-any
  const r = await call(client, name, args);
  if (r.isError) throw new Error(`${name} failed: ${JSON.stringify(r.json)}`);
  return r.json;
}

/** One raw JSON-RPC POST (no initialize: the servers are stateless). */
export async function rpc(motor: TestMotor, path: string, body: unknown, accessToken?: string, init: { method?: string } = {}) {
  const res = await fetch(`${motor.baseUrl}${path}`, {
    method: init.method ?? 'POST',
    headers: {
      'content-type': 'application/json', accept: 'application/json, text/event-stream',
      ...(accessToken ? { authorization: `Bearer ${accessToken}` } : {}),
    },
    body: (init.method ?? 'POST') === 'POST' ? JSON.stringify(body) : undefined,
  });
  const text = await res.text();
  let json: any; // eslint-disable-line @typescript-eslint/no-explicit-any
  try { json = JSON.parse(text); } catch { json = text; }
  return { status: res.status, headers: res.headers, body: json };
}

export const toolCall = (id: number, name: string, args: Record<string, unknown> = {}) => ({ jsonrpc: '2.0', id, method: 'tools/call', params: { name, arguments: args } });

/** Revokes a grant the way the connections page does (OAuthGrantRevoked on its stream). */
export async function revokeGrant(motor: TestMotor, grant: { grantId: string; userId: string }): Promise<void> {
  const { grantId, userId } = grant;
  await motor.rt.store.append(streamName('oauthGrant', grantId), [toEventData(newId(), {
    type: 'OAuthGrantRevoked', data: { grantId, reason: 'user_revoked', at: new Date().toISOString(), by: `user:${userId}` },
  })], { expectedRevision: 'any' });
}
