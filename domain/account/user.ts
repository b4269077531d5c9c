import { timingSafeEqual } from 'node:crypto';
import { fail, type DomainError } from '../errors';
import type { DomainEvent } from '../events';

/**
 * The user aggregate (stream `user-<uuid>`, the id derived from the lower-cased address): the
 * onboarding steps (register → verification code → setup token → password) and the login
 * brute-force state. Pure: hashes, ids, the clock and the rules come in as arguments; the command
 * handlers in commands/auth/ do the hashing and the I/O. See docs/AUTH.md.
 */

export const USER_RULES = {
  /** A mailed code lives 10 minutes. */
  codeTtlMs: 10 * 60_000,
  /** At most this many codes per address per rolling hour. */
  maxCodesPerHour: 5,
  /** A code dies after this many wrong guesses (a new one must be requested). */
  maxCodeFailures: 5,
  /** From this many wrong guesses on, the next try waits 2^(failures - slowAfter) seconds. */
  codeSlowAfter: 2,
  /** The setup token (SPEC: single use, 30 minutes). */
  setupTtlMs: 30 * 60_000,
  /** Consecutive wrong passwords before login is slowed (2^(failures - loginSlowAfter) s between tries). */
  loginSlowAfter: 3,
  /** Consecutive wrong passwords before the account is locked for lockMs. */
  loginLockAfter: 10,
  lockMs: 15 * 60_000,
} as const;
export type UserRules = typeof USER_RULES;

export type UserEvent = Extract<DomainEvent, { type:
  'AccountRegistered' | 'VerificationCodeIssued' | 'VerificationCodeRejected' | 'EmailVerified' | 'PasswordSet' |
  'LoginSucceeded' | 'LoginFailed' | 'UserLockedOut' }>;

export interface UserState {
  exists: boolean;
  userId: string | null;
  accountId: string | null;
  email: string | null;
  /** The current code (null once used, burned, or never issued). */
  code: { hash: string; expiresAt: number; failures: number; lastFailureAt: number | null; burned: boolean } | null;
  /** Issue times of recent codes (ms), for the hourly cap. */
  codesIssuedAt: number[];
  setup: { hash: string; expiresAt: number } | null;
  passwordHash: string | null;
  /** When the current password was set (ms): sessions started before it are over (a reset signs everyone out). */
  passwordSetAt: number | null;
  /** Consecutive failed logins since the last success or lockout. */
  loginFailures: number;
  lastLoginFailureAt: number | null;
  lockedUntil: number | null;
}

export const initialUserState = (): UserState => ({
  exists: false, userId: null, accountId: null, email: null, code: null, codesIssuedAt: [], setup: null,
  passwordHash: null, passwordSetAt: null, loginFailures: 0, lastLoginFailureAt: null, lockedUntil: null,
});

export function evolveUser(s: UserState, e: UserEvent): UserState {
  switch (e.type) {
    case 'AccountRegistered':
      return { ...s, exists: true, userId: e.data.userId, accountId: e.data.accountId, email: e.data.email };
    case 'VerificationCodeIssued': {
      const at = Date.parse(e.data.issuedAt);
      return { ...s, code: { hash: e.data.codeHash, expiresAt: Date.parse(e.data.expiresAt), failures: 0, lastFailureAt: null, burned: false }, codesIssuedAt: [...s.codesIssuedAt.filter((t) => at - t < 3_600_000), at] };
    }
    case 'VerificationCodeRejected': {
      if (!s.code) return s;
      return { ...s, code: { ...s.code, failures: e.data.failures, lastFailureAt: Date.parse(e.data.at), burned: e.data.failures >= USER_RULES.maxCodeFailures } };
    }
    case 'EmailVerified':
      return { ...s, code: null, setup: { hash: e.data.setupTokenHash, expiresAt: Date.parse(e.data.setupTokenExpiresAt) } };
    case 'PasswordSet':
      return { ...s, setup: null, passwordHash: e.data.passwordHash, passwordSetAt: Date.parse(e.data.setAt), accountId: e.data.accountId, loginFailures: 0, lastLoginFailureAt: null, lockedUntil: null };
    case 'LoginSucceeded':
      return { ...s, loginFailures: 0, lastLoginFailureAt: null };
    case 'LoginFailed':
      return { ...s, loginFailures: e.data.failures, lastLoginFailureAt: Date.parse(e.data.at) };
    case 'UserLockedOut':
      return { ...s, lockedUntil: Date.parse(e.data.until), loginFailures: 0, lastLoginFailureAt: null };
  }
}

