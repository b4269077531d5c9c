import { expect } from 'chai';
import { USER_RULES, checkLoginAllowed, checkSetupToken, foldUser, login, register, setPassword, verifyCode, type UserEvent } from '../../domain/account/user';
import { foldSession, refresh, startSession } from '../../domain/account/session';
import { isDomainError } from '../../domain/errors';

const T0 = new Date('2026-01-01T00:00:00Z');
const at = (ms: number) => new Date(T0.getTime() + ms);
const U = '11111111-1111-4111-8111-111111111111';
const A = '22222222-2222-4222-8222-222222222222';
const HASH = (c: string) => Buffer.from(c.padEnd(32, '0')).toString('hex');

const codeOf = (e: unknown) => { try { (e as () => void)(); } catch (err) { return isDomainError(err) ? err.code : String(err); } return null; };

describe('user aggregate (unit)', () => {
  const registered = (): UserEvent[] => register(foldUser([]), { userId: U, accountId: A, email: 'a@x.test', codeHash: HASH('123456'), now: T0 });

  it('register: a new address gets AccountRegistered + a code; at most 5 codes per hour', () => {
    const given = registered();
    expect(given.map((e) => e.type)).to.deep.equal(['AccountRegistered', 'VerificationCodeIssued']);
    let events = given;
    for (let i = 1; i < USER_RULES.maxCodesPerHour; i++) events = [...events, ...register(foldUser(events), { userId: U, accountId: A, email: 'a@x.test', codeHash: HASH(`c${i}`), now: at(i * 1000) })];
    expect(codeOf(() => register(foldUser(events), { userId: U, accountId: A, email: 'a@x.test', codeHash: HASH('x'), now: at(10_000) }))).to.equal('rate_limited');
    expect(register(foldUser(events), { userId: U, accountId: A, email: 'a@x.test', codeHash: HASH('x'), now: at(3_600_001) }).map((e) => e.type)).to.deep.equal(['VerificationCodeIssued']);
  });

  it('verify-code: expires after 10 minutes', () => {
    const d = verifyCode(foldUser(registered()), { codeHash: HASH('123456'), setupTokenHash: HASH('st'), now: at(USER_RULES.codeTtlMs) });
    expect(d.error?.code).to.equal('code_expired');
    expect(d.events).to.deep.equal([]);
  });

  it('verify-code: wrong guesses are events, slowed from the 2nd, the 5th burns the code', () => {
    let events = registered();
    let t = 0;
    const guess = (code: string) => {
      const d = verifyCode(foldUser(events), { codeHash: HASH(code), setupTokenHash: HASH('st'), now: at(t) });
      events = [...events, ...d.events];
      return d.error?.code ?? 'ok';
    };
    expect(guess('000000')).to.equal('invalid_code');
    expect(guess('000000')).to.equal('invalid_code');
    expect(guess('123456')).to.equal('too_many_attempts'); // right code, but too soon: not even looked at
    t += 1000; expect(guess('000000')).to.equal('invalid_code');
    t += 1000; expect(guess('000000')).to.equal('too_many_attempts');
    t += 2000; expect(guess('000000')).to.equal('invalid_code');
    t += 4000; expect(guess('000000')).to.equal('verification_locked');
    t += 60_000; expect(guess('123456')).to.equal('verification_locked');
    expect(events.filter((e) => e.type === 'VerificationCodeRejected')).to.have.length(5);
    // A new code unlocks.
    events = [...events, ...register(foldUser(events), { userId: U, accountId: A, email: 'a@x.test', codeHash: HASH('654321'), now: at(t) })];
    expect(guess('654321')).to.equal('ok');
  });

  it('set-password: the setup token is single use and lives 30 minutes', () => {
    const verified = [...registered(), ...verifyCode(foldUser(registered()), { codeHash: HASH('123456'), setupTokenHash: HASH('st'), now: T0 }).events];
    expect(codeOf(() => setPassword(foldUser(verified), { setupTokenHash: HASH('other'), passwordHash: 'p', channel: 'web', now: T0 }))).to.equal('invalid_setup_token');
    expect(codeOf(() => setPassword(foldUser(verified), { setupTokenHash: HASH('st'), passwordHash: 'p', channel: 'web', now: at(USER_RULES.setupTtlMs) }))).to.equal('setup_token_expired');
    const set = setPassword(foldUser(verified), { setupTokenHash: HASH('st'), passwordHash: 'p', channel: 'web', now: at(1000) });
    expect(set.map((e) => e.type)).to.deep.equal(['PasswordSet']);
    expect(codeOf(() => setPassword(foldUser([...verified, ...set]), { setupTokenHash: HASH('st'), passwordHash: 'p', channel: 'web', now: at(2000) }))).to.equal('invalid_setup_token');
  });

  it('set-password: a first password gives the account the address belongs to when the handler names one (a bootstrap\'s), else the registered one', () => {
    const verified = [...registered(), ...verifyCode(foldUser(registered()), { codeHash: HASH('123456'), setupTokenHash: HASH('st'), now: T0 }).events];
    const B = '33333333-3333-4333-8333-333333333333';
    const joined = setPassword(foldUser(verified), { setupTokenHash: HASH('st'), passwordHash: 'p', channel: 'web', accountId: B, now: T0 });
    expect(joined[0].data.accountId).to.equal(B);
    expect(foldUser([...verified, ...joined]).accountId, 'logins and sessions follow PasswordSet').to.equal(B);
    expect(setPassword(foldUser(verified), { setupTokenHash: HASH('st'), passwordHash: 'p', channel: 'web', now: T0 })[0].data.accountId).to.equal(A);
  });

  it('checkSetupToken (asked before the password is hashed) refuses as set-password does and returns the owner', () => {
    const verified = [...registered(), ...verifyCode(foldUser(registered()), { codeHash: HASH('123456'), setupTokenHash: HASH('st'), now: T0 }).events];
    expect(codeOf(() => checkSetupToken(foldUser(registered()), { setupTokenHash: HASH('st'), now: T0 }))).to.equal('invalid_setup_token');
    expect(codeOf(() => checkSetupToken(foldUser(verified), { setupTokenHash: HASH('other'), now: T0 }))).to.equal('invalid_setup_token');
    expect(codeOf(() => checkSetupToken(foldUser(verified), { setupTokenHash: HASH('st'), now: at(USER_RULES.setupTtlMs) }))).to.equal('setup_token_expired');
    expect(checkSetupToken(foldUser(verified), { setupTokenHash: HASH('st'), now: at(1000) })).to.deep.equal({ userId: U, accountId: A });
  });

  it('login: slowed after 3 failures, locked for 15 minutes after 10', () => {
    const verified = [...registered(), ...verifyCode(foldUser(registered()), { codeHash: HASH('123456'), setupTokenHash: HASH('st'), now: T0 }).events];
    let events = [...verified, ...setPassword(foldUser(verified), { setupTokenHash: HASH('st'), passwordHash: 'p', channel: 'web', now: T0 })];
    let t = 0;
    const attempt = (ok: boolean) => {
      const s = foldUser(events);
      const pre = codeOf(() => checkLoginAllowed(s, at(t)));
      if (pre) return pre;
      const d = login(s, { passwordOk: ok, sessionId: U, remoteAddress: null, now: at(t) });
      events = [...events, ...d.events];
      return d.error?.code ?? 'ok';
    };
    for (let i = 0; i < 3; i++) expect(attempt(false)).to.equal('invalid_credentials');
    expect(attempt(true)).to.equal('login_throttled');
    t += 1000; expect(attempt(false)).to.equal('invalid_credentials');
    for (let i = 4; i < 9; i++) { t += 1000 * 2 ** (i - 3); expect(attempt(false)).to.equal('invalid_credentials'); }
    t += 1000 * 2 ** 6; expect(attempt(false)).to.equal('account_locked');
    expect(events.some((e) => e.type === 'UserLockedOut')).to.equal(true);
    t += 60_000; expect(attempt(true)).to.equal('account_locked');
    t += USER_RULES.lockMs; expect(attempt(true)).to.equal('ok');
    expect(foldUser(events).loginFailures).to.equal(0);
  });

  it('login: the verdict re-checks the lock and the slowdown on the state it is recorded on', () => {
    const verified = [...registered(), ...verifyCode(foldUser(registered()), { codeHash: HASH('123456'), setupTokenHash: HASH('st'), now: T0 }).events];
    const set = [...verified, ...setPassword(foldUser(verified), { setupTokenHash: HASH('st'), passwordHash: 'p', channel: 'web', now: T0 })];
    const locked: UserEvent[] = [...set, { type: 'UserLockedOut', data: { userId: U, reason: 'login', until: at(USER_RULES.lockMs).toISOString(), at: T0.toISOString() } }];
    const slowed: UserEvent[] = [...set, { type: 'LoginFailed', data: { userId: U, failures: USER_RULES.loginSlowAfter, remoteAddress: null, at: T0.toISOString() } }];
    for (const [given, code] of [[locked, 'account_locked'], [slowed, 'login_throttled']] as const) {
      for (const passwordOk of [true, false]) {
        const d = login(foldUser(given), { passwordOk, sessionId: U, remoteAddress: null, now: at(500) });
        expect(d.error?.code).to.equal(code);
        expect(d.events).to.deep.equal([]);
      }
    }
    expect(login(foldUser(slowed), { passwordOk: true, sessionId: U, remoteAddress: null, now: at(1000) }).events.map((e) => e.type)).to.deep.equal(['LoginSucceeded']);
  });
});

