import { expect } from 'chai';
import { isDomainError } from '../../domain/errors';
import { decideChangePlan, foldPlan, type AccountPlanEvent } from '../../domain/account/plan';

/** The account's plan (domain/account/plan.ts), given(events).when(set plan).then(events). */

const T0 = new Date('2026-11-22T10:00:00Z');
const ACCOUNT = '0b6f1a52-3b7e-4d0a-9a43-2f6e8b1c5d70';
const KNOWN = ['free', 'starter', 'pro', 'enterprise', 'default'];

const created = (plan: string): AccountPlanEvent => ({ type: 'AccountCreated', data: { accountId: ACCOUNT, email: 'o@example.test', plan, createdAt: T0.toISOString() } });
const changed = (previousPlan: string, plan: string): AccountPlanEvent => ({
  type: 'AccountPlanChanged', data: { accountId: ACCOUNT, plan, previousPlan, changedAt: T0.toISOString() },
});
const setPlan = (given: AccountPlanEvent[], plan: string) => {
  const state = foldPlan(given);
  if (state === null) throw new Error('no account');
  return decideChangePlan(state, { plan, knownPlans: KNOWN, now: T0 });
};

describe('account plan decider (unit)', () => {
  it('fold: no account without AccountCreated; the last change wins', () => {
    expect(foldPlan([])).to.equal(null);
    expect(foldPlan([changed('free', 'pro')]), 'a change without an account').to.equal(null);
    expect(foldPlan([created('free'), changed('free', 'pro'), changed('pro', 'starter')])).to.deep.equal({ accountId: ACCOUNT, plan: 'starter' });
  });

  it('another known plan → AccountPlanChanged with the plan it replaces', () => {
    expect(setPlan([created('default'), changed('default', 'free')], 'starter')).to.deep.equal([changed('free', 'starter')]);
  });

  it('the plan it is on already → nothing', () => {
    expect(setPlan([created('free')], 'free')).to.deep.equal([]);
    expect(setPlan([created('free'), changed('free', 'pro')], 'pro')).to.deep.equal([]);
  });

  it('an unknown plan → 422 unknown_plan naming the known ones, also from an account whose own plan is unknown', () => {
    for (const [given, plan] of [[[created('free')], 'gold'], [[created('gold')], 'system'], [[created('free')], 'Free'], [[created('free')], '__proto__']] as const) {
      try {
        setPlan([...given], plan);
        expect.fail(`${plan} was accepted`);
      } catch (e) {
        if (!isDomainError(e)) throw e;
        expect([e.code, e.status]).to.deep.equal(['unknown_plan', 422]);
        expect(e.details).to.deep.equal({ knownPlans: ['default', 'enterprise', 'free', 'pro', 'starter'] });
      }
    }
  });

  it('from an unknown plan to a known one → changed', () => {
    expect(setPlan([created('gold')], 'pro')).to.deep.equal([changed('gold', 'pro')]);
  });

  it('the service\'s own system account → 422 system_account, whatever the plan asked for', () => {
    for (const plan of ['free', 'pro', 'system']) {
      try {
        setPlan([created('system')], plan);
        expect.fail(`${plan} was accepted`);
      } catch (e) {
        if (!isDomainError(e)) throw e;
        expect([e.code, e.status]).to.deep.equal(['system_account', 422]);
      }
    }
  });
});
