import { isAscii } from 'node:buffer';
import { connect as tcpConnect, isIP, type Socket } from 'node:net';
import type { ConnectionOptions as TlsOptions, TLSSocket } from 'node:tls';
import SMTPConnection from 'nodemailer/lib/smtp-connection';
import type { SmtpConnectionPool, PooledConnection } from './connectionPool.js';
import type { DnsResolver } from './dns.js';
import { mxAllowed, type MtaStsPolicy, type MtaStsSource } from './mtaSts.js';
import { envelopeAddress, resolveHostAddresses, resolveMxHosts, type MxHost } from './mx.js';
import { isPublicAddress } from '../../infra/outboundAddress.js';
import { storableText } from '../../domain/storableJson.js';

/**
 * Outbound SMTP: one message, its recipients, straight to each domain's MX (or through one smart
 * host). Knows nothing of events or queues: it returns one result per recipient and the caller
 * records them (as each domain finishes, through `onResults`). Nothing here throws for a delivery
 * problem; a throw is a bug.
 */

export type DeliveryOutcome = 'delivered' | 'deferred' | 'bounced' | 'failed';

export interface RecipientResult {
  recipient: string;
  /** 2xx delivered, 4xx or no usable connection deferred, 5xx bounced, undeliverable domain failed. */
  outcome: DeliveryOutcome;
  /** The three-digit reply code ("250", "450"...), null when no server answered. */
  smtpCode: string | null;
  /** RFC 3463 enhanced status code from the reply ("4.2.0"), when the server gave one. */
  enhancedCode: string | null;
  /** The server's reply as received, null when no server answered. */
  smtpResponse: string | null;
  /** The MX host name (or relay host) the result came from; null when none was reached. */
  mx: string | null;
  /** What went wrong when there is no SMTP reply to show (DNS, connection, TLS, null MX). */
  detail: string | null;
}

export interface DeliveryTimeouts {
  /** TCP connect, ms (default 30 s). */
  connectMs?: number;
  /** Wait for the 220 greeting once connected, ms (default 60 s); also bounds a TLS handshake (STARTTLS, smtps). */
  greetingMs?: number;
  /** Inactivity on an open session, ms (default 5 min; RFC 5321 §4.5.3.2 allows 10 min after DATA). */
  socketMs?: number;
}

export interface DomainDeliveryOptions {
  domain: string;
  /** All of one message, all at `domain`. */
  recipients: string[];
  /** The signed RFC 5322 message. */
  raw: Buffer;
  /** MAIL FROM address ("" for the null sender). */
  envelopeFrom: string;
  resolver: DnsResolver;
  /** 25 in production; tests point it at a loopback sink. */
  mxPort: number;
  /** Connect to loopback, private and other non-public addresses too (MX_ALLOW_PRIVATE_ADDRESSES; default: public only). */
  allowPrivateAddresses?: boolean;
  /** Our name in EHLO. */
  hostname: string;
  timeouts?: DeliveryTimeouts;
  /** Tie-break among equal-priority MX hosts (default Math.random). */
  random?: () => number;
  /** At most this many connection attempts (host addresses) per domain (default 6). */
  maxConnectionAttempts?: number;
  /** Reuse of open sessions between messages (the worker's cache); none = one connection per message. */
  pool?: SmtpConnectionPool;
  /** The attempt's deadline (see DeliverMessageOptions.signal). */
  signal?: AbortSignal;
  /** MTA-STS policies (RFC 8461) to honour; none: opportunistic TLS everywhere, as without MTA-STS. */
  mtaSts?: MtaStsSource;
}

export interface RelayDeliveryOptions {
  recipients: string[];
  raw: Buffer;
  envelopeFrom: string;
  /** Resolves the relay host name (nodemailer's own lookup would bypass DNS_SERVERS). */
  resolver: DnsResolver;
  hostname: string;
  timeouts?: DeliveryTimeouts;
  /** TLS settings for the relay; certificates are verified unless told otherwise. */
  tls?: Pick<TlsOptions, 'rejectUnauthorized' | 'ca'>;
  pool?: SmtpConnectionPool;
  /** The attempt's deadline (see DeliverMessageOptions.signal). */
  signal?: AbortSignal;
}

export interface DeliverMessageOptions {
  raw: Buffer;
  envelopeFrom: string;
  recipients: string[];
  resolver: DnsResolver;
  mxPort: number;
  /** Connect to non-public MX addresses too (MX_ALLOW_PRIVATE_ADDRESSES; default: public only). Not applied to the relay. */
  allowPrivateAddresses?: boolean;
  /** SMTP_RELAY_URL: when set, everything goes through that smart host. */
  relayUrl?: string | null;
  hostname: string;
  timeouts?: DeliveryTimeouts;
  /** Domains delivered at the same time (default 5). */
  concurrency?: number;
  relayTls?: RelayDeliveryOptions['tls'];
  random?: () => number;
  pool?: SmtpConnectionPool;
  /**
   * Called with each domain's results as soon as that domain is finished (once with all of them
   * through the relay), before the other domains are: a recipient one MX has accepted can be
   * recorded while another domain is still connecting. Must not throw.
   */
  onResults?: (results: RecipientResult[]) => void;
  /**
   * The attempt's deadline (the worker's DELIVERY_ATTEMPT_DEADLINE_SECONDS). When it aborts, the
   * sessions still open are closed, no lookup or connection is started, and every recipient
   * without a verdict yet is deferred with an `ATTEMPT_DEADLINE_DETAIL` detail, so the attempt
   * ends at once. A message whose end was sent but not yet answered is deferred too: the MX may
   * have taken it, as when the connection drops there.
   */
  signal?: AbortSignal;
  /** MTA-STS policies to honour in direct delivery (MTA_STS); the relay is not concerned. */
  mtaSts?: MtaStsSource;
}

