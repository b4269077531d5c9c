import type { EventStore } from '../../domain/eventStore';
import { WrongExpectedRevisionError, streamName } from '../../domain/eventStore';
import { fail, type DomainError } from '../../domain/errors';
import { newId, uuidV5, type Clock } from '../../domain/ids';
import { foldSession, refresh as decideRefresh, startSession, invalidRefreshToken, type SessionEvent } from '../../domain/account/session';
import { newAccountBlocks } from '../../domain/account/blocks';
import {
  USER_RULES, checkLoginAllowed, checkSetupToken, foldUser, login as decideLogin, register as decideRegister, setPassword as decideSetPassword,
  verifyCode as decideVerifyCode, type UserEvent,
} from '../../domain/account/user';
import { toEventData, type DomainEvent } from '../../domain/events';
import { isValidAddress } from '../../domain/message/sendRules';
import { dashboardLink, type Config } from '../../infra/config';
import type { KeyStore } from '../../infra/keys/keyStore';
import type { SendQuota } from '../quota/sendQuota';
import { dashboardTokenSettings, signDashboardToken } from './dashboardTokens';
import { PASSWORD_MAX, PASSWORD_MIN, burnPasswordCheck, hashPassword, verifyPassword } from './passwords';
import { codeHash, generateCode, isSetupTokenShape, opaqueToken, parseOpaqueToken, randomSecret, setupToken, sha256Hex } from './secrets';
import type { LoginTurns } from './loginTurn';
import { appendEvents, decideAndAppend, load, type Contention } from './streams';
import { sendSystemMail } from './systemMail';
import { claimOwnerEmail, emailReserved, refuseReservedEmail } from './accountEmail';
import type { ReadYourWritesDeps } from '../readYourWrites';

/**
 * Onboarding and session command handlers (SPEC "Onboarding routes"). Every step is an event on
 * the user's stream (`user-<v5(email)>`), a session's stream (`authSession-<uuid>`) or a handoff's
 * stream (`webHandoff-<uuid>`); the decisions are the pure functions of domain/account/. Single-use
 * secrets are spent under the stream's expected revision, so two racing requests cannot both win.
 */

/** `logger` and `metrics`: the account routes' read-your-writes waits report there (commands/readYourWrites.ts). */
export interface AuthDeps extends ReadYourWritesDeps {
  store: EventStore;
  keys: KeyStore;
  quota: SendQuota;
  config: Config;
  /** One password check per address at a time (loginTurn.ts); without it (no Redis), none is kept. */
  loginTurns?: LoginTurns;
}

const USER_TYPES: readonly string[] = ['AccountRegistered', 'VerificationCodeIssued', 'VerificationCodeRejected', 'EmailVerified', 'PasswordSet', 'LoginSucceeded', 'LoginFailed', 'UserLockedOut'];
const SESSION_TYPES: readonly string[] = ['SessionStarted', 'RefreshTokenRotated', 'SessionRevoked'];

/** Every try of a write lost to other requests on the same stream (docs/ERRORS.md "Any route: concurrent changes"). */
const USER_CONTENTION: Contention = { code: 'user_conflict', subject: 'The sign-up and sign-in record of this address' };
const SESSION_CONTENTION: Contention = { code: 'session_conflict', subject: 'This session' };
const HANDOFF_CONTENTION: Contention = { code: 'handoff_conflict', subject: 'This handoff' };

export const userIdOf = (email: string): string => uuidV5(`user:${email}`);
const userStream = (email: string) => streamName('user', userIdOf(email));
/** The code pepper: HMAC key derived from TOKEN_SECRET (never stored). */
const pepperOf = (config: Config) => sha256Hex(`motor.verification-code.v1:${config.tokenSecret}`);

const validation = (message: string, field: string) => fail('validation_error', 400, message, { details: { field } });

