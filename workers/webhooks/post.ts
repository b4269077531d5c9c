import { createHmac } from 'node:crypto';
import { lookup as dnsLookup } from 'node:dns/promises';
import http from 'node:http';
import https from 'node:https';
import { BlockList, isIP, type LookupFunction } from 'node:net';
import { storableText } from '../../domain/storableJson.js';

/**
 * One webhook POST to a customer's endpoint. It knows nothing of events or retries: it returns a
 * result and the caller records it. Nothing here throws or rejects; a throw is a bug.
 *
 * The URL points wherever a customer likes, so the destination is resolved here, every address is
 * checked, and the socket is pinned to the checked addresses: a second resolution (DNS rebinding)
 * never happens.
 */

export interface WebhookPostResult {
  /** true for a 2xx answer. */
  ok: boolean;
  /** HTTP status, null when no answer came (DNS, refused, timeout, blocked address). */
  status: number | null;
  /** Short stable reason when not ok: 'http_<status>', 'timeout', 'connection_refused', 'dns_error', 'blocked_address', 'tls_error', 'connection_error', 'invalid_url'. null when ok. */
  error: string | null;
  /** First 1,024 characters of the response body (UTF-8), null if none was read. */
  responseBody: string | null;
  /** Wall time from start to the end of the answer (or the failure), whole milliseconds. */
  durationMs: number;
}

export interface WebhookPostOptions {
  url: string;
  /** The exact bytes that are signed and sent (JSON text). */
  body: string;
  /** Extra headers (signature, event name, delivery id). Content-Type: application/json and a User-Agent `Motor-Webhooks/1.2` are always set. */
  headers: Record<string, string>;
  timeoutMs: number;
  /** false in production: refuse any destination address that is not public (SSRF guard). */
  allowPrivateAddresses: boolean;
  /** Host name resolution, default node:dns lookup with { all: true }; injectable for tests. */
  lookup?: (hostname: string) => Promise<{ address: string; family: number }[]>;
}

const USER_AGENT = 'Motor-Webhooks/1.2';
const MAX_RESPONSE_BODY = 1024;

type Answer = Omit<WebhookPostResult, 'durationMs'>;
export interface Address { address: string; family: 4 | 6 }

export async function postWebhook(opts: WebhookPostOptions): Promise<WebhookPostResult> {
  const started = performance.now();
  const done = (answer: Answer): WebhookPostResult => ({ ...answer, durationMs: Math.round(performance.now() - started) });

  const url = webhookUrl(opts.url);
  if (!url) return done(failed('invalid_url'));

  const deadline = new AbortController();
  const timer = setTimeout(() => deadline.abort(), opts.timeoutMs);
  try {
    let addresses: Address[];
    try {
      addresses = await untilAborted(resolveHost(url.hostname, opts.lookup ?? systemLookup), deadline.signal);
    } catch {
      return done(failed(deadline.signal.aborted ? 'timeout' : 'dns_error'));
    }
    if (!opts.allowPrivateAddresses && !addresses.every((a) => isPublicAddress(a.address))) return done(failed('blocked_address'));
    return done(await send(url, addresses, opts, deadline.signal));
  } catch (err) {
    return done(failed(deadline.signal.aborted ? 'timeout' : reasonOf(err)));
  } finally {
    clearTimeout(timer);
  }
}

/** Hex HMAC-SHA256 of the body under the webhook secret (header X-Service-Signature). */
export function signWebhookBody(secret: string, body: string): string {
  return createHmac('sha256', secret).update(body, 'utf8').digest('hex');
}

/**
 * Addresses that are not public unicast (IANA special-purpose registries, RFC 6890 and updates):
 * private, shared, loopback, link-local, documentation, benchmarking, multicast, reserved.
 */
