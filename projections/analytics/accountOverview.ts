/**
 * Account-wide analytics (the communications API's `GET /analytics/overview`,
 * docs/COMMUNICATIONS.md): the per-block daily rollups of the `analytics` read model summed over
 * every block of the account. Same unit, attribution and rates as the block routes
 * (docs/ANALYTICS.md): recipients of accepted sends, by UTC day of acceptance.
 */
import type { Knex } from 'knex';
import { fail } from '../../domain/errors';
import { dailySummary, withRates, type DailyRow, type Totals, type TotalsWithRates } from './queries';
import { dayOf, hourOf } from './state';

const HOUR_MS = 3_600_000;
const DAY_MS = 86_400_000;
export const OVERVIEW_DAYS = { default: 30, max: 90 } as const;

export interface AccountOverview {
  /** UTC days covered, today included. */
  days: number;
  /** Start of the first day; end of the current hour (the last rollup hour). */
  from: string;
  to: string;
  /** Blocks of the account summed (deleted ones included while their history is kept). */
  blocks: number;
  totals: TotalsWithRates;
  /** One row per UTC day, oldest first, zero-filled. */
  daily: DailyRow[];
}

/**
 * `days`: absent = 30 (or the plan's retention when shorter); 1 to 90 (400 invalid_query); more
 * than the plan's retention is 400 outside_retention_window, as on the block daily-summary route.
 */
export function overviewDays(days: number | undefined, retentionDays: number): number {
  const n = days ?? Math.min(OVERVIEW_DAYS.default, retentionDays);
  if (!Number.isInteger(n) || n < 1 || n > OVERVIEW_DAYS.max) throw fail('invalid_query', 400, `days must be an integer from 1 to ${OVERVIEW_DAYS.max}`);
  if (n > retentionDays) {
    throw fail('outside_retention_window', 400, `days is beyond the ${retentionDays}-day retention window of this plan`, {
      nextAction: `Ask for at most ${retentionDays} days`, details: { retentionDays },
    });
  }
  return n;
}

const zero = (): Totals => ({ messages: 0, total: 0, delivered: 0, bounced: 0, complained: 0, failed: 0, deferred: 0 });
const FIELDS = ['messages', 'total', 'delivered', 'bounced', 'complained', 'failed', 'deferred'] as const;

export async function accountOverview(db: Knex, motorBlockIds: readonly string[], days: number, now: Date): Promise<AccountOverview> {
  const first = dayOf(now).getTime() - (days - 1) * DAY_MS;
  const byDate = new Map<string, Totals>();
  for (let d = first; d <= now.getTime(); d += DAY_MS) byDate.set(new Date(d).toISOString().slice(0, 10), zero());
  for (const id of motorBlockIds) {
    for (const row of await dailySummary(db, id, days, now)) {
      const acc = byDate.get(row.date);
      if (!acc) continue;
      for (const f of FIELDS) acc[f] += row[f];
    }
  }
  const totals = zero();
  const daily: DailyRow[] = [];
  for (const [date, x] of byDate) {
    for (const f of FIELDS) totals[f] += x[f];
    daily.push({ date, ...withRates(x) });
  }
  return {
    days, from: new Date(first).toISOString(), to: new Date(hourOf(now).getTime() + HOUR_MS - 1).toISOString(),
    blocks: motorBlockIds.length, totals: withRates(totals), daily,
  };
}
