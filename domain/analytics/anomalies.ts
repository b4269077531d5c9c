/**
 * Anomaly rule (SPEC "Motor Block analytics": flag when today's bounce rate exceeds 2 times the
 * historical average by more than 2 percentage points; 14-day window). Pure.
 *
 * - todayRate = bounced / total of the current UTC day (so far), in %.
 * - avgRate   = Σ bounced / Σ total over the 14 full UTC days before today (pooled, so a quiet day
 *   does not weigh as much as a busy one), in %; 0 when there was no traffic.
 * - flagged when todayRate − 2 × avgRate > 2 (percentage points), and today has traffic.
 *   Rates are compared unrounded; the entry reports them rounded to 2 decimals.
 */
import { percent } from './rates';

export const ANOMALY_WINDOW_DAYS = 14;
export const ANOMALY_FACTOR = 2;
export const ANOMALY_MARGIN_PP = 2;

export interface DayCounts { total: number; bounced: number }
export interface Anomaly { type: 'bounce_rate_spike'; todayRate: number; avgRate: number }

export function detectAnomalies(today: DayCounts, history: readonly DayCounts[]): Anomaly[] {
  if (today.total <= 0) return [];
  const sum = history.reduce((a, d) => ({ total: a.total + d.total, bounced: a.bounced + d.bounced }), { total: 0, bounced: 0 });
  const todayRate = (today.bounced / today.total) * 100;
  const avgRate = sum.total > 0 ? (sum.bounced / sum.total) * 100 : 0;
  if (todayRate - ANOMALY_FACTOR * avgRate > ANOMALY_MARGIN_PP) {
    return [{ type: 'bounce_rate_spike', todayRate: percent(today.bounced, today.total), avgRate: percent(sum.bounced, sum.total) }];
  }
  return [];
}
