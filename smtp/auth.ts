import type { EventStore } from '../domain/eventStore';
import { streamName } from '../domain/eventStore';
import { toEventData, type SmtpAuthFailureReason } from '../domain/events';
import { newId, type Clock } from '../domain/ids';
import { storableText } from '../domain/storableJson';
import { hashSecret, secretMatches } from '../domain/credentials/apiKeys';
import { findBlockBySmtpUsername, type BlockRecord } from '../projections/directory/queries';
import { isDeletedOrDeleting } from '../commands/blocks/deletionGuard';
import type { DirectoryCache } from '../commands/directoryCache';
import { activeAccessToken } from '../commands/oauth/authorization';
import type { AuthLimiter, AuthTicket } from './authLimiter';
import type { RefusalEventBudget, RefusalEventSettings } from './refusalBudget';
import { registeredCertificate } from './mtls';
import { reply, type SmtpReply } from './replies';

/**
 * SMTP AUTH (PLAIN, LOGIN) against a block's SMTP username and hashed password; for a block whose
 * auth method is OAuth 2.0, PLAIN/LOGIN with the access token as password and XOAUTH2 (RFC 7628's
 * predecessor, as Gmail and Outlook speak it) with the access token (docs/OAUTH.md); for a block
 * whose method is mTLS, PLAIN/LOGIN with the password over a TLS session whose client certificate
 * chains to SMTP_CLIENT_CA and is the block's registered one (fingerprint). Every refusal
 * is a SmtpAuthFailed event on `smtpAuth-<motorBlockId>` (or `smtpAuth-unknown`), which is how the
 * block's owner sees them, up to the refusal event limit of the client's address
 * (smtp/refusalBudget.ts): past it, failures are counted and summed up in one
 * SmtpAuthFailuresSummarized on `smtpAuth-unknown`.
 *
 * A block that is deleted or whose deletion is queued is no block here (docs/BLOCKS.md "Deletion"):
 * its username is refused as an unknown one and the refusal is filed under `smtpAuth-unknown`, so
 * nothing re-creates the history stream the deletion removes.
 */

export interface AuthDeps {
  store: EventStore;
  blockBySmtpUsername(username: string): Promise<BlockRecord | null>;
  /** The same look-up without the cache: asked before a refusal is filed under the block's stream. */
  blockBySmtpUsernameNow(username: string): Promise<BlockRecord | null>;
  limiter: AuthLimiter;
  /** Checks an OAuth access token (commands/oauth): the block it is bound to when it is valid, unexpired and not revoked. Absent: tokens are refused. */
  accessToken?(token: string): Promise<{ ok: true; motorBlockId: string } | { ok: false }>;
  /** The SHA-256 fingerprint of the block's registered client certificate (mTLS blocks); absent or null: none registered. */
  registeredCertificate?(motorBlockId: string): Promise<{ fingerprint256: string } | null>;
  /** Bounds the SmtpAuthFailed events per client address; absent: every failure is recorded. */
  refusals?: RefusalEventBudget;
  now(): Date;
  sleep?(ms: number): Promise<void>;
}

/** What AUTH reads from the running service: the same for the listener and for POST /v1/test-email's check. */
export interface AuthSources {
  store: EventStore;
  directory: DirectoryCache;
  clock: Clock;
  /** Key settings of OAuth access tokens (docs/OAUTH.md); without them OAuth 2.0 blocks cannot log in. */
  oauth?: { tokenSecret: string; tokenIssuer: string; publicBaseUrl: string };
}

export function authDepsOf(s: AuthSources, limiter: AuthLimiter, refusals?: RefusalEventBudget): AuthDeps {
  const oauth = s.oauth;
  return {
    store: s.store, blockBySmtpUsername: (u) => s.directory.blockBySmtpUsername(u),
    blockBySmtpUsernameNow: (u) => findBlockBySmtpUsername(s.directory.db, u), limiter, refusals, now: () => s.clock.now(),
    accessToken: oauth ? async (token: string) => {
      const v = await activeAccessToken({ store: s.store, config: oauth }, token, s.clock.now());
      return v.ok ? { ok: true as const, motorBlockId: v.claims.motorBlockId } : { ok: false as const };
    } : undefined,
    registeredCertificate: (id) => registeredCertificate(s.directory.db, id),
  };
}

export interface AuthAttempt {
  mechanism: 'PLAIN' | 'LOGIN' | 'XOAUTH2';
  username: string;
  /** The password, or for XOAUTH2 (and OAuth 2.0 blocks) the access token. */
  password: string;
  /** PLAIN's authorization identity: empty, or the username itself. */
  authzid?: string;
  remoteAddress: string;
  /** The client certificate of the TLS session, if the client presented one (smtp/mtls.ts). */
  clientCertificate?: PeerCertificate | null;
}

