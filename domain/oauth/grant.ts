import { timingSafeEqual } from 'node:crypto';
import { DomainError } from '../errors';
import type { DomainEvent } from '../events';
import { pkceMatches } from './agent';

/**
 * One OAuth 2.0 authorization of the SMTP authorization server (stream `oauthGrant-<uuid>`,
 * docs/OAUTH.md): the consent page's one-time form token, the authorization code, then one
 * access/refresh token family. Single-use secrets are spent under the stream's expected revision.
 * Reuse of a code or of a spent refresh token revokes the whole grant (RFC 6749 §4.1.2,
 * OAuth 2.0 Security BCP §4.14). Pure: the clock, ids and secret hashes come in as arguments.
 */

export const OAUTH_RULES = {
  consentTtlMs: 10 * 60_000,
  codeTtlMs: 60_000,
  accessTtlSeconds: 3600,
  refreshTtlMs: 30 * 24 * 3600_000,
} as const;

/** Scopes an SMTP access token can carry. */
export const OAUTH_SCOPES = ['email.send'] as const;
export const DEFAULT_OAUTH_SCOPE = 'email.send';

export type GrantEvent = Extract<DomainEvent, { type: 'OAuthConsentRequested' | 'OAuthCodeIssued' | 'OAuthTokenIssued' | 'OAuthRefreshRotated' | 'OAuthConsentDenied' | 'OAuthGrantRevoked' }>;
export const GRANT_TYPES: readonly GrantEvent['type'][] = ['OAuthConsentRequested', 'OAuthCodeIssued', 'OAuthTokenIssued', 'OAuthRefreshRotated', 'OAuthConsentDenied', 'OAuthGrantRevoked'];

export interface GrantState {
  exists: boolean;
  grantId: string | null;
  clientId: string | null;
  accountId: string | null;
  userId: string | null;
  sessionId: string | null;
  redirectUri: string | null;
  scope: string;
  state: string | null;
  requestedBlockId: string | null;
  formTokenHash: string | null;
  consentExpiresAt: number;
  motorBlockId: string | null;
  codeHash: string | null;
  codeExpiresAt: number;
  codeRedeemed: boolean;
  denied: boolean;
  currentRefreshHash: string | null;
  refreshExpiresAt: number;
  /** Grows by one per refresh rotation (and `tokenIds` per token issued): never changed in place, a folded state may be shared. */
  spentRefreshHashes: readonly string[];
  tokenIds: readonly string[];
  revoked: boolean;
  revokedReason: OAuthGrantRevokedReason | null;
  /** Agent grants (docs/MCP.md): the MCP server the tokens are bound to, the PKCE challenge, the client's name at consent. */
  resource: string | null;
  codeChallenge: string | null;
  clientName: string | null;
  requestedAt: string | null;
}
type OAuthGrantRevokedReason = Extract<GrantEvent, { type: 'OAuthGrantRevoked' }>['data']['reason'];

export const initialGrantState = (): GrantState => ({
  exists: false, grantId: null, clientId: null, accountId: null, userId: null, sessionId: null, redirectUri: null, scope: DEFAULT_OAUTH_SCOPE,
  state: null, requestedBlockId: null, formTokenHash: null, consentExpiresAt: 0, motorBlockId: null, codeHash: null, codeExpiresAt: 0,
  codeRedeemed: false, denied: false, currentRefreshHash: null, refreshExpiresAt: 0, spentRefreshHashes: [], tokenIds: [], revoked: false,
  revokedReason: null, resource: null, codeChallenge: null, clientName: null, requestedAt: null,
});

