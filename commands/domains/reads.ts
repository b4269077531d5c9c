import type { Knex } from 'knex';
import type { EventStore } from '../../domain/eventStore';
import { streamName } from '../../domain/eventStore';
import { fail } from '../../domain/errors';
import { dashboardLink, planOf, type Config } from '../../infra/config';
import { getAccount, getBlock, getDomain, getSandboxOfAccount, listBlocksOfAccount, listDomainsOfAccount, type BlockRecord } from '../../projections/directory/queries';
import { resourceOfRecord } from './handlers';

/**
 * Composed reads of the public API: a block's non-sensitive configuration and the account's
 * state (domains, blocks, sandbox, next step). docs/DOMAINS.md.
 */

export interface BlockConfig {
  id: string;
  name: string;
  type: string;
  status: string;
  description: string | null;
  activeAuthMethod: string;
  smtp_username: string;
  /** Configured send limits (the block's own, else its plan's). */
  limits: { burst: number; hourly: number; daily: number; source: 'block' | 'plan' };
  domain: {
    id: string; domain: string | null; status: 'pending_verification' | 'verified' | 'missing'; verified: boolean; sendReady: boolean;
    dkimMode: string | null; sandbox: boolean; dkim_configured: boolean; spf_configured: boolean; dmarc_configured: boolean; lastCheckedAt: string | null;
  };
  /** Always false: passwords, API-key secrets and certificates are never returned by the API. */
  credentialsAvailable: false;
  /** Where the owner manages credentials. */
  dashboardUrl: string;
  createdAt: string;
}

export async function blockConfig(db: Knex, config: Pick<Config, 'serviceDomain' | 'authPublicUrl' | 'plans' | 'defaultPlan' | 'accountFallback'>, accountId: string, motorBlockId: string): Promise<BlockConfig> {
  const block = await getBlock(db, motorBlockId);
  if (!block || block.accountId !== accountId || block.status === 'deleted') throw fail('motor_block_not_found', 404, 'No such Motor Block in this account');
  const [domain, account] = await Promise.all([getDomain(db, block.domainId), getAccount(db, accountId)]);
  const plan = planOf(config, account?.plan ?? null).plan;
  const own = block.limits.burst !== null && block.limits.hourly !== null && block.limits.daily !== null;
  const d = domain ? resourceOfRecord(domain, config.serviceDomain) : null;
  return {
    id: block.id, name: block.name, type: block.type, status: block.status, description: block.description, activeAuthMethod: block.authMethod,
    smtp_username: block.smtpUsername,
    limits: own ? { burst: block.limits.burst!, hourly: block.limits.hourly!, daily: block.limits.daily!, source: 'block' } : { burst: plan.burst, hourly: plan.hourly, daily: plan.daily, source: 'plan' },
    domain: d
      ? { id: d.id, domain: d.domain, status: d.status, verified: d.verified, sendReady: d.sendReady, dkimMode: d.dkimMode, sandbox: d.sandbox, dkim_configured: d.dkim_configured, spf_configured: d.spf_configured, dmarc_configured: d.dmarc_configured, lastCheckedAt: d.lastCheckedAt }
      : { id: block.domainId, domain: null, status: 'missing', verified: false, sendReady: false, dkimMode: null, sandbox: false, dkim_configured: false, spf_configured: false, dmarc_configured: false, lastCheckedAt: null },
    credentialsAvailable: false,
    dashboardUrl: dashboardLink(config, `/dashboard/motor-blocks/${block.id}`),
    createdAt: new Date(block.createdAt).toISOString(),
  };
}

export type NextStep = 'add_domain' | 'verify_domain' | 'configure_dns' | 'create_motor_block' | 'reactivate_motor_block' | 'send';

export interface AccountState {
  accountId: string;
  plan: string | null;
  domains: {
    total: number; verified: number; sendReady: number;
    items: Array<{ id: string; domain: string; status: 'pending_verification' | 'verified'; verified: boolean; sendReady: boolean; sandbox: boolean; dkimMode: string; dkim_configured: boolean; spf_configured: boolean; dmarc_configured: boolean; lastCheckedAt: string | null }>;
  };
  motorBlocks: {
    /** Any block that is not deleted (sandbox included). */
    exists: boolean;
    total: number; active: number; inactive: number;
    /** Blocks other than the sandbox block. */
    production: number;
  };
  sandbox: {
    provisioned: boolean; handle: string | null; domainId: string | null;
    /** The sandbox block, after conversion the production block it became; kept once that block is deleted. */
    motorBlockId: string | null;
    /** That block's status (`deleted` once deleted); null before provisioning, or while the block is not in the directory yet. */
    motorBlockStatus: BlockRecord['status'] | null;
    /** Whether the sandbox was converted: a fact of its history, true also after the block it became is deleted. */
    converted: boolean;
    convertedAt: string | null;
  };
  nextStep: NextStep;
  nextAction: string;
}

