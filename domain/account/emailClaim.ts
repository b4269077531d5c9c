import type { AccountEmailClaimed, DomainEvent } from '../events';
import { uuidV5 } from '../ids';

/**
 * One email, one account (stream `accountEmail-<v5("account-email:<address>")>`, the address
 * trimmed and in lower case): the first AccountEmailClaimed names the account the address belongs
 * to, and every later one is refused by the stream's expected revision (`no_stream`). Whoever makes
 * an account for an owner (the CLI's bootstrap, the dashboard's first password) claims the address
 * first, so two of them at the same moment cannot both make one. See docs/AUTH.md "One account per
 * email". Pure: the clock and the ids come in as arguments.
 */

export const ACCOUNT_EMAIL_EVENTS = ['AccountEmailClaimed'] as const;
export type AccountEmailEvent = DomainEvent<(typeof ACCOUNT_EMAIL_EVENTS)[number]>;

/** The address as claims compare it: trimmed, in lower case (bootstrap keeps the case it was given; sign-up lower-cases). */
export const accountEmailKey = (email: string): string => email.trim().toLowerCase();

/** The id of the address's claim stream. */
export const accountEmailId = (email: string): string => uuidV5(`account-email:${accountEmailKey(email)}`);

/** The claim in force: the stream's first event (there is never a second); null when the address is free. */
export const foldAccountEmail = (events: readonly AccountEmailEvent[]): AccountEmailClaimed | null => events[0]?.data ?? null;

/**
 * Claim `email` for `accountId`. An address held already stays with its holder: nothing to
 * append, and the caller decides what that means for it (bootstrap refuses, sign-up joins it).
 */
export function decideClaimAccountEmail(
  holder: AccountEmailClaimed | null, cmd: { email: string; accountId: string; now: Date },
): DomainEvent<'AccountEmailClaimed'>[] {
  if (holder) return [];
  return [{ type: 'AccountEmailClaimed', data: { email: accountEmailKey(cmd.email), accountId: cmd.accountId, claimedAt: cmd.now.toISOString() } }];
}
