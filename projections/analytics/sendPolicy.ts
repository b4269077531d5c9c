/**
 * The send ceilings that apply to a block right now: its configured limits (else its plan's),
 * lowered by the reputation throttle (domain/analytics/throttle.ts) and, when enforced, by its
 * domain's warm-up cap (domain/analytics/warmup.ts); and the account's plan ceilings. Shared by the
 * send path (commands/send/sendMessage.ts) and GET .../rate-limits, so both show and enforce the
 * same numbers.
 */
import type { Knex } from 'knex';
import { reputationThrottle, effectiveLimits, type BlockLimits, type EffectiveLimits } from '../../domain/analytics/throttle';
import { warmupCap, type Warmup } from '../../domain/analytics/warmup';
import { planOf, type Config, type PlanLimits } from '../../infra/config';
import { reputation } from './queries';

export interface SendPolicy {
  plan: PlanLimits;
  planSource: 'plan' | 'fallback';
  block: EffectiveLimits;
  account: { hourly: number; daily: number };
  /** Today's warm-up cap of the block's domain (null once warmed up). */
  warmup: Warmup | null;
  /** True when the warm-up cap is what lowers the effective daily ceiling. */
  warmupBinding: boolean;
}

export interface PolicyInputs {
  block: { id: string; limits: { burst: number | null; hourly: number | null; daily: number | null } };
  accountPlan: string | null | undefined;
  domainAddedAt: Date | null;
}

type PolicyConfig = Pick<Config, 'plans' | 'defaultPlan' | 'accountFallback' | 'enforceWarmup'>;

/** Pure: the policy from the inputs and the block's reputation (null = unknown: no throttle). */
export function sendPolicyOf(config: PolicyConfig, inputs: PolicyInputs, rep: Parameters<typeof reputationThrottle>[0] | null, now: Date): SendPolicy {
  const { plan, source } = planOf(config, inputs.accountPlan);
  const l = inputs.block.limits;
  const configured: BlockLimits = { burst: l.burst ?? plan.burst, hourly: l.hourly ?? plan.hourly, daily: l.daily ?? plan.daily };
  const block = effectiveLimits(configured, rep ? reputationThrottle(rep) : null);
  const warmup = inputs.domainAddedAt ? warmupCap(inputs.domainAddedAt, now) : null;
  let warmupBinding = false;
  if (config.enforceWarmup && warmup && warmup.dailyCap < block.effective.daily) {
    block.effective = { ...block.effective, daily: warmup.dailyCap };
    warmupBinding = true;
    if (!block.throttled) {
      block.throttled = true;
      block.throttleReason = 'domain_warmup';
    }
  }
  return { plan, planSource: source, block, account: { hourly: plan.accountHourly, daily: plan.accountDaily }, warmup, warmupBinding };
}

/**
 * Loads the block's reputation from the analytics read model, cached per block for `ttlMs` (the
 * send path calls it on every send). A read-model failure means "no throttle": analytics being
 * down must never stop sending.
 */
export class ReputationCache {
  private readonly entries = new Map<string, { at: number; value: Awaited<ReturnType<typeof reputation>> | null }>();
  constructor(private readonly db: Knex, private readonly ttlMs = 30_000, private readonly clock: () => number = Date.now) {}

  async get(motorBlockId: string, windowDays: number, now: Date): Promise<Awaited<ReturnType<typeof reputation>> | null> {
    const key = `${motorBlockId}:${windowDays}`;
    const hit = this.entries.get(key);
    if (hit && this.clock() - hit.at < this.ttlMs) return hit.value;
    let value: Awaited<ReturnType<typeof reputation>> | null;
    try {
      value = await reputation(this.db, motorBlockId, windowDays, now);
    } catch {
      value = null;
    }
    if (this.entries.size > 50_000) this.entries.clear();
    this.entries.set(key, { at: this.clock(), value });
    return value;
  }
}

export async function loadSendPolicy(
  db: Knex, config: PolicyConfig, inputs: PolicyInputs, now: Date, cache?: ReputationCache,
): Promise<SendPolicy> {
  const { plan } = planOf(config, inputs.accountPlan);
  const rep = cache
    ? await cache.get(inputs.block.id, plan.retentionDays, now)
    : await reputation(db, inputs.block.id, plan.retentionDays, now).catch(() => null);
  return sendPolicyOf(config, inputs, rep, now);
}