/** What the TLS session tells about the client's certificate. */
export interface PeerCertificate {
  /** SHA-256 of the DER certificate, `AB:CD:...` (X509Certificate.fingerprint256). */
  fingerprint256: string;
  subject: string;
  /** It chains to SMTP_CLIENT_CA and is within its validity period (TLSSocket.authorized). */
  authorized: boolean;
}

export type AuthOutcome =
  | { ok: true; block: BlockRecord }
  | { ok: false; reason: SmtpAuthFailureReason; reply: SmtpReply };

/** The user object smtp-server keeps in session.user. */
export interface SmtpUser { motorBlockId: string; username: string }

const INVALID = reply(535, '5.7.8', 'Authentication credentials invalid');
// Compared against when the username is unknown, so an unknown name costs the same as a wrong password.
const DUMMY_HASH = hashSecret('motor-smtp-no-such-user');

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** The block a username names, unless it is deleted or being deleted: then none (its stream must not come back). */
async function liveBlockOf(deps: AuthDeps, username: string): Promise<BlockRecord | null> {
  const block = username.length <= 256 ? await deps.blockBySmtpUsername(username) : null;
  return block && !isDeletedOrDeleting(block.status) ? block : null;
}

export async function authenticate(deps: AuthDeps, a: AuthAttempt): Promise<AuthOutcome> {
  const gate = await deps.limiter.gate(a.remoteAddress, a.username);
  if (gate.kind !== 'open') {
    const r = gate.kind === 'locked'
      ? reply(454, '4.7.0', `Too many failed authentications from this address; try again in ${gate.retryAfterSeconds}s`)
      : reply(454, '4.7.0', 'Too many authentications from this address are in progress; try again in a moment');
    // The password is not looked at; the lookup only files the event where the block's owner sees it.
    const target = await liveBlockOf(deps, a.username);
    await recordFailure(deps, target?.id ?? null, a, 'locked_out');
    return { ok: false, reason: 'locked_out', reply: r };
  }
  try {
    return await check(deps, a, gate.delayMs, gate.ticket);
  } catch (err) {
    // No verdict (the directory or the store failed): the slot goes back, nothing is counted.
    await deps.limiter.release(gate.ticket);
    throw err;
  }
}

async function check(deps: AuthDeps, a: AuthAttempt, delayMs: number, ticket: AuthTicket): Promise<AuthOutcome> {
  if (delayMs > 0) await (deps.sleep ?? sleep)(delayMs);

  const block = await liveBlockOf(deps, a.username);
  if (a.mechanism === 'XOAUTH2' || block?.authMethod === 'oauth2') return finish(deps, a, ticket, block, await checkToken(deps, a, block));
  const passwordOk = secretMatches(a.password, block?.smtpPasswordHash ?? DUMMY_HASH) && block?.smtpPasswordHash != null;

  let failure: { reason: SmtpAuthFailureReason; reply: SmtpReply } | null = null;
  if (!block) failure = { reason: 'unknown_user', reply: INVALID };
  else if (!block.smtpPasswordHash) failure = { reason: 'no_password_set', reply: INVALID };
  else if (!passwordOk) failure = { reason: 'bad_password', reply: INVALID };
  else if (a.authzid && a.authzid !== a.username) failure = { reason: 'authzid_mismatch', reply: reply(535, '5.7.8', 'Authorization identity must be empty or equal the username') };
  // Only after the password proved who is asking: say why a right password is still refused.
  // SPEC: "A block whose auth method is API Key accepts the key on HTTP only, never as SMTP password".
  else if (block.authMethod === 'mtls') failure = await checkCertificate(deps, a, block);
  else if (block.authMethod !== 'smtp_password') {
    failure = {
      reason: 'auth_method_mismatch',
      reply: reply(535, '5.7.8', block.authMethod === 'api_key'
        ? 'This Motor Block uses API-key authentication; SMTP AUTH is refused (send over HTTPS, or switch the block to SMTP password in the dashboard)'
        : `This Motor Block uses ${block.authMethod} authentication, not an SMTP password`),
    };
  }

  return finish(deps, a, ticket, block, failure);
}

async function finish(
  deps: AuthDeps, a: AuthAttempt, ticket: AuthTicket, block: BlockRecord | null, failure: { reason: SmtpAuthFailureReason; reply: SmtpReply } | null,
): Promise<AuthOutcome> {
  if (failure) {
    await deps.limiter.recordFailure(ticket);
    await recordFailure(deps, block?.id ?? null, a, failure.reason);
    return { ok: false, ...failure };
  }
  await deps.limiter.recordSuccess(ticket);
  return { ok: true, block: block! };
}

/**
 * An access token (the JWT alone: the token endpoint's whole JSON answer is not one) bound to this
 * very block. The block must use OAuth 2.0; that is said only once the token proved who is asking.
 */