/** What an event changes but the two lists that grow over a grant's life (`foldGrant` appends to those). */
function evolveFields(s: GrantState, e: GrantEvent): GrantState {
  switch (e.type) {
    case 'OAuthConsentRequested':
      return {
        ...s, exists: true, grantId: e.data.grantId, clientId: e.data.clientId, accountId: e.data.accountId, userId: e.data.userId, sessionId: e.data.sessionId,
        redirectUri: e.data.redirectUri, scope: e.data.scope, state: e.data.state, requestedBlockId: e.data.motorBlockId,
        formTokenHash: e.data.formTokenHash, consentExpiresAt: Date.parse(e.data.expiresAt),
        resource: e.data.resource ?? null, codeChallenge: e.data.codeChallenge ?? null, clientName: e.data.clientName ?? null, requestedAt: e.data.requestedAt,
      };
    case 'OAuthCodeIssued':
      return { ...s, formTokenHash: null, motorBlockId: e.data.motorBlockId, codeHash: e.data.codeHash, codeExpiresAt: Date.parse(e.data.expiresAt) };
    case 'OAuthConsentDenied':
      return { ...s, formTokenHash: null, denied: true };
    case 'OAuthTokenIssued':
      return { ...s, codeRedeemed: true, currentRefreshHash: e.data.refreshTokenHash, refreshExpiresAt: Date.parse(e.data.refreshExpiresAt) };
    case 'OAuthRefreshRotated':
      return { ...s, currentRefreshHash: e.data.refreshTokenHash, refreshExpiresAt: Date.parse(e.data.refreshExpiresAt) };
    case 'OAuthGrantRevoked':
      return { ...s, revoked: true, revokedReason: e.data.reason, currentRefreshHash: null };
  }
}

/**
 * The state after `events`, starting from `from` (a new grant by default; a state folded earlier,
 * to carry on from where it stopped: commands/oauth/grantCache.ts). Linear in the events: each
 * token issued adds its id to `tokenIds`, each rotation also the spent hash to
 * `spentRefreshHashes`, appended to one copy of each list made here. Copying both lists at every
 * event, as an event-by-event evolve does, made the fold of a connection kept alive for months
 * (one rotation an hour) quadratic: 2,000 rotations, 4 million strings copied per fold.
 */
export function foldGrant(events: readonly GrantEvent[], from: GrantState = initialGrantState()): GrantState {
  let s = from;
  let tokenIds: string[] | null = null;
  let spent: string[] | null = null;
  for (const e of events) {
    s = evolveFields(s, e);
    if (e.type === 'OAuthTokenIssued' || e.type === 'OAuthRefreshRotated') (tokenIds ??= [...from.tokenIds]).push(e.data.tokenId);
    if (e.type === 'OAuthRefreshRotated') (spent ??= [...from.spentRefreshHashes]).push(e.data.previousHash);
  }
  if (tokenIds === null && spent === null) return s;
  return { ...s, tokenIds: tokenIds ?? from.tokenIds, spentRefreshHashes: spent ?? from.spentRefreshHashes };
}

export const evolveGrant = (s: GrantState, e: GrantEvent): GrantState => foldGrant([e], s);

const sameHash = (a: string | null, b: string): boolean => {
  if (a === null) return false;
  const x = Buffer.from(a, 'hex');
  const y = Buffer.from(b, 'hex');
  return x.length === y.length && timingSafeEqual(x, y);
};

/** OAuth errors: `error` is the code (RFC 6749 §5.2), always 400 here. */
export const oauthError = (code: 'invalid_target' | 'invalid_request' | 'invalid_client' | 'invalid_grant' | 'invalid_scope' | 'unsupported_grant_type' | 'unsupported_response_type' | 'access_denied', description: string): DomainError =>
  new DomainError({ code, status: 400, message: description, details: { oauth: true } });

export interface ApproveConsent { formTokenHash: string; userId: string; motorBlockId: string | null; codeHash: string; now: Date }

/** The consent form was posted: spends the form token and issues the code. */
export function decideApprove(s: GrantState, c: ApproveConsent): GrantEvent[] {
  if (!s.exists || s.userId !== c.userId || !sameHash(s.formTokenHash, c.formTokenHash) || c.now.getTime() > s.consentExpiresAt) {
    throw oauthError('invalid_request', 'The consent form expired or was already used; start the authorization again');
  }
  return [{ type: 'OAuthCodeIssued', data: { grantId: s.grantId!, motorBlockId: c.motorBlockId, codeHash: c.codeHash, expiresAt: new Date(c.now.getTime() + OAUTH_RULES.codeTtlMs).toISOString(), issuedAt: c.now.toISOString() } }];
}

