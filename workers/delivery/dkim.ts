import { generateKeyPair, createPublicKey } from 'node:crypto';
import { promisify } from 'node:util';
import type { DKIMSignOptions } from 'mailauth';
import { dkimSign } from 'mailauth/lib/dkim/sign';

export type DkimAlgorithm = 'rsa-sha256' | 'ed25519-sha256';

export interface DkimKey {
  privateKeyPem: string;
  /** The `p=` value of the DKIM TXT record (base64). */
  publicKeyDnsValue: string;
  /** The whole TXT record value to publish at `<selector>._domainkey.<domain>`. */
  dnsTxtValue: string;
}

const generateKeyPairAsync = promisify(generateKeyPair);

/** A fresh signing key: RSA 2048 (SPKI in p=) or Ed25519 (the raw 32-byte key in p=, RFC 8463). */
export async function generateDkimKey(algorithm: DkimAlgorithm): Promise<DkimKey> {
  if (algorithm === 'rsa-sha256') {
    const { privateKey, publicKey } = await generateKeyPairAsync('rsa', { modulusLength: 2048 });
    const p = publicKey.export({ type: 'spki', format: 'der' }).toString('base64');
    return { privateKeyPem: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(), publicKeyDnsValue: p, dnsTxtValue: `v=DKIM1; k=rsa; p=${p}` };
  }
  const { privateKey, publicKey } = await generateKeyPairAsync('ed25519');
  const p = rawEd25519PublicKey(publicKey.export({ type: 'spki', format: 'der' }));
  return { privateKeyPem: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(), publicKeyDnsValue: p, dnsTxtValue: `v=DKIM1; k=ed25519; p=${p}` };
}

/** The p= value for an existing private key (e.g. to show the record to publish again). */
export function dkimPublicKeyDnsValue(privateKeyPem: string): string {
  const pub = createPublicKey(privateKeyPem);
  const der = pub.export({ type: 'spki', format: 'der' });
  return pub.asymmetricKeyType === 'ed25519' ? rawEd25519PublicKey(der) : der.toString('base64');
}

/** An Ed25519 SPKI DER is a fixed 12-byte prefix followed by the 32-byte key. */
function rawEd25519PublicKey(spkiDer: Buffer): string {
  return spkiDer.subarray(spkiDer.length - 32).toString('base64');
}

export interface SignOptions {
  domain: string;
  selector: string;
  privateKeyPem: string;
  algorithm: DkimAlgorithm;
  /** t= value; defaults to now. */
  signTime?: Date;
}

/** The headers every signature covers when present (mailauth's default set). */
const STANDARD_SIGNED = [
  'from', 'sender', 'reply-to', 'subject', 'date', 'message-id', 'to', 'cc', 'mime-version', 'content-type',
  'content-transfer-encoding', 'content-id', 'content-description', 'resent-date', 'resent-from', 'resent-sender',
  'resent-to', 'resent-cc', 'resent-message-id', 'in-reply-to', 'references', 'list-id', 'list-help',
  'list-unsubscribe', 'list-subscribe', 'list-post', 'list-owner', 'list-archive', 'list-unsubscribe-post',
  'feedback-id', 'bimi-selector',
];

/** Headers that relays add or rewrite in transit: signing them would break the signature. */
const NEVER_SIGNED = new Set([
  'return-path', 'received', 'dkim-signature', 'arc-seal', 'arc-message-signature', 'arc-authentication-results',
  'authentication-results', 'delivered-to', 'x-original-to', 'bcc',
]);

/**
 * Prepends a DKIM-Signature (relaxed/relaxed) covering the standard headers and every other
 * header of the message, so the sender's custom headers are covered too. Uses mailauth, which
 * signs Ed25519 (nodemailer's signer silently skips it). Throws when the key cannot sign.
 */
export async function signMessage(raw: Buffer, opts: SignOptions): Promise<Buffer> {
  const present = headerNames(raw);
  const extra = [...new Set(present)].filter((n) => !STANDARD_SIGNED.includes(n) && !NEVER_SIGNED.has(n));
  // The typings declare the top-level signing fields required; the real API takes them per signatureData entry.
  const options = {
    canonicalization: 'relaxed/relaxed',
    algorithm: opts.algorithm,
    signTime: opts.signTime ?? new Date(),
    // mailauth reads headerList as a colon-separated string (an array silently falls back to its defaults).
    headerList: [...STANDARD_SIGNED, ...extra].join(':') as unknown as string[],
    signatureData: [{ signingDomain: opts.domain, selector: opts.selector, privateKey: opts.privateKeyPem, algorithm: opts.algorithm }],
  } as unknown as DKIMSignOptions;
  const result = await dkimSign(raw, options);
  if (result.errors?.length || !result.signatures.trim()) {
    const first = result.errors?.[0] as { err?: Error } | undefined;
    throw new Error(`DKIM signing failed for ${opts.selector}._domainkey.${opts.domain}: ${first?.err?.message ?? 'no signature produced'}`);
  }
  return Buffer.concat([Buffer.from(result.signatures), raw]);
}

/** Lower-cased names of the header fields of a raw message, in order. */
export function headerNames(raw: Buffer): string[] {
  const text = raw.toString('latin1');
  const end = text.search(/\r?\n\r?\n/);
  const block = end === -1 ? text : text.slice(0, end);
  const names: string[] = [];
  for (const line of block.split(/\r?\n/)) {
    if (/^[ \t]/.test(line)) continue; // folded continuation
    const m = /^([!-9;-~]+):/.exec(line);
    if (m) names.push(m[1].toLowerCase());
  }
  return names;
}
