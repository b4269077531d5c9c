import type { Request } from 'express';
import type { LoginTurns } from '../../commands/auth/loginTurn';
import type { Knex } from 'knex';
import type { Clock } from '../../domain/ids';
import type { EventStore } from '../../domain/eventStore';
import type { Config } from '../../infra/config';
import type { Logger } from '../../infra/logger';
import type { Metrics } from '../../infra/metrics';
import type { DirectoryCache } from '../../commands/directoryCache';
import type { SendQuota } from '../../commands/quota/sendQuota';
import type { RequestLimiter } from '../../commands/quota/requestLimiter';
import type { Principal } from './principal';
import type { DnsResolver } from '../../workers/delivery/dns';
import type { KeyStore } from '../../infra/keys/keyStore';
import type { EventStreams } from '../stream/eventStreams';
import type { AuthAttempt, AuthOutcome } from '../../smtp/auth';

/** Everything an HTTP controller may use, built once by the composition root (scripts/main.ts). */
export interface HttpContext {
  config: Config;
  db: Knex;
  store: EventStore;
  quota: SendQuota;
  limiter: RequestLimiter;
  directory: DirectoryCache;
  logger: Logger;
  metrics: Metrics;
  clock: Clock;
  /** The resolver honouring DNS_SERVERS (domain checks, docs/DOMAINS.md). */
  resolver: DnsResolver;
  /** Private key store (DKIM keys of added domains, webhook secrets). */
  keys: KeyStore;
  /** Dashboard logins: one password check per address at a time (commands/auth/loginTurn.ts). */
  loginTurns: LoginTurns;
  /** The live event streams (SSE) of this process. */
  streams: EventStreams;
  /** Health of the dependencies, for /v1/status and readiness. */
  health(): Promise<HealthReport>;
  /** The SMTP listener's AUTH, counted on the same failed-login counters (POST /v1/test-email). */
  smtpAuth(attempt: AuthAttempt): Promise<AuthOutcome>;
}

export interface HealthReport {
  ok: boolean;
  components: Record<string, { ok: boolean; latencyMs?: number; error?: string }>;
}

export const ctxOf = (req: Request): HttpContext => req.app.locals.ctx as HttpContext;
export const principalOf = <P extends Principal = Principal>(req: Request): P => (req as Request & { user: P }).user;
