import { randomBytes, randomUUID } from 'node:crypto';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { expect } from 'chai';
import type { BootstrapResult } from '../../commands/admin/bootstrap';
import { AGENT_SCOPES } from '../../domain/oauth/agent';
import { loadConfig } from '../../infra/config';
import { createLogger } from '../../infra/logger';
import { createRuntime, startRoles } from '../../scripts/runtime';
import { startAuthHarness, type AuthHarness } from '../auth/harness';
import { call, connectAgent, MCP_ENV } from '../mcp/support';
import { grantAgentAccess } from '../support/agentGrant';
import { addDomain } from '../blocks/support';
import { getJson, postJson, startTestMotor, type TestMotor } from '../support/motor';
import { dashboardApi, publicApi } from './support';

const BOUNCE_DOMAIN = 'bounces.operator.test';
/** The bounce domain, a name under it, in upper case, with a trailing dot: each the operator's. */
const REFUSED = [BOUNCE_DOMAIN, `MAIL.${BOUNCE_DOMAIN.toUpperCase()}`, `${BOUNCE_DOMAIN}.`, 'A.b.Bounces.Operator.Test.'];
/** A sibling sharing the suffix without the dot, a name that contains it, and the parent: the tenant's. */
const ALLOWED = ['notbounces.operator.test', 'bounces.operator.test.example', 'operator.test'];

/**
 * BOUNCE_DOMAIN is the operator's (docs/DOMAINS.md "Bounce domain"): no route that adds a sending
 * domain gives it, or a name under it, to a tenant (400 domain_reserved). Without BOUNCE_DOMAIN
 * nothing changes; a domain added then stays when the operator sets it, and the delivering
 * processes name it in a warning at start.
 */
describe('domains and BOUNCE_DOMAIN (int)', function () {
  this.timeout(120_000);
  const FULL = '/v1/service/mcp';
  let h: AuthHarness;
  let motor: TestMotor;
  let owner: BootstrapResult;
  let agent: Client;
  const lines: string[] = [];
  const warnings = () => lines.filter((l) => l.includes('tenant domains at or under BOUNCE_DOMAIN'));

  before(async () => {
    h = await startAuthHarness({ ...MCP_ENV, SERVICE_DOMAIN: 'motor.test', BOUNCE_DOMAIN }, { logLines: lines });
    motor = h.motor;
    owner = await motor.bootstrap();
    const g = await grantAgentAccess(motor, { accountId: owner.accountId, path: FULL, scopes: [...AGENT_SCOPES] });
    agent = await connectAgent(motor, FULL, g.accessToken);
  });
  after(async () => {
    await agent?.close();
    await h?.close();
  });

  it('POST /api/public/v1/domains: 400 domain_reserved for the bounce domain and names under it, nothing added; siblings and the parent are added', async () => {
    const api = publicApi(motor, await motor.token(owner, ['config.manage'], 900));
    for (const domain of REFUSED) {
      const r = await api.post('/domains', { domain });
      expect([r.status, r.body.code], domain).to.deep.equal([400, 'domain_reserved']);
      expect(r.body.success, domain).to.equal(false);
    }
    for (const domain of ALLOWED) expect((await api.post('/domains', { domain })).status, domain).to.equal(201);
    const listed = (await api.get('/domains')).body.data.map((d: { domain: string }) => d.domain);
    expect(listed).to.include.members(ALLOWED);
    expect(listed.filter((n: string) => n === BOUNCE_DOMAIN || n.endsWith(`.${BOUNCE_DOMAIN}`))).to.deep.equal([]);
    expect(warnings(), 'no tenant domain under it at start: no warning').to.deep.equal([]);
  });

  it('POST /api/domains (dashboard session) refuses them the same way', async () => {
    const dash = dashboardApi(motor, (await h.signUp('bounce-dash@rcpt.test')).token);
    for (const domain of REFUSED) {
      const r = await dash.post('/domains', { domain });
      expect([r.status, r.body.code], domain).to.deep.equal([400, 'domain_reserved']);
    }
    expect((await dash.post('/domains', { domain: 'operator.test' })).status).to.equal(201);
    expect((await dash.get('/domains')).body.data.map((d: { domain: string }) => d.domain)).to.deep.equal(['operator.test']);
  });

  it('the MCP tool add_domain refuses them the same way', async () => {
    for (const domain of REFUSED) {
      const r = await call(agent, 'add_domain', { domain });
      expect([r.isError, r.json.error, r.json.status], domain).to.deep.equal([true, 'domain_reserved', 400]);
    }
  });
});

