import { expect } from 'chai';
import type { BootstrapResult } from '../../commands/admin/bootstrap';
import { MCP_SERVERS } from '../../domain/oauth/agent';
import { grantAgentAccess } from '../support/agentGrant';
import { awayFromMinuteEdge, getJson, startTestMotor, type TestMotor } from '../support/motor';
import { AUTH, MCP, MCP_ENV, connectAgent, metadataUrlOf, revokeGrant, rpc, toolCall } from './support';

const FULL = '/v1/service/mcp';
const ANALYTICS = '/v1/service_analytics/mcp';
const DOMAINS = '/v1/service_domains/mcp';
const WEBHOOKS = '/v1/service_webhooks/mcp';
const REQUEST_LIMIT = 30;

const TOOLS = {
  send: ['send_email'],
  analytics: ['list_motor_blocks', 'get_block_overview', 'get_block_metrics', 'search_logs', 'get_message', 'list_block_suppressions'],
  domainsRead: ['list_domains', 'get_domain'],
  domainsManage: ['add_domain', 'verify_domain', 'check_domain_dns', 'rotate_domain_dkim'],
  sandbox: ['get_sandbox_status', 'provision_sandbox', 'set_sandbox_allowlist', 'convert_sandbox'],
  webhooksRead: ['list_webhooks', 'list_webhook_deliveries', 'get_webhook_stats'],
  webhooksManage: ['create_webhook', 'update_webhook', 'rotate_webhook_secret', 'delete_webhook', 'test_webhook'],
  recipients: ['list_free_recipients', 'add_free_recipient', 'remove_free_recipient'],
  blocks: ['create_motor_block', 'rename_motor_block', 'deactivate_motor_block', 'reactivate_motor_block', 'delete_motor_block', 'get_motor_block_deletion', 'lift_block_suppression'],
};
const EXPECTED_TOOLS: Record<string, string[]> = {
  '/v1/service/mcp': Object.values(TOOLS).flat(),
  '/v1/service_transactional/mcp': [...TOOLS.send, ...TOOLS.analytics],
  '/v1/service_analytics/mcp': TOOLS.analytics,
  '/v1/service_domains/mcp': [...TOOLS.domainsRead, ...TOOLS.domainsManage],
  '/v1/service_sandbox/mcp': TOOLS.sandbox,
  '/v1/service_webhooks/mcp': [...TOOLS.webhooksRead, ...TOOLS.webhooksManage],
};
const SPEC_SCOPES: Record<string, string[]> = {
  '/v1/service/mcp': ['send:transactional', 'read:analytics', 'read:domains', 'manage:domains', 'manage:sandbox', 'read:webhooks', 'manage:webhooks', 'manage:recipients', 'manage:motor-blocks'],
  '/v1/service_transactional/mcp': ['send:transactional', 'read:analytics'],
  '/v1/service_analytics/mcp': ['read:analytics'],
  '/v1/service_domains/mcp': ['read:domains', 'manage:domains'],
  '/v1/service_sandbox/mcp': ['manage:sandbox'],
  '/v1/service_webhooks/mcp': ['read:webhooks', 'manage:webhooks'],
};

/**
 * The HTTP edge of the agent-tool servers (SPEC "OAuth 2.1 for agent clients", docs/MCP.md):
 * protected-resource metadata, the exact 401 and 403 challenges, tools/list per server, the API
 * request limit per grant, and what is not POST.
 */