/** Bodies are checked here too (tsoa already refused unknown fields and wrong types). */
export function normalizeEmail(raw: unknown): string {
  if (typeof raw !== 'string') throw validation('email is required', 'email');
  const email = raw.trim();
  if (email.length === 0 || email.length > 254 || !isValidAddress(email)) throw fail('invalid_email', 400, 'email is not a valid address', { details: { field: 'email' } });
  const at = email.lastIndexOf('@');
  return `${email.slice(0, at)}@${email.slice(at + 1).toLowerCase()}`.toLowerCase();
}

// ------------------------------------------------------------------------------ register
export async function register(deps: AuthDeps, rawEmail: unknown, now: Date): Promise<{ email: string; expiresInSeconds: number }> {
  const email = normalizeEmail(rawEmail);
  // Before a code is mailed from that address to itself.
  refuseReservedEmail(deps.config, email);
  const userId = userIdOf(email);
  const code = generateCode();
  const issued = await decideAndAppend(deps.store, userStream(email), USER_TYPES, foldUser, (s) => {
    const events = decideRegister(s, { userId, accountId: s.accountId ?? newId(), email, codeHash: codeHash(pepperOf(deps.config), userId, code), now });
    return { events: events as UserEvent[], result: events[events.length - 1].data as { issuedAt: string } };
  }, 'anonymous', USER_CONTENTION);
  const minutes = USER_RULES.codeTtlMs / 60_000;
  await sendSystemMail(deps, {
    to: email,
    subject: `${code} is your Motor verification code`,
    text: [
      `Your Motor verification code is ${code}`,
      '',
      `It expires in ${minutes} minutes and works once. Enter it where you signed up, or continue at:`,
      dashboardLink(deps.config, `/dashboard/verify?email=${encodeURIComponent(email)}`),
      '',
      'If you did not ask for this code, ignore this mail.',
    ].join('\n'),
    purpose: 'verification_code',
    idempotencyKey: `verification-code:${userId}:${issued.issuedAt}`,
  }, now);
  return { email, expiresInSeconds: USER_RULES.codeTtlMs / 1000 };
}

// ------------------------------------------------------------------------------ verify-code
export async function verifyCode(deps: AuthDeps, body: { email?: unknown; code?: unknown }, now: Date) {
  const email = normalizeEmail(body.email);
  if (typeof body.code !== 'string' || !/^\d{6}$/.test(body.code)) throw validation('code must be the 6 digits from the mail', 'code');
  const userId = userIdOf(email);
  const token = setupToken();
  const { error } = await decideAndAppend(deps.store, userStream(email), USER_TYPES, foldUser, (s) => {
    const d = decideVerifyCode(s, { codeHash: codeHash(pepperOf(deps.config), userId, body.code as string), setupTokenHash: sha256Hex(token), now });
    return { events: d.events, result: { error: d.error } };
  }, 'anonymous', USER_CONTENTION);
  if (error) throw error;
  return { setupToken: token, expiresInSeconds: USER_RULES.setupTtlMs / 1000, expiresAt: new Date(now.getTime() + USER_RULES.setupTtlMs).toISOString() };
}

// ------------------------------------------------------------------------------ sessions
export interface SessionTokens {
  token: string; tokenType: 'Bearer'; expiresIn: number; expiresAt: string;
  refreshToken: string; refreshExpiresAt: string;
  userId: string; accountId: string;
}

async function openSession(deps: AuthDeps, user: { userId: string; accountId: string }, channel: string, now: Date, sessionId = newId()): Promise<SessionTokens> {
  const secret = randomSecret();
  const refreshToken = opaqueToken('rt', sessionId, secret);
  const events = startSession(foldSession([]), { sessionId, userId: user.userId, accountId: user.accountId, channel, refreshTokenHash: sha256Hex(secret), now });
  await appendEvents(deps.store, streamName('authSession', sessionId), events, 'no_stream', `user:${user.userId}`);
  return tokensFor(deps, user, sessionId, refreshToken, (events[0] as Extract<SessionEvent, { type: 'SessionStarted' }>).data.refreshExpiresAt, now);
}