const DEFAULT_TIMEOUTS: Required<DeliveryTimeouts> = { connectMs: 30_000, greetingMs: 60_000, socketMs: 300_000 };

/** How the `detail` of a recipient left without a verdict at the attempt's deadline begins. */
export const ATTEMPT_DEADLINE_DETAIL = 'Attempt deadline exceeded';

const deadlineResults = (recipients: string[], mx: string | null): RecipientResult[] =>
  recipients.map((r) => noReply(r, 'deferred', mx, `${ATTEMPT_DEADLINE_DETAIL} before ${mx ?? 'any host'} gave a verdict`));

const ABORTED: unique symbol = Symbol('aborted');

/** `work`'s value, or ABORTED as soon as `signal` aborts (a DNS lookup left behind ends on its own). */
function unlessAborted<T>(signal: AbortSignal | undefined, work: Promise<T>): Promise<T | typeof ABORTED> {
  if (!signal) return work;
  if (signal.aborted) return Promise.resolve(ABORTED);
  return new Promise((resolve, reject) => {
    const onAbort = (): void => resolve(ABORTED);
    signal.addEventListener('abort', onAbort, { once: true });
    work.then(
      (value) => { signal.removeEventListener('abort', onAbort); resolve(value); },
      (err: unknown) => { signal.removeEventListener('abort', onAbort); reject(err); },
    );
  });
}

/** Recipients grouped by their domain (lower-cased), in first-seen order. */
export function groupByDomain(recipients: string[]): Map<string, string[]> {
  const groups = new Map<string, string[]>();
  for (const recipient of recipients) {
    const at = recipient.lastIndexOf('@');
    const domain = at === -1 ? '' : recipient.slice(at + 1).trim().toLowerCase();
    const group = groups.get(domain);
    if (group) group.push(recipient);
    else groups.set(domain, [recipient]);
  }
  return groups;
}

/**
 * Delivers one message to all its recipients, per domain in parallel (bounded), or via the relay.
 * Resolves with every result once all domains are done; `onResults` hears of each domain's first.
 */
export async function deliverMessage(opts: DeliverMessageOptions): Promise<RecipientResult[]> {
  const common = { raw: opts.raw, envelopeFrom: opts.envelopeFrom, resolver: opts.resolver, hostname: opts.hostname, timeouts: opts.timeouts, pool: opts.pool, signal: opts.signal };
  if (opts.relayUrl) {
    const all = await deliverViaRelay(opts.relayUrl, { ...common, recipients: opts.recipients, tls: opts.relayTls });
    opts.onResults?.(all);
    return all;
  }

  const groups = [...groupByDomain(opts.recipients)];
  const results: RecipientResult[][] = new Array(groups.length);
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < groups.length) {
      const i = next++;
      const [domain, recipients] = groups[i];
      results[i] = domain
        ? await deliverToDomain({ ...common, domain, recipients, mxPort: opts.mxPort, allowPrivateAddresses: opts.allowPrivateAddresses, random: opts.random, mtaSts: opts.mtaSts })
        : recipients.map((r) => noReply(r, 'failed', null, 'Recipient address has no domain'));
      opts.onResults?.(results[i]);
    }
  };
  await Promise.all(Array.from({ length: Math.min(opts.concurrency ?? 5, groups.length) }, worker));
  return results.flat();
}

/**
 * MX hosts looked at per attempt, in preference order (Postfix's smtp_mx_address_limit is 5): a
 * domain publishing hundreds of MX records, unresolvable or slow, cannot hold a delivery slot for
 * hundreds of lookups. The connection budget (6 by default) still applies within them.
 */
export const MAX_MX_HOSTS = 10;

/**
 * Delivers to one domain: MX hosts in order, each address of a host in turn, until one session
 * gets as far as MAIL FROM. That session's replies are final for this attempt; a host that cannot
 * be reached, greets with an error or drops the session before the message is through moves on to
 * the next host. STARTTLS is used whenever offered, without certificate checks (opportunistic
 * MTA-to-MTA TLS, RFC 7435); a host whose TLS handshake fails is retried once in plain text.
 *
 * Under an MTA-STS policy in `enforce` mode (RFC 8461 §4, §5) only the MX hosts the policy lists
 * are tried, each over STARTTLS with a certificate valid for its name, never in plain text; a
 * host refused so is skipped like one that cannot be reached, and when none is left the
 * recipients are deferred with the policy's reason. In `testing` mode delivery is as without a
 * policy, and every host tried that `enforce` would have refused is reported, whether it or
 * another took the message, or none did. Each is one report per attempt, naming every host.
 */
export async function deliverToDomain(opts: DomainDeliveryOptions): Promise<RecipientResult[]> {
  const found = await unlessAborted(opts.signal, Promise.all([
    resolveMxHosts(opts.resolver, opts.domain, { random: opts.random }),
    opts.mtaSts ? opts.mtaSts.policyFor(opts.domain, opts.signal).catch(() => null) : null,
  ]));
  if (found === ABORTED) return deadlineResults(opts.recipients, null);
  const [mx, policy] = found;
  if (mx.kind === 'permanent') return opts.recipients.map((r) => noReply(r, 'failed', null, mx.message));
  if (mx.kind === 'temporary') return opts.recipients.map((r) => noReply(r, 'deferred', null, mx.message));
  const findings: PolicyFindings = { refused: [], wouldFail: [] };
  const results = await deliverToHosts(opts, mx.hosts, policy, findings);
  if (findings.refused.length > 0) opts.mtaSts?.report({ kind: 'enforced_refusal', domain: opts.domain, detail: hostReasons(policyPrefix(opts.domain, 'enforce'), findings.refused) });
  if (findings.wouldFail.length > 0) opts.mtaSts?.report({ kind: 'testing_would_fail', domain: opts.domain, detail: hostReasons(policyPrefix(opts.domain, 'testing'), findings.wouldFail) });
  return results;
}