export function decideDeny(s: GrantState, c: { formTokenHash: string; userId: string; now: Date }): GrantEvent[] {
  if (!s.exists || s.userId !== c.userId || !sameHash(s.formTokenHash, c.formTokenHash) || c.now.getTime() > s.consentExpiresAt) {
    throw oauthError('invalid_request', 'The consent form expired or was already used');
  }
  return [{ type: 'OAuthConsentDenied', data: { grantId: s.grantId!, at: c.now.toISOString() } }];
}

export interface RedeemCode {
  clientId: string; codeHash: string; redirectUri: string; tokenId: string; refreshTokenHash: string; now: Date;
  /**
   * The PKCE code_verifier, when the token request has one: required when the authorization request
   * recorded a code_challenge (always, for agent grants), refused when it recorded none (a downgrade,
   * RFC 9700 §2.1.1). Agent grants: the `resource` of the token request (required).
   */
  codeVerifier?: string; resource?: string;
}

/**
 * Code → tokens. A code presented after it was redeemed revokes everything issued from it (the
 * events to append come back with `error` so the caller appends them, then refuses).
 */
export function decideRedeemCode(s: GrantState, c: RedeemCode): { events: GrantEvent[]; error?: DomainError } {
  const invalid = (m: string) => oauthError('invalid_grant', m);
  if (!s.exists || s.codeHash === null || !sameHash(s.codeHash, c.codeHash)) return { events: [], error: invalid('Unknown authorization code') };
  if (s.clientId !== c.clientId) return { events: [], error: invalid('The code was issued to another client') };
  if (s.revoked) return { events: [], error: invalid('The authorization was revoked') };
  if (s.codeRedeemed) {
    return { events: [{ type: 'OAuthGrantRevoked', data: { grantId: s.grantId!, reason: 'code_reuse', at: c.now.toISOString() } }], error: invalid('The code was already used; the tokens issued from it are revoked') };
  }
  if (c.now.getTime() > s.codeExpiresAt) return { events: [], error: invalid('The code expired') };
  if (s.redirectUri !== c.redirectUri) return { events: [], error: invalid('redirect_uri differs from the one of the authorization request') };
  if (s.codeChallenge !== null && (c.codeVerifier === undefined || !pkceMatches(s.codeChallenge, c.codeVerifier))) return { events: [], error: invalid('code_verifier does not match the code_challenge') };
  if (s.codeChallenge === null && c.codeVerifier !== undefined) return { events: [], error: invalid('code_verifier given, but the authorization request had no code_challenge') };
  if (s.resource !== c.resource && (s.resource !== null || c.resource !== undefined)) return { events: [], error: oauthError('invalid_target', 'resource differs from the one of the authorization request') };
  return {
    events: [{
      type: 'OAuthTokenIssued',
      data: {
        grantId: s.grantId!, tokenId: c.tokenId, refreshTokenHash: c.refreshTokenHash,
        accessExpiresAt: new Date(c.now.getTime() + OAUTH_RULES.accessTtlSeconds * 1000).toISOString(),
        refreshExpiresAt: new Date(c.now.getTime() + OAUTH_RULES.refreshTtlMs).toISOString(), issuedAt: c.now.toISOString(),
      },
    }],
  };
}

export interface RotateRefresh {
  clientId: string; refreshTokenHash: string; newRefreshTokenHash: string; tokenId: string; now: Date;
  /** Agent grants: the `resource` of the token request, which must be the grant's. */
  resource?: string;
}

