import { X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { TLSSocket } from 'node:tls';
import type { Knex } from 'knex';
import type { EventStore } from '../domain/eventStore';
import { streamName, WrongExpectedRevisionError } from '../domain/eventStore';
import { fail } from '../domain/errors';
import { asDomainEvent, toEventData, type MotorBlockCreated, type SmtpClientCertificateRegistered } from '../domain/events';
import { newId } from '../domain/ids';
import { ownedBlock, type Actor } from '../commands/auth/credentials';
import { conflictAfterRetries, retryPauseMs } from '../commands/decideOnStream';
import { awaitDirectoryRow, type ReadYourWritesDeps } from '../commands/readYourWrites';
import { DIRECTORY_SCHEMA } from '../projections/directory/queries';
import type { PeerCertificate } from './auth';

/**
 * SMTP mTLS (SPEC credential map: "client certificate plus username and password"), docs/SMTP.md.
 *
 * - The listeners ask every TLS client for a certificate when SMTP_CLIENT_CA is set
 *   (`requestCert`, never `rejectUnauthorized`: clients of other blocks have none and must still
 *   connect). OpenSSL checks the chain to the CA and the validity period; the result is
 *   `TLSSocket.authorized`.
 * - A block is bound to ONE certificate: its SHA-256 fingerprint, registered by the owner in the
 *   dashboard (PEM upload; the certificate is public, only fingerprint, subject, issuer, serial and
 *   validity enter the log). A CA issues many certificates; the registration says which one is this
 *   block's, so a certificate of another block (same CA) is refused.
 * - The auth method is switched in the dashboard (MotorBlockAuthMethodChanged); `mtls` only once a
 *   certificate is registered.
 */

export type AuthMethod = MotorBlockCreated['authMethod'];
export const AUTH_METHODS: readonly AuthMethod[] = ['smtp_password', 'api_key', 'oauth2', 'mtls'];

/** The client certificate of a TLS session (null when the client sent none). */
export function peerCertificateOf(socket: TLSSocket): PeerCertificate | null {
  const x = typeof socket.getPeerX509Certificate === 'function' ? socket.getPeerX509Certificate() : undefined;
  if (!x) return null;
  return { fingerprint256: x.fingerprint256, subject: x.subject.replace(/\n/g, ', '), authorized: socket.authorized === true };
}

/** The fingerprint registered for the block (directory read model, migration 007_smtp_mtls). */
export async function registeredCertificate(db: Knex, motorBlockId: string): Promise<{ fingerprint256: string } | null> {
  const r = await db.withSchema(DIRECTORY_SCHEMA).table('smtp_client_certificates').where({ motor_block_id: motorBlockId }).first('fingerprint256');
  return r ? { fingerprint256: r.fingerprint256 as string } : null;
}

const PEM_CERT_RE = /-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g;

/** Every certificate of a PEM bundle (the CA file may hold a root and intermediates). */
export function parsePemBundle(pem: string | Buffer): X509Certificate[] {
  return [...pem.toString().matchAll(PEM_CERT_RE)].map((m) => new X509Certificate(m[0]));
}

const caCache = new Map<string, X509Certificate[]>();
/** The CA certificates of SMTP_CLIENT_CA (read once per path). */
export function clientCaCertificates(path: string | null): X509Certificate[] | null {
  if (!path) return null;
  let certs = caCache.get(path);
  if (!certs) {
    certs = parsePemBundle(readFileSync(path));
    caCache.set(path, certs);
  }
  return certs;
}

// ------------------------------------------------------------------------------ block state

interface BlockSmtpState {
  created: MotorBlockCreated;
  /** Current SMTP username (a sandbox conversion replaces the one the block was created with). */
  smtpUsername: string;
  authMethod: AuthMethod;
  certificate: SmtpClientCertificateRegistered | null;
  revision: bigint;
}

async function blockState(store: EventStore, accountId: string, motorBlockId: string): Promise<BlockSmtpState> {
  const { created, block } = await ownedBlock(store, accountId, motorBlockId);
  const recorded = await store.readStream(streamName('motorBlock', motorBlockId));
  let authMethod: AuthMethod = created.authMethod;
  let certificate: SmtpClientCertificateRegistered | null = null;
  for (const r of recorded) {
    const e = asDomainEvent(r);
    if (e?.type === 'MotorBlockAuthMethodChanged') authMethod = e.data.authMethod;
    else if (e?.type === 'SmtpClientCertificateRegistered') certificate = e.data;
  }
  return { created, smtpUsername: block.smtpUsername, authMethod, certificate, revision: recorded[recorded.length - 1].revision };
}

export interface ClientCertificateDto {
  fingerprint256: string; subject: string; issuer: string; serialNumber: string; notBefore: string; notAfter: string; registeredAt: string;
}
export interface SmtpAuthSettingsDto {
  motorBlockId: string;
  smtpUsername: string;
  authMethod: AuthMethod;
  clientCertificate: ClientCertificateDto | null;
}

const dto = (s: BlockSmtpState): SmtpAuthSettingsDto => ({
  motorBlockId: s.created.motorBlockId,
  smtpUsername: s.smtpUsername,
  authMethod: s.authMethod,
  clientCertificate: s.certificate
    ? {
      fingerprint256: s.certificate.fingerprint256, subject: s.certificate.subject, issuer: s.certificate.issuer,
      serialNumber: s.certificate.serialNumber, notBefore: s.certificate.notBefore, notAfter: s.certificate.notAfter, registeredAt: s.certificate.registeredAt,
    }
    : null,
});

export interface MtlsCommandDeps extends ReadYourWritesDeps { store: EventStore; clientCaPath: string | null }
const actorOf = (a: Actor) => `user:${a.userId}`;
const invalid = (message: string, field: string) => fail('validation_error', 400, message, { details: { field } });

export async function smtpAuthSettings(deps: MtlsCommandDeps, a: Actor, motorBlockId: string): Promise<SmtpAuthSettingsDto> {
  return dto(await blockState(deps.store, a.accountId, motorBlockId));
}

/**
 * Load → decide → append at the revision read, again (after a short random pause) on a concurrent
 * append to the block's stream, up to 5 tries, then 409 motor_block_conflict; then waits for the
 * directory row, so the caller's next read (and the SMTP listener) sees it.
 */
async function decideOnBlock(
  deps: MtlsCommandDeps, wait: string, a: Actor, motorBlockId: string,
  decide: (s: BlockSmtpState) => { event: Parameters<typeof toEventData>[1] | null; result: SmtpAuthSettingsDto },
): Promise<SmtpAuthSettingsDto> {
  for (let attempt = 1; ; attempt++) {
    const s = await blockState(deps.store, a.accountId, motorBlockId);
    const { event, result } = decide(s);
    if (!event) return result;
    try {
      const r = await deps.store.append(streamName('motorBlock', motorBlockId), [toEventData(newId(), event, { actor: actorOf(a) })], { expectedRevision: s.revision });
      await awaitDirectoryRow(deps, wait, 'motor_blocks', motorBlockId, r.nextExpectedRevision);
      return result;
    } catch (err) {
      if (!(err instanceof WrongExpectedRevisionError)) throw err;
      if (attempt >= 5) throw conflictAfterRetries('motor_block_conflict', 'The Motor Block')();
      await new Promise((resolve) => setTimeout(resolve, retryPauseMs(attempt)));
    }
  }
}

/**
 * Registers the block's client certificate from its PEM (the leaf certificate; a private key in
 * the upload is refused, never stored). It must be an end-entity certificate issued by a CA of
 * SMTP_CLIENT_CA and not expired. Replaces the previous one at once.
 */
export async function registerClientCertificate(deps: MtlsCommandDeps, a: Actor, motorBlockId: string, body: { certificate?: unknown }, now: Date): Promise<SmtpAuthSettingsDto> {
  await ownedBlock(deps.store, a.accountId, motorBlockId);
  const pem = body?.certificate;
  if (typeof pem !== 'string' || pem.trim() === '') throw invalid('certificate must be the PEM text of the client certificate', 'certificate');
  if (pem.length > 64 * 1024) throw invalid('certificate is too long (64 KiB at most)', 'certificate');
  if (/PRIVATE KEY-----/.test(pem)) {
    throw fail('validation_error', 400, 'The upload contains a private key: send the certificate only (the key never leaves the client)', { details: { field: 'certificate' } });
  }
  let certs: X509Certificate[];
  try {
    certs = parsePemBundle(pem);
  } catch {
    throw invalid('certificate is not a valid PEM X.509 certificate', 'certificate');
  }
  if (certs.length !== 1) throw invalid('certificate must hold exactly one PEM certificate (the client certificate, without its chain)', 'certificate');
  const leaf = certs[0];
  if (leaf.ca) throw invalid('certificate is a CA certificate; register the client (end-entity) certificate', 'certificate');

  const cas = clientCaCertificates(deps.clientCaPath);
  if (!cas || cas.length === 0) {
    throw fail('mtls_not_configured', 409, 'mTLS is not available on this Motor: the operator has not set SMTP_CLIENT_CA', { nextAction: 'Use an SMTP password or OAuth 2.0 for this Motor Block' });
  }
  if (!cas.some((ca) => leaf.checkIssued(ca) && leaf.verify(ca.publicKey))) {
    throw fail('client_certificate_untrusted', 422, 'The certificate is not issued by the client CA this Motor trusts (SMTP_CLIENT_CA)', { details: { issuer: leaf.issuer.replace(/\n/g, ', ') } });
  }
  const notAfter = new Date(leaf.validTo);
  if (notAfter.getTime() <= now.getTime()) {
    throw fail('client_certificate_expired', 422, `The certificate expired on ${notAfter.toISOString()}`, { details: { notAfter: notAfter.toISOString() } });
  }
  const data: SmtpClientCertificateRegistered = {
    motorBlockId,
    fingerprint256: leaf.fingerprint256,
    subject: leaf.subject.replace(/\n/g, ', ').slice(0, 1024),
    issuer: leaf.issuer.replace(/\n/g, ', ').slice(0, 1024),
    serialNumber: leaf.serialNumber.slice(0, 128),
    notBefore: new Date(leaf.validFrom).toISOString(),
    notAfter: notAfter.toISOString(),
    registeredAt: now.toISOString(),
  };
  return decideOnBlock(deps, 'block.register_client_certificate', a, motorBlockId, (s) =>
    // The same certificate again: nothing to record.
    s.certificate?.fingerprint256 === data.fingerprint256
      ? { event: null, result: dto(s) }
      : { event: { type: 'SmtpClientCertificateRegistered', data }, result: dto({ ...s, certificate: data }) });
}

/** Switches the block's SMTP auth method; `mtls` needs a registered certificate. Same method again: unchanged. */
export async function changeAuthMethod(deps: MtlsCommandDeps, a: Actor, motorBlockId: string, body: { authMethod?: unknown }, now: Date): Promise<SmtpAuthSettingsDto> {
  await ownedBlock(deps.store, a.accountId, motorBlockId);
  const method = body?.authMethod;
  if (typeof method !== 'string' || !(AUTH_METHODS as readonly string[]).includes(method)) {
    throw invalid(`authMethod must be one of ${AUTH_METHODS.join(', ')}`, 'authMethod');
  }
  const authMethod = method as AuthMethod;
  return decideOnBlock(deps, 'block.change_smtp_auth_method', a, motorBlockId, (s) => {
    if (s.authMethod === authMethod) return { event: null, result: dto(s) };
    if (authMethod === 'mtls' && !s.certificate) {
      throw fail('client_certificate_missing', 409, 'Register the block\'s client certificate before switching it to mTLS', {
        nextAction: `PUT /api/motor-blocks/${motorBlockId}/smtp/client-certificate with the certificate's PEM`,
      });
    }
    return {
      event: { type: 'MotorBlockAuthMethodChanged', data: { motorBlockId, authMethod, previousAuthMethod: s.authMethod, changedAt: now.toISOString() } },
      result: dto({ ...s, authMethod }),
    };
  });
}