/** What a policy made of the MX hosts of one attempt, in the order they were tried. */
interface PolicyFindings {
  /** enforce: why each refused host was (not listed, no STARTTLS, certificate not valid). */
  refused: string[];
  /** testing: why enforce would have refused each host tried, whatever became of the message. */
  wouldFail: string[];
}

const policyPrefix = (domain: string, mode: 'enforce' | 'testing'): string => `MTA-STS policy of ${domain} (${mode}): `;

/** Longest reason kept for one host in hostReasons(): a certificate error fits, a megabyte of 421 text does not. */
const MAX_HOST_REASON = 600;

/**
 * `prefix` and the reason of each host, in the order tried, `; ` between them: a reason given
 * twice (two addresses of one host refused alike by a policy; other failures name the address,
 * see triedReasons) is written once, a long one cut at MAX_HOST_REASON, and hosts that would take
 * the text past `max` (the MAX_REPLY_TEXT of a recorded smtpResponse) are left out whole and
 * counted, so what is kept reads as written.
 */
export function hostReasons(prefix: string, reasons: string[], max = MAX_REPLY_TEXT): string {
  const unique = [...new Set(reasons)].map((r) => (r.length > MAX_HOST_REASON ? `${storableText(r, MAX_HOST_REASON - 3)}...` : r));
  let text = storableText(prefix, max);
  for (let i = 0; i < unique.length; i++) {
    const entry = `${i === 0 ? '' : '; '}${unique[i]}`;
    const rest = unique.length - i - 1;
    // Room for the count of what would be left out, unless this is the last one.
    const tail = rest > 0 ? `; ${rest} more hosts not shown`.length : 0;
    if (text.length + entry.length + tail > max) {
      const more = unique.length - i;
      return storableText(`${text}${i === 0 ? '' : '; '}${more} more ${more === 1 ? 'host' : 'hosts'} not shown`, max);
    }
    text += entry;
  }
  return text;
}

/**
 * The MX hosts in turn (deliverToDomain); what the policy made of each is added to `findings`.
 * When no host gave a verdict, the recipients are deferred with the reason of every host and
 * address tried (hostReasons), not the last's only: under an enforce policy that refused any, with
 * the policy's prefix; otherwise when more than one try failed (two hosts, or two addresses of
 * one) and the last gave no reply to keep (see noVerdict).
 */
