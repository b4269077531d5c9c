import { fail } from '../../domain/errors';

/**
 * Time parameters of the public API (SPEC "Limits", data retention): `from` and `to` are ISO 8601
 * timestamps inside the plan's retention window. Pure: the clock and the window length come in.
 *
 * - A value that is not ISO 8601 (`2026-11-22`, `2026-11-22T10:00:00Z`, `...+02:00`) is
 *   `invalid_query` (400); a date-time without an offset is read as UTC, never as server time.
 * - A `from` (or `to`) older than the window is `outside_retention_window` (400). A small grace
 *   absorbs clock skew, so a client asking for exactly "the last N days" is not refused.
 * - Without `from`, the window start applies: nothing older than the retention is ever returned.
 * - Nothing exists after now: a `from` or `to` later than now counts as now, so a list asked from
 *   the future is empty and `to=9999-12-31` cannot make a route build hourly buckets until then.
 * - One record asked for by id (a message) older than the window's start is refused the same way:
 *   the logs never list it, and the read model may or may not still hold it (the sweeper keeps up
 *   to a day more; a replay brings it back; its stream stays in the log), so the answer must not
 *   depend on that.
 */

export const RETENTION_GRACE_MS = 5 * 60 * 1000;

const ISO_RE = /^(\d{4})-(\d{2})-(\d{2})(?:[Tt](\d{2}):(\d{2})(?::(\d{2})(\.\d{1,9})?)?([Zz]|[+-]\d{2}:?\d{2})?)?$/;

const invalid = (name: string, value: string) =>
  fail('invalid_query', 400, `${name} must be an ISO 8601 timestamp (e.g. 2026-01-31T12:00:00Z), got "${value}"`);

/** Parses an ISO 8601 date or date-time; null when it is not one (or names a day that does not exist). */
export function parseIsoTimestamp(value: string): Date | null {
  const m = ISO_RE.exec(value.trim());
  if (!m) return null;
  const [, y, mo, d, h = '00', mi = '00', s = '00', frac = '', zone = 'Z'] = m;
  const month = Number(mo);
  const day = Number(d);
  if (month < 1 || month > 12 || day < 1 || Number(h) > 23 || Number(mi) > 59 || Number(s) > 59) return null;
  const offset = /^[Zz]$/.test(zone) ? 'Z' : `${zone.slice(0, 3)}:${zone.slice(-2)}`;
  const ms = frac ? `.${frac.slice(1, 4).padEnd(3, '0')}` : '';
  const date = new Date(`${y}-${mo}-${d}T${h}:${mi}:${s}${ms}${offset}`);
  if (Number.isNaN(date.getTime())) return null;
  // Date rolls 2026-02-30 over to March: reject days the month does not have.
  const daysInMonth = new Date(Date.UTC(Number(y), month, 0)).getUTCDate();
  return day <= daysInMonth ? date : null;
}

const outsideWindow = (what: string, retentionDays: number, windowStart: Date) =>
  fail('outside_retention_window', 400, `${what} older than the ${retentionDays}-day retention window of this plan`, {
    nextAction: `Ask for data at or after ${windowStart.toISOString()}`,
    details: { retentionDays, oldestAllowed: windowStart.toISOString() },
  });

/** The oldest time the plan's window covers: what a route lists without `from` starts here. */
export const windowStartOf = (retentionDays: number, now: Date): Date => new Date(now.getTime() - retentionDays * 86_400_000);

/**
 * A length counted back from now (`days`, `hours`) must fit the plan's window, as `from` must: past it
 * is 400 outside_retention_window (daily-summary `days`, webhook stats `hours`).
 */
export function requireSpanInsideRetention(name: string, value: number, unitMs: number, retentionDays: number): void {
  if (value * unitMs > retentionDays * 86_400_000) {
    throw fail('outside_retention_window', 400, `${name} is beyond the ${retentionDays}-day retention window of this plan`, {
      nextAction: `Ask for at most ${Math.floor((retentionDays * 86_400_000) / unitMs)} ${name}`, details: { retentionDays },
    });
  }
}

/** A record stamped `at` (a message's queuedAt) is readable only inside the window the logs list. */
export function requireInsideRetention(at: Date, retentionDays: number, now: Date): void {
  const windowStart = windowStartOf(retentionDays, now);
  if (at.getTime() < windowStart.getTime()) throw outsideWindow('This message is', retentionDays, windowStart);
}

export interface TimeRange {
  /** Effective lower bound: the requested `from`, or the start of the retention window. */
  from: Date;
  to: Date | null;
}

export function retentionRange(params: { from?: string | null; to?: string | null }, retentionDays: number, now: Date): TimeRange {
  const parse = (name: 'from' | 'to', v: string | null | undefined): Date | null => {
    if (v === undefined || v === null) return null;
    const d = parseIsoTimestamp(v);
    if (!d) throw invalid(name, v);
    return d;
  };
  const from = parse('from', params.from);
  const to = parse('to', params.to);
  const windowStart = windowStartOf(retentionDays, now);
  for (const [name, d] of [['from', from], ['to', to]] as const) {
    if (d && d.getTime() < windowStart.getTime() - RETENTION_GRACE_MS) throw outsideWindow(`${name} is`, retentionDays, windowStart);
  }
  if (from && to && from.getTime() > to.getTime()) throw fail('invalid_query', 400, 'from must not be after to');
  const notAfterNow = (d: Date): Date => (d > now ? now : d);
  // Inside the window: a time in the grace before its start counts as the start, `to` as `from`
  // (a `to` there left the range upside down: from = the window start, after it).
  const inWindow = (d: Date): Date => (d < windowStart ? windowStart : d);
  return { from: notAfterNow(inWindow(from ?? windowStart)), to: to && notAfterNow(inWindow(to)) };
}
