import { randomBytes } from 'node:crypto';
import type { Knex } from 'knex';
import type { EventStore } from '../../domain/eventStore';
import { streamName } from '../../domain/eventStore';
import { isDomainError, type DomainError } from '../../domain/errors';
import { asDomainEvent, type MotorBlockCreated } from '../../domain/events';
import { isUuid, newId } from '../../domain/ids';
import {
  decideApprove, decideDeny, decideRedeemCode, decideRefresh, OAUTH_RULES, oauthError, parseScope, type GrantEvent, type GrantState,
} from '../../domain/oauth/grant';
import { codeChallengeOf, isCodeVerifier } from '../../domain/oauth/agent';
import { listBlocksOfAccount } from '../../projections/directory/queries';
import { sha256Hex } from '../auth/secrets';
import { appendEvents } from '../auth/streams';
import { ownedBlock } from '../auth/credentials';
import { accessTokenSettings, signAccessToken, verifyAccessToken, type AccessClaims } from './accessTokens';
import { authenticateClient, findClient } from './clients';
import { currentGrant, decideOnGrant, grantStream } from './grantCache';
import { issueAgentToken, startAgentAuthorization, type AgentConsentPage, type AgentOAuthDeps, type AgentTokenResponse } from './agentAuthorization';
import type { ClientMetadataFetcher } from './clientMetadata';
import type { KeyStore } from '../../infra/keys/keyStore';

/**
 * The authorization-code flow of the SMTP authorization server (docs/OAUTH.md): authorize
 * (consent page), consent (code), token (code or refresh → access token), validate. Errors are
 * DomainErrors whose code is the OAuth `error`; the controller renders them as RFC 6749 bodies.
 */

export interface OAuthDeps {
  store: EventStore; db: Knex;
  config: { tokenSecret: string; tokenIssuer: string; publicBaseUrl: string; authPublicUrl: string; mcpPublicUrl: string };
  /** Agent clients (client_id is a metadata document URL): their documents and the token signing key. */
  agents: { clients: ClientMetadataFetcher; keys: KeyStore };
}
export interface DashboardUser { userId: string; accountId: string; sessionId: string }