describe('domains added before BOUNCE_DOMAIN named them (int)', function () {
  this.timeout(120_000);
  let motor: TestMotor;
  let owner: BootstrapResult;

  before(async () => {
    motor = await startTestMotor({ env: { SERVICE_DOMAIN: 'motor.test' } });
    owner = await motor.bootstrap();
  });
  after(async () => { await motor?.close(); });

  it('BOUNCE_DOMAIN unset: its name and names under it are added; set later, a delivering process warns at start naming them, and they stay', async () => {
    const api = publicApi(motor, await motor.token(owner, ['config.manage'], 900));
    const added: Record<string, string> = {};
    for (const domain of [BOUNCE_DOMAIN, `mail.${BOUNCE_DOMAIN}`, 'notbounces.operator.test']) {
      const r = await api.post('/domains', { domain });
      expect(r.status, domain).to.equal(201);
      added[domain] = r.body.data.id;
    }

    // The operator sets BOUNCE_DOMAIN and starts a worker process on the same database.
    const lines: string[] = [];
    const rt = await createRuntime(loadConfig({ LOG_LEVEL: 'silent', TOKEN_SECRET: 'test-token-secret-0123456789abcdef0123', SERVICE_DOMAIN: 'motor.test', BOUNCE_DOMAIN: 'Bounces.Operator.Test.' }), {
      databaseUrl: motor.rt.databaseUrl, redisUrl: motor.rt.redisUrl, directoryTtlMs: 0, queuePrefix: `motor-test-${randomBytes(4).toString('hex')}`,
      logger: createLogger('trace', {}, { write: (line: string) => { lines.push(line); } }),
    });
    try {
      const started = await startRoles(rt, ['worker']);
      await started.stop();
    } finally {
      await rt.close();
    }
    const warned = lines.map((l) => JSON.parse(l)).filter((l) => String(l.msg).startsWith('tenant domains at or under BOUNCE_DOMAIN'));
    expect(warned).to.have.length(1);
    expect(warned[0]).to.include({ bounceDomain: BOUNCE_DOMAIN, count: 2 });
    expect(warned[0].domains).to.deep.equal([BOUNCE_DOMAIN, `mail.${BOUNCE_DOMAIN}`].map((name) => ({ name, domainId: added[name], accountId: owner.accountId })));

    // Tenant data is not touched: the domains are still the account's.
    const listed = (await api.get('/domains')).body.data.map((d: { id: string }) => d.id);
    expect(listed).to.include.members(Object.values(added));
  });
});

/**
 * A domain at or under BOUNCE_DOMAIN that a tenant had before the operator set it gets no new
 * Motor Block (docs/BLOCKS.md "Domains at or under BOUNCE_DOMAIN"): create, assign-domain and
 * sandbox convert are 400 domain_reserved on every surface (public routes, the dashboard's sandbox
 * route, the MCP tools; the CLI's bootstrap refuses the domain itself: test/cli/operator.int.test.ts).
 * The blocks already on it keep sending and reactivating.
 */