function tokensFor(deps: AuthDeps, user: { userId: string; accountId: string }, sessionId: string, refreshToken: string, refreshExpiresAt: string, now: Date): SessionTokens {
  const jwt = signDashboardToken(dashboardTokenSettings(deps.config), { ...user, sessionId }, now);
  return {
    token: jwt.token, tokenType: 'Bearer', expiresIn: jwt.expiresIn, expiresAt: jwt.expiresAt.toISOString(),
    refreshToken, refreshExpiresAt, userId: user.userId, accountId: user.accountId,
  };
}

// ------------------------------------------------------------------------------ set-password
export function checkPassword(password: unknown): string {
  if (typeof password !== 'string') throw validation('password is required', 'password');
  const chars = [...password];
  if (chars.length < PASSWORD_MIN || chars.length > PASSWORD_MAX || password.trim().length === 0 || /[\u0000-\u001f\u007f]/.test(password)) {
    throw fail('weak_password', 400, `password must be ${PASSWORD_MIN} to ${PASSWORD_MAX} characters, without control characters`, { details: { field: 'password' } });
  }
  return password;
}

export function checkChannel(channel: unknown): string {
  if (channel === undefined) return 'web';
  if (typeof channel !== 'string' || !/^[a-z][a-z0-9_-]{0,31}$/.test(channel)) throw validation('channel must be a short lower-case name such as agent or web', 'channel');
  return channel;
}

export async function setPassword(deps: AuthDeps, body: { email?: unknown; password?: unknown; setupToken?: unknown; channel?: unknown }, now: Date): Promise<SessionTokens> {
  const email = normalizeEmail(body.email);
  const password = checkPassword(body.password);
  const channel = checkChannel(body.channel);
  if (!isSetupTokenShape(body.setupToken)) throw fail('invalid_setup_token', 401, 'The setup token is invalid or was already used', { details: { field: 'setupToken' } });
  const presented = sha256Hex(body.setupToken);
  // The token before the password's hash: anyone may send this request, and a wrong, spent or
  // expired token must cost a stream read, not a scrypt. Nothing is spent here; the token is
  // checked again, and used up, on the stream as it is when PasswordSet is appended.
  const { state } = await load(deps.store, userStream(email), USER_TYPES, foldUser);
  checkSetupToken(state, { setupTokenHash: presented, now });
  const passwordHash = await hashPassword(password);
  const accountId = state.passwordHash === null && state.userId && state.accountId
    ? await accountOfFirstPassword(deps, email, { userId: state.userId, accountId: state.accountId }, now)
    : undefined;
  const user = await decideAndAppend(deps.store, userStream(email), USER_TYPES, foldUser, (s) => {
    const events = decideSetPassword(s, { setupTokenHash: presented, passwordHash, channel, accountId, now });
    return { events, result: { userId: s.userId!, accountId: events[0].data.accountId } };
  }, `user:${state.userId}`, USER_CONTENTION);
  return openSession(deps, user, channel, now);
}

/**
 * The account a user's first password opens (an unverified address never makes one): the one the
 * address belongs to (docs/AUTH.md "One account per email"). A free address is claimed for the
 * account registered with it, which is made now; an address that has an account already (a
 * bootstrap made it for this owner, or an older release did) gives the user that account, since the
 * code mailed to the address proves the same ownership a password reset does. The service's own
 * sender address opens none (400 email_reserved).
 */
async function accountOfFirstPassword(deps: AuthDeps, email: string, user: { userId: string; accountId: string }, now: Date): Promise<string> {
  const actor = `user:${user.userId}`;
  const accountId = await claimOwnerEmail(deps, { email, accountId: user.accountId, actor, now }, deps.config.systemMailFrom, emailReserved);
  // Made unless it exists. A claim whose account is not there yet (a bootstrap between its claim
  // and its account, or one that stopped there) gets it here: the first AccountCreated wins, and
  // a bootstrap that loses is refused (account_exists).
  try {
    const created: DomainEvent[] = [
      { type: 'AccountCreated', data: { accountId, email, plan: deps.config.defaultPlan.name, createdAt: now.toISOString() } },
      // An account without blocks: its list of them starts empty (docs/BLOCKS.md "Plan limit").
      ...newAccountBlocks(accountId, [], now),
    ];
    await deps.store.append(streamName('account', accountId), created.map((e) => toEventData(newId(), e, { actor })), { expectedRevision: 'no_stream' });
  } catch (err) {
    if (!(err instanceof WrongExpectedRevisionError)) throw err;
  }
  return accountId;
}

