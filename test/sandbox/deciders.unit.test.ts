import { expect } from 'chai';
import type { DomainEvent } from '../../domain/events';
import * as fr from '../../domain/freeRecipients/freeRecipients';
import * as sb from '../../domain/sandbox/sandbox';

/** The sandbox and free-recipient deciders, given(events).when(command).then(events | error). */

const ACCOUNT = '11111111-1111-4111-8111-111111111111';
const BLOCK = '22222222-2222-4222-8222-222222222222';
const DOMAIN = '33333333-3333-4333-8333-333333333333';
const now = new Date('2026-01-01T00:00:00Z');
const codeOf = (f: () => unknown): string | null => {
  try {
    f();
    return null;
  } catch (e) {
    return (e as { code: string }).code;
  }
};

describe('sandbox deciders (unit)', () => {
  const created: DomainEvent = {
    type: 'MotorBlockCreated',
    data: { motorBlockId: BLOCK, accountId: ACCOUNT, name: 'Sandbox x', type: 'sandbox', domainId: DOMAIN, smtpUsername: 'mb_old', authMethod: 'smtp_password', createdAt: now.toISOString() },
  };
  const block = (...events: DomainEvent[]) => sb.foldBlock(events as Parameters<typeof sb.foldBlock>[0]);

  it('handles are DNS labels, lower-cased; generated ones are too', () => {
    expect(sb.checkHandle(' Acme-Dev ')).to.equal('acme-dev');
    for (const bad of ['', '-a', 'a-', 'a_b', 'a.b', 'x'.repeat(64), 7]) expect(codeOf(() => sb.checkHandle(bad)), String(bad)).to.equal('invalid_handle');
    expect(sb.checkHandle(sb.generatedHandle(new Uint8Array(10).fill(255)))).to.match(/^sbx-[a-z2-7]{10}$/);
  });

  it('provision: given no sandbox → SandboxProvisioned; given one → nothing, the existing one', () => {
    const cmd = { accountId: ACCOUNT, handle: 'h', domainId: DOMAIN, motorBlockId: BLOCK, channel: 'agent', now };
    const first = sb.decideProvision({ account: null, sandbox: null }, cmd);
    expect(first.created).to.equal(true);
    expect(first.events.map((e) => e.type)).to.deep.equal(['SandboxProvisioned']);
    const again = sb.decideProvision({ account: null, sandbox: first.sandbox }, { ...cmd, handle: 'other', motorBlockId: DOMAIN });
    expect(again).to.deep.equal({ events: [], sandbox: first.sandbox, created: false });
  });

  it('the sandbox block is named Sandbox <handle>, or the first free Sandbox <handle> (n) when another block has that name', () => {
    expect(sb.sandboxBlockName('acme', () => false)).to.equal('Sandbox acme');
    const names = new Set(['sandbox acme', 'sandbox acme (2)']);
    expect(sb.sandboxBlockName('acme', (n) => names.has(n.toLowerCase()))).to.equal('Sandbox acme (3)');
  });

  it('handle claim: first wins, same account is a no-op, another account 409 sandbox_handle_taken', () => {
    const events = sb.decideClaimHandle(null, { handle: 'h', accountId: ACCOUNT, now });
    expect(events).to.have.length(1);
    expect(sb.decideClaimHandle(events[0].data, { handle: 'h', accountId: ACCOUNT, now })).to.deep.equal([]);
    expect(codeOf(() => sb.decideClaimHandle(events[0].data, { handle: 'h', accountId: BLOCK, now }))).to.equal('sandbox_handle_taken');
  });

  it('allowlist: validated and de-duplicated; set on a sandbox block; refused once converted or for another account', () => {
    expect(sb.checkAllowlist(['A@x.test', 'a@x.test', 'b@x.test'])).to.deep.equal(['a@x.test', 'b@x.test']);
    expect(codeOf(() => sb.checkAllowlist(['nope']))).to.equal('invalid_email');
    // Items of any JSON type, one whose String() throws included (it was a TypeError: a 500).
    expect(codeOf(() => sb.checkAllowlist([JSON.parse('{"toString": 1}'), 5, null, ['a@x.test']]))).to.equal('invalid_email');
    expect(codeOf(() => sb.checkAllowlist(Array.from({ length: sb.MAX_ALLOWLIST + 1 }, (_, i) => `a${i}@x.test`)))).to.equal('allowlist_too_large');
    expect(codeOf(() => sb.checkAllowlist('a@x.test'))).to.equal('validation_error');
    const set = sb.decideSetAllowlist(block(created), { accountId: ACCOUNT, addresses: ['a@x.test'], now });
    expect(set[0].data.addresses).to.deep.equal(['a@x.test']);
    expect(codeOf(() => sb.decideSetAllowlist(block(created), { accountId: BLOCK, addresses: [], now }))).to.equal('sandbox_not_provisioned');
  });

  it('convert: given a sandbox block → SandboxConverted with the old and new username; given converted → 409 sandbox_already_converted', () => {
    const cmd = { accountId: ACCOUNT, target: { domainId: DOMAIN, name: 'own.test' }, name: undefined, type: undefined, newSmtpUsername: 'mb_new', now, liveBlocks: 0, maxBlocks: 1, nameTaken: () => false };
    const events = sb.decideConvert(block(created), cmd);
    expect(events[0].data).to.include({ name: 'own.test', type: 'general_purpose', previousSmtpUsername: 'mb_old', smtpUsername: 'mb_new', motorBlockId: BLOCK });
    expect(codeOf(() => sb.decideConvert(block(created, events[0]), cmd))).to.equal('sandbox_already_converted');
    expect(codeOf(() => sb.decideSetAllowlist(block(created, events[0]), { accountId: ACCOUNT, addresses: [], now }))).to.equal('sandbox_already_converted');
    expect(codeOf(() => sb.decideConvert(block(), cmd))).to.equal('sandbox_not_provisioned');
  });

  it('convert: the name (given, or the domain\'s) taken by another block of the account → 409 motor_block_name_conflict', () => {
    const taken = (n: string) => n.toLowerCase() === 'own.test';
    const cmd = { accountId: ACCOUNT, target: { domainId: DOMAIN, name: 'own.test' }, name: undefined, type: undefined, newSmtpUsername: 'mb_new', now, liveBlocks: 0, maxBlocks: 1, nameTaken: taken };
    expect(codeOf(() => sb.decideConvert(block(created), cmd))).to.equal('motor_block_name_conflict');
    expect(codeOf(() => sb.decideConvert(block(created), { ...cmd, name: 'OWN.test' }))).to.equal('motor_block_name_conflict');
    expect(sb.decideConvert(block(created), { ...cmd, name: 'Billing' })[0].data.name).to.equal('Billing');
  });

  it('convert: the plan\'s maxBlocks reached (the sandbox block aside) → 409 motor_block_limit_reached, checked before the name', () => {
    const cmd = { accountId: ACCOUNT, target: { domainId: DOMAIN, name: 'own.test' }, name: undefined, type: undefined, newSmtpUsername: 'mb_new', now, nameTaken: () => true };
    expect(codeOf(() => sb.decideConvert(block(created), { ...cmd, liveBlocks: 1, maxBlocks: 1 }))).to.equal('motor_block_limit_reached');
    expect(codeOf(() => sb.decideConvert(block(created), { ...cmd, liveBlocks: 0, maxBlocks: 1 }))).to.equal('motor_block_name_conflict');
    expect(sb.decideConvert(block(created), { ...cmd, liveBlocks: 4, maxBlocks: 5, nameTaken: () => false })[0].type).to.equal('SandboxConverted');
  });

  it('effective allowlist: the owner first, then the set addresses; refused recipients compare case-insensitively', () => {
    expect(sb.effectiveAllowlist('Owner@x.test', ['a@x.test', 'owner@x.test'])).to.deep.equal(['owner@x.test', 'a@x.test']);
    expect(sb.refusedRecipients(['A@x.test', 'c@x.test'], ['a@x.test'])).to.deep.equal(['c@x.test']);
  });
});

