import { expect } from 'chai';
import {
  blocksCountedByPlan, decideAddBlock, decideList, decideStartListing, fold, nameTaken, newAccountBlocks, type AccountBlockEvent, type AccountBlocks,
} from '../../domain/account/blocks';

/** The account's list of its blocks (domain/account/blocks.ts), given(events).when(command).then(events). */

const T0 = new Date('2026-11-22T10:00:00Z');
const AT = T0.toISOString();
const ACCOUNT = '0b6f1a52-3b7e-4d0a-9a43-2f6e8b1c5d70';
const B1 = '11111111-1111-4111-8111-111111111111';
const B2 = '22222222-2222-4222-8222-222222222222';
const SANDBOX = '33333333-3333-4333-8333-333333333333';

const created: AccountBlockEvent = { type: 'AccountCreated', data: { accountId: ACCOUNT, email: 'o@example.test', plan: 'starter', createdAt: AT } };
const planChanged: AccountBlockEvent = { type: 'AccountPlanChanged', data: { accountId: ACCOUNT, plan: 'pro', previousPlan: 'starter', changedAt: AT } };
const provisioned: AccountBlockEvent = {
  type: 'SandboxProvisioned', data: { accountId: ACCOUNT, handle: 'acme', domainId: B2, motorBlockId: SANDBOX, channel: 'agent', provisionedAt: AT },
};
const started: AccountBlockEvent = { type: 'AccountBlockListingStarted', data: { accountId: ACCOUNT, startedAt: AT } };
const listed = (ids: string[]): AccountBlockEvent => ({ type: 'AccountBlocksListed', data: { accountId: ACCOUNT, motorBlockIds: ids, listedAt: AT } });
const added = (id: string): AccountBlockEvent => ({ type: 'AccountBlockAdded', data: { accountId: ACCOUNT, motorBlockId: id, addedAt: AT } });

const state = (...events: AccountBlockEvent[]): AccountBlocks => {
  const s = fold(events);
  if (s === null) throw new Error('no account');
  return s;
};

describe('account block list (unit)', () => {
  it('an account of an earlier release (AccountCreated, a plan change, a sandbox): not listed, only the sandbox block known', () => {
    expect(fold([])).to.equal(null);
    expect(fold([added(B1)]), 'events without an account').to.equal(null);
    expect(state(created, planChanged, provisioned)).to.deep.equal({ accountId: ACCOUNT, plan: 'pro', listingStarted: false, listed: false, motorBlockIds: [SANDBOX] });
  });

  it('older account: start listing → AccountBlockListingStarted once; then the listing → AccountBlocksListed once', () => {
    expect(decideStartListing(state(created), T0)).to.deep.equal([started]);
    expect(decideStartListing(state(created, started), T0), 'started already').to.deep.equal([]);
    expect(decideList(state(created, started), { motorBlockIds: [B1, B1, SANDBOX], now: T0 })).to.deep.equal([listed([B1, SANDBOX])]);
    const done = state(created, provisioned, started, listed([B1, SANDBOX]));
    expect(done).to.include({ listed: true, listingStarted: true });
    expect(done.motorBlockIds, 'each id once').to.deep.equal([SANDBOX, B1]);
    expect(decideStartListing(done, T0)).to.deep.equal([]);
    expect(decideList(done, { motorBlockIds: [B2], now: T0 }), 'listed already').to.deep.equal([]);
  });

  it('a new account starts listed, with the blocks made with it', () => {
    expect(state(created, ...newAccountBlocks(ACCOUNT, [B1], T0))).to.deep.equal({ accountId: ACCOUNT, plan: 'starter', listingStarted: false, listed: true, motorBlockIds: [B1] });
    expect(newAccountBlocks(ACCOUNT, [], T0)).to.deep.equal([listed([])]);
  });

  it('add a block → AccountBlockAdded; an id recorded already (a retried create) → nothing', () => {
    const s = state(created, listed([]));
    expect(decideAddBlock(s, { motorBlockId: B1, now: T0 })).to.deep.equal([added(B1)]);
    expect(decideAddBlock(state(created, listed([]), added(B1)), { motorBlockId: B1, now: T0 })).to.deep.equal([]);
    expect(state(created, listed([B1]), added(B2)).motorBlockIds).to.deep.equal([B1, B2]);
  });

  it('rules: the sandbox block is not counted by the plan; names compare trimmed and case-insensitively, the renamed block aside', () => {
    const blocks = [{ id: B1, name: 'Orders', type: 'transactional' as const }, { id: SANDBOX, name: 'Sandbox acme', type: 'sandbox' as const }];
    expect(blocksCountedByPlan(blocks)).to.equal(1);
    expect(nameTaken(blocks, ' ORDERS ')).to.equal(true);
    expect(nameTaken(blocks, 'orders', B1)).to.equal(false);
    expect(nameTaken(blocks, 'Receipts')).to.equal(false);
  });
});