describe('session aggregate (unit)', () => {
  const S = '33333333-3333-4333-8333-333333333333';
  it('rotation spends each token; reuse revokes; expiry after 7 days', () => {
    let events = startSession(foldSession([]), { sessionId: S, userId: U, accountId: A, channel: 'web', refreshTokenHash: HASH('r0'), now: T0 });
    const r1 = refresh(foldSession(events), { presentedHash: HASH('r0'), nextHash: HASH('r1'), now: at(1000) });
    expect(r1.error).to.equal(undefined);
    events = [...events, ...r1.events];
    const reuse = refresh(foldSession(events), { presentedHash: HASH('r0'), nextHash: HASH('r2'), now: at(2000) });
    expect(reuse.error?.code).to.equal('refresh_token_reused');
    expect(reuse.events.map((e) => e.type)).to.deep.equal(['SessionRevoked']);
    events = [...events, ...reuse.events];
    expect(refresh(foldSession(events), { presentedHash: HASH('r1'), nextHash: HASH('r2'), now: at(3000) }).error?.code).to.equal('invalid_refresh_token');
    const fresh = startSession(foldSession([]), { sessionId: S, userId: U, accountId: A, channel: 'web', refreshTokenHash: HASH('r0'), now: T0 });
    expect(refresh(foldSession(fresh), { presentedHash: HASH('r0'), nextHash: HASH('r1'), now: at(7 * 24 * 3600_000) }).error?.code).to.equal('refresh_token_expired');
  });
});
