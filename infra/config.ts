import { existsSync } from 'node:fs';
import { ATTEMPT_DEADLINE_MAX_MS } from '../domain/message/message';
import { isAtOrUnder, normalizeDomainName } from '../domain/sendingDomain/sendingDomain';
import { QUERY_TIMEOUT_MS } from './db';

/**
 * Configuration: read once from the environment at an entry point, validated, typed, and passed
 * down. Nothing below scripts/ reads process.env.
 */

/** A plan tier: default block ceilings, account-wide ceilings and data retention. */
export interface PlanLimits {
  name: string;
  burst: number; hourly: number; daily: number;
  accountHourly: number; accountDaily: number;
  retentionDays: number;
  /** Motor Blocks the account may hold (not deleted; docs/BLOCKS.md). */
  maxBlocks: number;
}

/**
 * The plan tiers an account can be on (AccountCreated.plan). The default plan (PLAN_DEFAULT_*, named
 * PLAN_DEFAULT_NAME) is added to these, and overrides a tier of the same name.
 */
export const PLAN_TIERS: Readonly<Record<string, PlanLimits>> = {
  free: { name: 'free', burst: 10, hourly: 100, daily: 1_000, accountHourly: 200, accountDaily: 2_000, retentionDays: 7, maxBlocks: 1 },
  starter: { name: 'starter', burst: 60, hourly: 2_000, daily: 20_000, accountHourly: 10_000, accountDaily: 100_000, retentionDays: 30, maxBlocks: 5 },
  pro: { name: 'pro', burst: 300, hourly: 10_000, daily: 100_000, accountHourly: 50_000, accountDaily: 500_000, retentionDays: 90, maxBlocks: 25 },
  enterprise: { name: 'enterprise', burst: 1_000, hourly: 100_000, daily: 1_000_000, accountHourly: 500_000, accountDaily: 5_000_000, retentionDays: 365, maxBlocks: 250 },
};

/**
 * A page of the dashboard: on {auth_url}, which SPEC names the dashboard host (AUTH_PUBLIC_URL,
 * by default PUBLIC_BASE_URL), not on the API's {base_url}. `path` starts with /dashboard.
 */
export const dashboardLink = (config: Pick<Config, 'authPublicUrl'>, path: string): string => `${config.authPublicUrl.replace(/\/+$/, '')}${path}`;

/**
 * The plan of an account: `source: 'plan'` when the account exists and its plan is a known tier;
 * otherwise `fallback` (SPEC "Account rate limits": account without an active product), with the
 * default plan's block ceilings and retention and the ACCOUNT_FALLBACK_* account ceilings.
 */
export function planOf(config: Pick<Config, 'plans' | 'defaultPlan' | 'accountFallback'>, planName: string | null | undefined): { plan: PlanLimits; source: 'plan' | 'fallback' } {
  const tier = planName ? config.plans?.[planName] : undefined;
  if (tier) return { plan: tier, source: 'plan' };
  const d = config.defaultPlan;
  return { plan: { ...d, accountHourly: config.accountFallback.hourly, accountDaily: config.accountFallback.daily }, source: 'fallback' };
}