async function deliverToHosts(opts: DomainDeliveryOptions, hosts: MxHost[], policy: MtaStsPolicy | null, findings: PolicyFindings): Promise<RecipientResult[]> {
  const enforce = policy?.mode === 'enforce' ? policy : null;
  const testing = policy?.mode === 'testing' ? policy : null;
  // What enforce verifies certificates with, and testing judges them by. Given to every session,
  // policy or not, so that a parked opportunistic session judges alike whichever domain takes it.
  const tls = opts.mtaSts?.secureContext ? { secureContext: opts.mtaSts.secureContext } : undefined;
  /** Every failed try (a host, or one of its addresses), in order: what a deferral without a verdict names. */
  const tries: FailedTry[] = [];
  const failed = (failure: HostFailure, address: string | null = null): HostFailure => {
    tries.push({ mx: failure.mx, address, reason: failure.detail });
    return failure;
  };
  const refuse = (mxHost: string, why: string, address: string | null = null): HostFailure => {
    findings.refused.push(why);
    tries.push({ mx: mxHost, address, reason: why, namesHost: true });
    return { mx: mxHost, detail: `${policyPrefix(opts.domain, 'enforce')}${why}`, reply: null };
  };
  let budget = opts.maxConnectionAttempts ?? 6;
  let lastFailure: HostFailure | null = null;
  let everyHostUnresolvable = true;
  for (const host of hosts.slice(0, MAX_MX_HOSTS)) {
    if (budget <= 0) break;
    if (enforce && !mxAllowed(enforce, host.exchange)) {
      // Not unresolvable: the domain takes mail, only not at this host. Deferred, and tried again.
      everyHostUnresolvable = false;
      lastFailure = refuse(host.exchange, `${host.exchange} is not a listed MX`);
      continue;
    }
    // testing: a host enforce would skip is still tried; its TLS is not judged on top (one reason a host, as enforce gives).
    const judgeTls = testing !== null && mxAllowed(testing, host.exchange);
    if (testing && !judgeTls) findings.wouldFail.push(`${host.exchange} is not a listed MX`);
    const addresses = await unlessAborted(opts.signal, resolveHostAddresses(opts.resolver, host.exchange));
    if (addresses === ABORTED) return deadlineResults(opts.recipients, host.exchange);
    if (addresses.kind !== 'addresses') {
      if (addresses.kind === 'temporary') everyHostUnresolvable = false;
      lastFailure = failed({ mx: host.exchange, detail: addresses.message, reply: null });
      continue;
    }
    const usable = opts.allowPrivateAddresses ? addresses.addresses : addresses.addresses.filter(isPublicAddress);
    if (usable.length === 0) {
      // Counted as a host without an address: only such hosts, and the domain cannot take mail from here.
      lastFailure = failed({ mx: host.exchange, detail: `${host.exchange} has only non-public addresses (${addresses.addresses.slice(0, 3).join(', ')}), refused unless MX_ALLOW_PRIVATE_ADDRESSES is on`, reply: null });
      continue;
    }
    everyHostUnresolvable = false;
    for (const address of usable.slice(0, 2)) {
      if (budget-- <= 0) break;
      const base = {
        host: address,
        port: opts.mxPort,
        servername: host.exchange,
        hostname: opts.hostname,
        timeouts: opts.timeouts,
        envelopeFrom: opts.envelopeFrom,
        recipients: opts.recipients,
        raw: opts.raw,
        pool: opts.pool,
        signal: opts.signal,
        tls,
      };
      if (enforce) {
        // STARTTLS required, certificate verified for the MX host name, no plain-text fallback.
        const session = await smtpSession({ ...base, tlsMode: 'mta-sts' });
        if (session.kind === 'done') return session.results;
        if (opts.signal?.aborted) return deadlineResults(opts.recipients, host.exchange);
        lastFailure = session.tlsFailure ? refuse(host.exchange, session.tlsFailure, address) : failed(session.failure, address);
        continue;
      }
      let session = await smtpSession({ ...base, tlsMode: 'opportunistic' });
      const tlsFailure = session.kind === 'host_failed' ? session.tlsFailure : null;
      if (tlsFailure && !opts.signal?.aborted) session = await smtpSession({ ...base, tlsMode: 'none' });
      if (judgeTls) {
        // A failed handshake, or the TLS of a session that got as far as a transaction, verdict or
        // not; a host that failed before STARTTLS (refused, 421 greeting) tells nothing of its TLS.
        const wouldFail = tlsFailure ?? (session.tls ? tlsWouldRefuse(host.exchange, session.tls) : null);
        if (wouldFail) findings.wouldFail.push(wouldFail);
      }
      // A verdict that came before the deadline stands; a session cut short by it tells nothing.
      if (session.kind === 'done') return session.results;
      if (opts.signal?.aborted) return deadlineResults(opts.recipients, host.exchange);
      lastFailure = failed(session.failure, address);
    }
  }

  if (everyHostUnresolvable && lastFailure) {
    // Exim's rule: every MX names a host that does not exist, so the domain cannot take mail.
    return opts.recipients.map((r) => noReply(r, 'failed', lastFailure!.mx, `No MX host of ${opts.domain} has an address (${lastFailure!.detail})`));
  }
  if (findings.refused.length > 0) {
    // The policy's deferral (no SMTP code): a 421 from a listed host is one of the reasons named.
    const detail = hostReasons(policyPrefix(opts.domain, 'enforce'), triedReasons(tries));
    return opts.recipients.map((r) => noReply(r, 'deferred', lastFailure?.mx ?? null, detail));
  }
  return noVerdict(opts.recipients, lastFailure, tries, `No MX host of ${opts.domain} took the message: `);
}

/**
 * A try that gave no verdict: an MX host (no address: its lookup failed, or a policy refused it
 * unseen) or one address of it. `namesHost`: `reason` is an MTA-STS refusal, which names the host itself.
 */
export interface FailedTry { mx: string; address: string | null; reason: string; namesHost?: boolean }

/**
 * The reasons of `tries` for hostReasons(): `host: reason`, or `host[address]: reason` (Postfix's
 * way of writing it) for a host of which more than one address was tried, so that two addresses
 * are told apart even when their failures do not name them (a dropped session, a 421).
 */
export function triedReasons(tries: FailedTry[]): string[] {
  const addresses = new Map<string, number>();
  for (const t of tries) if (t.address !== null) addresses.set(t.mx, (addresses.get(t.mx) ?? 0) + 1);
  return tries.map((t) => {
    if (t.namesHost) return t.reason;
    const where = t.address !== null && (addresses.get(t.mx) ?? 0) > 1 ? `${t.mx}[${t.address}]` : t.mx;
    return `${where}: ${t.reason}`;
  });
}

/**
 * No try gave a verdict: the recipients are deferred. A last try that replied (a 421 greeting, a
 * 535 to AUTH) keeps its reply as the verdict, as one try keeps its own failure; otherwise every
 * try is named after `prefix` (mx1 timed out and mx2 refused the connection, or both addresses of
 * one host did: the operator needs each, not the last's alone).
 */
function noVerdict(recipients: string[], last: HostFailure | null, tries: FailedTry[], prefix: string): RecipientResult[] {
  if (!last || last.reply || tries.length < 2) return recipients.map((r) => fromHostFailure(r, last));
  const detail = hostReasons(prefix, triedReasons(tries));
  return recipients.map((r) => noReply(r, 'deferred', last.mx, detail));
}

/** Why `enforce` would have refused the TLS of a session with the listed `mxHost` (null: it would have allowed it). */
function tlsWouldRefuse(mxHost: string, tls: SessionTls): string | null {
  if (!tls.secure) return `${mxHost} does not offer STARTTLS`;
  if (!tls.authorized) return `certificate of ${mxHost} not valid: ${tls.error ?? 'unknown reason'}`;
  return null;
}

/**
 * Delivers everything through one smart host (SMTP_RELAY_URL: smtp://user:pass@host:port with
 * STARTTLS, or smtps:// for implicit TLS; port 587 / 465 when not given), authenticating when
 * credentials are given. The relay's certificate is verified; with credentials STARTTLS is
 * required, so they never go out in clear text. A relay name with two addresses that both fail
 * defers naming each (noVerdict), as MX hosts do.
 */