describe('Motor Blocks on a domain at or under BOUNCE_DOMAIN (int)', function () {
  this.timeout(120_000);
  const FULL = '/v1/service/mcp';
  let h: AuthHarness;
  let motor: TestMotor;
  /** Bootstrapped onto mail.<BOUNCE_DOMAIN> (bootstrap() is not told BOUNCE_DOMAIN): a tenant and its block from before it was set. */
  let owner: BootstrapResult;
  let agent: Client;
  let token: string;
  /** The account's domains: two from before BOUNCE_DOMAIN was set, and the parent (the tenant's own). */
  const ids = { under: '', at: '', parent: '' };

  const auth = () => ({ authorization: `Bearer ${token}` });
  const post = (path: string, body: unknown, headers: Record<string, string> = {}) => postJson(`${motor.baseUrl}/api/public/v1${path}`, body, { ...auth(), ...headers });
  const createBlock = (body: Record<string, unknown>) => post('/account/motor-blocks', body, { 'Idempotency-Key': randomUUID() });
  /** Every event that puts a block on a domain: none may be appended by a refusal. */
  const placements = async () => (await motor.rt.db.raw(
    `select count(*)::int as n from events where type in ('MotorBlockCreated', 'AccountBlockAdded', 'MotorBlockDomainAssigned', 'SandboxConverted')`,
  )).rows[0].n as number;
  const reserved = () => [ids.under, ids.at];

  before(async () => {
    h = await startAuthHarness({ ...MCP_ENV, SERVICE_DOMAIN: 'motor.test', BOUNCE_DOMAIN });
    motor = h.motor;
    owner = await motor.bootstrap({ domain: `mail.${BOUNCE_DOMAIN}` });
    ids.under = owner.domainId;
    ids.at = await addDomain(motor, owner.accountId, { name: BOUNCE_DOMAIN });
    ids.parent = await addDomain(motor, owner.accountId, { name: 'operator.test' });
    token = await motor.token(owner, ['config.manage', 'sandbox.manage'], 900);
    const g = await grantAgentAccess(motor, { accountId: owner.accountId, path: FULL, scopes: [...AGENT_SCOPES] });
    agent = await connectAgent(motor, FULL, g.accessToken);
  });
  after(async () => {
    await agent?.close();
    await h?.close();
  });

  it('POST /api/public/v1/account/motor-blocks: 400 domain_reserved naming the domain, nothing appended; on the parent the block is created', async () => {
    const before = await placements();
    for (const domainId of reserved()) {
      const r = await createBlock({ name: `reserved ${domainId}`, domainId });
      expect([r.status, r.body.code, r.body.domainId], domainId).to.deep.equal([400, 'domain_reserved', domainId]);
      expect(r.body.success).to.equal(false);
    }
    // Domain ids in capitals are the same ids.
    expect((await createBlock({ name: 'reserved upper', domainId: ids.at.toUpperCase() })).body.code).to.equal('domain_reserved');
    expect(await placements()).to.equal(before);
    const ok = await createBlock({ name: 'on the parent', domainId: ids.parent });
    expect(ok.status, JSON.stringify(ok.body)).to.equal(201);
    expect(ok.body.data.domain).to.include({ id: ids.parent, name: 'operator.test' });
  });

  it('assign-domain onto it: 400 domain_reserved, the block stays on its domain', async () => {
    const made = await createBlock({ name: 'to be moved', domainId: ids.parent });
    expect(made.status).to.equal(201);
    for (const domainId of reserved()) {
      const r = await post(`/account/motor-blocks/${made.body.data.id}/assign-domain`, { domainId, confirm: true });
      expect([r.status, r.body.code], domainId).to.deep.equal([400, 'domain_reserved']);
    }
    const list = await getJson(`${motor.baseUrl}/api/public/v1/account/motor-blocks`, auth());
    expect(list.body.data.find((b: { id: string }) => b.id === made.body.data.id).domain.id).to.equal(ids.parent);
  });

  it('the MCP tool create_motor_block refuses it the same way', async () => {
    const before = await placements();
    for (const domainId of reserved()) {
      const r = await call(agent, 'create_motor_block', { name: `agent ${domainId}`, domainId, idempotencyKey: randomUUID() });
      expect([r.isError, r.json.error, r.json.status], domainId).to.deep.equal([true, 'domain_reserved', 400]);
    }
    expect(await placements()).to.equal(before);
  });

  it('sandbox convert onto it (public route, MCP convert_sandbox, dashboard route): 400 domain_reserved, the sandbox stays unconverted', async () => {
    expect((await post('/account/sandbox/provision', {})).status).to.equal(201);
    // A dashboard account with a domain from before BOUNCE_DOMAIN was set, and its sandbox.
    const user = await h.signUp('bounce-convert@rcpt.test');
    const userDomain = await addDomain(motor, user.accountId, { name: `x.${BOUNCE_DOMAIN}` });
    const dash = dashboardApi(motor, user.token);
    expect((await dash.post('/developer/sandbox/provision', {})).status).to.equal(201);

    const before = await placements();
    for (const domainId of reserved()) {
      const r = await post('/account/sandbox/convert', { domainId });
      expect([r.status, r.body.code], domainId).to.deep.equal([400, 'domain_reserved']);
      const m = await call(agent, 'convert_sandbox', { domainId });
      expect([m.isError, m.json.error, m.json.status], domainId).to.deep.equal([true, 'domain_reserved', 400]);
    }
    const r = await dash.post('/developer/sandbox/convert', { domainId: userDomain });
    expect([r.status, r.body.code]).to.deep.equal([400, 'domain_reserved']);
    expect(await placements()).to.equal(before);
    expect((await getJson(`${motor.baseUrl}/api/public/v1/account/sandbox`, auth())).body.data).to.include({ converted: false, allowlistLocked: true });
    expect((await dash.get('/developer/sandbox')).body.data).to.include({ converted: false, allowlistLocked: true });
  });

  it('the block already on it keeps working: a dry-run send validates, it deactivates and reactivates, an assign of its own domain changes nothing', async () => {
    const dry = await postJson(`${motor.baseUrl}/v1/send`, { from: `app@mail.${BOUNCE_DOMAIN}`, to: 'someone@example.com', subject: 'Hi', text: 'Hello', dryRun: true }, { 'x-api-key': owner.apiKey });
    expect(dry.status, JSON.stringify(dry.body)).to.equal(200);
    expect(dry.body.data).to.include({ acceptanceStatus: 'validated', domain: `mail.${BOUNCE_DOMAIN}` });
    const off = await post(`/account/motor-blocks/${owner.motorBlockId}/deactivate`, { confirm: true });
    expect([off.status, off.body.data?.status]).to.deep.equal([200, 'inactive']);
    const on = await post(`/account/motor-blocks/${owner.motorBlockId}/reactivate`, {});
    expect([on.status, on.body.data?.status], JSON.stringify(on.body)).to.deep.equal([200, 'active']);
    const same = await post(`/account/motor-blocks/${owner.motorBlockId}/assign-domain`, { domainId: ids.under, confirm: true });
    expect([same.status, same.body.data?.domain?.id], JSON.stringify(same.body)).to.deep.equal([200, ids.under]);
    expect((await postJson(`${motor.baseUrl}/v1/send`, { from: `app@mail.${BOUNCE_DOMAIN}`, to: 'someone@example.com', subject: 'Hi', text: 'Hello', dryRun: true }, { 'x-api-key': owner.apiKey })).status).to.equal(200);
  });
});