/** Refresh rotation: the presented token is spent; a spent one presented again revokes the family. */
export function decideRefresh(s: GrantState, c: RotateRefresh): { events: GrantEvent[]; error?: DomainError } {
  const invalid = (m: string) => oauthError('invalid_grant', m);
  if (!s.exists || s.clientId !== c.clientId) return { events: [], error: invalid('Unknown refresh token') };
  if (s.revoked) return { events: [], error: invalid('The authorization was revoked') };
  if (s.spentRefreshHashes.some((h) => sameHash(h, c.refreshTokenHash))) {
    return { events: [{ type: 'OAuthGrantRevoked', data: { grantId: s.grantId!, reason: 'refresh_token_reuse', at: c.now.toISOString() } }], error: invalid('The refresh token was already used; the authorization is revoked') };
  }
  if (!sameHash(s.currentRefreshHash, c.refreshTokenHash)) return { events: [], error: invalid('Unknown refresh token') };
  if (c.now.getTime() > s.refreshExpiresAt) return { events: [], error: invalid('The refresh token expired') };
  if (s.resource !== c.resource && (s.resource !== null || c.resource !== undefined)) return { events: [], error: oauthError('invalid_target', 'resource differs from the one of the authorization') };
  return {
    events: [{
      type: 'OAuthRefreshRotated',
      data: {
        grantId: s.grantId!, tokenId: c.tokenId, previousHash: c.refreshTokenHash, refreshTokenHash: c.newRefreshTokenHash,
        accessExpiresAt: new Date(c.now.getTime() + OAUTH_RULES.accessTtlSeconds * 1000).toISOString(),
        refreshExpiresAt: new Date(c.now.getTime() + OAUTH_RULES.refreshTtlMs).toISOString(), at: c.now.toISOString(),
      },
    }],
  };
}

/**
 * A user revokes a connection (docs/MCP.md): every token of the grant stops at once. Only a grant
 * of the user's own account; revoking a revoked grant changes nothing. Returns null when the grant
 * is not the account's (the caller answers 404, as for a grant that does not exist).
 */
export function decideUserRevoke(s: GrantState, c: { accountId: string; userId: string; now: Date }): GrantEvent[] | null {
  if (!s.exists || s.accountId !== c.accountId) return null;
  if (s.revoked) return [];
  return [{ type: 'OAuthGrantRevoked', data: { grantId: s.grantId!, reason: 'user_revoked', at: c.now.toISOString(), by: `user:${c.userId}` } }];
}

/**
 * The client itself asks to revoke a token of the grant (RFC 7009): the whole grant goes. A grant
 * of another client, one already revoked, or a refresh token the grant never issued changes nothing
 * (the endpoint answers 200 either way).
 */
export function decideClientRevoke(s: GrantState, c: { clientId: string; now: Date; refreshTokenHash?: string }): GrantEvent[] {
  if (!s.exists || s.clientId !== c.clientId || s.revoked) return [];
  // A refresh token names its grant in clear: only one the grant really issued may revoke it.
  const h = c.refreshTokenHash;
  if (h !== undefined && !sameHash(s.currentRefreshHash, h) && !s.spentRefreshHashes.some((x) => sameHash(x, h))) return [];
  return [{ type: 'OAuthGrantRevoked', data: { grantId: s.grantId!, reason: 'client_revoked', at: c.now.toISOString(), by: `oauthClient:${c.clientId}` } }];
}

/** `scope` of an authorization request: space-separated, each known; absent = email.send. */
export function parseScope(scope: unknown): string | null {
  if (scope === undefined || scope === '') return DEFAULT_OAUTH_SCOPE;
  if (typeof scope !== 'string') return null;
  const parts = [...new Set(scope.split(' ').filter(Boolean))];
  if (parts.length === 0 || parts.some((p) => !(OAUTH_SCOPES as readonly string[]).includes(p))) return null;
  return parts.sort().join(' ');
}

/** Redirect URIs: absolute https (or http on a loopback host), no fragment, at most 2000 characters. */
export function isAcceptableRedirectUri(uri: unknown): uri is string {
  if (typeof uri !== 'string' || uri.length > 2000) return false;
  let u: URL;
  try { u = new URL(uri); } catch { return false; }
  if (u.hash || u.username || u.password) return false;
  if (u.protocol === 'https:') return true;
  return u.protocol === 'http:' && ['localhost', '127.0.0.1', '[::1]'].includes(u.hostname);
}
