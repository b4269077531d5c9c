import { randomBytes } from 'node:crypto';
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
import { startTestMotor, type TestMotor } from '../support/motor';
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
