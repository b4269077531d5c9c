import { createHmac } from 'node:crypto';
import http from 'node:http';
import https from 'node:https';
import { storableText } from '../../domain/storableJson.js';
import { isPublicAddress, pinnedLookup, resolveHost, systemLookup, untilAborted, type Address, type HostLookup } from '../../infra/outboundAddress.js';

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
  lookup?: HostLookup;
}

const USER_AGENT = 'Motor-Webhooks/1.2';
const MAX_RESPONSE_BODY = 1024;

type Answer = Omit<WebhookPostResult, 'durationMs'>;

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
