/**
 * Reputation-based throttle and effective send ceilings (SPEC "Block rate limits": effective
 * ceiling = the lower of the configured limits and any active reputation throttle). Pure.
 *
 * Policy (only with at least THROTTLE_MIN_SAMPLE recipients in the reputation window, so a handful
 * of early bounces cannot throttle a new block):
 *   score < 50 → every block ceiling × 0.25, throttleReason "reputation_critical"
 *   score < 70 → every block ceiling × 0.5,  throttleReason "reputation_low"
 * A lowered ceiling is floor(limit × factor), never below 1.
 */
import type { Reputation } from './reputation';

export interface BlockLimits { burst: number; hourly: number; daily: number }

export const THROTTLE_MIN_SAMPLE = 100;
export const THROTTLE_TIERS: ReadonlyArray<{ below: number; factor: number; reason: string }> = [
  { below: 50, factor: 0.25, reason: 'reputation_critical' },
  { below: 70, factor: 0.5, reason: 'reputation_low' },
];

export interface Throttle { factor: number; reason: string; score: number }

export function reputationThrottle(rep: Pick<Reputation, 'score' | 'totals'>): Throttle | null {
  if (rep.totals.total < THROTTLE_MIN_SAMPLE) return null;
  const tier = THROTTLE_TIERS.find((t) => rep.score < t.below);
  return tier ? { factor: tier.factor, reason: tier.reason, score: rep.score } : null;
}

export interface EffectiveLimits {
  /** As configured (block limits, else the plan's), unaffected by throttling. */
  limits: BlockLimits;
  /** What the quota enforces. */
  effective: BlockLimits;
  throttled: boolean;
  throttleReason: string | null;
}

export function effectiveLimits(configured: BlockLimits, throttle: Throttle | null): EffectiveLimits {
  if (!throttle) return { limits: { ...configured }, effective: { ...configured }, throttled: false, throttleReason: null };
  const lower = (n: number) => Math.min(n, Math.max(1, Math.floor(n * throttle.factor)));
  return {
    limits: { ...configured },
    effective: { burst: lower(configured.burst), hourly: lower(configured.hourly), daily: lower(configured.daily) },
    throttled: true,
    throttleReason: throttle.reason,
  };
}
