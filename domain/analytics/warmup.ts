/**
 * Warm-up schedule of a new sending domain (SPEC 429 `rate_limited_warmup`). A domain's first
 * weeks are capped per UTC day so receivers see its volume grow gradually. Day 1 is the UTC day of
 * the domain's first accepted send (today when it has not sent yet). The cap is counted per sending
 * domain: every block on the domain draws on the same daily buffer. Pure.
 *
 * | domain day | recipients per UTC day |
 * |---|---|
 * | 1 | 50 | 2 | 100 | 3 | 250 | 4 | 500 | 5 | 1 000 | 6 | 2 000 | 7 | 5 000 |
 * | 8 | 10 000 | 9 | 20 000 | 10 | 40 000 | 11 | 70 000 | 12 | 100 000 | 13 | 150 000 | 14 | 200 000 |
 * | 15 and later | no warm-up cap |
 */
export const WARMUP_SCHEDULE: readonly number[] = [50, 100, 250, 500, 1_000, 2_000, 5_000, 10_000, 20_000, 40_000, 70_000, 100_000, 150_000, 200_000];

const DAY_MS = 86_400_000;

/** 1-based UTC day of the warm-up (1 = the UTC day of the domain's first accepted send). */
export function warmupDay(startedAt: Date, now: Date): number {
  const start = Math.floor(startedAt.getTime() / DAY_MS);
  const today = Math.floor(now.getTime() / DAY_MS);
  return Math.max(1, today - start + 1);
}

export interface Warmup { day: number; dailyCap: number }

/** The warm-up cap that applies today, or null once the domain has finished warming up. */
export function warmupCap(startedAt: Date, now: Date): Warmup | null {
  const day = warmupDay(startedAt, now);
  return day <= WARMUP_SCHEDULE.length ? { day, dailyCap: WARMUP_SCHEDULE[day - 1] } : null;
}
