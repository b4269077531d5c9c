/**
 * Reputation (SPEC "Reputation, deliverability, anomalies"): a score from 0 to 100 computed from
 * the bounce, complaint and failure rates over the plan's retention window. Pure.
 *
 *   bounceRate    = bounced    / total × 100
 *   complaintRate = complained / total × 100
 *   failRate      = failed     / total × 100
 *   score = clamp(0, 100, round(100 − 5 × bounceRate − 200 × complaintRate − 2 × failRate))
 *
 * (total = every recipient accepted in the window; rates unrounded inside the formula.) Weights
 * follow mailbox providers' published thresholds: a 2 % bounce rate costs 10 points, 5 % costs 25;
 * complaints weigh 40× more than bounces (0.1 % costs 20 points, 0.5 % empties the score);
 * local failures (no MX, lifetime exceeded) weigh less than bounces since no receiver saw them.
 * No traffic = 100.
 */
import { percent, type OutcomeTotals } from './rates';

export const REPUTATION_WEIGHTS = { bounce: 5, complaint: 200, fail: 2 } as const;

export interface Reputation {
  score: number;
  windowDays: number;
  totals: OutcomeTotals;
  rates: { bounceRate: number; complaintRate: number; failRate: number };
}

export function reputationScore(t: OutcomeTotals): number {
  if (t.total <= 0) return 100;
  const rate = (n: number) => (n / t.total) * 100;
  const raw = 100 - REPUTATION_WEIGHTS.bounce * rate(t.bounced) - REPUTATION_WEIGHTS.complaint * rate(t.complained) - REPUTATION_WEIGHTS.fail * rate(t.failed);
  return Math.max(0, Math.min(100, Math.round(raw)));
}

export function reputationOf(totals: OutcomeTotals, windowDays: number): Reputation {
  return {
    score: reputationScore(totals),
    windowDays,
    totals: { total: totals.total, delivered: totals.delivered, bounced: totals.bounced, complained: totals.complained, failed: totals.failed },
    rates: {
      bounceRate: percent(totals.bounced, totals.total),
      complaintRate: percent(totals.complained, totals.total),
      failRate: percent(totals.failed, totals.total),
    },
  };
}