export async function deliverViaRelay(relayUrl: string, opts: RelayDeliveryOptions): Promise<RecipientResult[]> {
  const url = new URL(relayUrl);
  const secure = url.protocol === 'smtps:';
  const hostName = url.hostname.replace(/^\[(.*)\]$/, '$1');
  const port = url.port ? Number(url.port) : secure ? 465 : 587;
  const auth = url.username ? { user: decodeURIComponent(url.username), pass: decodeURIComponent(url.password) } : undefined;

  const addresses = await unlessAborted(opts.signal, resolveHostAddresses(opts.resolver, hostName));
  if (addresses === ABORTED) return deadlineResults(opts.recipients, hostName);
  if (addresses.kind !== 'addresses') return opts.recipients.map((r) => noReply(r, 'deferred', hostName, `Relay ${addresses.message}`));

  let failure: HostFailure | null = null;
  const tries: FailedTry[] = [];
  for (const address of addresses.addresses.slice(0, 2)) {
    const session = await smtpSession({
      host: address,
      port,
      servername: hostName,
      hostname: opts.hostname,
      timeouts: opts.timeouts,
      envelopeFrom: opts.envelopeFrom,
      recipients: opts.recipients,
      raw: opts.raw,
      tlsMode: secure ? 'implicit' : 'starttls-verified',
      tls: opts.tls,
      auth,
      pool: opts.pool,
      poolKey: `relay ${relayUrl} ${address}`,
      signal: opts.signal,
    });
    if (session.kind === 'done') return session.results;
    if (opts.signal?.aborted) return deadlineResults(opts.recipients, hostName);
    failure = session.failure;
    tries.push({ mx: hostName, address, reason: failure.detail });
  }
  return noVerdict(opts.recipients, failure, tries, `No address of relay ${hostName} took the message: `);
}

// ---------------------------------------------------------------------------------------------

export interface SmtpReply {
  code: string;
  enhancedCode: string | null;
  response: string;
}

interface HostFailure {
  mx: string;
  detail: string;
  /** The reply that ended the session (421 greeting, 535 AUTH...), if one came. */
  reply: SmtpReply | null;
}

/** The TLS of the session a verdict came on: `authorized` when its certificate is valid for the MX host name. */
interface SessionTls { secure: boolean; authorized: boolean; error: string | null }

type SessionResult =
  | { kind: 'done'; results: RecipientResult[]; tls: SessionTls }
  /**
   * `tlsFailure`: STARTTLS failed (opportunistic, mta-sts), and why; null for any other failure.
   * `tls`: the session's TLS when it failed in the transaction (after EHLO and STARTTLS).
   */
  | { kind: 'host_failed'; failure: HostFailure; tlsFailure: string | null; tls?: SessionTls };

interface SessionOptions {
  host: string;
  port: number;
  servername: string;
  hostname: string;
  timeouts?: DeliveryTimeouts;
  envelopeFrom: string;
  recipients: string[];
  raw: Buffer;
  /**
   * opportunistic: STARTTLS if offered, any certificate; none: plain text; mta-sts: STARTTLS
   * required, certificate verified for `servername`; starttls-verified / implicit: relay.
   */
  tlsMode: 'opportunistic' | 'none' | 'mta-sts' | 'starttls-verified' | 'implicit';
  tls?: Pick<TlsOptions, 'rejectUnauthorized' | 'ca' | 'secureContext'>;
  auth?: { user: string; pass: string };
  pool?: SmtpConnectionPool;
  /** Destination key in the pool (default: TLS mode, host name, IP, port). */
  poolKey?: string;
  signal?: AbortSignal;
}

/** The part of a nodemailer error this module reads. */
interface SmtpError extends Error {
  code?: string;
  /** The code nodemailer replaced with its own (a socket's ECONNRESET, a certificate's DEPTH_ZERO_SELF_SIGNED_CERT). */
  originalCode?: string;
  response?: string;
  responseCode?: number;
  command?: string;
  recipient?: string;
  rejectedErrors?: SmtpError[];
}

/** nodemailer keeps the per-recipient RCPT replies on its private envelope; read, never written. */
interface EnvelopeState {
  rejectedErrors?: SmtpError[];
}

/**
 * One SMTP transaction: one MAIL FROM, RCPT each, DATA once, on a session taken from the pool
 * (already through EHLO, STARTTLS, AUTH) or on a new one, within the pool's connections per
 * address. A pooled session that fails before the server answered anything, or answers MAIL FROM
 * with 421 (it timed the session out), has not taken the message: it is discarded and the
 * transaction tried again on the next session the pool gives (parked or new).
 */
async function smtpSession(o: SessionOptions): Promise<SessionResult> {
  const address = hostPort(o.host, o.port);
  if (!o.pool) {
    const opened = await openSession(o);
    if (opened.kind === 'host_failed') return opened;
    return (await transaction({ key: '', address, conn: opened.conn, messages: 0, timer: null, dead: false }, o, false)) as SessionResult;
  }
  const pool = o.pool;
  const key = o.poolKey ?? `${o.tlsMode} ${o.servername} ${o.host} ${o.port} ${o.hostname}`;
  // A place frees up within milliseconds at a server that answers. A session gives up on a full
  // address when the pool judges the wait too long (its maxQueueMs) and, at the latest, after
  // what a new session may take to connect and greet: then the next address is tried.
  const t = { ...DEFAULT_TIMEOUTS, ...o.timeouts };
  const maxWaitMs = t.connectMs + t.greetingMs;
  // Parked sessions that turn out dead are discarded one by one; each pass takes a fresh grant.
  for (;;) {
    const grant = await pool.acquire(key, address, { signal: o.signal, maxWaitMs });
    if (grant === null || grant.kind === 'busy') {
      const detail = grant?.detail ?? `${ATTEMPT_DEADLINE_DETAIL} while waiting for one of the ${pool.maxPerAddress} connections allowed to ${address}`;
      return { kind: 'host_failed', failure: { mx: o.servername, detail, reply: null }, tlsFailure: null };
    }
    if (grant.kind === 'parked') {
      const r = await transaction(grant.pc, o, true);
      if (r !== 'retry') return r;
      continue;
    }
    const opened = await openSession(o);
    if (opened.kind === 'host_failed') {
      pool.vacate(address);
      return opened;
    }
    return (await transaction(pool.adopt(key, address, opened.conn), o, false)) as SessionResult;
  }
}