/**
 * One composed answer, working before any block exists. Whether there is a sandbox comes from the
 * account stream (SandboxProvisioned); whether it was converted from the directory's sandbox row,
 * which keeps the conversion when the block it made is deleted (the block row's type does not).
 */
export async function accountState(db: Knex, store: EventStore, config: Pick<Config, 'serviceDomain'>, accountId: string): Promise<AccountState> {
  const [account, domains, blocks, accountEvents, sandboxRow] = await Promise.all([
    getAccount(db, accountId), listDomainsOfAccount(db, accountId), listBlocksOfAccount(db, accountId), store.readStream(streamName('account', accountId)),
    getSandboxOfAccount(db, accountId),
  ]);
  const provisioned = [...accountEvents].reverse().find((e) => e.type === 'SandboxProvisioned');
  const sp = provisioned?.data as { handle?: string; domainId?: string; motorBlockId?: string } | undefined;
  const live = blocks.filter((b) => b.status !== 'deleted');
  const sandboxBlock = sp?.motorBlockId ? blocks.find((b) => b.id === sp.motorBlockId) : undefined;
  const convertedAt = sp && sandboxRow?.convertedAt ? new Date(sandboxRow.convertedAt).toISOString() : null;
  const production = live.filter((b) => b.type !== 'sandbox');
  const items = domains.map((r) => resourceOfRecord(r, config.serviceDomain)).map((d) => ({
    id: d.id, domain: d.domain, status: d.status, verified: d.verified, sendReady: d.sendReady, sandbox: d.sandbox, dkimMode: d.dkimMode,
    dkim_configured: d.dkim_configured, spf_configured: d.spf_configured, dmarc_configured: d.dmarc_configured, lastCheckedAt: d.lastCheckedAt,
  }));
  const own = items.filter((d) => !d.sandbox);
  let nextStep: NextStep;
  let nextAction: string;
  if (own.length === 0) {
    nextStep = 'add_domain';
    nextAction = sp ? 'Send test mail through the sandbox block, and add your own domain with POST /domains when ready' : 'Add a sending domain with POST /domains {"domain": "example.com"} (or provision a sandbox with POST /account/sandbox/provision)';
  } else if (!own.some((d) => d.verified)) {
    nextStep = 'verify_domain';
    nextAction = `Publish the ownership TXT record of ${own[0].domain} shown in dnsRecords, then POST /domains/${own[0].id}/verify`;
  } else if (!own.some((d) => d.sendReady)) {
    const d = own.find((x) => x.verified)!;
    nextStep = 'configure_dns';
    nextAction = `Publish the SPF and DKIM records of ${d.domain}, then POST /domains/${d.id}/check-dns`;
  } else if (production.length === 0) {
    nextStep = 'create_motor_block';
    nextAction = 'Create a Motor Block on your verified domain with POST /account/motor-blocks';
  } else if (!production.some((b) => b.status === 'active')) {
    nextStep = 'reactivate_motor_block';
    nextAction = 'Reactivate a Motor Block with POST /account/motor-blocks/{id}/reactivate';
  } else {
    nextStep = 'send';
    nextAction = 'Send with POST /v1/send using a Motor Block API key';
  }
  return {
    accountId, plan: account?.plan ?? null,
    domains: { total: items.length, verified: items.filter((d) => d.verified).length, sendReady: items.filter((d) => d.sendReady).length, items },
    motorBlocks: {
      exists: live.length > 0, total: live.length, active: live.filter((b) => b.status === 'active').length,
      inactive: live.filter((b) => b.status === 'inactive').length, production: production.length,
    },
    sandbox: {
      provisioned: !!sp, handle: sp?.handle ?? null, domainId: sp?.domainId ?? null, motorBlockId: sp?.motorBlockId ?? null,
      motorBlockStatus: sandboxBlock?.status ?? null, converted: convertedAt !== null, convertedAt,
    },
    nextStep, nextAction,
  };
}
