import { expect } from 'chai';
import { z } from 'zod';
import { fail } from '../../domain/errors';
import { effectiveScopes, MCP_SERVERS } from '../../domain/oauth/agent';
import type { HttpContext } from '../../read-api/http/context';
import { AGENT_TOOLS, missingScopes, toolsOf } from '../../read-api/mcp/catalogue';
import { callTool } from '../../read-api/mcp/server';
import { createMetrics } from '../../infra/metrics';
import { defineTool, type ToolEnv } from '../../read-api/mcp/tool';

const server = (path: string) => MCP_SERVERS.find((s) => s.path === path)!;
const call = (name: string) => ({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name, arguments: {} } });

describe('MCP tool catalogue and scope rule (unit)', () => {
  it('read:* scopes hold only read tools; tool names are unique snake_case; every tool has a scope some server offers', () => {
    for (const t of AGENT_TOOLS) {
      if (t.scope.startsWith('read:')) expect(t.readOnly, t.name).to.equal(true);
      expect(t.name, t.name).to.match(/^[a-z]+(_[a-z]+)*$/);
      expect(MCP_SERVERS.some((s) => s.scopes.includes(t.scope)), t.name).to.equal(true);
    }
    expect(new Set(AGENT_TOOLS.map((t) => t.name)).size).to.equal(AGENT_TOOLS.length);
  });

  it('a server offers exactly the tools of its scopes', () => {
    for (const s of MCP_SERVERS) {
      const offered = [...toolsOf(s).values()];
      expect(offered.every((t) => s.scopes.includes(t.scope)), s.path).to.equal(true);
      expect(offered.length, s.path).to.equal(AGENT_TOOLS.filter((t) => s.scopes.includes(t.scope)).length);
    }
    expect([...toolsOf(server('/v1/service_sandbox/mcp')).keys()].sort()).to.deep.equal(['convert_sandbox', 'get_sandbox_status', 'provision_sandbox', 'set_sandbox_allowlist']);
  });

  it('missingScopes: every tools/call of an offered tool, in the server\'s order; unknown tools and other methods need nothing', () => {
    const full = server('/v1/service/mcp');
    const tools = toolsOf(full);
    const granted = effectiveScopes(['read:analytics', 'manage:webhooks']);
    expect(missingScopes(full, tools, call('list_motor_blocks'), granted)).to.deep.equal([]);
    expect(missingScopes(full, tools, call('list_webhooks'), granted), 'manage implies read').to.deep.equal([]);
    expect(missingScopes(full, tools, call('add_domain'), granted)).to.deep.equal(['manage:domains']);
    expect(missingScopes(full, tools, [call('create_motor_block'), call('send_email'), call('verify_domain'), call('send_email')], granted))
      .to.deep.equal(['send:transactional', 'manage:domains', 'manage:motor-blocks']);
    expect(missingScopes(full, tools, call('no_such_tool'), granted)).to.deep.equal([]);
    expect(missingScopes(full, tools, { jsonrpc: '2.0', id: 1, method: 'tools/list' }, granted)).to.deep.equal([]);
    for (const odd of [null, 'x', 3, [null, 'x'], { method: 'tools/call' }, { method: 'tools/call', params: { name: 7 } }]) {
      expect(missingScopes(full, tools, odd, new Set()), JSON.stringify(odd)).to.deep.equal([]);
    }
    const analytics = server('/v1/service_analytics/mcp');
    expect(missingScopes(analytics, toolsOf(analytics), call('add_domain'), new Set()), 'not offered here').to.deep.equal([]);
  });

  it('callTool: the answer as JSON text; a DomainError as {error, message, status}; anything else logged and withheld; each counted', async () => {
    const logged: unknown[] = [];
    const metrics = createMetrics();
    const env = {
      ctx: { logger: { error: (o: unknown) => logged.push(o) }, config: { eventstoreUrl: null }, metrics } as unknown as HttpContext,
      agent: { accountId: 'a', grantId: 'g', clientId: 'c', userId: 'u', actor: 'agent:g' },
    } satisfies ToolEnv;
    const tool = (run: () => Promise<unknown>) => defineTool({ name: 't', scope: 'read:analytics', readOnly: true, description: 'd', input: { x: z.string().optional() }, run });
    expect(await callTool(tool(async () => ({ n: 1 })), env, {})).to.deep.equal({ content: [{ type: 'text', text: '{"n":1}' }] });
    const refused = await callTool(tool(async () => { throw fail('motor_block_not_found', 404, 'No such Motor Block in this account'); }), env, {});
    expect(refused.isError).to.equal(true);
    expect(JSON.parse((refused.content[0] as { text: string }).text)).to.deep.equal({ error: 'motor_block_not_found', message: 'No such Motor Block in this account', status: 404 });
    const broken = await callTool(tool(async () => { throw new Error('secret detail'); }), env, {});
    expect(broken.isError).to.equal(true);
    expect(JSON.parse((broken.content[0] as { text: string }).text)).to.deep.equal({ error: 'internal_error', message: 'Internal error', status: 500 });
    expect(logged).to.have.length(1);
    const counted = (await metrics.mcpToolCalls.get()).values.map((v) => `${v.labels.tool}/${v.labels.outcome}=${v.value}`).sort();
    expect(counted).to.deep.equal(['t/internal_error=1', 't/motor_block_not_found=1', 't/ok=1']);
  });
});