export const foldUser = (events: UserEvent[]): UserState => events.reduce(evolveUser, initialUserState());

const sameHash = (a: string, b: string): boolean => {
  const x = Buffer.from(a, 'hex');
  const y = Buffer.from(b, 'hex');
  return x.length === y.length && x.length > 0 && timingSafeEqual(x, y);
};

/** A decision: events to append, and (when the step failed) the error to answer after appending them. */
export interface Decision { events: UserEvent[]; error?: DomainError }

// ------------------------------------------------------------------------------ register
export interface Register { userId: string; accountId: string; email: string; codeHash: string; now: Date }

/** Registering again re-issues a code (also the way back in after a forgotten password). */
export function register(s: UserState, c: Register, rules: UserRules = USER_RULES): UserEvent[] {
  const now = c.now.getTime();
  const recent = s.codesIssuedAt.filter((t) => now - t < 3_600_000);
  if (recent.length >= rules.maxCodesPerHour) {
    const retryAfterSeconds = Math.max(1, Math.ceil((recent[0] + 3_600_000 - now) / 1000));
    throw fail('rate_limited', 429, `At most ${rules.maxCodesPerHour} codes per hour can be sent to one address`, {
      details: { retryAfterSeconds }, nextAction: `Use the last code received, or retry in ${retryAfterSeconds}s`,
    });
  }
  const at = c.now.toISOString();
  const events: UserEvent[] = [];
  if (!s.exists) events.push({ type: 'AccountRegistered', data: { userId: c.userId, accountId: c.accountId, email: c.email, registeredAt: at } });
  events.push({ type: 'VerificationCodeIssued', data: { userId: c.userId, codeHash: c.codeHash, expiresAt: new Date(now + rules.codeTtlMs).toISOString(), issuedAt: at } });
  return events;
}

// ------------------------------------------------------------------------------ verify-code
export interface VerifyCode { codeHash: string; setupTokenHash: string; now: Date }

const invalidCode = () => fail('invalid_code', 400, 'The code is wrong, already used, or was never sent to this address', {
  nextAction: 'Check the code in the latest mail, or POST /api/auth/register again for a new one',
});

export function verifyCode(s: UserState, c: VerifyCode, rules: UserRules = USER_RULES): Decision {
  const now = c.now.getTime();
  if (!s.exists || !s.userId) return { events: [], error: invalidCode() };
  const code = s.code;
  if (!code) return { events: [], error: invalidCode() };
  // A code burned by too many guesses stays refused with the lock code until a new one is asked for.
  if (code.burned) return { events: [], error: verificationLocked() };
  if (code.failures >= rules.codeSlowAfter && code.lastFailureAt !== null) {
    const waitMs = 1000 * 2 ** (code.failures - rules.codeSlowAfter);
    if (now < code.lastFailureAt + waitMs) {
      const retryAfterSeconds = Math.max(1, Math.ceil((code.lastFailureAt + waitMs - now) / 1000));
      return { events: [], error: fail('too_many_attempts', 429, `Too many wrong codes; wait ${retryAfterSeconds}s before the next try`, { details: { retryAfterSeconds } }) };
    }
  }
  if (now >= code.expiresAt) {
    return { events: [], error: fail('code_expired', 400, 'The code has expired', { nextAction: 'POST /api/auth/register again for a new code' }) };
  }
  if (!sameHash(code.hash, c.codeHash)) {
    const failures = code.failures + 1;
    const events: UserEvent[] = [{ type: 'VerificationCodeRejected', data: { userId: s.userId, failures, at: c.now.toISOString() } }];
    return { events, error: failures >= rules.maxCodeFailures ? verificationLocked() : invalidCode() };
  }
  return {
    events: [{ type: 'EmailVerified', data: { userId: s.userId, setupTokenHash: c.setupTokenHash, setupTokenExpiresAt: new Date(now + rules.setupTtlMs).toISOString(), verifiedAt: c.now.toISOString() } }],
  };
}

const verificationLocked = () => fail('verification_locked', 429, 'Too many wrong codes: this code no longer works', {
  nextAction: 'POST /api/auth/register again to receive a new code',
});

// ------------------------------------------------------------------------------ set-password
export interface SetPassword {
  setupTokenHash: string; passwordHash: string; channel: string; now: Date;
  /**
   * The account a first password gives the user: the one the address belongs to (its claim,
   * domain/account/emailClaim.ts), which is not the registered one when the address had an account
   * already (a bootstrap's). Absent: the user's account stays as it is.
   */
  accountId?: string;
}