export interface Config {
  port: number;
  /** API_PROCESSES: HTTP API processes sharing PORT (node:cluster; 1 = in the Motor process itself). */
  apiProcesses: number;
  /**
   * How long a client may take to send a request to the HTTP API: its headers, and the whole of it
   * (body included). Past either it gets 408 `request_timeout` and the connection is closed
   * (docs/ERRORS.md); Node's defaults (60 s, 300 s) let slow clients hold connections for minutes.
   * HTTP_MAX_BUFFERED_BYTES: request bodies one API process may be reading at once, by their
   * declared length; past it 503 server_busy (read-api/http/requestChecks.ts bodyBudget).
   */
  http: { headersTimeoutSeconds: number; requestTimeoutSeconds: number; maxBufferedBytes: number };
  /** Unset = embedded PostgreSQL under ./var/postgres. */
  databaseUrl: string | null;
  /** Unset = 127.0.0.1:6379, else a redis-server started by Motor. */
  redisUrl: string | null;
  /** Set = the KurrentDB/EventStoreDB adapter instead of PostgreSQL. */
  eventstoreUrl: string | null;
  /**
   * DATABASE_QUERY_TIMEOUT_MS: longest wait for PostgreSQL to answer a statement (read models, the
   * PostgreSQL event store's reads and appends) and for a connection to it; past it the statement
   * fails (503 at the edges) and its connection is dropped. The exceptions are in infra/db.ts
   * (docs/OPERATIONS.md "Database deadlines").
   */
  databaseQueryTimeoutMs: number;
  /**
   * DATABASE_POOL_SIZE: most connections a process holds in each of its two PostgreSQL pools, the
   * read models' (knex) and the PostgreSQL event store's (docs/OPERATIONS.md "Connections").
   */
  databasePoolSize: number;
  /** host:port resolvers for every MX/TXT/A lookup; empty = the system's resolvers. */
  dnsServers: string[];
  /** Port used to reach recipient MX hosts (25 in production; tests run an MX on loopback). */
  mxPort: number;
  /**
   * Deliver to MX hosts (or address literals) on loopback, private, link-local and other non-public
   * addresses. Off: a tenant cannot aim Motor's SMTP client at the operator's own network (a
   * recipient @[10.0.0.5], or a domain whose MX points there). SMTP_RELAY_URL is the operator's own
   * choice and not checked.
   */
  mxAllowPrivateAddresses: boolean;
  /** smtp(s)://user:pass@host:port: deliver everything through this smart host. */
  smtpRelayUrl: string | null;
  /**
   * MTA-STS (RFC 8461) in direct delivery (MTA_STS on/off, default on; docs/DELIVERY.md "MTA-STS"):
   * recipient domains' policies are fetched and honoured. `port`: MTA_STS_PORT, the policy hosts'
   * HTTPS port (443; tests run a policy host on loopback, as MX_PORT an MX). Policy hosts at
   * non-public addresses follow MX_ALLOW_PRIVATE_ADDRESSES.
   */
  mtaSts: { enabled: boolean; port: number };
  /**
   * DELIVERY_TLS_CA_FILE: PEM certificates added to the default trust store to verify MX hosts'
   * certificates (under MTA-STS) and MTA-STS policy hosts'. Unset in production; tests use a test CA.
   */
  deliveryTlsCaFile: string | null;
  /** HS256 key for public bearer tokens. */
  tokenSecret: string;
  /** Encrypts private keys (DKIM) at rest in the key store. */
  keyEncryptionKey: string;
  /** Refuse sends over the account-wide ceiling (SPEC: rolling out; measured only when off). */
  enforceAccountLimit: boolean;
  /** Ceilings of accounts without an active plan (`source: fallback`). */
  accountFallback: { hourly: number; daily: number };
  tokenIssuer: string;
  tokenAudience: string;
  /** Host name this instance announces in EHLO and in generated Message-IDs. */
  hostname: string;
  /** The SMTP submission host names clients are given (SPEC {smtp_host}); POST /v1/test-email connects only to these. */
  smtpPublicHosts: string[];
  /**
   * The ports clients connect to on those hosts (SMTP_PUBLIC_PORTS; default SMTP_PORT and
   * SMTPS_PORT, the listeners' own); POST /v1/test-email connects only to these, so it cannot
   * probe the other ports of Motor's host.
   */
  smtpPublicPorts: number[];
  /** The service's own domain: SPF include host, sandbox namespace (<handle>.sandbox.<domain>). */
  serviceDomain: string;
  /** {base_url} of SPEC: the send API, the public API, onboarding and email validation. */
  publicBaseUrl: string;
  /**
   * {auth_url} of SPEC, the dashboard host: issuer of agent access tokens and of
   * /.well-known/oauth-authorization-server (docs/MCP.md), and where dashboard pages are linked
   * (dashboardLink).
   */
  authPublicUrl: string;
  /** {mcp_url} of SPEC: the agent-tool servers' canonical URIs (token audiences) start with it (docs/MCP.md). */
  mcpPublicUrl: string;
  /** Fetching agent clients' metadata documents (docs/MCP.md). */
  agentClients: {
    /** Lets a client_id URL resolve to loopback and private addresses (off in production: SSRF guard). */
    allowPrivateAddresses: boolean;
    /** PEM file of extra CA certificates trusted for client_id URLs (besides the system's). */
    caFile: string | null;
  };
  logLevel: string;
  /** Requests per minute per credential (X-RateLimit-*). */
  apiRequestLimit: number;
  /** Requests per minute per client IP on routes without a credential (onboarding, email validation). */
  anonymousRequestLimit: number;
  /** Sender of the service's own mail (verification codes, links), delivered through the normal pipeline (docs/AUTH.md). */
  systemMailFrom: string;
  /** Give up on a deferred recipient after this many seconds (RFC 5321 says 4-5 days). */
  deliveryLifetimeSeconds: number;
  /** Override of the retry delays in seconds, by attempt (DELIVERY_RETRY_SCHEDULE, e.g. "60,300,900"); null = docs/DELIVERY.md's schedule. */
  deliveryRetrySchedule: number[] | null;
  /** Concurrent delivery jobs per worker process. */
  deliveryConcurrency: number;
  /** SMTP connections a worker process keeps open at once to one server address (IP and port), in use or parked. */
  deliveryMaxConnectionsPerAddress: number;
  /**
   * DELIVERY_MAX_ADDRESS_WAIT_SECONDS: how long a delivery may expect to wait for a place at a full
   * server address, or wait without any place coming free, before it gives up on that address
   * (next address or MX, else deferred); 0 = never wait.
   */
  deliveryMaxAddressWaitSeconds: number;
  /**
   * DELIVERY_MAX_BUFFERED_BYTES: content bytes of the messages one worker process delivers at once
   * (MessageAccepted's contentBytes); a round that would go over it waits for room. At least one
   * message always goes (a larger one alone).
   */
  deliveryMaxBufferedBytes: number;
  /**
   * How long a delivery round may talk to MX hosts before the sessions still open are closed and
   * their recipients deferred; at most ATTEMPT_DEADLINE_MAX_MS, inside the in-flight window.
   */
  deliveryAttemptDeadlineSeconds: number;
  /** Contacts a campaign sends per page, between two checkpoints (docs/COMMUNICATIONS.md "Campaigns"). */
  campaignPageSize: number;
  /** Seconds between `keepalive` events of an event stream (docs/EVENTS.md). */
  eventStreamKeepaliveSeconds: number;
  /** Outgoing webhooks (docs/WEBHOOKS.md). */
  webhooks: {
    /** Waits in seconds after attempt 1, 2, ...; its length + 1 attempts in all. */
    retrySchedule: number[];
    timeoutSeconds: number;
    concurrency: number;
    /** Lets endpoints resolve to loopback and private addresses (off in production: SSRF guard). */
    allowPrivateAddresses: boolean;
    /** Days without a successful attempt after which a delivery ending `failed` pauses its endpoint; 0: never. */
    disableAfterDays: number;
  };
  /** Seconds a delivery job stays locked to its worker without a renewal (a crashed worker's jobs come back after it). */
  deliveryJobLockSeconds: number;
  /** Most events a projector applies in one transaction when it is behind (caught up, batches are small). */
  projectionBatchSize: number;
  /**
   * Message-traffic projections (messages, analytics) start a batch transaction at most this often
   * (ms) while events keep coming; 0 = every batch at once (docs/PROJECTIONS.md "Batch interval").
   */
  projectionBatchIntervalMs: number;
  /** Ceilings of the default plan: block limits default to these. */
  defaultPlan: PlanLimits;
  /** Every plan tier by name (the default plan included): ceilings and retention of an account's plan. */
  plans: Record<string, PlanLimits>;
  /** Refuse sends of a warming-up domain over its daily warm-up cap (`rate_limited_warmup`; SPEC: rolling out). */
  enforceWarmup: boolean;
  /** Retention sweeper (workers/retention.ts): seconds between sweeps (0 = off; the first comes 0–60 s after start) and rows per delete statement. */
  retentionSweep: { intervalSeconds: number; batchSize: number };
  /** Directory for embedded PostgreSQL data, generated keys and certificates. */
  dataDir: string;
  /** SMTP submission listener (smtp/). */
  smtp: SmtpConfig;
  /**
   * Asynchronous bounces and complaints (docs/DELIVERY.md): `bounceDomain` (BOUNCE_DOMAIN, lower
   * case; null = off, MAIL FROM as before) is the domain of the per-message envelope senders;
   * the `inbound` role's listener takes the reports on `port` (INBOUND_SMTP_PORT; 0 = not
   * started), messages up to `maxMessageBytes` (INBOUND_MAX_MESSAGE_BYTES).
   */
  inbound: { bounceDomain: string | null; port: number; maxMessageBytes: number };
  /** Domain DNS checks (docs/DOMAINS.md): per-lookup cap, domain-health staleness and live re-check cap. */
  domainChecks: { lookupTimeoutMs: number; healthStaleSeconds: number; liveTimeoutMs: number };
  /** Free recipients (docs/SANDBOX.md): list size per account, POSTs per minute per account, resend cooldown, link lifetime. */
  freeRecipients: { limit: number; postsPerMinute: number; resendCooldownSeconds: number; linkTtlSeconds: number };
}