describe('MCP agent-tool servers: metadata, authentication, scopes (int)', function () {
  this.timeout(60_000);
  let motor: TestMotor;
  let b: BootstrapResult;

  before(async () => {
    motor = await startTestMotor({ roles: ['api', 'projector'], env: { ...MCP_ENV, API_REQUEST_LIMIT: String(REQUEST_LIMIT) } });
    b = await motor.bootstrap();
  });
  after(async () => {
    await motor?.close();
  });

  const grant = (path: string, scopes: string[], extra: { ttlSeconds?: number } = {}) =>
    grantAgentAccess(motor, { accountId: b.accountId, path, scopes: scopes as never, ...extra });
  const listTools = { jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} };

  it('publishes RFC 9728 metadata for each of the six servers, without a token', async () => {
    expect(MCP_SERVERS.map((s) => s.path).sort()).to.deep.equal(Object.keys(SPEC_SCOPES).sort());
    for (const path of Object.keys(SPEC_SCOPES)) {
      const r = await getJson(`${motor.baseUrl}/.well-known/oauth-protected-resource${path}`);
      expect(r.status, path).to.equal(200);
      expect(r.body).to.deep.include({
        resource: `${MCP}${path}`, authorization_servers: [AUTH], scopes_supported: SPEC_SCOPES[path], bearer_methods_supported: ['header'],
      });
      expect(r.body.resource_name).to.be.a('string').that.matches(/^Motor/);
      expect(r.headers.get('cache-control')).to.equal('public, max-age=3600');
    }
    expect((await getJson(`${motor.baseUrl}/.well-known/oauth-protected-resource/v1/service_nothing/mcp`)).status).to.equal(404);
  });

  it('401 without a token names the metadata document (POST and GET alike)', async () => {
    for (const path of Object.keys(SPEC_SCOPES)) {
      const r = await rpc(motor, path, listTools);
      expect(r.status, path).to.equal(401);
      expect(r.headers.get('www-authenticate')).to.equal(`Bearer resource_metadata="${metadataUrlOf(path)}"`);
      expect(r.body.error).to.equal('invalid_token');
    }
    const get = await rpc(motor, ANALYTICS, null, undefined, { method: 'GET' });
    expect(get.status).to.equal(401);
    const basic = await fetch(`${motor.baseUrl}${ANALYTICS}`, { method: 'POST', headers: { authorization: 'Basic Zm9vOmJhcg==', 'content-type': 'application/json' }, body: JSON.stringify(listTools) });
    expect(basic.status).to.equal(401);
    expect(basic.headers.get('www-authenticate')).to.equal(`Bearer resource_metadata="${metadataUrlOf(ANALYTICS)}"`);
  });

  const invalidChallenge = (path: string, description: string) =>
    `Bearer error="invalid_token", error_description="${description}", resource_metadata="${metadataUrlOf(path)}"`;

  it('401 invalid_token for a garbage token, a token of another server, an expired token', async () => {
    const garbage = await rpc(motor, ANALYTICS, listTools, 'not.a.jwt');
    expect(garbage.status).to.equal(401);
    expect(garbage.headers.get('www-authenticate')).to.equal(invalidChallenge(ANALYTICS, 'The access token is invalid or was not issued for this server'));
    expect(garbage.body).to.deep.equal({ error: 'invalid_token', error_description: 'The access token is invalid or was not issued for this server' });

    const analytics = await grant(ANALYTICS, ['read:analytics']);
    expect((await rpc(motor, ANALYTICS, listTools, analytics.accessToken)).status).to.equal(200);
    for (const other of [DOMAINS, FULL]) {
      const r = await rpc(motor, other, listTools, analytics.accessToken);
      expect(r.status, other).to.equal(401);
      expect(r.headers.get('www-authenticate')).to.equal(invalidChallenge(other, 'The access token is invalid or was not issued for this server'));
    }

    const expired = await grant(ANALYTICS, ['read:analytics'], { ttlSeconds: -60 });
    const r = await rpc(motor, ANALYTICS, listTools, expired.accessToken);
    expect(r.status).to.equal(401);
    expect(r.headers.get('www-authenticate')).to.equal(invalidChallenge(ANALYTICS, 'The access token expired'));
  });

  it('401 at once after the grant is revoked', async () => {
    const g = await grant(FULL, ['read:analytics']);
    expect((await rpc(motor, FULL, listTools, g.accessToken)).status).to.equal(200);
    await revokeGrant(motor, g);
    const r = await rpc(motor, FULL, listTools, g.accessToken);
    expect(r.status).to.equal(401);
    expect(r.headers.get('www-authenticate')).to.equal(invalidChallenge(FULL, 'The connection of this access token was revoked'));
  });

  it('tools/list shows every tool of the server (whatever the grant), each naming its scope; read tools are readOnlyHint', async () => {
    for (const [path, expected] of Object.entries(EXPECTED_TOOLS)) {
      // The narrowest grant the server can have: discovery does not depend on it.
      const client = await connectAgent(motor, path, (await grant(path, [SPEC_SCOPES[path][0]])).accessToken);
      try {
        const { tools } = await client.listTools();
        expect(tools.map((t) => t.name).sort(), path).to.deep.equal([...expected].sort());
        for (const t of tools) {
          const scope = /Requires scope (\S+)\.$/.exec(t.description ?? '')?.[1];
          expect(SPEC_SCOPES[path], `${path} ${t.name}`).to.include(scope);
          if (scope!.startsWith('read:')) expect(t.annotations?.readOnlyHint, t.name).to.equal(true);
          if (['send_email', 'add_domain', 'create_webhook', 'delete_motor_block', 'convert_sandbox'].includes(t.name)) expect(t.annotations?.readOnlyHint, t.name).to.equal(false);
          expect(t.inputSchema.type).to.equal('object');
        }
      } finally {
        await client.close();
      }
    }
  });

  it('a read-only grant calling a write tool gets 403 insufficient_scope; its read tools run; manage:domains implies read:domains', async () => {
    const reader = await grant(DOMAINS, ['read:domains']);
    const r = await rpc(motor, DOMAINS, toolCall(7, 'add_domain', { domain: 'agent-denied.example.test' }), reader.accessToken);
    expect(r.status).to.equal(403);
    expect(r.headers.get('www-authenticate')).to.equal(`Bearer error="insufficient_scope", scope="manage:domains", resource_metadata="${metadataUrlOf(DOMAINS)}"`);
    expect(r.body).to.include({ error: 'insufficient_scope' });
    expect(r.body.missing_scopes).to.deep.equal(['manage:domains']);

    const read = await rpc(motor, DOMAINS, toolCall(8, 'list_domains'), reader.accessToken);
    expect(read.status).to.equal(200);
    expect(read.body.result.isError).to.not.equal(true);
    expect(JSON.parse(read.body.result.content[0].text).domains.map((d: { id: string }) => d.id)).to.include(b.domainId);

    const manager = await grant(DOMAINS, ['manage:domains']);
    const implied = await rpc(motor, DOMAINS, toolCall(9, 'get_domain', { domainId: b.domainId }), manager.accessToken);
    expect(implied.status).to.equal(200);
    expect(JSON.parse(implied.body.result.content[0].text).id).to.equal(b.domainId);
  });

  it('rotate_webhook_secret needs manage:webhooks: a read:webhooks grant gets 403 insufficient_scope', async () => {
    const reader = await grant(WEBHOOKS, ['read:webhooks']);
    const r = await rpc(motor, WEBHOOKS, toolCall(5, 'rotate_webhook_secret', { motorBlockId: b.motorBlockId, webhookId: '0194b3c0-0000-7000-8000-000000000001' }), reader.accessToken);
    expect(r.status).to.equal(403);
    expect(r.headers.get('www-authenticate')).to.equal(`Bearer error="insufficient_scope", scope="manage:webhooks", resource_metadata="${metadataUrlOf(WEBHOOKS)}"`);
    expect(r.body.missing_scopes).to.deep.equal(['manage:webhooks']);
  });

  it('a batch needing two missing scopes gets one challenge naming both', async () => {
    const g = await grant(FULL, ['read:analytics', 'read:webhooks']);
    const batch = [
      toolCall(1, 'list_motor_blocks'), toolCall(2, 'create_webhook', { motorBlockId: b.motorBlockId, url: 'https://hooks.example.test/x' }),
      toolCall(3, 'send_email', { motorBlockId: b.motorBlockId }), toolCall(4, 'list_webhooks', { motorBlockId: b.motorBlockId }),
    ];
    const r = await rpc(motor, FULL, batch, g.accessToken);
    expect(r.status).to.equal(403);
    expect(r.headers.get('www-authenticate')).to.equal(`Bearer error="insufficient_scope", scope="send:transactional manage:webhooks", resource_metadata="${metadataUrlOf(FULL)}"`);
    expect(r.body.missing_scopes).to.deep.equal(['send:transactional', 'manage:webhooks']);
    const allowed = await rpc(motor, FULL, [batch[0], batch[3]], g.accessToken);
    expect(allowed.status).to.equal(200);
    expect(allowed.body.map((m: { id: number; result: { isError?: boolean } }) => [m.id, m.result.isError ?? false])).to.deep.equal([[1, false], [4, false]]);
  });

  it('a tool the server does not offer goes to the MCP server, which answers it as unknown', async () => {
    const g = await grant(ANALYTICS, ['read:analytics']);
    const r = await rpc(motor, ANALYTICS, toolCall(5, 'add_domain', { domain: 'x.example.test' }), g.accessToken);
    expect(r.status).to.equal(200);
    const answer = r.body.error ?? r.body.result;
    expect(JSON.stringify(answer)).to.match(/add_domain not found/);
  });

  it('GET and DELETE are 405 with a JSON-RPC error; the API request limit applies per grant (429 rate_limited)', async () => {
    const g = await grant(ANALYTICS, ['read:analytics']);
    // The limit counts in fixed one-minute windows: all of this test's requests must fall in one.
    await awayFromMinuteEdge(15);
    for (const method of ['GET', 'DELETE']) {
      const r = await rpc(motor, ANALYTICS, null, g.accessToken, { method });
      expect(r.status, method).to.equal(405);
      expect(r.headers.get('allow')).to.equal('POST');
      expect(r.body).to.deep.equal({ jsonrpc: '2.0', error: { code: -32000, message: 'Method not allowed.' }, id: null });
    }
    let last = await rpc(motor, ANALYTICS, listTools, g.accessToken);
    expect(last.headers.get('x-ratelimit-limit')).to.equal(String(REQUEST_LIMIT));
    expect(Number(last.headers.get('x-ratelimit-remaining'))).to.equal(REQUEST_LIMIT - 3);
    for (let i = 3; i < REQUEST_LIMIT; i++) last = await rpc(motor, ANALYTICS, listTools, g.accessToken);
    expect([last.status, last.headers.get('x-ratelimit-remaining')]).to.deep.equal([200, '0']);
    const limited = await rpc(motor, ANALYTICS, listTools, g.accessToken);
    expect(limited.status).to.equal(429);
    expect(limited.body.error).to.equal('rate_limited');
    expect(Number(limited.headers.get('retry-after'))).to.be.within(1, 60);
    // Another connection of the same account counts on its own.
    const other = await grant(ANALYTICS, ['read:analytics']);
    expect((await rpc(motor, ANALYTICS, listTools, other.accessToken)).status).to.equal(200);
  });
});