/** The error of a session step cut short by the attempt's deadline (no reply: the session told nothing). */
const deadlineError = (): SmtpError => Object.assign(new Error(ATTEMPT_DEADLINE_DETAIL), { code: 'EDEADLINE' });

/**
 * Runs one callback-style step of a session. If the attempt's deadline passes first the session is
 * closed and the step settles with `aborted`: nodemailer's close() drops the callbacks of what was
 * in progress, so nothing else would settle it.
 */
function sessionStep<T>(conn: SMTPConnection, signal: AbortSignal | undefined, aborted: () => T, start: (done: (value: T) => void) => void): Promise<T> {
  return new Promise<T>((resolve) => {
    let settled = false;
    const done = (value: T): void => {
      if (settled) return;
      settled = true;
      signal?.removeEventListener('abort', onAbort);
      resolve(value);
    };
    const onAbort = (): void => {
      conn.close();
      done(aborted());
    };
    if (signal?.aborted) return onAbort();
    signal?.addEventListener('abort', onAbort, { once: true });
    start(done);
  });
}

/**
 * The TCP connection, within `connectMs`. Made here rather than by nodemailer: nodemailer's
 * connectionTimeout covers connecting and the greeting and the TLS handshake together, so with its
 * own connect the greeting could wait only what was left of the connect timeout.
 */
