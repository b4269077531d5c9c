import { z } from 'zod';
import { addDomain, checkDns, listDomains, resourceOfRecord, rotateDkim, verifyDomain, type DomainActor } from '../../../commands/domains/handlers';
import { domainDeps } from '../../../commands/domains/http';
import { fail } from '../../../domain/errors';
import { isUuid } from '../../../domain/ids';
import { getDomain } from '../../../projections/directory/queries';
import { defineTool, type ToolEnv } from '../tool';

/**
 * read:domains and manage:domains: the handlers of /api/public/v1/domains (commands/domains/handlers.ts),
 * acting on the grant's account.
 */

const actor = ({ agent }: ToolEnv): DomainActor => ({ accountId: agent.accountId, actor: agent.actor });
const domainId = z.string().describe('A domain id of the account (list_domains)');

export const listDomainsTool = defineTool({
  name: 'list_domains',
  scope: 'read:domains',
  readOnly: true,
  description: 'List the account\'s sending domains with their verification status, DNS records to publish (with the last check\'s result each) and sendReady.',
  input: {},
  async run({ ctx, agent }) {
    return { domains: await listDomains(ctx, agent.accountId) };
  },
});

export const getDomainTool = defineTool({
  name: 'get_domain',
  scope: 'read:domains',
  readOnly: true,
  description: 'One sending domain: status, sendReady, SPF/DKIM/DMARC readiness and every DNS record with its last check result (reason and what was found when not ok).',
  input: { domainId },
  async run({ ctx, agent }, { domainId }) {
    if (!isUuid(domainId)) throw fail('invalid_id', 400, 'Domain id must be a uuid');
    const record = await getDomain(ctx.db, domainId.toLowerCase());
    if (!record || record.accountId !== agent.accountId) throw fail('domain_not_found', 404, 'No such domain on this account');
    return resourceOfRecord(record, ctx.config.serviceDomain);
  },
});

export const addDomainTool = defineTool({
  name: 'add_domain',
  scope: 'manage:domains',
  readOnly: false,
  description: 'Add a sending domain to the account. The answer lists the DNS records to publish (ownership TXT, SPF, DKIM, DMARC); then call verify_domain.',
  input: {
    domain: z.string().describe('e.g. example.com'),
    dkimMode: z.enum(['txt', 'cname_managed']).optional()
      .describe('txt (default): publish the DKIM key as TXT; cname_managed: publish a CNAME, the service manages and can rotate the key'),
  },
  async run(env, body) {
    return addDomain(domainDeps(env.ctx), actor(env), body);
  },
});

export const verifyDomainTool = defineTool({
  name: 'verify_domain',
  scope: 'manage:domains',
  readOnly: false,
  description: 'Look up the ownership TXT record now (and refresh SPF/DKIM/DMARC readiness in the same pass); returns the domain with verified and sendReady.',
  input: { domainId },
  async run(env, { domainId }) {
    return verifyDomain(domainDeps(env.ctx), actor(env), domainId);
  },
});

export const checkDomainDnsTool = defineTool({
  name: 'check_domain_dns',
  scope: 'manage:domains',
  readOnly: false,
  description: 'Run a live DNS check of every record of the domain and store the result (spf_configured, dkim_configured, dmarc_configured, per-record status).',
  input: { domainId },
  async run(env, { domainId }) {
    return checkDns(domainDeps(env.ctx), actor(env), domainId);
  },
});

export const rotateDomainDkimTool = defineTool({
  name: 'rotate_domain_dkim',
  scope: 'manage:domains',
  readOnly: false,
  description: 'cname_managed domains only: put a new DKIM key behind the same CNAME (no DNS change). Refused with dkim_rotation_not_available otherwise.',
  input: { domainId },
  async run(env, { domainId }) {
    return rotateDkim(domainDeps(env.ctx), actor(env), domainId);
  },
});

export const DOMAIN_TOOLS = [listDomainsTool, getDomainTool, addDomainTool, verifyDomainTool, checkDomainDnsTool, rotateDomainDkimTool];