// ------------------------------------------------------------------------------ login
export async function login(deps: AuthDeps, body: { email?: unknown; password?: unknown }, remoteAddress: string | null, clock: Clock): Promise<SessionTokens> {
  const email = normalizeEmail(body.email);
  if (typeof body.password !== 'string' || body.password.length === 0 || body.password.length > 1024) throw validation('password is required', 'password');
  const password = body.password;
  const sessionId = newId();
  // One attempt per address at a time (loginTurn.ts): each sees the failures recorded before it.
  const inTurn = <T>(attempt: () => Promise<T>) => (deps.loginTurns ? deps.loginTurns.run(userIdOf(email), attempt) : attempt());
  const { user, now } = await inTurn(async () => {
    const first = await load(deps.store, userStream(email), USER_TYPES, foldUser);
    checkLoginAllowed(first.state, clock.now());
    const ok = first.state.passwordHash !== null ? await verifyPassword(password, first.state.passwordHash) : await burnPasswordCheck(password);
    // The slowdown counts from when the failure was known, not from when the (slow) check began.
    const checkedAt = clock.now();
    const verdict = await decideAndAppend(deps.store, userStream(email), USER_TYPES, foldUser, (s) => {
      // Decided on the stream as it is now (a password reset, or another process writing despite
      // the turn): the lock and the slowdown are checked again there, and the password check
      // holds only for the password it was made against.
      const passwordOk = ok && s.passwordHash === first.state.passwordHash;
      const d = decideLogin(s, { passwordOk, sessionId, remoteAddress, now: checkedAt });
      return { events: d.events, result: { error: d.error as DomainError | undefined, user: { userId: s.userId ?? '', accountId: s.accountId ?? '' } } };
    }, 'anonymous', USER_CONTENTION);
    if (verdict.error) throw verdict.error;
    return { user: verdict.user, now: checkedAt };
  });
  return openSession(deps, user, 'login', now, sessionId);
}

// ------------------------------------------------------------------------------ refresh
export async function refreshSession(deps: AuthDeps, body: { refreshToken?: unknown }, now: Date): Promise<SessionTokens> {
  if (typeof body.refreshToken !== 'string') throw validation('refreshToken is required', 'refreshToken');
  const parsed = parseOpaqueToken('rt', body.refreshToken);
  if (!parsed) throw invalidRefreshToken();
  const secret = randomSecret();
  const next = opaqueToken('rt', parsed.id, secret);
  const r = await decideAndAppend(deps.store, streamName('authSession', parsed.id), SESSION_TYPES, foldSession, async (s) => {
    if (s.exists && !s.revoked && !(await startedAfterPassword(deps.store, s))) return { events: [], result: { error: invalidRefreshToken(), user: { userId: '', accountId: '' }, refreshExpiresAt: '' } };
    const d = decideRefresh(s, { presentedHash: sha256Hex(parsed.secret), nextHash: sha256Hex(secret), now });
    const rotated = d.events.find((e) => e.type === 'RefreshTokenRotated') as Extract<SessionEvent, { type: 'RefreshTokenRotated' }> | undefined;
    return { events: d.events, result: { error: d.error, user: { userId: s.userId ?? '', accountId: s.accountId ?? '' }, refreshExpiresAt: rotated?.data.refreshExpiresAt ?? '' } };
  }, 'anonymous', SESSION_CONTENTION);
  if (r.error) throw r.error;
  return tokensFor(deps, r.user, parsed.id, next, r.refreshExpiresAt, now);
}

// ------------------------------------------------------------------------------ web handoff
export const HANDOFF_TTL_SECONDS = 60;

