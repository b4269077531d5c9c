import { timingSafeEqual } from 'node:crypto';
import { fail, type DomainError } from '../errors';
import type { DomainEvent } from '../events';

/**
 * A dashboard session = one refresh-token family (stream `authSession-<uuid>`). Every refresh
 * spends the presented token and issues the next one; presenting a spent token again means it
 * leaked, so the whole family is revoked (OAuth 2.0 Security BCP, refresh token rotation).
 */

export const SESSION_RULES = { refreshTtlMs: 7 * 24 * 3600_000 } as const;

export type SessionEvent = Extract<DomainEvent, { type: 'SessionStarted' | 'RefreshTokenRotated' | 'SessionRevoked' }>;

export interface SessionState {
  exists: boolean;
  sessionId: string | null;
  userId: string | null;
  accountId: string | null;
  channel: string | null;
  currentHash: string | null;
  refreshExpiresAt: number;
  startedAt: number;
  spent: string[];
  revoked: boolean;
}

export const initialSessionState = (): SessionState => ({
  exists: false, sessionId: null, userId: null, accountId: null, channel: null, currentHash: null, refreshExpiresAt: 0, startedAt: 0, spent: [], revoked: false,
});

export function evolveSession(s: SessionState, e: SessionEvent): SessionState {
  switch (e.type) {
    case 'SessionStarted':
      return { ...s, exists: true, sessionId: e.data.sessionId, userId: e.data.userId, accountId: e.data.accountId, channel: e.data.channel, currentHash: e.data.refreshTokenHash, refreshExpiresAt: Date.parse(e.data.refreshExpiresAt), startedAt: Date.parse(e.data.startedAt) };
    case 'RefreshTokenRotated':
      return { ...s, spent: [...s.spent, e.data.previousHash], currentHash: e.data.refreshTokenHash, refreshExpiresAt: Date.parse(e.data.refreshExpiresAt) };
    case 'SessionRevoked':
      return { ...s, revoked: true, currentHash: null };
  }
}

export const foldSession = (events: SessionEvent[]): SessionState => events.reduce(evolveSession, initialSessionState());

const sameHash = (a: string, b: string): boolean => {
  const x = Buffer.from(a, 'hex');
  const y = Buffer.from(b, 'hex');
  return x.length === y.length && x.length > 0 && timingSafeEqual(x, y);
};

export interface StartSession { sessionId: string; userId: string; accountId: string; channel: string; refreshTokenHash: string; now: Date }

export function startSession(s: SessionState, c: StartSession, rules = SESSION_RULES): SessionEvent[] {
  if (s.exists) throw new Error(`session ${c.sessionId} already exists`);
  return [{ type: 'SessionStarted', data: {
    sessionId: c.sessionId, userId: c.userId, accountId: c.accountId, channel: c.channel, refreshTokenHash: c.refreshTokenHash,
    refreshExpiresAt: new Date(c.now.getTime() + rules.refreshTtlMs).toISOString(), startedAt: c.now.toISOString(),
  } }];
}

export const invalidRefreshToken = () => fail('invalid_refresh_token', 401, 'The refresh token is invalid, expired or revoked', { nextAction: 'Log in again: POST /api/auth/login' });

export interface Refresh { presentedHash: string; nextHash: string; now: Date }

export function refresh(s: SessionState, c: Refresh, rules = SESSION_RULES): { events: SessionEvent[]; error?: DomainError } {
  if (!s.exists || !s.sessionId) return { events: [], error: invalidRefreshToken() };
  if (s.revoked) return { events: [], error: invalidRefreshToken() };
  if (s.spent.some((h) => sameHash(h, c.presentedHash))) {
    return {
      events: [{ type: 'SessionRevoked', data: { sessionId: s.sessionId, reason: 'refresh_token_reuse', at: c.now.toISOString() } }],
      error: fail('refresh_token_reused', 401, 'This refresh token was already used: the session is revoked', { nextAction: 'Log in again: POST /api/auth/login' }),
    };
  }
  if (!s.currentHash || !sameHash(s.currentHash, c.presentedHash)) return { events: [], error: invalidRefreshToken() };
  if (c.now.getTime() >= s.refreshExpiresAt) return { events: [], error: fail('refresh_token_expired', 401, 'The refresh token has expired', { nextAction: 'Log in again: POST /api/auth/login' }) };
  return { events: [{ type: 'RefreshTokenRotated', data: {
    sessionId: s.sessionId, previousHash: s.currentHash, refreshTokenHash: c.nextHash,
    refreshExpiresAt: new Date(c.now.getTime() + rules.refreshTtlMs).toISOString(), at: c.now.toISOString(),
  } }] };
}
