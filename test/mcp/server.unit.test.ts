import { expect } from 'chai';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { Server } from '@modelcontextprotocol/sdk/server/index.js';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import { MCP_SERVERS } from '../../domain/oauth/agent';
import { toolsOf } from '../../read-api/mcp/catalogue';
import { agentMcpServer, mcpEndpoint } from '../../read-api/mcp/server';
import type { ToolEnv } from '../../read-api/mcp/tool';

/** One JSON-RPC request to a server over the SDK's in-memory transport; its raw answer, as the transport would serialize it. */
async function ask(server: { connect(t: InMemoryTransport): Promise<void> }, method: string, params: Record<string, unknown>): Promise<string> {
  const [client, serverSide] = InMemoryTransport.createLinkedPair();
  const answer = new Promise<JSONRPCMessage>((resolve) => { client.onmessage = resolve; });
  await server.connect(serverSide);
  await client.start();
  await client.send({ jsonrpc: '2.0', id: 1, method, params });
  const text = JSON.stringify(await answer);
  await client.close();
  return text;
}

/** The server of one request as it was built before the tools/list answer was made once per endpoint: an McpServer with every tool registered. */
function registeredServer(path: string, instructions: string): McpServer {
  const spec = MCP_SERVERS.find((s) => s.path === path)!;
  const server = new McpServer({ name: `motor${spec.path.replace(/\//g, '-')}`, version: '1.0.0' }, { instructions });
  for (const tool of toolsOf(spec).values()) {
    server.registerTool(tool.name, {
      description: `${tool.description} Requires scope ${tool.scope}.`,
      inputSchema: tool.input,
      annotations: tool.readOnly ? { readOnlyHint: true } : { readOnlyHint: false, destructiveHint: tool.destructive ?? false },
    }, () => ({ content: [] }));
  }
  return server;
}

/**
 * The tools/list answer made once per server (read-api/mcp/server.ts `mcpEndpoint`) is, byte for
 * byte, what the SDK's McpServer answered with the same tools registered on every request; the
 * initialize answer (capabilities, server info, instructions) is the same too. Fails when an SDK
 * update changes what McpServer lists.
 */
describe('MCP server of one request (unit)', () => {
  const env = {} as ToolEnv;
  const initialize = { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 't', version: '1' } };

  for (const spec of MCP_SERVERS) {
    it(`${spec.path}: tools/list and initialize answer as an McpServer with the tools registered`, async () => {
      const endpoint = mcpEndpoint(spec, toolsOf(spec));
      const ours = (): Server => agentMcpServer(endpoint, env);
      const init = JSON.parse(await ask(ours(), 'initialize', initialize));
      expect(init.result.capabilities).to.deep.equal({ tools: { listChanged: true } });
      const theirs = () => registeredServer(spec.path, init.result.instructions);
      expect(await ask(ours(), 'tools/list', {})).to.equal(await ask(theirs(), 'tools/list', {}));
      expect(await ask(ours(), 'initialize', initialize)).to.equal(await ask(theirs(), 'initialize', initialize));
    });
  }

  it('every request of an endpoint is handed the same answer, which nothing can change', async () => {
    const spec = MCP_SERVERS[0];
    const endpoint = mcpEndpoint(spec, toolsOf(spec));
    const first = await ask(agentMcpServer(endpoint, env), 'tools/list', {});
    expect(Object.isFrozen(endpoint.toolList.tools[0].inputSchema)).to.equal(true);
    expect(() => { (endpoint.toolList.tools as unknown[]).push({}); }).to.throw(TypeError);
    expect(await ask(agentMcpServer(endpoint, env), 'tools/list', {})).to.equal(first);
  });
});