export function checkRedirectPath(v: unknown): string {
  if (v === undefined) return '/dashboard';
  if (typeof v !== 'string' || !/^\/(?![/\\])[\x21-\x7e]{0,512}$/.test(v)) throw validation('redirectPath must be a path on this site starting with a single /', 'redirectPath');
  return v;
}

export async function issueWebHandoff(deps: AuthDeps, user: { userId: string; accountId: string }, body: { redirectPath?: unknown }, now: Date) {
  const redirectPath = checkRedirectPath(body?.redirectPath);
  const handoffId = newId();
  const secret = randomSecret();
  const code = opaqueToken('wh', handoffId, secret);
  const expiresAt = new Date(now.getTime() + HANDOFF_TTL_SECONDS * 1000).toISOString();
  await appendEvents(deps.store, streamName('webHandoff', handoffId), [{
    type: 'WebHandoffIssued', data: { handoffId, userId: user.userId, accountId: user.accountId, codeHash: sha256Hex(secret), redirectPath, expiresAt, issuedAt: now.toISOString() },
  }], 'no_stream', `user:${user.userId}`);
  // The code travels in the fragment: browsers never send it to a server or put it in a Referer.
  return { url: dashboardLink(deps.config, `/dashboard/handoff#code=${code}`), code, expiresIn: HANDOFF_TTL_SECONDS, expiresAt };
}

const invalidHandoff = () => fail('invalid_handoff', 401, 'The handoff code is invalid, expired or already used', { nextAction: 'Ask for a new handoff URL' });

export async function redeemWebHandoff(deps: AuthDeps, body: { code?: unknown }, now: Date): Promise<SessionTokens & { redirectPath: string }> {
  const parsed = parseOpaqueToken('wh', body.code);
  if (!parsed) throw invalidHandoff();
  const sessionId = newId();
  const issued = await decideAndAppend(deps.store, streamName('webHandoff', parsed.id), ['WebHandoffIssued', 'WebHandoffRedeemed'],
    (events: Array<Extract<DomainEvent, { type: 'WebHandoffIssued' | 'WebHandoffRedeemed' }>>) => ({
      issued: events.find((e) => e.type === 'WebHandoffIssued')?.data as Extract<DomainEvent, { type: 'WebHandoffIssued' }>['data'] | undefined,
      redeemed: events.some((e) => e.type === 'WebHandoffRedeemed'),
    }),
    (s) => {
      if (!s.issued || s.redeemed || sha256Hex(parsed.secret) !== s.issued.codeHash || now.getTime() >= Date.parse(s.issued.expiresAt)) throw invalidHandoff();
      return { events: [{ type: 'WebHandoffRedeemed', data: { handoffId: parsed.id, sessionId, at: now.toISOString() } }], result: s.issued };
    }, 'anonymous', HANDOFF_CONTENTION);
  const tokens = await openSession(deps, { userId: issued.userId, accountId: issued.accountId }, 'web', now, sessionId);
  return { ...tokens, redirectPath: issued.redirectPath };
}

// ------------------------------------------------------------------------------ dashboard JWT check
/**
 * A dashboard JWT is honoured only while its session lives: once a refresh-token reuse revoked
 * the family, the access tokens of that session stop working too (one stream read per request).
 */
export async function assertSessionActive(store: EventStore, sessionId: string): Promise<void> {
  const { state } = await load(store, streamName('authSession', sessionId), SESSION_TYPES, foldSession);
  if (!state.exists || state.revoked || !(await startedAfterPassword(store, state))) {
    throw fail('session_revoked', 401, 'This dashboard session was revoked', { nextAction: 'Log in again: POST /api/auth/login' });
  }
}

/** A password set after the session started (a reset) ends the session. */
async function startedAfterPassword(store: EventStore, session: { userId: string | null; startedAt: number }): Promise<boolean> {
  if (!session.userId) return false;
  const { state: user } = await load(store, streamName('user', session.userId), USER_TYPES, foldUser);
  return user.passwordSetAt === null || session.startedAt >= user.passwordSetAt;
}