describe('free-recipient deciders (unit)', () => {
  const base = { accountId: ACCOUNT, ownEmail: 'owner@x.test', limit: 2, cooldownMs: 60_000, linkTtlMs: 7 * 86_400_000, newRecipientId: BLOCK, tokenHash: 'h1', now };
  const after = (ms: number) => new Date(now.getTime() + ms);

  it('new address → FreeRecipientRequested (pending, mail); own address 400; invalid 400; over the limit 409', () => {
    const d = fr.decideRequest({ recipients: [] }, { ...base, email: ' Friend@X.test ' });
    expect(d.mail).to.equal(true);
    expect(d.recipient).to.include({ email: 'friend@x.test', status: 'pending', tokenHash: 'h1' });
    expect(codeOf(() => fr.decideRequest({ recipients: [] }, { ...base, email: 'OWNER@x.test' }))).to.equal('own_address');
    expect(codeOf(() => fr.decideRequest({ recipients: [] }, { ...base, email: 'nope' }))).to.equal('invalid_email');
    const two = fr.fold([
      ...d.events,
      ...fr.decideRequest(fr.fold(d.events), { ...base, email: 'b@x.test', newRecipientId: DOMAIN }).events,
    ]);
    expect(codeOf(() => fr.decideRequest(two, { ...base, email: 'c@x.test', newRecipientId: ACCOUNT }))).to.equal('recipient_limit');
  });

  it('asked again: within the cooldown nothing; after it a new link (same id); confirmed: nothing', () => {
    const s = fr.fold(fr.decideRequest({ recipients: [] }, { ...base, email: 'f@x.test' }).events);
    expect(fr.decideRequest(s, { ...base, email: 'f@x.test', tokenHash: 'h2', now: after(1000) })).to.include({ mail: false });
    const later = fr.decideRequest(s, { ...base, email: 'f@x.test', tokenHash: 'h2', now: after(61_000) });
    expect(later.mail).to.equal(true);
    expect(later.recipient).to.include({ recipientId: BLOCK, tokenHash: 'h2' });
    const c = fr.decideConfirm(s, { accountId: ACCOUNT, tokenHash: 'h1', now: after(1) });
    expect(c.kind).to.equal('confirmed');
    const confirmed = fr.fold([...fr.decideRequest({ recipients: [] }, { ...base, email: 'f@x.test' }).events, ...(c.kind === 'confirmed' ? c.events : [])]);
    expect(fr.decideRequest(confirmed, { ...base, email: 'f@x.test', now: after(999_999) })).to.deep.include({ events: [], mail: false });
  });

  it('confirm: unknown token invalid; expired; used → already_used; a replaced token is invalid', () => {
    const s = fr.fold(fr.decideRequest({ recipients: [] }, { ...base, email: 'f@x.test' }).events);
    expect(fr.decideConfirm(s, { accountId: ACCOUNT, tokenHash: 'zz', now }).kind).to.equal('invalid');
    expect(fr.decideConfirm(s, { accountId: ACCOUNT, tokenHash: 'h1', now: after(base.linkTtlMs) }).kind).to.equal('expired');
    const c = fr.decideConfirm(s, { accountId: ACCOUNT, tokenHash: 'h1', now });
    const confirmed = fr.fold([...fr.decideRequest({ recipients: [] }, { ...base, email: 'f@x.test' }).events, ...(c.kind === 'confirmed' ? c.events : [])]);
    expect(fr.decideConfirm(confirmed, { accountId: ACCOUNT, tokenHash: 'h1', now }).kind).to.equal('already_used');
    const reissued = fr.evolve(s, fr.decideRequest(s, { ...base, email: 'f@x.test', tokenHash: 'h2', now: after(61_000) }).events[0]);
    expect(fr.decideConfirm(reissued, { accountId: ACCOUNT, tokenHash: 'h1', now: after(61_001) }).kind).to.equal('invalid');
  });

  it('remove: unknown id 404 not_found; mail failure voids only the pending request it belongs to', () => {
    const s = fr.fold(fr.decideRequest({ recipients: [] }, { ...base, email: 'f@x.test' }).events);
    expect(codeOf(() => fr.decideRemove(s, { accountId: ACCOUNT, recipientId: DOMAIN, now }))).to.equal('not_found');
    expect(fr.fold([...fr.decideRequest({ recipients: [] }, { ...base, email: 'f@x.test' }).events, ...fr.decideRemove(s, { accountId: ACCOUNT, recipientId: BLOCK, now })]).recipients).to.deep.equal([]);
    expect(fr.mailFailed(s, { accountId: ACCOUNT, recipientId: BLOCK, tokenHash: 'other', now })).to.deep.equal([]);
    const failed = fr.mailFailed(s, { accountId: ACCOUNT, recipientId: BLOCK, tokenHash: 'h1', now });
    expect(fr.evolve(s, failed[0]).recipients).to.deep.equal([]);
  });
});
