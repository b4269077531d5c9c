import { fail } from '../errors';
import type { DomainEvent } from '../events';

/**
 * An account's plan tier (stream `account-<uuid>`): AccountCreated sets it, AccountPlanChanged
 * (the operator's `npm run cli -- account set-plan`) replaces it. The plan decides the account's
 * ceilings, retention, `maxBlocks` and the Free-plan recipient rule. The plan limit folds it from
 * the stream (domain/account/blocks.ts); every other reader takes it from the directory's
 * `accounts.plan`, which follows these events. Pure: the names of the plans this
 * deployment knows (config.plans) and the clock come in as arguments.
 */

/** The plan of the service's own system account (commands/auth/systemMail.ts). */
export const SYSTEM_PLAN = 'system';

export const ACCOUNT_PLAN_EVENTS = ['AccountCreated', 'AccountPlanChanged'] as const;
export type AccountPlanEvent = DomainEvent<(typeof ACCOUNT_PLAN_EVENTS)[number]>;

/** null: no account on the stream. */
export type AccountPlanState = { accountId: string; plan: string } | null;

export function evolvePlan(state: AccountPlanState, e: AccountPlanEvent): AccountPlanState {
  switch (e.type) {
    case 'AccountCreated': return state ?? { accountId: e.data.accountId, plan: e.data.plan };
    case 'AccountPlanChanged': return state && { ...state, plan: e.data.plan };
  }
}

export const foldPlan = (events: readonly AccountPlanEvent[]): AccountPlanState => events.reduce(evolvePlan, null);

/**
 * Move an existing account to `plan`, one of `knownPlans` (else 422 unknown_plan, nothing
 * appended: an unknown name would put the account on the fallback ceilings). The plan it is on
 * already: nothing to append.
 */
export function decideChangePlan(
  state: NonNullable<AccountPlanState>,
  cmd: { plan: string; knownPlans: readonly string[]; now: Date },
): DomainEvent<'AccountPlanChanged'>[] {
  // The service's own account (verification mail, commands/auth/systemMail.ts) is on no tier: on
  // `free` its mail would be refused, and `system` is no plan one could move it back to.
  if (state.plan === SYSTEM_PLAN) throw fail('system_account', 422, 'The service\'s own system account is on no plan tier and cannot be moved');
  if (!cmd.knownPlans.includes(cmd.plan)) {
    throw fail('unknown_plan', 422, `No plan "${cmd.plan}"; known plans: ${[...cmd.knownPlans].sort().join(', ')}`, {
      details: { knownPlans: [...cmd.knownPlans].sort() },
    });
  }
  if (state.plan === cmd.plan) return [];
  return [{ type: 'AccountPlanChanged', data: { accountId: state.accountId, plan: cmd.plan, previousPlan: state.plan, changedAt: cmd.now.toISOString() } }];
}
