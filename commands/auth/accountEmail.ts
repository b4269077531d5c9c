import type { Knex } from 'knex';
import { streamName, type EventStore } from '../../domain/eventStore';
import { ACCOUNT_EMAIL_EVENTS, accountEmailId, accountEmailKey, decideClaimAccountEmail, foldAccountEmail, type AccountEmailEvent } from '../../domain/account/emailClaim';
import { fail } from '../../domain/errors';
import { findAccountByEmail } from '../../projections/directory/queries';
import { decideAndAppend } from './streams';
import { systemIds } from './systemMail';

/**
 * One email, one account (docs/AUTH.md "One account per email"). Whoever is about to make an
 * account for an owner (the CLI's bootstrap, the dashboard's first password) asks here first which
 * account the address belongs to. A free address is claimed for the caller's new account
 * (`accountEmail-<id>`, expectedRevision no_stream); one claimed already answers its holder, and
 * of two callers at the same moment only one append can land, so both get the same answer.
 */

export interface AccountEmailDeps { store: EventStore; db: Knex }

/**
 * The account `email` belongs to: `accountId` when this call claimed the address for it, else the
 * holder (compare the two). An account made before addresses were claimed has no claim stream: it
 * is found in the directory (the oldest account with that address, compared trimmed and in any
 * case) and the claim is written for it, so the older account keeps its address. That lookup reads
 * the read model, which has long projected such accounts (the CLI catches it up first); every
 * account made since is decided on the claim stream alone.
 */
export async function claimAccountEmail(deps: AccountEmailDeps, cmd: { email: string; accountId: string; actor: string; now: Date }): Promise<string> {
  const email = accountEmailKey(cmd.email);
  return decideAndAppend(deps.store, streamName('accountEmail', accountEmailId(email)), ACCOUNT_EMAIL_EVENTS, foldAccountEmail, async (holder) => {
    if (holder) return { events: [] as AccountEmailEvent[], result: holder.accountId };
    const older = await findAccountByEmail(deps.db, email);
    const accountId = older?.id ?? cmd.accountId;
    return { events: decideClaimAccountEmail(null, { email, accountId, now: cmd.now }), result: accountId };
  // A lost append is decided again on the claim that won, which appends nothing: this cannot run out of tries.
  }, cmd.actor, { code: 'account_conflict', subject: `The account of ${email}` });
}

/** 400 email_reserved: the address is the service's own sender, whose account is the system account. */
export const emailReserved = () => fail('email_reserved', 400, 'This address is the sender of the service\'s own mail and cannot sign up', {
  details: { field: 'email' }, nextAction: 'Sign up with another address',
});

/** Whether `email` is SYSTEM_MAIL_FROM, compared as claims compare addresses. */
const isSystemAddress = (systemMailFrom: string, email: string): boolean => accountEmailKey(email) === accountEmailKey(systemMailFrom);

/** Dashboard sign-up of SYSTEM_MAIL_FROM: refused. */
export function refuseReservedEmail(config: { systemMailFrom: string }, email: string): void {
  if (isSystemAddress(config.systemMailFrom, email)) throw emailReserved();
}

/**
 * claimAccountEmail for a new owner (the CLI's bootstrap, the first dashboard password). The
 * service's own sender is no owner's: SYSTEM_MAIL_FROM is refused with `reserved()` before anything
 * is appended, and so is an address whose claim is the system account's (an earlier
 * SYSTEM_MAIL_FROM, which the directory shows with the system account).
 */
export async function claimOwnerEmail(
  deps: AccountEmailDeps, cmd: { email: string; accountId: string; actor: string; now: Date }, systemMailFrom: string, reserved: () => Error,
): Promise<string> {
  if (isSystemAddress(systemMailFrom, cmd.email)) throw reserved();
  const accountId = await claimAccountEmail(deps, cmd);
  if (accountId === systemIds(systemMailFrom).accountId) throw reserved();
  return accountId;
}
