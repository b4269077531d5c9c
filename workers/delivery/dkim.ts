import { createHash, createPrivateKey, createPublicKey, generateKeyPair, sign as cryptoSign, type KeyObject } from 'node:crypto';
import { promisify } from 'node:util';
import type { DKIMSignOptions } from 'mailauth';
import { dkimSign } from 'mailauth/lib/dkim/sign';
import { dkimTxtValue } from '../../domain/sendingDomain/records';

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
    return { privateKeyPem: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(), publicKeyDnsValue: p, dnsTxtValue: dkimTxtValue(algorithm, p) };
  }
  const { privateKey, publicKey } = await generateKeyPairAsync('ed25519');
  const p = rawEd25519PublicKey(publicKey.export({ type: 'spki', format: 'der' }));
  return { privateKeyPem: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(), publicKeyDnsValue: p, dnsTxtValue: dkimTxtValue(algorithm, p) };
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
 * header of the message, so the sender's custom headers are covered too. Throws when the key
 * cannot sign.
 *
 * Messages with CRLF line ends and a header/body separator (everything buildMime makes) are signed
 * here directly (RFC 6376 §3.4.2 / §3.4.4 relaxed canonicalization, §3.7 hashes) with the private
 * key parsed once per PEM and cached; anything else (bare LF, no body separator) goes through
 * mailauth, which also signs Ed25519 (nodemailer's signer silently skips it).
 */
export async function signMessage(raw: Buffer, opts: SignOptions): Promise<Buffer> {
  const fast = await signDirect(raw, opts);
  if (fast) return fast;
  return signWithMailauth(raw, opts);
}

/** Parsed private keys by PEM: parsing an RSA PEM costs about a millisecond of CPU. */
const keyCache = new Map<string, KeyObject>();
const KEY_CACHE_MAX = 1000;

function privateKeyObject(pem: string): KeyObject {
  let key = keyCache.get(pem);
  if (!key) {
    key = createPrivateKey(pem);
    if (keyCache.size >= KEY_CACHE_MAX) keyCache.delete(keyCache.keys().next().value as string);
    keyCache.set(pem, key);
  }
  return key;
}

const SIGNED_ORDER = new Map<string, number>();

async function signDirect(raw: Buffer, opts: SignOptions): Promise<Buffer | null> {
  // No body separator, or a bare LF or CR anywhere: leave it to mailauth's general parser. The
  // header block is read as text; the body stays bytes and is checked as it is hashed.
  const sep = raw.indexOf('\r\n\r\n', 0, 'latin1');
  if (sep === -1) return null;
  const text = raw.toString('latin1', 0, sep);
  if (/(^|[^\r])\n/.test(text) || /\r(?!\n)/.test(text)) return null;
  const bh = relaxedBodyHash(raw, sep + 4);
  if (bh === null) return null;
  let key: KeyObject;
  try {
    key = privateKeyObject(opts.privateKeyPem);
  } catch (err) {
    throw new Error(`DKIM signing failed for ${opts.selector}._domainkey.${opts.domain}: ${(err as Error).message}`);
  }
  const keyType = key.asymmetricKeyType;
  if ((opts.algorithm === 'rsa-sha256' && keyType !== 'rsa') || (opts.algorithm === 'ed25519-sha256' && keyType !== 'ed25519')) {
    throw new Error(`DKIM signing failed for ${opts.selector}._domainkey.${opts.domain}: Invalid key type: "${keyType}" (expecting "${opts.algorithm.split('-')[0]}")`);
  }

  // Header fields, each instance bottom-up (as mailauth signs them), relaxed.
  const fields = text.split(/\r\n(?![ \t])/);
  const names: string[] = [];
  let canonical = '';
  if (SIGNED_ORDER.size === 0) STANDARD_SIGNED.forEach((n, i) => SIGNED_ORDER.set(n, i));
  const present = new Set<string>();
  const parsed: Array<{ name: string; lower: string; value: string }> = [];
  for (const field of fields) {
    const colon = field.indexOf(':');
    if (colon <= 0) return null;
    const name = field.slice(0, colon).replace(/[ \t]+$/, '');
    const lower = name.toLowerCase();
    parsed.push({ name, lower, value: field.slice(colon + 1) });
    present.add(lower);
  }
  // A name with ';' cannot be listed in h= (';' ends the tag; RFC 6376 §3.2): such a field (legal
  // in RFC 5322, refused by the send API) goes unsigned rather than breaking the signature.
  const signedNames = new Set([...STANDARD_SIGNED, ...[...present].filter((n) => !SIGNED_ORDER.has(n) && !NEVER_SIGNED.has(n) && !n.includes(';'))]);
  for (let i = parsed.length - 1; i >= 0; i--) {
    const f = parsed[i];
    if (!signedNames.has(f.lower)) continue;
    names.push(f.name);
    canonical += `${f.lower}:${relaxedValue(f.value)}\r\n`;
  }

  const t = Math.floor((opts.signTime ?? new Date()).getTime() / 1000);
  const h = foldList(names, 'h=');
  const head = `DKIM-Signature: v=1; a=${opts.algorithm}; c=relaxed/relaxed; d=${opts.domain}; q=dns/txt;\r\n s=${opts.selector}; t=${t}; bh=${bh};\r\n ${h};\r\n b=`;
  canonical += `dkim-signature:${relaxedValue(head.slice(head.indexOf(':') + 1))}`;
  const data = Buffer.from(canonical, 'latin1');
  // In libuv's thread pool, off the event loop: the signature is the largest single cost of a
  // delivered message (RSA-2048: 0.26 ms on a fast host, 1.15 ms on the slowest measured), and in
  // one process (`npm start`) the event loop is what saturates first while the second core has
  // room. Measured alternately on one host (docs/PERFORMANCE.md, 2026-11-29 01:47): 229–231 msg/s
  // against 214–216 on the event loop, for 2–6 % more CPU per message (the hand-off); with
  // separate processes, both cores already busy, 222–227 against 219–221.
  const signature = await new Promise<Buffer>((resolve, reject) => {
    const done = (err: Error | null, sig: Buffer) => (err ? reject(err) : resolve(sig));
    if (opts.algorithm === 'rsa-sha256') cryptoSign('sha256', data, key, done);
    else cryptoSign(null, createHash('sha256').update(data).digest(), key, done);
  });
  const b = signature.toString('base64').replace(/.{1,72}/g, (chunk, offset: number) => (offset === 0 ? chunk : `\r\n ${chunk}`));
  return Buffer.concat([Buffer.from(`${head}${b}\r\n`, 'latin1'), raw]);
}

const SP = 0x20;
const TAB = 0x09;
const CR = 0x0d;
const LF = 0x0a;

/**
 * The body hash (bh=) of `raw` from `start`, relaxed (RFC 6376 §3.4.4): no WSP at the end of a
 * line, WSP runs as one SP, no empty lines at the end, a final CRLF unless empty. One pass over
 * the bytes into one buffer. Null when the body has a bare CR or LF (mailauth's path then).
 */
export function relaxedBodyHash(raw: Buffer, start: number): string | null {
  const out = Buffer.allocUnsafe(raw.length - start + 2);
  let o = 0;
  let space = false;
  for (let i = start; i < raw.length; i++) {
    const b = raw[i];
    if (b === SP || b === TAB) {
      space = true;
    } else if (b === CR) {
      if (raw[i + 1] !== LF) return null;
      out[o++] = CR;
      out[o++] = LF;
      i++;
      space = false; // WSP before a line break is dropped
    } else if (b === LF) {
      return null;
    } else {
      if (space) out[o++] = SP;
      space = false;
      out[o++] = b;
    }
  }
  while (o >= 2 && out[o - 2] === CR && out[o - 1] === LF) o -= 2;
  if (o > 0) {
    out[o++] = CR;
    out[o++] = LF;
  }
  return createHash('sha256').update(out.subarray(0, o)).digest('base64');
}

/** Relaxed header value: unfolded, WSP runs as one SP, no WSP at either end. */
function relaxedValue(value: string): string {
  return value.replace(/\r\n/g, '').replace(/[ \t]+/g, ' ').replace(/^ | $/g, '');
}

/** "h=a:b:c..." folded before a name when a line would pass ~76 characters. */
function foldList(names: string[], prefix: string): string {
  let out = prefix;
  let line = prefix.length + 1;
  names.forEach((n, i) => {
    const piece = (i === 0 ? '' : ':') + n;
    if (line + piece.length > 76 && i > 0) {
      out += ':\r\n ' + n;
      line = 1 + n.length;
    } else {
      out += piece;
      line += piece.length;
    }
  });
  return out;
}

async function signWithMailauth(raw: Buffer, opts: SignOptions): Promise<Buffer> {
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