export interface SmtpConfig {
  /** STARTTLS submission port (SMTP_PORT, SPEC {smtp_host}: 2587). */
  port: number;
  /** Implicit TLS submission port (SMTPS_PORT, SPEC: 2465). */
  securePort: number;
  /** PEM certificate chain and key files; both null = a generated self-signed certificate (development). */
  tlsCertPath: string | null;
  tlsKeyPath: string | null;
  /** Largest message accepted, in bytes (advertised as SIZE; over it: 552). */
  maxMessageBytes: number;
  /** Most RCPT TO per transaction (over it: 452). */
  maxRecipients: number;
  /**
   * SMTP_MAX_BUFFERED_BYTES: message bytes all SMTP listeners of one process (submission and
   * inbound) may hold in memory at once while messages arrive; a message that would go over it is
   * answered 452 4.3.1 (smtp/dataBudget.ts, docs/SMTP.md "Memory for messages being received").
   * Not below the largest message either listener takes.
   */
  maxBufferedBytes: number;
  /** SMTP_CLIENT_CA: PEM file of the CA(s) client certificates of mTLS blocks must chain to; null = mTLS logins impossible (docs/SMTP.md). */
  clientCaPath: string | null;
  /** SMTP_PROCESSES: listener processes sharing the two ports (node:cluster, scripts/roleProcesses.ts; 1 = in the Motor process itself). */
  processes: number;
  /**
   * Errors of one session (Postfix's smtpd_soft_error_limit, smtpd_hard_error_limit,
   * smtpd_error_sleep_time): from the soft limit on each command waits `errorSleepMs`; at the hard
   * limit, 421 and the connection closes (docs/SMTP.md "Error limits").
   */
  softErrorLimit: number;
  hardErrorLimit: number;
  errorSleepMs: number;
  /**
   * HELO, EHLO, NOOP, RSET, VRFY and HELP allowed per session before each one more counts as an error
   * toward those limits (Postfix's smtpd_junk_command_limit); a message accepted resets the count.
   */
  junkCommandLimit: number;
  /**
   * RCPT TO commands one transaction may send beyond `maxRecipients`, repeated addresses and
   * refused ones included, before each one more is refused (452 4.5.3, no lookup) and counts as an
   * error (Postfix's smtpd_recipient_overshoot_limit).
   */
  recipientOvershootLimit: number;
  /**
   * SMTP_SESSION_TIMEOUT_SECONDS: the longest one connection may last, however busy (the idle
   * timeout starts again with every byte, so it bounds nothing for a client that trickles). Past
   * it the session is told 421 4.4.2 and closed; a message in progress is let finish first
   * (docs/SMTP.md "Deadlines").
   */
  sessionTimeoutSeconds: number;
  /** SMTP_DATA_TIMEOUT_SECONDS: the longest a message may take from the 354 to its final dot; past it 421 4.4.2, nothing submitted. */
  dataTimeoutSeconds: number;
  /**
   * SMTP_IDLE_TIMEOUT_SECONDS: how long the listeners wait for the client's next byte; past it
   * 421 4.4.2 and the connection closes. 300 s, RFC 5321 §4.5.3.2.7's server timeout (and Postfix's
   * smtpd_timeout); every byte received starts it again.
   */
  idleTimeoutSeconds: number;
  /**
   * SMTP_MAX_CONNECTIONS_PER_ADDRESS: open submission connections one client address may hold;
   * past it 421 4.7.0. Across every listener process (SMTP_PROCESSES) of the host.
   */
  maxConnectionsPerAddress: number;
  /** Refusal events recorded one by one per Motor Block (AUTH: per client address) per window; past it counted and summed up. */
  refusalEvents: { limit: number; windowSeconds: number };
  /**
   * Log lines a client can multiply (refusals, failed AUTHs, sessions closed for errors, connection
   * errors), per listener process and kind of line: at most `perKey` per client address (per block
   * for submission refusals) and `perKind` for every key together per window, the rest counted and
   * summed up in one line when the window ends (infra/logLimiter.ts).
   */
  logLines: { perKey: number; perKind: number; windowSeconds: number };
}

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`Invalid configuration:\n  - ${problems.join('\n  - ')}`);
    this.name = 'ConfigError';
  }
}