const SPECIAL_V4 = blockList('ipv4', [
  '0.0.0.0/8', '10.0.0.0/8', '100.64.0.0/10', '127.0.0.0/8', '169.254.0.0/16', '172.16.0.0/12',
  '192.0.0.0/24', '192.0.2.0/24', '192.88.99.0/24', '192.168.0.0/16', '198.18.0.0/15',
  '198.51.100.0/24', '203.0.113.0/24', '224.0.0.0/4', '240.0.0.0/4',
]);
/** IPv6 unicast is public only inside 2000::/3: that leaves out ::/8, fc00::/7, fe80::/10, ff00::/8... */
const GLOBAL_UNICAST_V6 = blockList('ipv6', ['2000::/3']);
/** ...minus the IETF protocol range (Teredo, ORCHID, benchmarking) and documentation. */
const SPECIAL_V6 = blockList('ipv6', ['2001::/23', '2001:db8::/32', '3fff::/20']);

/** True when the IP (v4 or v6 text) is a public unicast address. */
export function isPublicAddress(ip: string): boolean {
  switch (isIP(ip)) {
    case 4:
      return !SPECIAL_V4.check(ip, 'ipv4');
    case 6: {
      const v4 = embeddedIpv4(ip);
      if (v4 !== undefined) return v4 !== null && isPublicAddress(v4);
      return GLOBAL_UNICAST_V6.check(ip, 'ipv6') && !SPECIAL_V6.check(ip, 'ipv6');
    }
    default:
      return false;
  }
}

/**
 * The IPv4 address an IPv6 address stands for, because the kernel or a NAT64 gateway would send
 * the packets there: IPv4-mapped (::ffff:0:0/96), NAT64 (64:ff9b::/96) and 6to4 (2002::/16).
 * null for the deprecated IPv4-compatible ::/96 (:: and ::1 included), refused whatever it
 * embeds; undefined when the address embeds none.
 */
function embeddedIpv4(ip: string): string | null | undefined {
  const w = ipv6Words(ip);
  const dotted = (hi: number, lo: number) => `${hi >> 8}.${hi & 0xff}.${lo >> 8}.${lo & 0xff}`;
  const zeros = (from: number, to: number) => w.slice(from, to).every((x) => x === 0);
  if (zeros(0, 5) && w[5] === 0xffff) return dotted(w[6], w[7]);
  if (zeros(0, 6)) return null;
  if (w[0] === 0x64 && w[1] === 0xff9b && zeros(2, 6)) return dotted(w[6], w[7]);
  if (w[0] === 0x2002) return dotted(w[1], w[2]);
  return undefined;
}

