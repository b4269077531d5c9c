import { fail } from '../../domain/errors';
import { getBlock, getDomain } from '../../projections/directory/queries';
import { checkDns, resourceOfRecord, type DomainDeps, type DomainResource } from './handlers';

/**
 * GET /motor-blocks/{id}/domain-health: cache-first. The default answer is the stored flags and
 * per-record results; a domain never checked, or last checked more than
 * DOMAIN_HEALTH_STALE_SECONDS ago, gets an asynchronous re-check scheduled in this process (one
 * at a time per domain) whose result the next call sees. `refresh=true` runs the check now,
 * capped at DOMAIN_HEALTH_LIVE_TIMEOUT_MS, and answers with it. docs/DOMAINS.md.
 */

export interface DomainHealth {
  motorBlockId: string;
  /** `cached`: fresh stored result; `stale`: stored result, a re-check was scheduled by this call; `refreshing`: a re-check is already running; `live`: checked for this answer. */
  source: 'cached' | 'stale' | 'refreshing' | 'live';
  /** When the DNS was last checked (null: never). */
  checkedAt: string | null;
  refreshScheduled: boolean;
  staleAfterSeconds: number;
  sendReady: boolean;
  domain: DomainResource;
}

/** The domain handlers' dependencies; their logger also takes a background re-check's failure. */
export type HealthDeps = DomainDeps;

/** In-flight background re-checks, per process, by domain id. */
export class DomainHealthRefresher {
  private readonly running = new Map<string, Promise<void>>();

  isRunning(domainId: string): boolean { return this.running.has(domainId); }

  /** Starts a re-check unless one is running; true when this call started it. */
  schedule(deps: HealthDeps, accountId: string, domainId: string): boolean {
    if (this.running.has(domainId)) return false;
    const job = checkDns(deps, { accountId, actor: 'system:domain-health' }, domainId)
      .then(() => undefined, (err: unknown) => { deps.logger.warn({ err, domainId }, 'domain health refresh failed'); })
      .finally(() => { this.running.delete(domainId); });
    this.running.set(domainId, job);
    return true;
  }

  /** Waits for every running re-check (tests, shutdown). */
  async idle(): Promise<void> { await Promise.all([...this.running.values()]); }
}

export async function domainHealth(deps: HealthDeps, refresher: DomainHealthRefresher, accountId: string, motorBlockId: string, refresh: boolean): Promise<DomainHealth> {
  const block = await getBlock(deps.db, motorBlockId);
  if (!block || block.accountId !== accountId || block.status === 'deleted') throw fail('motor_block_not_found', 404, 'No such Motor Block in this account');
  const staleAfterSeconds = deps.config.domainChecks.healthStaleSeconds;
  if (refresh) {
    const domain = await checkDns(deps, { accountId, actor: 'system:domain-health' }, block.domainId, { timeoutMs: deps.config.domainChecks.liveTimeoutMs });
    return { motorBlockId, source: 'live', checkedAt: domain.lastCheckedAt, refreshScheduled: false, staleAfterSeconds, sendReady: domain.sendReady, domain };
  }
  const record = await getDomain(deps.db, block.domainId);
  if (!record || record.accountId !== accountId) throw fail('domain_not_found', 404, 'The Motor Block has no domain in this account');
  const domain = resourceOfRecord(record, deps.config.serviceDomain);
  const checkedAt = record.dnsCheckedAt ? new Date(record.dnsCheckedAt) : null;
  const stale = !record.sandbox && (checkedAt === null || deps.clock.now().getTime() - checkedAt.getTime() > staleAfterSeconds * 1000);
  let source: DomainHealth['source'] = 'cached';
  let refreshScheduled = false;
  if (stale) {
    refreshScheduled = refresher.schedule(deps, accountId, record.id);
    source = refreshScheduled ? 'stale' : 'refreshing';
  }
  return { motorBlockId, source, checkedAt: checkedAt?.toISOString() ?? null, refreshScheduled, staleAfterSeconds, sendReady: domain.sendReady, domain };
}

const refreshers = new WeakMap<object, DomainHealthRefresher>();
/** The refresher of one process context (the HttpContext): background re-checks are de-duplicated there. */
export function refresherFor(owner: object): DomainHealthRefresher {
  let r = refreshers.get(owner);
  if (!r) {
    r = new DomainHealthRefresher();
    refreshers.set(owner, r);
  }
  return r;
}