async function checkToken(deps: AuthDeps, a: AuthAttempt, block: BlockRecord | null): Promise<{ reason: SmtpAuthFailureReason; reply: SmtpReply } | null> {
  const token = a.password.length <= 4096 && deps.accessToken ? await deps.accessToken(a.password) : { ok: false as const };
  if (!block) return { reason: 'unknown_user', reply: INVALID };
  if (!token.ok || token.motorBlockId !== block.id) return { reason: 'invalid_token', reply: INVALID };
  if (a.authzid && a.authzid !== a.username) return { reason: 'authzid_mismatch', reply: reply(535, '5.7.8', 'Authorization identity must be empty or equal the username') };
  if (block.authMethod !== 'oauth2') {
    return { reason: 'auth_method_mismatch', reply: reply(535, '5.7.8', `This Motor Block uses ${block.authMethod} authentication, not OAuth 2.0`) };
  }
  return null;
}

/**
 * mTLS (SPEC credential map: client certificate plus username and password): the password was
 * right; the TLS session must also carry a certificate that chains to SMTP_CLIENT_CA and is the
 * very certificate registered for this block (its SHA-256 fingerprint). A certificate issued to
 * another block by the same CA is refused: the CA proves who issued it, the registration to whom.
 */
async function checkCertificate(deps: AuthDeps, a: AuthAttempt, block: BlockRecord): Promise<{ reason: SmtpAuthFailureReason; reply: SmtpReply } | null> {
  const cert = a.clientCertificate ?? null;
  if (!cert) {
    return { reason: 'client_certificate_required', reply: reply(535, '5.7.8', 'This Motor Block uses mTLS: present its client certificate in the TLS handshake') };
  }
  if (!cert.authorized) {
    return { reason: 'client_certificate_untrusted', reply: reply(535, '5.7.8', 'The client certificate is not issued by the trusted client CA, or it expired') };
  }
  const registered = deps.registeredCertificate ? await deps.registeredCertificate(block.id) : null;
  if (!registered || registered.fingerprint256 !== cert.fingerprint256) {
    return { reason: 'client_certificate_mismatch', reply: reply(535, '5.7.8', 'The client certificate is not the one registered for this Motor Block') };
  }
  return null;
}

async function recordFailure(deps: AuthDeps, target: string | null, a: AuthAttempt, blockReason: SmtpAuthFailureReason): Promise<void> {
  // Per client address (the only thing an unauthenticated client is known by): past the limit,
  // counted, and neither the directory nor the store is asked.
  const at = deps.now();
  const budget = deps.refusals;
  if (budget && !(await budget.admit(`auth:${a.remoteAddress}`, (failures) => recordFailuresSummarized(deps, budget.settings, a.remoteAddress, failures, at)))) return;
  // The cached look-up can be up to the cache's lifetime behind a deletion request, and a refusal
  // appended after the deletion job's scan would stay. So the directory is asked again, without
  // the cache, for every refusal (a known name or not, so that both cost the same).
  const current = a.username.length <= 256 ? await deps.blockBySmtpUsernameNow(a.username) : null;
  const gone = target !== null && (current === null || current.id !== target || isDeletedOrDeleting(current.status));
  const motorBlockId = gone ? null : target;
  const reason: SmtpAuthFailureReason = gone && blockReason !== 'locked_out' ? 'unknown_user' : blockReason;
  await deps.store.append(streamName('smtpAuth', motorBlockId ?? 'unknown'), [toEventData(newId(), {
    type: 'SmtpAuthFailed',
    data: {
      // At most 128 UTF-16 units, never half a surrogate pair: the store refuses an unpaired one, and
      // the failure would go unrecorded (and uncounted, the AUTH answered 454 as if the store were down).
      motorBlockId, username: storableText(a.username, 128), mechanism: a.mechanism, remoteAddress: a.remoteAddress, reason,
      ...(a.clientCertificate ? { clientCertificateFingerprint256: a.clientCertificate.fingerprint256 } : {}),
      at: at.toISOString(),
    },
  }, { actor: `smtp:${a.remoteAddress}` })], { expectedRevision: 'any' });
}

/** The address's failures counted past the limit, as one event. They may name several usernames: filed under no block. */
async function recordFailuresSummarized(
  deps: AuthDeps, { limit, windowSeconds }: RefusalEventSettings, remoteAddress: string, failures: number, from: Date,
): Promise<void> {
  await deps.store.append(streamName('smtpAuth', 'unknown'), [toEventData(newId(), {
    type: 'SmtpAuthFailuresSummarized',
    data: { remoteAddress, failures, from: from.toISOString(), to: deps.now().toISOString(), limit, windowSeconds },
  }, { actor: `smtp:${remoteAddress}` })], { expectedRevision: 'any' });
}
