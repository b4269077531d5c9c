/**
 * The send ceilings that apply to a block right now: its configured limits (else its plan's),
 * lowered by the reputation throttle (domain/analytics/throttle.ts); its sending domain's warm-up
 * cap (domain/analytics/warmup.ts, counted per domain, shared by every block on the domain); and
 * the account's plan ceilings. Shared by the send path (commands/send/sendMessage.ts) and
 * GET .../rate-limits, so both show and enforce the same numbers.
 */
import type { Knex } from 'knex';
import { reputationThrottle, effectiveLimits, type BlockLimits, type EffectiveLimits } from '../../domain/analytics/throttle';
import { warmupCap, type Warmup } from '../../domain/analytics/warmup';
import { planOf, type Config, type PlanLimits } from '../../infra/config';
import { domainFirstSend, reputation } from './queries';
import { TtlCache } from '../../infra/ttlCache';

export interface SendPolicy {
  plan: PlanLimits;
  planSource: 'plan' | 'fallback';
  /** The block's effective ceilings as shown (daily lowered to the warm-up cap when that binds). */
  block: EffectiveLimits;
  /** The ceilings the block's own counters are checked against (the warm-up cap is not among them). */
  blockQuota: { burst: number; hourly: number; daily: number };
  account: { hourly: number; daily: number };
  /** Today's warm-up cap of the block's domain (null once warmed up). */
  warmup: Warmup | null;
  /**
   * True when the warm-up cap is enforced and lower than the block's daily ceiling: the domain's
   * daily counter (all blocks on the domain) is checked against `warmup.dailyCap`.
   */
  warmupBinding: boolean;
}

export interface PolicyInputs {
  block: { id: string; limits: { burst: number | null; hourly: number | null; daily: number | null } };
  accountPlan: string | null | undefined;
  /** The block's sending domain as read now (null: none, no warm-up). */
  domainId: string | null;
  /** The domain's first accepted send (day 1 of its warm-up); null = none yet, so today is day 1. */
  domainFirstSendAt?: Date | null;
}

type PolicyConfig = Pick<Config, 'plans' | 'defaultPlan' | 'accountFallback' | 'enforceWarmup'>;

/** Pure: the policy from the inputs and the block's reputation (null = unknown: no throttle). */
export function sendPolicyOf(config: PolicyConfig, inputs: PolicyInputs, rep: Parameters<typeof reputationThrottle>[0] | null, now: Date): SendPolicy {
  const { plan, source } = planOf(config, inputs.accountPlan);
  const l = inputs.block.limits;
  const configured: BlockLimits = { burst: l.burst ?? plan.burst, hourly: l.hourly ?? plan.hourly, daily: l.daily ?? plan.daily };
  const block = effectiveLimits(configured, rep ? reputationThrottle(rep) : null);
  const blockQuota = { ...block.effective };
  const warmup = inputs.domainId ? warmupCap(inputs.domainFirstSendAt ?? now, now) : null;
  let warmupBinding = false;
  if (config.enforceWarmup && warmup && warmup.dailyCap < block.effective.daily) {
    block.effective = { ...block.effective, daily: warmup.dailyCap };
    warmupBinding = true;
    if (!block.throttled) {
      block.throttled = true;
      block.throttleReason = 'domain_warmup';
    }
  }
  return { plan, planSource: source, block, blockQuota, account: { hourly: plan.accountHourly, daily: plan.accountDaily }, warmup, warmupBinding };
}

/**
 * Loads the block's reputation from the analytics read model, cached per block for `ttlMs` (the
 * send path calls it on every send; concurrent misses share one query, infra/ttlCache.ts). A
 * read-model failure means "no throttle": analytics being down must never stop sending.
 */
export class ReputationCache {
  private readonly reputations: TtlCache<Awaited<ReturnType<typeof reputation>> | null>;
  private readonly firstSends: TtlCache<Date | null>;
  constructor(private readonly db: Knex, ttlMs = 30_000, clock: () => number = Date.now) {
    this.reputations = new TtlCache(ttlMs, clock);
    this.firstSends = new TtlCache(ttlMs, clock);
  }

  get(motorBlockId: string, windowDays: number, now: Date): Promise<Awaited<ReturnType<typeof reputation>> | null> {
    return this.reputations.get(`${motorBlockId}:${windowDays}`, () => reputation(this.db, motorBlockId, windowDays, now).catch(() => null));
  }

  /** The domain's first send (same TTL; a read-model failure reads as "none yet": day 1, the strictest cap). */
  firstSend(domainId: string): Promise<Date | null> {
    return this.firstSends.get(domainId, () => domainFirstSend(this.db, domainId).catch(() => null));
  }
}

export async function loadSendPolicy(
  db: Knex, config: PolicyConfig, inputs: PolicyInputs, now: Date, cache?: ReputationCache,
): Promise<SendPolicy> {
  const { plan } = planOf(config, inputs.accountPlan);
  const [rep, domainFirstSendAt] = await Promise.all([
    cache ? cache.get(inputs.block.id, plan.retentionDays, now) : reputation(db, inputs.block.id, plan.retentionDays, now).catch(() => null),
    inputs.domainId === null ? null : cache ? cache.firstSend(inputs.domainId) : domainFirstSend(db, inputs.domainId).catch(() => null),
  ]);
  return sendPolicyOf(config, { ...inputs, domainFirstSendAt }, rep, now);
}
