/**
 * When to try a deferred delivery again. Pure: the jitter and the clock come in as arguments.
 *
 * The first retry comes quickly because the most common 4xx is greylisting, which lets a sender
 * through once it comes back after a few minutes; after that the gaps grow so a host that is down
 * is not hammered, capped at 4 hours. See docs/DELIVERY.md.
 */

/** Delay before attempt n+1, indexed by the number of attempts already made (1 = after the first). */
const BASE_DELAYS_SECONDS = [60, 5 * 60, 15 * 60, 30 * 60, 60 * 60, 2 * 3600, 4 * 3600] as const;

export const MAX_RETRY_DELAY_SECONDS = 4 * 3600;

/** Jitter spreads retries of a burst of deferrals: ±10% of the base delay at most. */
export const MAX_JITTER_FRACTION = 0.1;

/**
 * Seconds to wait after `attempt` attempts have failed (attempt ≥ 1). `jitter` in [-1, 1]
 * (e.g. `Math.random() * 2 - 1` at the call site) shifts the delay by up to ±10%; the result is a
 * whole number of seconds, never above the 4 h cap and never below 1 s.
 */
export function nextAttemptDelay(attempt: number, jitter = 0): number {
  const index = Math.min(Math.max(Math.floor(attempt), 1), BASE_DELAYS_SECONDS.length) - 1;
  const base = BASE_DELAYS_SECONDS[index];
  const j = Math.min(Math.max(Number.isFinite(jitter) ? jitter : 0, -1), 1);
  const delay = Math.round(base * (1 + j * MAX_JITTER_FRACTION));
  return Math.min(Math.max(delay, 1), MAX_RETRY_DELAY_SECONDS);
}

/**
 * True once a message has been trying for its whole lifetime (DELIVERY_LIFETIME_SECONDS,
 * 4.5 days by default, like Postfix's maximal_queue_lifetime): the next deferral becomes a
 * permanent failure.
 */
export function shouldGiveUp(firstAttemptAt: Date, now: Date, lifetimeSeconds: number): boolean {
  return now.getTime() - firstAttemptAt.getTime() >= lifetimeSeconds * 1000;
}

/**
 * The time of the next attempt after `attempt` failed ones, or null when the lifetime is over
 * (give up now). An attempt that would fall after the end of the lifetime is moved to its last
 * moment, so a message always gets a last try at the deadline.
 */
export function nextAttemptAt(attempt: number, firstAttemptAt: Date, now: Date, lifetimeSeconds: number, jitter = 0): Date | null {
  if (shouldGiveUp(firstAttemptAt, now, lifetimeSeconds)) return null;
  const deadline = firstAttemptAt.getTime() + lifetimeSeconds * 1000;
  return new Date(Math.min(now.getTime() + nextAttemptDelay(attempt, jitter) * 1000, deadline));
}