function connectTcp(o: SessionOptions, connectMs: number): Promise<{ socket: Socket } | { error: SmtpError }> {
  return new Promise((resolve) => {
    const socket = tcpConnect({ host: o.host, port: o.port });
    const finish = (result: { socket: Socket } | { error: SmtpError }): void => {
      clearTimeout(timer);
      socket.removeListener('error', onError);
      o.signal?.removeEventListener('abort', onAbort);
      if ('error' in result) socket.destroy();
      resolve(result);
    };
    // Coded as nodemailer codes its own (ESOCKET, ETIMEDOUT). Node's error names the address it
    // could not reach (`connect ECONNREFUSED 192.0.2.1:25`); the timeout, which is Motor's, says
    // the same and how long it waited: the detail becomes the recipient's recorded smtpResponse.
    const onError = (err: Error): void => finish({ error: Object.assign(err, { code: 'ESOCKET' }) });
    const onAbort = (): void => finish({ error: deadlineError() });
    const timer = setTimeout(() => finish({
      error: Object.assign(new Error(`Connection timeout: ${hostPort(o.host, o.port)} did not answer within ${connectMs} ms`), { code: 'ETIMEDOUT' }),
    }), connectMs);
    // nodemailer's handlers take over once it has the socket; this one catches anything in between.
    socket.on('error', () => undefined);
    socket.once('error', onError);
    socket.once('connect', () => finish({ socket }));
    if (o.signal?.aborted) onAbort();
    else o.signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/** `192.0.2.1:25`, `[2001:db8::1]:25`. */
const hostPort = (host: string, port: number): string => (isIP(host) === 6 ? `[${host}]:${port}` : `${host}:${port}`);

/** Connect, EHLO, STARTTLS, AUTH (relay). */
async function openSession(o: SessionOptions): Promise<{ kind: 'open'; conn: SMTPConnection } | Extract<SessionResult, { kind: 'host_failed' }>> {
  const t = { ...DEFAULT_TIMEOUTS, ...o.timeouts };
  const connected = await connectTcp(o, t.connectMs);
  if ('error' in connected) return { kind: 'host_failed', failure: { mx: o.servername, detail: describe(connected.error), reply: null }, tlsFailure: null };
  const verified = o.tlsMode === 'starttls-verified' || o.tlsMode === 'implicit' || o.tlsMode === 'mta-sts';
  // SNI takes host names only; for an IP the certificate is checked against the IP itself.
  const sni = isIP(o.servername) ? undefined : o.servername;
  const conn = new SMTPConnection({
    connection: connected.socket,
    host: o.host,
    port: o.port,
    name: o.hostname,
    servername: sni,
    secure: o.tlsMode === 'implicit',
    ignoreTLS: o.tlsMode === 'none',
    opportunisticTLS: o.tlsMode === 'opportunistic',
    // Credentials never travel in clear text: a relay that cannot STARTTLS gets no AUTH.
    // MTA-STS enforce: no plain text either.
    requireTLS: o.tlsMode === 'mta-sts' || (o.tlsMode === 'starttls-verified' && !!o.auth),
    tls: {
      servername: sni,
      rejectUnauthorized: verified ? (o.tls?.rejectUnauthorized ?? true) : false,
      ...(o.tls?.ca ? { ca: o.tls.ca } : {}),
      ...(o.tls?.secureContext ? { secureContext: o.tls.secureContext } : {}),
    },
    // nodemailer's bound on the whole set-up, counted here from the TCP connection (greeting, EHLO,
    // STARTTLS, handshake); it cuts the greeting wait and a TLS handshake to what is left of it.
    // greetingMs + socketMs leaves both their whole greetingMs unless replies in between crawl.
    connectionTimeout: t.greetingMs + t.socketMs,
    greetingTimeout: t.greetingMs,
    socketTimeout: t.socketMs,
    socketCloseTimeout: 1000,
    logger: false,
  });
  // Errors are also delivered through the callbacks below; this keeps a late one from crashing.
  conn.on('error', () => undefined);

  const setUp = async (): Promise<SmtpError | null> => {
    const connectErr = await sessionStep<SmtpError | null>(conn, o.signal, deadlineError, (done) => {
      conn.once('error', (err) => done(err as SmtpError));
      conn.connect((err) => done((err as SmtpError) ?? null));
    });
    if (connectErr || !o.auth) return connectErr;
    return sessionStep<SmtpError | null>(conn, o.signal, deadlineError, (done) => conn.login({ user: o.auth!.user, pass: o.auth!.pass }, (err) => done((err as SmtpError) ?? null)));
  };
  const e = await setUp();
  if (e) {
    conn.close();
    return {
      kind: 'host_failed',
      failure: { mx: o.servername, detail: describe(e), reply: e.response ? parseReply(e.response) : null },
      // A failed handshake surfaces as ETLS or as a socket error while `upgrading` is still set.
      tlsFailure: (o.tlsMode === 'opportunistic' || o.tlsMode === 'mta-sts') && (e.code === 'ETLS' || conn.upgrading === true) ? tlsFailureOf(e, o.servername) : null,
    };
  }
  return { kind: 'open', conn };
}

/** Certificate verification errors (OpenSSL's verify codes, node's altname check), as opposed to a handshake that failed. */
const CERT_ERROR = /CERT|^UNABLE_TO_|^HOSTNAME_MISMATCH$|^INVALID_(CA|PURPOSE)$|^PATH_LENGTH_EXCEEDED$/;

/** Why STARTTLS with `mxHost` failed, as an MTA-STS refusal reads it. */
function tlsFailureOf(e: SmtpError, mxHost: string): string {
  const code = e.originalCode ?? e.code ?? '';
  if (CERT_ERROR.test(code)) return `certificate of ${mxHost} not valid: ${storableText(`${code}: ${e.message}`, 500)}`;
  if (e.command === 'STARTTLS' && e.response) return `${mxHost} does not offer STARTTLS (${storableText(e.response, 200)})`;
  return `TLS with ${mxHost} failed: ${describe(e)}`;
}

/** The session's TLS: nodemailer's `secure`, and the socket's verdict on the certificate (checked even when not enforced). */
function tlsOf(conn: SMTPConnection): SessionTls {
  const socket = (conn as unknown as { _socket?: Partial<TLSSocket> })._socket;
  const secure = (conn as unknown as { secure?: boolean }).secure === true;
  return { secure, authorized: secure && socket?.authorized === true, error: secure && socket?.authorizationError ? String(socket.authorizationError) : null };
}

/** A mailbox whose local part is not ASCII: it exists only under SMTPUTF8 (RFC 6531). */
const needsSmtpUtf8 = (address: string): boolean => !/^[\x00-\x7f]*$/.test(address.slice(0, address.lastIndexOf('@')));

/**
 * Runs the transaction on an open session and hands the session back (or closes it). A server that
 * does not offer SMTPUTF8 cannot take a non-ASCII local part (RFC 6531 §3.2: the client must not
 * send it): such recipients fail here without being sent (all of them when the sender is one), as
 * Postfix bounces them, and the others go on.
 */
async function transaction(pc: PooledConnection, o: SessionOptions, reused: boolean): Promise<SessionResult | 'retry'> {
  const offered = (pc.conn as unknown as { _supportedExtensions?: string[] })._supportedExtensions ?? [];
  if (!offered.includes('SMTPUTF8')) {
    const refused = new Set(needsSmtpUtf8(o.envelopeFrom) ? o.recipients : o.recipients.filter(needsSmtpUtf8));
    if (refused.size > 0) {
      const detail = `${o.servername} does not offer SMTPUTF8, which a non-ASCII address needs (RFC 6531)`;
      const failed = [...refused].map((r) => noReply(r, 'failed', o.servername, detail));
      const rest = o.recipients.filter((r) => !refused.has(r));
      if (rest.length === 0) {
        const tls = tlsOf(pc.conn);
        if (o.pool) o.pool.release(pc);
        else pc.conn.quit();
        return { kind: 'done', results: failed, tls };
      }
      const sent = await transaction(pc, { ...o, recipients: rest }, reused);
      return sent !== 'retry' && sent.kind === 'done' ? { ...sent, results: [...failed, ...sent.results] } : sent;
    }
  }
  return sendTransaction(pc, o, reused);
}

async function sendTransaction(pc: PooledConnection, o: SessionOptions, reused: boolean): Promise<SessionResult | 'retry'> {
  const conn = pc.conn;
  // Read before the session is handed back or closed: its socket is gone after.
  const tls = tlsOf(conn);
  const raw = conn as unknown as { lastServerResponse: string | false; _envelope?: EnvelopeState; _destroyed?: boolean };
  pc.messages++;
  // Tells "the server answered nothing in this transaction" from a reply that decided.
  raw.lastServerResponse = false;
  // Native check: a per-byte callback over the message cost ~5 % of the worker's CPU.
  const eightBit = !isAscii(o.raw);
  // Internationalized domains go in A-labels (no SMTPUTF8 needed for them); replies are matched by position.
  const wire = o.recipients.map(envelopeAddress);
  type Sent = { err: SmtpError | null; info: SMTPConnection.SentMessageInfo | null };
  // Cut short by the deadline, the transaction ends like a dropped connection: no verdict, even
  // when the end of the message was out and its reply still to come (the MX may have taken it).
  const sent = await sessionStep<Sent>(conn, o.signal, () => ({ err: deadlineError(), info: null }), (done) => {
    conn.send(
      { from: envelopeAddress(o.envelopeFrom), to: wire, size: o.raw.length, use8BitMime: eightBit },
      o.raw,
      (err, info) => done({ err: (err as SmtpError) ?? null, info: info ?? null }),
    );
  });
  const envelope = raw._envelope ?? {};
  const err = sent.err;

  if (reused && err && err.code !== 'EDEADLINE' && (raw.lastServerResponse === false || (err.command === 'MAIL FROM' && err.responseCode === 421))) {
    // The parked session was gone (closed by the server, timed out): nothing was accepted.
    discard(pc, o);
    return 'retry';
  }

  if (!o.pool) {
    if (err) conn.close();
    else conn.quit();
  } else if (!err) {
    // The transaction ended with the DATA reply: the next MAIL FROM can follow directly.
    o.pool.release(pc);
  } else if ((err.code === 'EENVELOPE' || err.code === 'EMESSAGE') && err.responseCode && err.responseCode !== 421 && !raw._destroyed) {
    // A refusal leaves the session usable: RSET, then park it.
    conn.reset((resetErr) => (resetErr ? o.pool!.discard(pc) : o.pool!.release(pc)));
  } else {
    o.pool.discard(pc);
  }

  const mx = o.servername;
  if (sent.info) {
    const dataReply = parseReply(sent.info.response);
    return {
      kind: 'done',
      tls,
      results: o.recipients.map((r, i) => {
        const rejected = sent.info!.rejectedErrors?.find((e) => (e as SmtpError).recipient === wire[i]) as SmtpError | undefined;
        return rejected?.response ? fromReply(r, parseReply(rejected.response), mx) : fromReply(r, dataReply, mx);
      }),
    };
  }

  if (!err!.responseCode || !err!.response) {
    // The session died without a verdict (reset, timeout): nothing was accepted, try elsewhere.
    return { kind: 'host_failed', failure: { mx, detail: describe(err!), reply: null }, tlsFailure: null, tls };
  }
  const verdict = parseReply(err!.response);
  // A refused MAIL FROM decides for everyone: with PIPELINING the RCPT replies that follow it are
  // only "503 bad sequence" echoes of that refusal.
  const rejectedErrors = err!.command === 'MAIL FROM' ? [] : (err!.rejectedErrors ?? envelope.rejectedErrors ?? []);
  return {
    kind: 'done',
    tls,
    results: o.recipients.map((r, i) => {
      const rejected = rejectedErrors.find((e) => e.recipient === wire[i]);
      if (rejected?.response) return fromReply(r, parseReply(rejected.response), mx);
      // MAIL FROM refused, or DATA / end of data refused for the recipients RCPT had accepted.
      return fromReply(r, verdict, mx);
    }),
  };
}

function discard(pc: PooledConnection, o: SessionOptions): void {
  if (o.pool) o.pool.discard(pc);
  else pc.conn.close();
}

/** Longest reply text kept in an outcome event (a hostile MX could send megabytes of continuation lines). */
export const MAX_REPLY_TEXT = 4000;

/** "450-4.2.0 first line\n450 4.2.0 last" → code 450, enhanced 4.2.0, the text as received (see storableText). */
export function parseReply(response: string): SmtpReply {
  const text = storableText(response.trim(), MAX_REPLY_TEXT);
  const m = /^([2-5]\d\d)[ -]?(?:([245]\.\d{1,3}\.\d{1,3})(?=\s|$))?/.exec(text);
  return { code: m?.[1] ?? '', enhancedCode: m?.[2] ?? null, response: text };
}

/** 2xx delivered, 4xx deferred, 5xx bounced (RFC 5321 §4.2.1). */
export function outcomeForCode(code: string): DeliveryOutcome {
  if (code.startsWith('2')) return 'delivered';
  if (code.startsWith('5')) return 'bounced';
  return 'deferred';
}

function fromReply(recipient: string, reply: SmtpReply, mx: string): RecipientResult {
  return { recipient, outcome: outcomeForCode(reply.code), smtpCode: reply.code || null, enhancedCode: reply.enhancedCode, smtpResponse: reply.response, mx, detail: null };
}

function noReply(recipient: string, outcome: DeliveryOutcome, mx: string | null, detail: string): RecipientResult {
  return { recipient, outcome, smtpCode: null, enhancedCode: null, smtpResponse: null, mx, detail };
}

/** No host gave a verdict: deferred, keeping the last reply seen (a 421 greeting, say). */
function fromHostFailure(recipient: string, failure: HostFailure | null): RecipientResult {
  if (!failure) return noReply(recipient, 'deferred', null, 'No MX host could be tried');
  const reply = failure.reply;
  return {
    recipient,
    outcome: 'deferred',
    smtpCode: reply?.code || null,
    enhancedCode: reply?.enhancedCode ?? null,
    smtpResponse: reply?.response ?? null,
    mx: failure.mx,
    detail: failure.detail,
  };
}

function describe(err: SmtpError): string {
  return storableText(`${err.code ?? 'ERROR'}: ${err.message}`, MAX_REPLY_TEXT);
}