/**
 * Whether the presented setup token may set a password now (it is the pending one and has not
 * expired); throws the refusal otherwise. Nothing is spent: the token is used up by PasswordSet.
 * The handler asks this before it hashes the password, so a request with a wrong or stale token
 * costs a stream read, not a scrypt.
 */
export function checkSetupToken(s: UserState, c: { setupTokenHash: string; now: Date }): { userId: string; accountId: string } {
  if (!s.exists || !s.userId || !s.accountId || !s.setup || !sameHash(s.setup.hash, c.setupTokenHash)) {
    throw fail('invalid_setup_token', 401, 'The setup token is invalid or was already used', { nextAction: 'Verify the address again (register, then verify-code)' });
  }
  if (c.now.getTime() >= s.setup.expiresAt) {
    throw fail('setup_token_expired', 401, 'The setup token has expired (30 minutes)', { nextAction: 'Verify the address again (register, then verify-code)' });
  }
  return { userId: s.userId, accountId: s.accountId };
}

export function setPassword(s: UserState, c: SetPassword): Extract<UserEvent, { type: 'PasswordSet' }>[] {
  const { userId, accountId } = checkSetupToken(s, c);
  return [{ type: 'PasswordSet', data: { userId, accountId: c.accountId ?? accountId, passwordHash: c.passwordHash, channel: c.channel, setAt: c.now.toISOString() } }];
}

// ------------------------------------------------------------------------------ login
export const invalidCredentials = () => fail('invalid_credentials', 401, 'Email or password is wrong');

/**
 * Why a login may not be tried now (locked, or slowed after too many failures), or null. The
 * password is not looked at and nothing is recorded: nothing was tried.
 */
export function loginRefusal(s: UserState, now: Date, rules: UserRules = USER_RULES): DomainError | null {
  const t = now.getTime();
  if (s.lockedUntil !== null && t < s.lockedUntil) {
    const retryAfterSeconds = Math.max(1, Math.ceil((s.lockedUntil - t) / 1000));
    return fail('account_locked', 423, `Too many failed logins: login is locked for ${retryAfterSeconds}s`, {
      details: { retryAfterSeconds }, nextAction: 'Wait, or reset the password (register, verify-code, set-password)',
    });
  }
  if (s.loginFailures >= rules.loginSlowAfter && s.lastLoginFailureAt !== null) {
    const waitMs = 1000 * 2 ** (s.loginFailures - rules.loginSlowAfter);
    if (t < s.lastLoginFailureAt + waitMs) {
      const retryAfterSeconds = Math.max(1, Math.ceil((s.lastLoginFailureAt + waitMs - t) / 1000));
      return fail('login_throttled', 429, `Too many failed logins; wait ${retryAfterSeconds}s before the next try`, { details: { retryAfterSeconds } });
    }
  }
  return null;
}

/** loginRefusal, thrown: the gate before the (slow) password check. */
export function checkLoginAllowed(s: UserState, now: Date, rules: UserRules = USER_RULES): void {
  const refused = loginRefusal(s, now, rules);
  if (refused) throw refused;
}

export interface LoginAttempt { passwordOk: boolean; sessionId: string; remoteAddress: string | null; now: Date }

/**
 * The verdict of a password check, taken on the stream as it is now: the lock and the slowdown are
 * checked again here, because other attempts may have been recorded while the password was being
 * checked. A right password is refused then too (no LoginSucceeded, no session).
 */
export function login(s: UserState, c: LoginAttempt, rules: UserRules = USER_RULES): Decision {
  if (!s.exists || !s.userId || s.passwordHash === null) return { events: [], error: invalidCredentials() };
  const refused = loginRefusal(s, c.now, rules);
  if (refused) return { events: [], error: refused };
  const at = c.now.toISOString();
  if (c.passwordOk) return { events: [{ type: 'LoginSucceeded', data: { userId: s.userId, sessionId: c.sessionId, at } }] };
  const failures = s.loginFailures + 1;
  const events: UserEvent[] = [{ type: 'LoginFailed', data: { userId: s.userId, failures, remoteAddress: c.remoteAddress, at } }];
  if (failures >= rules.loginLockAfter) {
    const until = new Date(c.now.getTime() + rules.lockMs).toISOString();
    events.push({ type: 'UserLockedOut', data: { userId: s.userId, reason: 'login', until, at } });
    return { events, error: fail('account_locked', 423, 'Too many failed logins: login is locked', { details: { retryAfterSeconds: Math.ceil(rules.lockMs / 1000) } }) };
  }
  return { events, error: invalidCredentials() };
}