type Env = Record<string, string | undefined>;

/** Waits between webhook attempts (docs/WEBHOOKS.md): 9 attempts over about 22 hours. */
export const WEBHOOK_RETRY_SCHEDULE: readonly number[] = [30, 120, 600, 1800, 3600, 10800, 21600, 43200];

export function loadConfig(env: Env = process.env): Config {
  const problems: string[] = [];
  const str = (name: string, fallback: string | null): string | null => {
    const v = env[name];
    return v === undefined || v.trim() === '' ? fallback : v.trim();
  };
  const int = (name: string, fallback: number, min: number, max: number): number => {
    const raw = str(name, null);
    if (raw === null) return fallback;
    // Decimal digits only: Number() would also read 1e9, +1, 0x10 and 1.0, which an operator did not
    // mean as a count (a typo such as 1e that reads as a number is refused, not guessed).
    const n = /^-?\d+$/.test(raw) ? Number(raw) : NaN;
    if (!Number.isSafeInteger(n) || n < min || n > max) {
      problems.push(`${name} must be an integer between ${min} and ${max} (got "${raw}")`);
      return fallback;
    }
    return n;
  };
  const url = (name: string, protocols: string[]): string | null => {
    const raw = str(name, null);
    if (raw === null) return null;
    try {
      const u = new URL(raw);
      if (!protocols.includes(u.protocol.replace(/:$/, ''))) problems.push(`${name} must use one of ${protocols.join(', ')} (got ${u.protocol})`);
    } catch {
      problems.push(`${name} is not a valid URL`);
    }
    return raw;
  };

  const dnsServers = (str('DNS_SERVERS', '') ?? '').split(',').map((s) => s.trim()).filter(Boolean);
  for (const s of dnsServers) {
    if (!/^(\[[0-9a-fA-F:]+\]|[0-9.]+|[0-9a-fA-F:]+)(:\d{1,5})?$/.test(s)) problems.push(`DNS_SERVERS entry "${s}" is not host[:port] with an IP host`);
  }

  let tokenSecret = str('TOKEN_SECRET', null);
  if (tokenSecret === null) {
    if (env.NODE_ENV === 'production') problems.push('TOKEN_SECRET is required in production (32+ random characters)');
    tokenSecret = 'motor-development-token-secret-change-me';
  } else if (tokenSecret.length < 32) {
    problems.push('TOKEN_SECRET must be at least 32 characters');
  }

  let keyEncryptionKey = str('KEY_ENCRYPTION_KEY', null);
  if (keyEncryptionKey === null) {
    if (env.NODE_ENV === 'production') problems.push('KEY_ENCRYPTION_KEY is required in production (32+ random characters)');
    keyEncryptionKey = 'motor-development-key-encryption-key-change-me';
  } else if (keyEncryptionKey.length < 32) {
    problems.push('KEY_ENCRYPTION_KEY must be at least 32 characters');
  }
  /** A comma-separated list of waits in whole seconds (1..86400), or null when unset or invalid. */
  const seconds = (name: string): number[] | null => {
    const raw = str(name, null);
    if (raw === null) return null;
    const list = raw.split(',').map((x) => Number(x.trim()));
    if (list.some((n) => !Number.isInteger(n) || n < 1 || n > 86400)) {
      problems.push(`${name} must be a comma-separated list of whole seconds (1..86400)`);
      return null;
    }
    return list;
  };
  /** A comma-separated list of TCP ports (1..65535, duplicates dropped), or null when unset or invalid. */
  const ports = (name: string): number[] | null => {
    const raw = str(name, null);
    if (raw === null) return null;
    const list = raw.split(',').map((x) => x.trim()).filter(Boolean).map(Number);
    if (list.length === 0 || list.some((n) => !Number.isInteger(n) || n < 1 || n > 65535)) {
      problems.push(`${name} must be a comma-separated list of ports (1..65535)`);
      return null;
    }
    return [...new Set(list)];
  };
  const bool = (name: string, fallback: boolean): boolean => {
    const raw = str(name, null);
    if (raw === null) return fallback;
    if (['1', 'true', 'yes', 'on'].includes(raw.toLowerCase())) return true;
    if (['0', 'false', 'no', 'off'].includes(raw.toLowerCase())) return false;
    problems.push(`${name} must be true or false (got "${raw}")`);
    return fallback;
  };

  const onOff = (name: string, fallback: boolean): boolean => {
    const raw = str(name, null);
    if (raw === null) return fallback;
    if (raw.toLowerCase() === 'on') return true;
    if (raw.toLowerCase() === 'off') return false;
    problems.push(`${name} must be on or off (got "${raw}")`);
    return fallback;
  };

  const port = int('PORT', 3000, 0, 65535);
  const smtpPort = int('SMTP_PORT', 2587, 0, 65535);
  const smtpsPort = int('SMTPS_PORT', 2465, 0, 65535);
  const smtpHardErrorLimit = int('SMTP_HARD_ERROR_LIMIT', 20, 1, 1000);
  const smtpSessionTimeoutSeconds = int('SMTP_SESSION_TIMEOUT_SECONDS', 1800, 1, 86_400);
  const publicBaseUrl = url('PUBLIC_BASE_URL', ['http', 'https']) ?? `http://localhost:${port}`;
  // Compared with tenants' domain names (docs/DOMAINS.md "Bounce domain"): normalised as they are.
  const bounceDomainSetting = str('BOUNCE_DOMAIN', null);
  const config: Config = {
    port,
    apiProcesses: int('API_PROCESSES', 1, 1, 64),
    http: {
      headersTimeoutSeconds: int('HTTP_HEADERS_TIMEOUT_SECONDS', 20, 1, 600),
      // A 12 MB send body must fit in it: 60 s is 1.6 Mbit/s.
      requestTimeoutSeconds: int('HTTP_REQUEST_TIMEOUT_SECONDS', 60, 1, 3600),
      // At least one largest body (12 MB): below it such a send could never be taken.
      maxBufferedBytes: int('HTTP_MAX_BUFFERED_BYTES', 256 * 1024 * 1024, 12 * 1024 * 1024, 64 * 1024 * 1024 * 1024),
    },
    databaseUrl: url('DATABASE_URL', ['postgres', 'postgresql']),
    redisUrl: url('REDIS_URL', ['redis', 'rediss']),
    eventstoreUrl: url('EVENTSTORE_URL', ['esdb', 'esdb+discover', 'kurrentdb', 'kurrentdb+discover', 'kurrent', 'kurrent+discover']),
    databaseQueryTimeoutMs: int('DATABASE_QUERY_TIMEOUT_MS', QUERY_TIMEOUT_MS, 100, 600_000),
    databasePoolSize: int('DATABASE_POOL_SIZE', 10, 4, 1000),
    dnsServers,
    mxPort: int('MX_PORT', 25, 1, 65535),
    mxAllowPrivateAddresses: bool('MX_ALLOW_PRIVATE_ADDRESSES', false),
    smtpRelayUrl: url('SMTP_RELAY_URL', ['smtp', 'smtps']),
    mtaSts: { enabled: onOff('MTA_STS', true), port: int('MTA_STS_PORT', 443, 1, 65535) },
    deliveryTlsCaFile: str('DELIVERY_TLS_CA_FILE', null),
    tokenSecret,
    keyEncryptionKey,
    enforceAccountLimit: bool('ENFORCE_ACCOUNT_LIMIT', false),
    enforceWarmup: bool('ENFORCE_WARMUP', false),
    retentionSweep: {
      intervalSeconds: int('RETENTION_SWEEP_INTERVAL_SECONDS', 3600, 0, 7 * 86400),
      batchSize: int('RETENTION_SWEEP_BATCH', 5000, 1, 1_000_000),
    },
    accountFallback: {
      hourly: int('ACCOUNT_FALLBACK_HOURLY', 1_000, 1, 100_000_000),
      daily: int('ACCOUNT_FALLBACK_DAILY', 10_000, 1, 1_000_000_000),
    },
    tokenIssuer: str('TOKEN_ISSUER', publicBaseUrl)!,
    tokenAudience: str('TOKEN_AUDIENCE', `${publicBaseUrl}/api/public/v1`)!,
    hostname: str('MOTOR_HOSTNAME', 'localhost')!,
    smtpPublicHosts: (str('SMTP_PUBLIC_HOST', null) ?? str('MOTOR_HOSTNAME', 'localhost')!).split(',').map((h) => h.trim().toLowerCase().replace(/\.$/, '')).filter(Boolean),
    // Behind a proxy or port mapping clients are given other ports than the listeners bind; 0 (any free port) is no port to give.
    smtpPublicPorts: ports('SMTP_PUBLIC_PORTS') ?? [...new Set([smtpPort, smtpsPort])].filter((p) => p !== 0),
    serviceDomain: (str('SERVICE_DOMAIN', 'motor.localhost')!).toLowerCase(),
    publicBaseUrl,
    authPublicUrl: (url('AUTH_PUBLIC_URL', ['http', 'https']) ?? publicBaseUrl).replace(/\/+$/, ''),
    mcpPublicUrl: (url('MCP_PUBLIC_URL', ['http', 'https']) ?? publicBaseUrl).replace(/\/+$/, ''),
    agentClients: {
      allowPrivateAddresses: bool('OAUTH_CLIENT_METADATA_ALLOW_PRIVATE', false),
      caFile: str('OAUTH_CLIENT_METADATA_CA', null),
    },
    logLevel: str('LOG_LEVEL', 'info')!,
    apiRequestLimit: int('API_REQUEST_LIMIT', 600, 1, 1_000_000),
    anonymousRequestLimit: int('ANONYMOUS_REQUEST_LIMIT', 60, 1, 1_000_000),
    systemMailFrom: (str('SYSTEM_MAIL_FROM', null) ?? `no-reply@${(str('SERVICE_DOMAIN', 'motor.localhost')!).toLowerCase()}`).toLowerCase(),
    deliveryLifetimeSeconds: int('DELIVERY_LIFETIME_SECONDS', 4 * 24 * 3600 + 12 * 3600, 1, 30 * 24 * 3600),
    deliveryRetrySchedule: seconds('DELIVERY_RETRY_SCHEDULE'),
    deliveryConcurrency: int('DELIVERY_CONCURRENCY', 32, 1, 1000),
    deliveryMaxConnectionsPerAddress: int('DELIVERY_MAX_CONNECTIONS_PER_ADDRESS', 20, 1, 1000),
    deliveryMaxAddressWaitSeconds: int('DELIVERY_MAX_ADDRESS_WAIT_SECONDS', 10, 0, 3600),
    deliveryMaxBufferedBytes: int('DELIVERY_MAX_BUFFERED_BYTES', 256 * 1024 * 1024, 1024, 64 * 1024 * 1024 * 1024),
    deliveryAttemptDeadlineSeconds: int('DELIVERY_ATTEMPT_DEADLINE_SECONDS', ATTEMPT_DEADLINE_MAX_MS / 1000, 10, ATTEMPT_DEADLINE_MAX_MS / 1000),
    campaignPageSize: int('CAMPAIGN_PAGE_SIZE', 100, 1, 1000),
    deliveryJobLockSeconds: int('DELIVERY_JOB_LOCK_SECONDS', 60, 2, 3600),
    eventStreamKeepaliveSeconds: int('EVENT_STREAM_KEEPALIVE_SECONDS', 15, 1, 300),
    webhooks: {
      retrySchedule: seconds('WEBHOOK_RETRY_SCHEDULE') ?? [...WEBHOOK_RETRY_SCHEDULE],
      timeoutSeconds: int('WEBHOOK_TIMEOUT_SECONDS', 10, 1, 60),
      concurrency: int('WEBHOOK_CONCURRENCY', 16, 1, 1000),
      allowPrivateAddresses: bool('WEBHOOK_ALLOW_PRIVATE_URLS', false),
      disableAfterDays: int('WEBHOOK_DISABLE_AFTER_DAYS', 3, 0, 365),
    },
    projectionBatchSize: int('PROJECTION_BATCH_SIZE', 5000, 1, 100_000),
    projectionBatchIntervalMs: int('PROJECTION_BATCH_INTERVAL_MS', 100, 0, 10_000),
    defaultPlan: {
      name: str('PLAN_DEFAULT_NAME', 'default')!,
      accountHourly: int('PLAN_DEFAULT_ACCOUNT_HOURLY', 50_000, 1, 100_000_000),
      accountDaily: int('PLAN_DEFAULT_ACCOUNT_DAILY', 500_000, 1, 1_000_000_000),
      burst: int('PLAN_DEFAULT_BURST', 300, 1, 1_000_000),
      hourly: int('PLAN_DEFAULT_HOURLY', 10_000, 1, 100_000_000),
      daily: int('PLAN_DEFAULT_DAILY', 100_000, 1, 1_000_000_000),
      retentionDays: int('PLAN_DEFAULT_RETENTION_DAYS', 30, 1, 3650),
      maxBlocks: int('PLAN_DEFAULT_MAX_BLOCKS', 25, 1, 100_000),
    },
    plans: {},
    dataDir: str('MOTOR_DATA_DIR', './var')!,
    smtp: {
      port: smtpPort,
      securePort: smtpsPort,
      tlsCertPath: str('SMTP_TLS_CERT', null),
      tlsKeyPath: str('SMTP_TLS_KEY', null),
      maxMessageBytes: int('SMTP_MAX_MESSAGE_BYTES', 10 * 1024 * 1024, 1024, 100 * 1024 * 1024),
      maxRecipients: int('SMTP_MAX_RECIPIENTS', 50, 1, 1000),
      // 256 MiB: 25 messages of the default largest size at once; up to 64 GiB (a heap that size is the operator's to give Node).
      maxBufferedBytes: int('SMTP_MAX_BUFFERED_BYTES', 256 * 1024 * 1024, 1024, 64 * 1024 * 1024 * 1024),
      clientCaPath: str('SMTP_CLIENT_CA', null),
      processes: int('SMTP_PROCESSES', 1, 1, 64),
      // Postfix's 10 of 20; a lower hard limit alone takes the soft one down with it.
      softErrorLimit: int('SMTP_SOFT_ERROR_LIMIT', Math.min(10, smtpHardErrorLimit), 1, 1000),
      hardErrorLimit: smtpHardErrorLimit,
      errorSleepMs: int('SMTP_ERROR_SLEEP_MS', 1000, 0, 10_000),
      junkCommandLimit: int('SMTP_JUNK_COMMAND_LIMIT', 100, 1, 10_000),
      recipientOvershootLimit: int('SMTP_RECIPIENT_OVERSHOOT_LIMIT', 1000, 0, 100_000),
      sessionTimeoutSeconds: smtpSessionTimeoutSeconds,
      // 10 minutes: the default maximum message (10 MiB) at 140 kbit/s. A shorter session deadline takes it down with it.
      dataTimeoutSeconds: int('SMTP_DATA_TIMEOUT_SECONDS', Math.min(600, smtpSessionTimeoutSeconds), 1, 86_400),
      // RFC 5321 §4.5.3.2.7: at least 5 minutes. A shorter session deadline takes it down with it.
      idleTimeoutSeconds: int('SMTP_IDLE_TIMEOUT_SECONDS', Math.min(300, smtpSessionTimeoutSeconds), 1, 3600),
      maxConnectionsPerAddress: int('SMTP_MAX_CONNECTIONS_PER_ADDRESS', 50, 1, 100_000),
      refusalEvents: {
        limit: int('SMTP_REFUSAL_EVENT_LIMIT', 100, 1, 100_000),
        windowSeconds: int('SMTP_REFUSAL_EVENT_WINDOW_SECONDS', 60, 1, 3600),
      },
      logLines: {
        perKey: int('SMTP_LOG_LINE_LIMIT', 10, 1, 100_000),
        perKind: int('SMTP_LOG_LINE_KIND_LIMIT', 1000, 1, 100_000),
        windowSeconds: int('SMTP_LOG_WINDOW_SECONDS', 60, 1, 3600),
      },
    },
    inbound: {
      bounceDomain: bounceDomainSetting === null ? null : normalizeDomainName(bounceDomainSetting),
      port: int('INBOUND_SMTP_PORT', 2525, 0, 65535),
      maxMessageBytes: int('INBOUND_MAX_MESSAGE_BYTES', 5 * 1024 * 1024, 1024, 100 * 1024 * 1024),
    },
    domainChecks: {
      lookupTimeoutMs: int('DOMAIN_DNS_TIMEOUT_MS', 3000, 100, 30_000),
      healthStaleSeconds: int('DOMAIN_HEALTH_STALE_SECONDS', 3600, 1, 30 * 24 * 3600),
      liveTimeoutMs: int('DOMAIN_HEALTH_LIVE_TIMEOUT_MS', 5000, 100, 30_000),
    },
    freeRecipients: {
      limit: int('FREE_RECIPIENT_LIMIT', 5, 0, 1000),
      postsPerMinute: int('FREE_RECIPIENT_POSTS_PER_MINUTE', 5, 1, 10_000),
      resendCooldownSeconds: int('FREE_RECIPIENT_RESEND_COOLDOWN_SECONDS', 600, 0, 7 * 24 * 3600),
      linkTtlSeconds: int('FREE_RECIPIENT_LINK_TTL_SECONDS', 7 * 24 * 3600, 60, 30 * 24 * 3600),
    },
  };
  config.plans = { ...PLAN_TIERS, [config.defaultPlan.name]: config.defaultPlan };
  if ((config.smtp.tlsCertPath === null) !== (config.smtp.tlsKeyPath === null)) problems.push('SMTP_TLS_CERT and SMTP_TLS_KEY must be set together');
  for (const [name, path] of [['SMTP_TLS_CERT', config.smtp.tlsCertPath], ['SMTP_TLS_KEY', config.smtp.tlsKeyPath], ['SMTP_CLIENT_CA', config.smtp.clientCaPath], ['DELIVERY_TLS_CA_FILE', config.deliveryTlsCaFile]] as const) {
    if (path !== null && !existsSync(path)) problems.push(`${name} names a file that does not exist (${path})`);
  }
  if (config.smtp.port !== 0 && config.smtp.port === config.smtp.securePort) problems.push('SMTP_PORT and SMTPS_PORT must differ');
  if (config.smtp.softErrorLimit > config.smtp.hardErrorLimit) problems.push('SMTP_SOFT_ERROR_LIMIT must not exceed SMTP_HARD_ERROR_LIMIT');
  // Under the largest message, that message could never be taken, not even by an idle process. The
  // inbound listener's only counts where it runs (BOUNCE_DOMAIN set, INBOUND_SMTP_PORT not 0).
  if (config.smtp.maxBufferedBytes < config.smtp.maxMessageBytes) problems.push('SMTP_MAX_BUFFERED_BYTES must not be below SMTP_MAX_MESSAGE_BYTES');
  if (config.inbound.bounceDomain !== null && config.inbound.port !== 0 && config.smtp.maxBufferedBytes < config.inbound.maxMessageBytes) {
    problems.push('SMTP_MAX_BUFFERED_BYTES must not be below INBOUND_MAX_MESSAGE_BYTES');
  }
  // A message is part of its session (the session deadline lets one in progress finish, so the
  // longest session is the sum of the two).
  if (config.smtp.dataTimeoutSeconds > config.smtp.sessionTimeoutSeconds) problems.push('SMTP_DATA_TIMEOUT_SECONDS must not exceed SMTP_SESSION_TIMEOUT_SECONDS');
  if (config.smtp.idleTimeoutSeconds > config.smtp.sessionTimeoutSeconds) problems.push('SMTP_IDLE_TIMEOUT_SECONDS must not exceed SMTP_SESSION_TIMEOUT_SECONDS');
  // One address's allowance is part of the kind's: a larger one could never be used.
  if (config.smtp.logLines.perKey > config.smtp.logLines.perKind) problems.push('SMTP_LOG_LINE_LIMIT must not exceed SMTP_LOG_LINE_KIND_LIMIT');
  // The headers are part of the request (Node refuses a server whose headers timeout is the longer).
  if (config.http.headersTimeoutSeconds > config.http.requestTimeoutSeconds) problems.push('HTTP_HEADERS_TIMEOUT_SECONDS must not exceed HTTP_REQUEST_TIMEOUT_SECONDS');
  if (!['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'].includes(config.logLevel)) problems.push(`LOG_LEVEL must be one of fatal,error,warn,info,debug,trace,silent`);
  if (!/^[^@\s]+@[a-z0-9-]+(\.[a-z0-9-]+)+$/.test(config.systemMailFrom)) problems.push(`SYSTEM_MAIL_FROM must be a bare address (got "${config.systemMailFrom}")`);
  const bounceDomain = config.inbound.bounceDomain;
  if (bounceDomain !== null && !/^(?=.{1,253}$)[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)+$/.test(bounceDomain)) {
    problems.push(`BOUNCE_DOMAIN must be a domain name in ASCII (got "${bounceDomain}")`);
  }
  // Sandbox domains are handed out by handle under this namespace: one would be the bounce domain or under it.
  if (bounceDomain !== null && isAtOrUnder(bounceDomain, `sandbox.${config.serviceDomain}`)) {
    problems.push(`BOUNCE_DOMAIN must not be in the sandbox namespace sandbox.${config.serviceDomain} (got "${bounceDomain}")`);
  }
  if (problems.length > 0) throw new ConfigError(problems);
  return config;
}