/** The eight 16-bit words of an IPv6 address that isIP() accepted (a zone index is ignored). */
function ipv6Words(ip: string): number[] {
  let text = ip.replace(/%.*$/, '');
  const dotted = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text);
  if (dotted) {
    const [a, b, c, d] = dotted.slice(1).map(Number);
    text = `${text.slice(0, dotted.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head, tail] = text.split('::');
  const words = (part: string | undefined) => (part ? part.split(':').map((h) => parseInt(h, 16)) : []);
  const before = words(head);
  const after = words(tail);
  return [...before, ...Array<number>(8 - before.length - after.length).fill(0), ...after];
}

function blockList(type: 'ipv4' | 'ipv6', cidrs: string[]): BlockList {
  const list = new BlockList();
  for (const cidr of cidrs) {
    const [network, prefix] = cidr.split('/');
    list.addSubnet(network, Number(prefix), type);
  }
  return list;
}

/** Only http(s) with a host; anything else is refused before any network call. */
function webhookUrl(text: string): URL | null {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return null;
  }
  return (url.protocol === 'http:' || url.protocol === 'https:') && url.hostname !== '' ? url : null;
}

export const systemLookup = (hostname: string) => dnsLookup(hostname, { all: true });

/** IP literals (URL gives IPv6 in brackets, already normalised) are not looked up. */
export async function resolveHost(hostname: string, lookup: NonNullable<WebhookPostOptions['lookup']>): Promise<Address[]> {
  const literal = hostname.replace(/^\[(.*)\]$/, '$1');
  if (isIP(literal)) return [{ address: literal, family: isIP(literal) as 4 | 6 }];
  const addresses = (await lookup(hostname)).map(({ address }) => ({ address, family: isIP(address) }));
  if (addresses.length === 0 || addresses.some((a) => a.family === 0)) throw new Error(`no usable address for ${hostname}`);
  return addresses as Address[];
}

/**
 * The lookup net.connect uses, answering with the addresses already checked, so the socket goes
 * to one of them and nowhere else. With several, net tries them in turn (autoSelectFamily); the
 * host name still gives the Host header, the TLS SNI and the name the certificate must match.
 */
export function pinnedLookup(addresses: Address[]): LookupFunction {
  return (_hostname, options, callback) => {
    if (options.all) callback(null, addresses);
    else callback(null, addresses[0].address, addresses[0].family);
  };
}

function send(url: URL, addresses: Address[], opts: WebhookPostOptions, deadline: AbortSignal): Promise<Answer> {
  return new Promise((resolve) => {
    if (deadline.aborted) return resolve(failed('timeout'));
    const payload = Buffer.from(opts.body, 'utf8');
    let req: http.ClientRequest;
    try {
      req = (url.protocol === 'https:' ? https : http).request(url, {
        method: 'POST',
        agent: false,
        lookup: pinnedLookup(addresses),
        headers: {
          ...opts.headers,
          'Content-Type': 'application/json',
          'Content-Length': String(payload.length),
          'User-Agent': USER_AGENT,
        },
      });
    } catch (err) {
      return resolve(failed(reasonOf(err))); // a header value node refuses (CR, LF...)
    }

    let status: number | null = null;
    let body: string | null = null;
    let settled = false;
    const settle = (error: string | null) => {
      if (settled) return;
      settled = true;
      deadline.removeEventListener('abort', onTimeout);
      req.destroy(); // also the response: nothing more is read, and the socket closes
      resolve({ ok: error === null, status, error, responseBody: body === null ? null : storableText(body, MAX_RESPONSE_BODY) });
    };
    const answered = () => settle(status !== null && status >= 200 && status < 300 ? null : `http_${status}`);
    const onTimeout = () => settle('timeout');

    deadline.addEventListener('abort', onTimeout, { once: true });
    req.on('error', (err) => settle(reasonOf(err)));
    req.on('response', (res) => {
      status = res.statusCode ?? null;
      body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        body = (body ?? '') + chunk;
        if (body.length >= MAX_RESPONSE_BODY) answered();
      });
      // A body cut short by the server still carries the status it answered with.
      res.on('error', () => undefined);
      res.on('close', answered);
    });
    req.end(payload);
  });
}

/** Handshake and certificate failures: OpenSSL's verify codes and node's ERR_TLS_* / ERR_SSL_*. */
const TLS_CODE = /CERT|CRL|^UNABLE_TO_|^ERR_(TLS|SSL|OSSL)_|^EPROTO$|^HOSTNAME_MISMATCH$|^INVALID_(CA|PURPOSE)$|^PATH_LENGTH_EXCEEDED$/;

/** The reason of a failure before any answer. DNS failures are told apart by where they happen. */
function reasonOf(err: unknown): string {
  // Several addresses tried: an AggregateError, one error per address.
  const e = err as { code?: unknown; errors?: Array<{ code?: unknown }> } | null;
  const code = String(e?.code ?? e?.errors?.[0]?.code ?? '');
  if (code === 'ECONNREFUSED') return 'connection_refused';
  if (TLS_CODE.test(code)) return 'tls_error';
  return 'connection_error';
}

function failed(error: string): Answer {
  return { ok: false, status: null, error, responseBody: null };
}

/** Resolution cannot be cancelled, but it cannot hold the attempt past its deadline either. */
export function untilAborted<T>(work: Promise<T>, signal: AbortSignal): Promise<T> {
  return new Promise((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    if (signal.aborted) return onAbort();
    signal.addEventListener('abort', onAbort, { once: true });
    work.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
  });
}
