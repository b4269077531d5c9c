import { expect } from 'chai';
import { accountEmailId, accountEmailKey, decideClaimAccountEmail, foldAccountEmail, type AccountEmailEvent } from '../../domain/account/emailClaim';

/** One email, one account (domain/account/emailClaim.ts), given(events).when(claim).then(events). */

const T0 = new Date('2026-11-22T10:00:00Z');
const A = '0b6f1a52-3b7e-4d0a-9a43-2f6e8b1c5d70';
const B = '1c7f2b63-4c8f-4e1b-8b54-3f7f9c2d6e81';

const claimed = (accountId: string, email = 'owner@example.test'): AccountEmailEvent => ({ type: 'AccountEmailClaimed', data: { email, accountId, claimedAt: T0.toISOString() } });
const claim = (given: AccountEmailEvent[], email: string, accountId: string) => decideClaimAccountEmail(foldAccountEmail(given), { email, accountId, now: T0 });

describe('account email claim decider (unit)', () => {
  it('a free address → AccountEmailClaimed for the account, the address trimmed and in lower case', () => {
    expect(claim([], ' Owner@Example.TEST ', A)).to.deep.equal([claimed(A)]);
  });

  it('an address held already → nothing, whoever asks (the holder stays the first claim)', () => {
    expect(claim([claimed(A)], 'owner@example.test', B)).to.deep.equal([]);
    expect(claim([claimed(A)], 'owner@example.test', A)).to.deep.equal([]);
    expect(foldAccountEmail([claimed(A)])?.accountId).to.equal(A);
    expect(foldAccountEmail([])).to.equal(null);
  });

  it('one stream per address as claims compare it: the spellings of one address share it, other addresses do not', () => {
    expect(accountEmailKey('  Owner@Example.TEST')).to.equal('owner@example.test');
    expect(accountEmailId('Owner@Example.test ')).to.equal(accountEmailId('owner@example.test'));
    expect(accountEmailId('owner2@example.test')).to.not.equal(accountEmailId('owner@example.test'));
  });
});