type Tag = 'oct' | 'oc' | 'ort';
export const opaque = (tag: Tag, grantId: string): { value: string; hash: string } => {
  const value = `${tag}_${grantId.replace(/-/g, '')}_${randomBytes(32).toString('base64url')}`;
  return { value, hash: sha256Hex(value) };
};
/** The grant a form token, code or refresh token names, or null when it is not one. */
export function grantOf(tag: Tag, value: unknown): string | null {
  if (typeof value !== 'string') return null;
  const m = new RegExp(`^${tag}_([0-9a-f]{32})_[A-Za-z0-9_-]{43}$`).exec(value);
  if (!m) return null;
  const h = m[1];
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

export interface ConsentPage {
  kind: 'smtp';
  grantId: string; formToken: string; clientName: string; clientId: string; scope: string; redirectUri: string;
  /** The block named by motor_block_id, or null when the user picks one on the page. */
  block: { id: string; name: string } | null;
  blocks: { id: string; name: string; authMethod: string }[];
}

const agentDeps = (deps: OAuthDeps): AgentOAuthDeps => ({ store: deps.store, keys: deps.agents.keys, clients: deps.agents.clients, config: deps.config });
/** An agent client names itself by its metadata document's https URL; an SMTP client by a uuid. */
const isAgentClientId = (clientId: unknown): clientId is string => typeof clientId === 'string' && clientId.startsWith('https://');

/** GET /api/oauth2/authorize: checks the request and records the consent page's one-time form token. */
export async function startAuthorization(deps: OAuthDeps, user: DashboardUser, q: Record<string, unknown>, now: Date): Promise<ConsentPage | (AgentConsentPage & { kind: 'agent' })> {
  const one = (name: string): string | undefined => {
    const v = q[name];
    if (v === undefined) return undefined;
    if (typeof v !== 'string') throw oauthError('invalid_request', `${name} must be given once`);
    return v;
  };
  const clientId = one('client_id');
  const responseType = one('response_type');
  const redirectUri = one('redirect_uri');
  const state = one('state');
  const blockId = one('motor_block_id');
  if (!clientId) throw oauthError('invalid_request', 'client_id is required');
  if (isAgentClientId(clientId)) return { kind: 'agent', ...await startAgentAuthorization(agentDeps(deps), user, one, now) };
  const client = await findClient(deps.store, clientId);
  if (!client) throw oauthError('invalid_client', 'Unknown client_id');
  if (!redirectUri) throw oauthError('invalid_request', 'redirect_uri is required');
  if (!client.redirectUris.includes(redirectUri)) throw oauthError('invalid_request', 'redirect_uri is not registered for this client');
  if (responseType !== 'code') throw oauthError('invalid_request', 'response_type must be code');
  // PKCE is optional for SMTP clients (a mail client with a secret may not send it), but a challenge
  // that is sent is recorded and then binds the code to its verifier, as for agent clients.
  const pkce = codeChallengeOf(one('code_challenge_method'), one('code_challenge'), false);
  if (!pkce.ok) throw oauthError('invalid_request', pkce.reason);
  const scope = parseScope(one('scope'));
  if (scope === null) throw oauthError('invalid_scope', 'Unknown scope (supported: email.send)');
  if (state !== undefined && state.length > 1024) throw oauthError('invalid_request', 'state is longer than 1024 characters');

  let block: ConsentPage['block'] = null;
  let blocks: ConsentPage['blocks'] = [];
  if (blockId !== undefined) {
    block = await blockOfUser(deps.store, user.accountId, blockId);
  } else {
    blocks = (await listBlocksOfAccount(deps.db, user.accountId)).filter((b) => b.status === 'active').map((b) => ({ id: b.id, name: b.name, authMethod: b.authMethod }));
    if (blocks.length === 0) throw oauthError('invalid_request', 'This account has no active Motor Block to authorize');
  }

  const grantId = newId();
  const form = opaque('oct', grantId);
  await appendEvents(deps.store, grantStream(grantId), [{
    type: 'OAuthConsentRequested',
    data: {
      grantId, clientId: client.clientId, accountId: user.accountId, userId: user.userId, sessionId: user.sessionId, redirectUri, scope,
      state: state ?? null, motorBlockId: block?.id ?? null, formTokenHash: form.hash,
      expiresAt: new Date(now.getTime() + OAUTH_RULES.consentTtlMs).toISOString(), requestedAt: now.toISOString(),
      ...(pkce.challenge !== null ? { codeChallenge: pkce.challenge } : {}),
    },
  }], 'no_stream', `user:${user.userId}`);
  return { kind: 'smtp', grantId, formToken: form.value, clientName: client.name, clientId: client.clientId, scope, redirectUri, block, blocks };
}

/** A uuid is case-insensitive (RFC 9562 §4); Motor names streams by the lower-case spelling. */
const lowerUuid = (v: string | undefined): string | undefined => (isUuid(v) ? v.toLowerCase() : v);

async function blockOfUser(store: EventStore, accountId: string, motorBlockId: string): Promise<{ id: string; name: string }> {
  try {
    const { created } = await ownedBlock(store, accountId, lowerUuid(motorBlockId)!);
    return { id: created.motorBlockId, name: created.name };
  } catch (e) {
    if (isDomainError(e)) throw oauthError('invalid_request', 'motor_block_id is not a Motor Block of this account');
    throw e;
  }
}

export const withParams = (uri: string, params: Record<string, string | null>): string => {
  const u = new URL(uri);
  for (const [k, v] of Object.entries(params)) if (v !== null) u.searchParams.set(k, v);
  return u.toString();
};

/** POST /api/oauth2/consent: spends the form token; approve → code, deny → access_denied. Returns where to redirect. */
export async function decideConsent(deps: OAuthDeps, user: DashboardUser, form: Record<string, string>, now: Date): Promise<{ location: string }> {
  const grantId = grantOf('oct', form.form_token);
  if (!grantId) throw oauthError('invalid_request', 'form_token missing or malformed');
  const formTokenHash = sha256Hex(form.form_token);
  const actor = `user:${user.userId}`;
  if (form.decision === 'deny') {
    const { state: s } = await decideOnGrant(deps.store, grantId, actor, (st) => ({ events: decideDeny(st, { formTokenHash, userId: user.userId, now }), result: undefined }));
    return { location: withParams(s.redirectUri!, { error: 'access_denied', state: s.state }) };
  }
  if (form.decision !== 'approve') throw oauthError('invalid_request', 'decision must be approve or deny');
  const pre = await currentGrant(deps.store, grantId);
  if (pre.resource !== null) {
    // An agent grant is account-wide: no block to choose.
    const code = opaque('oc', grantId);
    const { state: s } = await decideOnGrant(deps.store, grantId, actor,
      (st) => ({ events: decideApprove(st, { formTokenHash, userId: user.userId, motorBlockId: null, codeHash: code.hash, now }), result: undefined }));
    return { location: withParams(s.redirectUri!, { code: code.value, state: s.state }) };
  }
  const formBlockId = lowerUuid(form.motor_block_id);
  const chosen = pre.requestedBlockId ?? formBlockId;
  if (!chosen) throw oauthError('invalid_request', 'motor_block_id is required');
  if (pre.requestedBlockId && formBlockId && formBlockId !== pre.requestedBlockId) throw oauthError('invalid_request', 'motor_block_id differs from the authorization request');
  const block = await blockOfUser(deps.store, user.accountId, chosen);
  const code = opaque('oc', grantId);
  const { state: s } = await decideOnGrant(deps.store, grantId, actor,
    (st) => ({ events: decideApprove(st, { formTokenHash, userId: user.userId, motorBlockId: block.id, codeHash: code.hash, now }), result: undefined }));
  return { location: withParams(s.redirectUri!, { code: code.value, state: s.state }) };
}

export interface TokenResponse {
  access_token: string; token_type: 'Bearer';
  /** Seconds. @isInt */
  expires_in: number;
  refresh_token: string; scope: string;
  motor_block: { id: string; name: string; smtp_username: string };
}

async function blockCreated(store: EventStore, motorBlockId: string): Promise<MotorBlockCreated> {
  const events = await store.readStream(streamName('motorBlock', motorBlockId));
  const first = events[0] ? asDomainEvent(events[0]) : null;
  if (first?.type !== 'MotorBlockCreated') throw oauthError('invalid_grant', 'The Motor Block of this authorization no longer exists');
  return first.data;
}

/** POST /api/oauth2/token. */
export async function issueToken(deps: OAuthDeps, body: Record<string, unknown>, now: Date): Promise<TokenResponse | AgentTokenResponse> {
  const grantType = body.grant_type;
  if (typeof grantType !== 'string') throw oauthError('invalid_request', 'grant_type is required');
  if (grantType !== 'authorization_code' && grantType !== 'refresh_token') throw oauthError('unsupported_grant_type', 'grant_type must be authorization_code or refresh_token');
  if (isAgentClientId(body.client_id)) return issueAgentToken(agentDeps(deps), body, now);
  if (typeof body.client_id !== 'string' || typeof body.client_secret !== 'string') throw oauthError('invalid_client', 'client_id and client_secret are required');
  const client = await authenticateClient(deps.store, body.client_id, body.client_secret);
  const { grantId, tokenId, refresh, state } = await redeemGrant(deps.store, body, client.clientId, now);
  const block = await blockCreated(deps.store, state.motorBlockId!);
  const access = signAccessToken(accessTokenSettings(deps.config), {
    tokenId, grantId, clientId: client.clientId, userId: state.userId!, accountId: state.accountId!, motorBlockId: block.motorBlockId, scope: state.scope,
  }, now, OAUTH_RULES.accessTtlSeconds);
  return {
    access_token: access.token, token_type: 'Bearer', expires_in: OAUTH_RULES.accessTtlSeconds, refresh_token: refresh.value, scope: state.scope,
    motor_block: { id: block.motorBlockId, name: block.name, smtp_username: block.smtpUsername },
  };
}

type SmtpTokenDeps = { store: EventStore; config: Parameters<typeof accessTokenSettings>[0] };

/**
 * The grant step of POST /api/oauth2/token, the same for both profiles: an authorization code
 * redeemed for the first token family, or a refresh token rotated. `agent` carries what an agent
 * client must add (docs/OAUTH.md): the `resource`, and for a code the PKCE `code_verifier`, which an
 * SMTP client sends when its authorization request had a `code_challenge`. Returns
 * the grant after the step, the id of the access token to sign and the new refresh token.
 */
export async function redeemGrant(
  store: EventStore, body: Record<string, unknown>, clientId: string, now: Date, agent?: { resource: string },
): Promise<{ grantId: string; tokenId: string; refresh: { value: string; hash: string }; state: GrantState }> {
  const tokenId = newId();
  let grantId: string;
  let refresh: { value: string; hash: string };
  let decide: (s: GrantState) => { events: GrantEvent[]; error?: DomainError };
  if (body.grant_type === 'authorization_code') {
    if (typeof body.code !== 'string') throw oauthError('invalid_request', 'code is required');
    if (typeof body.redirect_uri !== 'string') throw oauthError('invalid_request', 'redirect_uri is required');
    // PKCE: required of agent clients; for SMTP clients decideRedeemCode requires the verifier when
    // the authorization request had a challenge and refuses one when it had none. A parameter sent
    // empty counts as omitted (RFC 6749 §3.2).
    const verifier = body.code_verifier === '' ? undefined : body.code_verifier;
    if (agent && verifier === undefined) throw oauthError('invalid_request', 'code_verifier is required (PKCE)');
    let codeVerifier: string | undefined;
    if (verifier !== undefined) {
      if (!isCodeVerifier(verifier)) throw oauthError('invalid_grant', 'code_verifier must be 43 to 128 unreserved characters');
      codeVerifier = verifier;
    }
    const id = grantOf('oc', body.code);
    if (!id) throw oauthError('invalid_grant', 'Unknown authorization code');
    grantId = id;
    refresh = opaque('ort', grantId);
    const c = { clientId, codeHash: sha256Hex(body.code), redirectUri: body.redirect_uri, codeVerifier, resource: agent?.resource, tokenId, refreshTokenHash: refresh.hash, now };
    decide = (s) => decideRedeemCode(s, c);
  } else {
    if (typeof body.refresh_token !== 'string') throw oauthError('invalid_request', 'refresh_token is required');
    const id = grantOf('ort', body.refresh_token);
    if (!id) throw oauthError('invalid_grant', 'Unknown refresh token');
    grantId = id;
    refresh = opaque('ort', grantId);
    const c = { clientId, refreshTokenHash: sha256Hex(body.refresh_token), newRefreshTokenHash: refresh.hash, tokenId, resource: agent?.resource, now };
    decide = (s) => decideRefresh(s, c);
  }
  // From the state this process keeps of the grant: a refresh reads only the events appended since
  // this process last read the grant, not the thousands of a connection kept alive for months.
  const { result: error, state } = await decideOnGrant(store, grantId, `oauthClient:${clientId}`, (s) => {
    const d = decide(s);
    return { events: d.events, result: d.error };
  });
  if (error) throw error;
  return { grantId, tokenId, refresh, state };
}

/**
 * An access token that is well signed, unexpired, and whose grant is not revoked (a code or
 * refresh-token reuse kills the tokens already issued, not only the next ones). The grant is read
 * through this process's cache, which still reads the stream's new events every time (grantCache.ts).
 */
export async function activeAccessToken(deps: SmtpTokenDeps, token: string, now: Date): Promise<{ ok: true; claims: AccessClaims } | { ok: false; reason: 'expired' | 'invalid' | 'revoked' }> {
  const v = verifyAccessToken(accessTokenSettings(deps.config), token, now);
  if (!v.ok) return v;
  const state = await currentGrant(deps.store, v.claims.grantId);
  if (!state.exists || state.revoked || !state.tokenIds.includes(v.claims.tokenId)) return { ok: false, reason: 'revoked' };
  return v;
}

/** GET /api/oauth2/validate's metadata (docs/OAUTH.md). */
export interface TokenMetadata { active: true; client_id: string; motor_block_id: string; account_id: string; scope: string; token_type: 'Bearer'; exp: number; iat: number; expires_in: number }

export async function validateToken(deps: SmtpTokenDeps, token: string | null, now: Date): Promise<TokenMetadata | null> {
  if (!token) return null;
  const v = await activeAccessToken(deps, token, now);
  if (!v.ok) return null;
  const c = v.claims;
  return {
    active: true, client_id: c.clientId, motor_block_id: c.motorBlockId, account_id: c.accountId, scope: c.scope, token_type: 'Bearer',
    exp: c.exp, iat: c.iat, expires_in: Math.max(0, c.exp - Math.floor(now.getTime() / 1000)),
  };
}

