/** Counts and percentages shared by every analytics figure. Pure. */

export interface OutcomeTotals {
  /** Recipients accepted (every recipient of every send counts once). */
  total: number;
  delivered: number;
  bounced: number;
  complained: number;
  failed: number;
}

/** `part / whole` as a percentage rounded to 2 decimals; 0 when `whole` is 0. */
export function percent(part: number, whole: number): number {
  if (whole <= 0) return 0;
  return Math.round((part / whole) * 10_000) / 100;
}

/**
 * deliveryRate counts a complained recipient as delivered: a complaint can only come from a
 * mailbox the message reached (the complaint supersedes `delivered` as its outcome).
 */
export function deliveryRate(t: OutcomeTotals): number {
  return percent(t.delivered + t.complained, t.total);
}
