import { expect } from 'chai';
import type { BootstrapResult } from '../../commands/admin/bootstrap';
import { AGENT_SCOPES } from '../../domain/oauth/agent';
import { grantAgentAccess } from '../support/agentGrant';
import { startTestMotor, type TestMotor } from '../support/motor';
import { MCP_ENV, call, connectAgent } from './support';

const FULL = '/v1/service/mcp';
const ACCEPT = 'application/json, text/event-stream';

/**
 * The MCP edge against malformed and absurd requests, with a valid token so they reach the
 * transport and the tools: every one gets a definite answer below 500 in time, and the server
 * still works afterwards. (The REST routes have their own sweep: test/read-api/hostileInput.)
 */
describe('MCP agent-tool servers: hostile input (int)', function () {
  this.timeout(120_000);
  let motor: TestMotor;
  let b: BootstrapResult;
  let token: string;
  const domain = `hostile${Date.now().toString(36)}.example.test`;

  before(async () => {
    motor = await startTestMotor({ roles: ['api', 'projector'], env: { ...MCP_ENV, API_REQUEST_LIMIT: '100000' } });
    b = await motor.bootstrap({ domain });
    token = (await grantAgentAccess(motor, { accountId: b.accountId, path: FULL, scopes: [...AGENT_SCOPES] })).accessToken;
  });
  after(async () => {
    await motor?.close();
  });

  const post = async (body: string, headers: Record<string, string> = {}) => {
    const res = await fetch(`${motor.baseUrl}${FULL}`, {
      method: 'POST', body, signal: AbortSignal.timeout(10_000),
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', accept: ACCEPT, ...headers },
    });
    return { status: res.status, text: await res.text() };
  };
  const rpc = (method: unknown, params?: unknown, id: unknown = 1) => JSON.stringify({ jsonrpc: '2.0', id, method, ...(params === undefined ? {} : { params }) });
  const callOf = (name: unknown, args?: unknown) => rpc('tools/call', { name, ...(args === undefined ? {} : { arguments: args }) });

  const deep = (n: number): unknown => (n === 0 ? 'x' : { a: deep(n - 1) });
  const cases: Array<[string, string, Record<string, string>?]> = [
    ['an empty body', ''],
    ['invalid JSON', '{"jsonrpc":'],
    ['null', 'null'],
    ['a number', '42'],
    ['a string', '"tools/list"'],
    ['an empty object', '{}'],
    ['an empty batch', '[]'],
    ['a batch of garbage', '[1, "x", null, {}]'],
    ['jsonrpc 1.0', JSON.stringify({ jsonrpc: '1.0', id: 1, method: 'tools/list' })],
    ['a method that is not a string', rpc(123)],
    ['an unknown method', rpc('tools/explode')],
    ['an id that is an object', rpc('tools/list', {}, { x: 1 })],
    ['tools/call without params', rpc('tools/call')],
    ['tools/call with params null', rpc('tools/call', null)],
    ['tools/call of an unknown tool', callOf('rm_rf')],
    ['tools/call with a 10,000-character tool name', callOf('x'.repeat(10_000))],
    ['tools/call with a name that is an object', callOf({ toString: 'send_email' })],
    ['send_email without arguments', callOf('send_email')],
    ['send_email with arguments of the wrong types', callOf('send_email', { motorBlockId: 7, from: [], to: { a: 1 }, subject: null })],
    ['send_email with arguments as an array', callOf('send_email', ['a', 'b'])],
    ['send_email with a NUL and a lone surrogate', '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"send_email","arguments":{"motorBlockId":"\\u0000","from":"a\\ud800@x.test","to":"b@x.test","subject":"s","text":"t"}}}'],
    ['send_email to 10,000 recipients', callOf('send_email', { motorBlockId: 'x', from: 'a@x.test', to: Array.from({ length: 10_000 }, (_, i) => `r${i}@x.test`), subject: 's', text: 't' })],
    ['__proto__ in the arguments', '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"list_domains","arguments":{"__proto__":{"polluted":true}}}}'],
    ['search_logs with an absurd query', callOf('search_logs', { motorBlockId: '00000000-0000-0000-0000-000000000000', query: '('.repeat(5000), limit: -1 })],
    ['get_message with a malformed id', callOf('get_message', { messageId: "'; drop table events; --" })],
    ['create_webhook with a javascript: URL', callOf('create_webhook', { motorBlockId: 'not-a-uuid', url: 'javascript:alert(1)' })],
    ['a nesting 500 levels deep', callOf('list_domains', deep(500))],
    ['a batch of 500 tools/list', `[${Array.from({ length: 500 }, (_, i) => rpc('tools/list', {}, i)).join(',')}]`],
    ['a text/plain body', rpc('tools/list'), { 'content-type': 'text/plain' }],
    ['no Accept header naming JSON or SSE', rpc('tools/list'), { accept: 'text/html' }],
  ];
  for (const [name, body, headers] of cases) {
    it(`${name}: a definite answer below 500`, async () => {
      const r = await post(body, headers);
      expect(r.status, r.text.slice(0, 300)).to.be.below(500);
      expect(r.text.length, 'an answer with a body').to.be.above(0);
    });
  }

  it('params that break MCP\'s schema of the method are -32602 Invalid params, not -32603 Internal error', async () => {
    const batch = [
      { jsonrpc: '2.0', id: 0, method: 'tools/call', params: { name: 'list_domains', arguments: [] } },
      { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'send_email', arguments: 'to=a@x.test' } },
      { jsonrpc: '2.0', id: 2, method: 'initialize', params: { capabilities: {}, clientInfo: { name: 'x', version: '1' } } },
      { jsonrpc: '2.0', id: 3, method: 'tools/list', params: { cursor: 5 } },
    ];
    const r = await post(JSON.stringify(batch));
    expect(r.status).to.equal(200);
    expect((JSON.parse(r.text) as Array<{ error?: { code: number } }>).map((m) => m.error?.code)).to.deep.equal([-32602, -32602, -32602, -32602]);
  });

  it('a request asking to run as a task is -32601 Method not found (no tool runs as a task), not -32603', async () => {
    const batch = [
      { jsonrpc: '2.0', id: 0, method: 'tools/call', params: { name: 'list_domains', arguments: {}, task: { ttl: 60_000 } } },
      { jsonrpc: '2.0', id: 1, method: 'ping', params: { task: {} } },
    ];
    const r = await post(JSON.stringify(batch));
    expect(r.status).to.equal(200);
    expect((JSON.parse(r.text) as Array<{ error?: { code: number } }>).map((m) => m.error?.code)).to.deep.equal([-32601, -32601]);
  });

  it('arguments that break a tool\'s schema are the coded 422 validation_error naming each field; an unknown tool is -32602', async () => {
    const agent = await connectAgent(motor, FULL, token);
    const r = await call(agent, 'send_email', { motorBlockId: 7, to: { a: 1 }, subject: 's' });
    await agent.close();
    expect([r.isError, r.json.error, r.json.status]).to.deep.equal([true, 'validation_error', 422]);
    expect(r.json.details.fields.map((f: { field: string }) => f.field)).to.have.members(['motorBlockId', 'from', 'to']);
    const unknown = JSON.parse((await post(callOf('rm_rf', {}))).text);
    expect(unknown.error?.code).to.equal(-32602);
  });

  it('send_email refuses `__proto__` as a metadata key or header name as POST /v1/send does (422 validation_error), rather than dropping it', async () => {
    for (const field of ['metadata', 'headers']) {
      const body = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"send_email","arguments":{"motorBlockId":"${b.motorBlockId}",`
        + `"from":"app@${domain}","to":"a@x.test","subject":"s","text":"t","dryRun":true,"${field}":{"__proto__":"x"}}}}`;
      const result = JSON.parse((await post(body)).text).result;
      expect([result.isError, JSON.parse(result.content[0].text).error], field).to.deep.equal([true, 'validation_error']);
      const rest = await fetch(`${motor.baseUrl}/v1/send`, {
        method: 'POST', headers: { 'content-type': 'application/json', authorization: `ApiKey ${b.apiKey}` },
        body: `{"from":"app@${domain}","to":"a@x.test","subject":"s","text":"t","dryRun":true,"${field}":{"__proto__":"x"}}`,
      });
      expect([rest.status, ((await rest.json()) as { code: string }).code], `POST /v1/send with ${field}`).to.deep.equal([422, 'validation_error']);
    }
  });

  it('a body over the size limit is refused (413), not read whole', async () => {
    const r = await post(callOf('send_email', { motorBlockId: 'x', from: 'a@x.test', to: 'b@x.test', subject: 's', text: 'x'.repeat(13 * 1024 * 1024) }));
    expect(r.status).to.equal(413);
  });

  it('still answers a normal call afterwards', async () => {
    const agent = await connectAgent(motor, FULL, token);
    const r = await call(agent, 'list_motor_blocks');
    expect(r.isError, JSON.stringify(r.json)).to.equal(false);
    expect(JSON.stringify(r.json)).to.include(b.motorBlockId);
    expect(({} as Record<string, unknown>).polluted).to.equal(undefined);
    await agent.close();
  });
});
