import { randomBytes } from 'node:crypto';
import { expect } from 'chai';
import { hashSecret } from '../../domain/credentials/apiKeys';
import { newId } from '../../domain/ids';
import type { BlockRecord } from '../../projections/directory/queries';
import { authenticate, type AuthDeps, type AuthOutcome } from '../../smtp/auth';
import { AuthLimiter, DEFAULT_AUTH_LIMITS, type AuthLimiterSettings } from '../../smtp/authLimiter';
import { MemoryEventStore } from '../support/memoryEventStore';
import { useTestRedis } from '../support/db';

/**
 * The failed-AUTH limiter (smtp/authLimiter.ts) on real Redis, through smtp/auth.ts: attempts that
 * overlap. A look-up that waits for the test holds an attempt between its gate and its verdict.
 */
describe('SMTP AUTH limiter with overlapping attempts (int, real Redis)', () => {
  const t = useTestRedis('smtpauth');
  const prefix = t.prefix;
  // No slowdown here (it has its own unit test): only the lock and the slots.
  const limits = (o: Partial<AuthLimiterSettings>): AuthLimiterSettings => ({ ...DEFAULT_AUTH_LIMITS, freeFailures: 1000, windowSeconds: 60, ...o });

  const block = (smtpUsername: string, password: string): BlockRecord => ({
    id: newId(), accountId: newId(), name: smtpUsername, type: 'transactional', description: null, domainId: newId(), smtpUsername,
    authMethod: 'smtp_password', status: 'active', smtpPasswordHash: hashSecret(password), limits: { burst: null, hourly: null, daily: null }, createdAt: new Date(),
  });

  /** Deps whose look-up of `held` usernames waits until the test lets it go. */
  function setUp(settings: AuthLimiterSettings) {
    const blocks = new Map<string, BlockRecord>();
    const gates: Array<{ username: string; go: () => void }> = [];
    const held = new Set<string>();
    const lookup = async (u: string) => {
      if (held.has(u)) await new Promise<void>((go) => gates.push({ username: u, go }));
      return blocks.get(u) ?? null;
    };
    const limiter = new AuthLimiter(t.redis, settings, `${prefix}:${randomBytes(3).toString('hex')}`);
    const deps: AuthDeps = {
      store: new MemoryEventStore(), limiter, now: () => new Date(),
      blockBySmtpUsername: lookup, blockBySmtpUsernameNow: async (u) => blocks.get(u) ?? null,
    };
    const attempt = (username: string, password: string, remoteAddress: string) => authenticate(deps, { mechanism: 'PLAIN', username, password, remoteAddress });
    const waitingLookups = async (n: number) => {
      for (let i = 0; gates.length < n; i++) {
        if (i > 200) throw new Error(`only ${gates.length} look-ups waiting, not ${n}`);
        await new Promise((r) => setTimeout(r, 10));
      }
    };
    const releaseAll = () => { for (const g of gates.splice(0)) g.go(); };
    return { blocks, held, limiter, attempt, waitingLookups, releaseAll };
  }
  const verdict = (o: AuthOutcome) => (o.ok ? 'ok' : `${o.reply.code} ${o.reason}`);

  it('a success clears the failures recorded before it, not the ones of attempts that ran alongside it', async () => {
    const t = setUp(limits({ lockoutFailures: 5 }));
    t.blocks.set('good', block('good', 'right-password'));
    t.blocks.set('other', block('other', 'other-password'));
    const ip = '192.0.2.10';
    // Two failures first: the success will clear them.
    for (const p of ['w1', 'w2']) expect(verdict(await t.attempt('other', p, ip))).to.equal('535 bad_password');

    // The right password is being checked while two wrong ones from the same address fail.
    t.held.add('good');
    const success = t.attempt('good', 'right-password', ip);
    await t.waitingLookups(1);
    const alongside = await Promise.all(['w3', 'w4'].map((p) => t.attempt('other', p, ip)));
    expect(alongside.map(verdict)).to.deep.equal(['535 bad_password', '535 bad_password']);
    t.releaseAll();
    expect(verdict(await success)).to.equal('ok');

    // w3 and w4 still count (a reset would have wiped them too): three more failures lock the
    // address, and the right password is then refused unseen.
    t.held.clear();
    for (const p of ['w5', 'w6', 'w7']) expect(verdict(await t.attempt('other', p, ip))).to.equal('535 bad_password');
    expect(verdict(await t.attempt('good', 'right-password', ip))).to.equal('454 locked_out');
    expect(await t.limiter.addressFailures(ip)).to.equal(5);
  });

  it('attempts in progress count against the lock: a burst gets the lock\'s number of checks, the rest are refused unseen', async () => {
    const t = setUp(limits({ lockoutFailures: 5, slotWaitMs: 3000 }));
    t.blocks.set('other', block('other', 'other-password'));
    const ip = '192.0.2.11';
    t.held.add('other');
    const burst = Array.from({ length: 12 }, (_, i) => t.attempt('other', `wrong-${i}`, ip));
    // Five attempts reach their password check and are held there; the other seven wait for a slot.
    await t.waitingLookups(5);
    await new Promise((r) => setTimeout(r, 200));
    t.held.clear();
    t.releaseAll();
    const verdicts = (await Promise.all(burst)).map(verdict);
    expect(verdicts.filter((v) => v === '535 bad_password')).to.have.length(5);
    expect(verdicts.filter((v) => v === '454 locked_out')).to.have.length(7);
    expect(await t.limiter.addressFailures(ip)).to.equal(5);
  });

  it('logins that wait for a slot go on once the attempts ahead of them succeed', async () => {
    const t = setUp(limits({ lockoutFailures: 3, slotWaitMs: 3000 }));
    t.blocks.set('good', block('good', 'right-password'));
    const ip = '192.0.2.12';
    t.held.add('good');
    const pool = Array.from({ length: 6 }, () => t.attempt('good', 'right-password', ip));
    await t.waitingLookups(3);
    t.held.clear();
    t.releaseAll();
    expect((await Promise.all(pool)).map(verdict)).to.deep.equal(Array(6).fill('ok'));
    expect(await t.limiter.addressFailures(ip)).to.equal(0);
  });

  it('a slot whose attempt never settles (a crashed listener) lapses; until then a waiting attempt is refused as busy', async () => {
    const limiter = new AuthLimiter(t.redis, limits({ lockoutFailures: 1, slotWaitMs: 150, slotLeaseMs: 600 }), `${prefix}:lease`);
    const ip = '192.0.2.13';
    const first = await limiter.gate(ip, 'someone');
    expect(first.kind).to.equal('open');
    expect((await limiter.gate(ip, 'someone')).kind).to.equal('busy');
    await new Promise((r) => setTimeout(r, 700));
    const later = await limiter.gate(ip, 'someone');
    expect(later.kind).to.equal('open');
    if (later.kind === 'open') await limiter.release(later.ticket);
    expect(await limiter.addressFailures(ip)).to.equal(0);
  });
});
