/**
 * The composition root: builds every service of a Motor process from the validated Config and
 * starts the roles (api, projector, worker). `npm start`, the CLI, the replay script, tests and
 * benchmarks all assemble Motor through here, so there is one wiring.
 */
import cluster from 'node:cluster';
import { readFileSync } from 'node:fs';
import { setMaxListeners } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Knex } from 'knex';
import type { Redis } from 'ioredis';
import type { Queue, Worker } from 'bullmq';
import type { EventStore } from '../domain/eventStore';
import { systemClock, type Clock } from '../domain/ids';
import type { Config } from '../infra/config';
import { createDb, processApplicationName } from '../infra/db';
import { createEventStore } from '../infra/eventstore';
import { KeyStore } from '../infra/keys/keyStore';
import { createLogger, type Logger } from '../infra/logger';
import { createMetrics, type Metrics } from '../infra/metrics';
import { createFastRedis } from '../infra/redis';
import { RedisBatch } from '../infra/redisBatch';
import { DIRECTORY_CACHE_TTL_MS, DirectoryCache } from '../commands/directoryCache';
import { LoginTurns } from '../commands/auth/loginTurn';
import { RequestLimiter } from '../commands/quota/requestLimiter';
import { SendQuota } from '../commands/quota/sendQuota';
import { allProjections } from '../projections';
import { ProjectionRunner, migrateProjection } from '../projections/runner';
import type { HealthReport, HttpContext } from '../read-api/http/context';
import { createResolver, type DnsResolver } from '../workers/delivery/dns';
import { initCheckpoints } from '../workers/logEnqueuer';
import { initWebhookDispatchSchema } from '../workers/webhooks/dispatcher';
import { EventStreams } from '../read-api/stream/eventStreams';
import { initExportFiles } from '../commands/exports/exports';
import type { DeliveryDeps } from '../workers/deliveryWorker';
import { createDeliveryQueue, type DeliveryJob } from '../workers/queue';
import type { SmtpListeners, SmtpSettings } from '../smtp/listener';
import type { InboundListener } from '../smtp/inbound/listener';
import { authDepsOf, authenticate } from '../smtp/auth';
import { AuthLimiter, DEFAULT_AUTH_LIMITS } from '../smtp/authLimiter';
import { RefusalEventBudget } from '../smtp/refusalBudget';
import { LogLimiter } from '../infra/logLimiter';
import { DataBudget } from '../smtp/dataBudget';
import { within } from '../infra/within';
import { startRoleProcesses, type RoleProcesses } from './roleProcesses';
import { returnPathSettings } from '../smtp/inbound/returnPath';
import { tenantDomainsAtOrUnder } from '../projections/directory/queries';

export type Role = 'api' | 'projector' | 'worker' | 'smtp' | 'inbound';
/** `inbound` (bounces and complaints) starts only with BOUNCE_DOMAIN set and INBOUND_SMTP_PORT not 0. */
export const ALL_ROLES: Role[] = ['api', 'projector', 'worker', 'smtp', 'inbound'];

export interface Runtime {
  config: Config;
  /** Resolved connection strings (after embedded defaults). */
  databaseUrl: string;
  redisUrl: string;
  logger: Logger;
  metrics: Metrics;
  clock: Clock;
  db: Knex;
  store: EventStore;
  redis: Redis;
  keys: KeyStore;
  directory: DirectoryCache;
  quota: SendQuota;
  limiter: RequestLimiter;
  resolver: DnsResolver;
  queue: Queue<DeliveryJob>;
  queuePrefix: string;
  /** The request path's Redis pipeline batch (limiter and quota). */
  redisBatch: RedisBatch;
  /** Failed SMTP AUTH counters: the listeners' and POST /v1/test-email's check share them. */
  smtpAuthLimiter: AuthLimiter;
  /** The bound on SMTP refusal events (per block, per client address), shared the same way. */
  smtpRefusals: RefusalEventBudget;
  /** This process's cap on the SMTP log lines a client can multiply (SMTP_LOG_*): the listeners' and the refusal budget's. */
  smtpLogLines: LogLimiter;
  /** This process's budget of message bytes held while they arrive (SMTP_MAX_BUFFERED_BYTES): every listener's, submission and inbound. */
  smtpDataBudget: DataBudget;
  http: HttpContext;
  close(): Promise<void>;
}

export interface RuntimeOptions {
  databaseUrl: string;
  redisUrl: string;
  logger?: Logger;
  clock?: Clock;
  /** Directory cache lifetime (tests use 0 to read their own writes at once). */
  directoryTtlMs?: number;
  /** Redis key prefix of the delivery queue (QUEUE_PREFIX; tests use one per run). */
  queuePrefix?: string;
  /** application_name of the pool's connections; default `motor@<host>:<pid>` (infra/db.ts processApplicationName). */
  applicationName?: string;
}

/** `motor-<roles>@<host>:<pid>` (`motor-all@...` for every role): which process a database session, and a lease on it, is. */
export function roleApplicationName(roles: readonly Role[]): string {
  const all = ALL_ROLES.every((r) => roles.includes(r));
  return processApplicationName(`motor-${all ? 'all' : roles.join(',')}`);
}

async function timed(fn: () => Promise<unknown>): Promise<{ ok: boolean; latencyMs: number; error?: string }> {
  const t = Date.now();
  try {
    await within(2000, fn(), () => new Error('timeout'));
    return { ok: true, latencyMs: Date.now() - t };
  } catch (e) {
    return { ok: false, latencyMs: Date.now() - t, error: (e as Error).message };
  }
}

export async function createRuntime(config: Config, opts: RuntimeOptions): Promise<Runtime> {
  const logger = opts.logger ?? createLogger(config.logLevel);
  const metrics = createMetrics();
  const clock = opts.clock ?? systemClock;
  const applicationName = opts.applicationName ?? processApplicationName('motor');
  const db = createDb(opts.databaseUrl, { applicationName, pool: { min: 0, max: config.databasePoolSize }, queryTimeoutMs: config.databaseQueryTimeoutMs, logger });
  const store = await createEventStore({
    databaseUrl: opts.databaseUrl, eventstoreUrl: config.eventstoreUrl, queryTimeoutMs: config.databaseQueryTimeoutMs, poolSize: config.databasePoolSize,
  });
  const redis = createFastRedis(opts.redisUrl);
  redis.on('error', (err) => logger.debug({ err: err.message }, 'redis connection error'));
  const keys = new KeyStore(db, config.keyEncryptionKey);
  await keys.init();
  for (const p of allProjections()) await migrateProjection(db, p);
  await initCheckpoints(db);
  await initWebhookDispatchSchema(db);
  await initExportFiles(db);
  const directory = new DirectoryCache(db, opts.directoryTtlMs ?? DIRECTORY_CACHE_TTL_MS);
  // One batch for the request path's Redis commands: a turn's limiter hits and quota charges share a write.
  const redisBatch = new RedisBatch(redis);
  const quota = new SendQuota(redis, redisBatch);
  const limiter = new RequestLimiter(redis, config.apiRequestLimit, redisBatch);
  const resolver = createResolver(config.dnsServers);
  const queuePrefix = opts.queuePrefix ?? 'motor';
  const queue = createDeliveryQueue(opts.redisUrl, queuePrefix);
  // Without a listener BullMQ prints every reconnect failure to stderr; Redis outages are visible in /v1/status.
  queue.on('error', (err) => logger.debug({ err: err.message }, 'delivery queue connection error'));

  const health = async (): Promise<HealthReport> => {
    const [eventStore, database, redisCheck, queueCheck] = await Promise.all([
      timed(() => store.ping()),
      timed(() => db.raw('select 1')),
      timed(() => redis.ping()),
      timed(async () => { await queue.getJobCounts('waiting'); }),
    ]);
    const components = { eventStore, database, redis: redisCheck, deliveryQueue: queueCheck };
    // Redis down degrades quotas to "unknown" but sends still work; the store and database are essential.
    return { ok: eventStore.ok && database.ok, components };
  };

  const streams = new EventStreams(db, store, redis, logger, config.eventStreamKeepaliveSeconds);
  const smtpAuthLimiter = new AuthLimiter(redis, DEFAULT_AUTH_LIMITS, `${queuePrefix}:smtp:authfail`);
  const { perKey, perKind, windowSeconds } = config.smtp.logLines;
  const smtpLogLines = new LogLimiter({ perKey, perKind, windowMs: windowSeconds * 1000 });
  const smtpRefusals = new RefusalEventBudget(redis, config.smtp.refusalEvents, logger.child({ component: 'smtp' }), `${queuePrefix}:smtp:refusals`, smtpLogLines);
  const smtpDataBudget = new DataBudget(config.smtp.maxBufferedBytes, (held) => metrics.smtpBufferedBytes.set(held));
  const smtpAuthDeps = authDepsOf({ store, directory, clock, oauth: config }, smtpAuthLimiter, smtpRefusals);
  const http: HttpContext = {
    config, db, store, quota, limiter, directory, logger, metrics, clock, health, resolver, keys, streams,
    loginTurns: new LoginTurns(redis, queuePrefix),
    smtpAuth: (attempt) => authenticate(smtpAuthDeps, attempt),
  };
  return {
    config, databaseUrl: opts.databaseUrl, redisUrl: opts.redisUrl, logger, metrics, clock, db, store, redis, keys, directory,
    quota, limiter, resolver, queue, queuePrefix, http, redisBatch, smtpAuthLimiter, smtpRefusals, smtpLogLines, smtpDataBudget,
    async close() {
      // The summaries of refusals counted in windows not yet over: appended now, while the store is open.
      await smtpRefusals.flush();
      // And the log lines left out so far: said now, not lost with the process.
      smtpLogLines.flush();
      await queue.close().catch(() => {});
      redis.disconnect();
      await store.close().catch(() => {});
      await db.destroy().catch(() => {});
    },
  };
}

export interface StartedRoles {
  server: Server | null;
  port: number | null;
  workers: Worker<DeliveryJob>[];
  /** SMTP submission listeners (role smtp), with the ports actually bound. */
  smtp: SmtpListeners | null;
  /** The bounce and complaint listener (role inbound); null when not started (no BOUNCE_DOMAIN, INBOUND_SMTP_PORT 0). */
  inbound: InboundListener | null;
  stop(): Promise<void>;
}

export interface StartOptions {
  port?: number;
  host?: string;
  /** Override SMTP_PORT / SMTPS_PORT (tests pass 0 for free ports). */
  smtpPort?: number;
  smtpsPort?: number;
  /** Override INBOUND_SMTP_PORT (tests pass 0 for a free port; the setting's 0 means off). */
  inboundPort?: number;
  /** Extra settings of the SMTP listeners (tests shorten timeouts). */
  smtp?: Partial<Omit<SmtpSettings, 'port' | 'securePort' | 'host' | 'tls'>>;
}

/**
 * Tenants' domains that are BOUNCE_DOMAIN or under it, added before the operator set it (adds are
 * refused since): a warning naming them, at the start of each process that delivers (the role
 * whose MAIL FROM is on the bounce domain). They are tenants' data: left as they are, still able
 * to send (though no new block is put on them), for the operator to settle (docs/DOMAINS.md
 * "Bounce domain"). A failed lookup does not stop the start.
 */
export async function warnOfTenantDomainsAtBounceDomain(rt: Pick<Runtime, 'db' | 'logger'>, bounceDomain: string): Promise<void> {
  try {
    const found = await tenantDomainsAtOrUnder(rt.db, bounceDomain);
    if (found.length === 0) return;
    rt.logger.warn(
      { bounceDomain, count: found.length, domains: found.slice(0, 50).map((d) => ({ name: d.name, domainId: d.id, accountId: d.accountId })) },
      'tenant domains at or under BOUNCE_DOMAIN (added before it was set): they still send From: the bounce domain; see docs/DOMAINS.md "Bounce domain"',
    );
  } catch (err) {
    rt.logger.warn({ err: (err as Error).message, bounceDomain }, 'could not look for tenant domains at or under BOUNCE_DOMAIN');
  }
}

/**
 * Starts the given roles in this process; stop() drains in-flight work, then returns. Each role's
 * modules are loaded when the role starts: a worker process never loads the HTTP API (its routes,
 * controllers and OpenAPI document are the larger part of a process's heap), an API process
 * never loads the delivery engine or the SMTP listeners.
 */
export async function startRoles(rt: Runtime, roles: Role[], opts: StartOptions = {}): Promise<StartedRoles> {
  const abort = new AbortController();
  // Every projector, the enqueuer and the sweeper listen on this one signal.
  setMaxListeners(64, abort.signal);
  const background: Promise<unknown>[] = [];
  let server: Server | null = null;
  let port: number | null = null;
  const workers: Worker<DeliveryJob>[] = [];
  const extraWorkers: Worker[] = [];

  if (roles.includes('projector')) {
    // One projector process at a time applies each projection (ProjectionRunner.runAlone): the
    // others would read the same log for it only to lose each batch's compare-and-set.
    for (const p of allProjections()) {
      const runner = new ProjectionRunner(rt.db, rt.store, p, {
        logger: rt.logger,
        batchSize: rt.config.projectionBatchSize,
        minBatchIntervalMs: p.followsMessageTraffic ? rt.config.projectionBatchIntervalMs : 0,
        onBatch: (r) => {
          if (r.skipped > 0) rt.metrics.projectionSkipped.inc({ projection: r.projection }, r.skipped);
          if (r.lastEventCreatedAt) rt.metrics.projectionLagSeconds.set({ projection: r.projection }, Math.max(0, (Date.now() - r.lastEventCreatedAt.getTime()) / 1000));
        },
      });
      const projection = { projection: p.name };
      background.push(runner.runAlone(abort.signal, {
        leading: (held) => {
          rt.metrics.projectionLeader.set(projection, held ? 1 : 0);
          // Set by the batches this process applies: a process standing by has none to say.
          if (!held) rt.metrics.projectionLagSeconds.remove(projection);
        },
      }));
      // Every projector process, holder or not: the read model's lag, from its shared checkpoint.
      const lag = setInterval(async () => {
        try {
          const l = await runner.lag();
          rt.metrics.projectionLagEvents.set({ projection: p.name }, l.eventsBehind);
        } catch { /* database busy or down: keep the last reading */ }
      }, 5000);
      lag.unref();
      abort.signal.addEventListener('abort', () => clearInterval(lag));
    }
  }
  if (roles.includes('worker')) {
    if (rt.config.inbound.bounceDomain) await warnOfTenantDomainsAtBounceDomain(rt, rt.config.inbound.bounceDomain);
    const [{ DeliveryEnqueuer }, { DeliverySweeper }, { RetentionSweeper }, { startDeliveryWorker }, { BlockDeletionEnqueuer, createBlockDeletionQueue, startBlockDeletionWorker }, { BlockSuppressionCache }] = await Promise.all([
      import('../workers/enqueuer.js'), import('../workers/sweeper.js'), import('../workers/retention.js'), import('../workers/deliveryWorker.js'), import('../workers/blockDeletion.js'),
      import('../workers/delivery/suppressions.js'),
    ]);
    const enqueuer = new DeliveryEnqueuer(rt.db, rt.store, rt.queue, rt.logger, rt.metrics);
    background.push(enqueuer.run(abort.signal));
    background.push(new DeliverySweeper(rt.db, rt.queue, rt.logger).run(abort.signal));
    if (rt.config.retentionSweep.intervalSeconds > 0) {
      const { intervalSeconds, batchSize } = rt.config.retentionSweep;
      background.push(new RetentionSweeper(rt.db, rt.config, rt.logger, { intervalMs: intervalSeconds * 1000, batchSize, clock: rt.clock }).run(abort.signal));
    }
    const deps: DeliveryDeps = {
      store: rt.store, directory: rt.directory, keys: rt.keys, resolver: rt.resolver, logger: rt.logger, metrics: rt.metrics, now: () => rt.clock.now(),
      logLines: rt.smtpLogLines,
      suppressions: new BlockSuppressionCache(rt.db),
      settings: {
        mxPort: rt.config.mxPort, allowPrivateAddresses: rt.config.mxAllowPrivateAddresses, relayUrl: rt.config.smtpRelayUrl, hostname: rt.config.hostname,
        lifetimeSeconds: rt.config.deliveryLifetimeSeconds, retrySchedule: rt.config.deliveryRetrySchedule,
        attemptDeadlineMs: rt.config.deliveryAttemptDeadlineSeconds * 1000,
        maxConnectionsPerAddress: rt.config.deliveryMaxConnectionsPerAddress,
        maxAddressWaitSeconds: rt.config.deliveryMaxAddressWaitSeconds,
        maxBufferedBytes: rt.config.deliveryMaxBufferedBytes,
        returnPath: rt.config.inbound.bounceDomain ? returnPathSettings(rt.config.inbound.bounceDomain, rt.config.tokenSecret) : null,
        mtaSts: rt.config.mtaSts.enabled ? { port: rt.config.mtaSts.port } : null,
        tlsCa: rt.config.deliveryTlsCaFile ? readFileSync(rt.config.deliveryTlsCaFile, 'utf8') : null,
      },
    };
    workers.push(startDeliveryWorker(deps, rt.redisUrl, rt.config.deliveryConcurrency, rt.queuePrefix, rt.config.deliveryJobLockSeconds));
    // Motor Block deletion (docs/BLOCKS.md): a subscriber queues the jobs, a worker runs them.
    const deletionQueue = createBlockDeletionQueue(rt.redisUrl, rt.queuePrefix);
    deletionQueue.on('error', (err) => rt.logger.debug({ err: err.message }, 'block deletion queue connection error'));
    background.push(new BlockDeletionEnqueuer(rt.db, rt.store, deletionQueue, rt.logger, rt.metrics).run(abort.signal).finally(() => deletionQueue.close().catch(() => {})));
    extraWorkers.push(startBlockDeletionWorker({ store: rt.store, db: rt.db, clock: rt.clock, logger: rt.logger, directoryCacheTtlMs: rt.directory.ttlMs }, rt.redisUrl, rt.queuePrefix));
    // Outgoing webhooks (docs/WEBHOOKS.md): the dispatcher queues deliveries from the log, a worker posts them.
    const [{ WebhookDispatcher }, { createWebhookQueue, startWebhookWorker }, { WebhookPauseNotifier }] = await Promise.all([
      import('../workers/webhooks/dispatcher.js'), import('../workers/webhooks/worker.js'), import('../workers/webhooks/pauseNotices.js'),
    ]);
    const webhookQueue = createWebhookQueue(rt.redisUrl, rt.queuePrefix);
    webhookQueue.on('error', (err) => rt.logger.debug({ err: err.message }, 'webhook queue connection error'));
    const webhookSettings = rt.config.webhooks;
    background.push(new WebhookDispatcher(rt.db, rt.store, webhookQueue, rt.logger, { jobOptions: { attempts: webhookSettings.retrySchedule.length + 1 }, metrics: rt.metrics })
      .run(abort.signal).finally(() => webhookQueue.close().catch(() => {})));
    // The owner of an endpoint paused for failing gets one mail, from the log (docs/WEBHOOKS.md "Failing endpoints").
    background.push(new WebhookPauseNotifier({
      store: rt.store, db: rt.db, keys: rt.keys, quota: rt.quota, config: rt.config, logger: rt.logger, metrics: rt.metrics, clock: rt.clock,
    }).run(abort.signal));
    // Exports (docs/EXPORTS.md): a subscriber queues the jobs, a worker builds the files.
    const { ExportEnqueuer, createExportQueue, startExportWorker } = await import('../workers/exports.js');
    const exportQueue = createExportQueue(rt.redisUrl, rt.queuePrefix);
    exportQueue.on('error', (err) => rt.logger.debug({ err: err.message }, 'export queue connection error'));
    background.push(new ExportEnqueuer(rt.db, rt.store, exportQueue, rt.logger, rt.metrics).run(abort.signal).finally(() => exportQueue.close().catch(() => {})));
    extraWorkers.push(startExportWorker({ store: rt.store, db: rt.db, clock: rt.clock, logger: rt.logger }, rt.redisUrl, rt.queuePrefix));
    extraWorkers.push(startWebhookWorker({ store: rt.store, db: rt.db, keys: rt.keys, clock: rt.clock, logger: rt.logger, metrics: rt.metrics, settings: webhookSettings }, rt.redisUrl, rt.queuePrefix));
    // Campaigns (docs/COMMUNICATIONS.md "Campaigns"): a subscriber queues one job per page of contacts, a worker sends them.
    const { CampaignEnqueuer, createCampaignQueue, startCampaignWorker } = await import('../workers/campaigns.js');
    const campaignQueue = createCampaignQueue(rt.redisUrl, rt.queuePrefix);
    campaignQueue.on('error', (err) => rt.logger.debug({ err: err.message }, 'campaign queue connection error'));
    background.push(new CampaignEnqueuer({ db: rt.db, store: rt.store, queue: campaignQueue, logger: rt.logger, clock: rt.clock, metrics: rt.metrics }).run(abort.signal)
      .finally(() => campaignQueue.close().catch(() => {})));
    extraWorkers.push(startCampaignWorker({
      store: rt.store, db: rt.db, clock: rt.clock, logger: rt.logger, baseUrl: rt.config.authPublicUrl, tokenSecret: rt.config.tokenSecret,
      pageSize: rt.config.campaignPageSize, send: { store: rt.store, directory: rt.directory, quota: rt.quota, config: rt.config },
    }, rt.redisUrl, rt.queuePrefix, rt.config.deliveryJobLockSeconds));
    const depth = setInterval(async () => {
      try {
        const c = await rt.queue.getJobCounts('waiting', 'delayed', 'active');
        for (const [state, n] of Object.entries(c)) rt.metrics.queueDepth.set({ state }, n);
      } catch { /* redis down: keep the last reading */ }
    }, 5000);
    depth.unref();
    abort.signal.addEventListener('abort', () => clearInterval(depth));
  }
  let apiProcesses: RoleProcesses | null = null;
  if (roles.includes('api') && rt.config.apiProcesses > 1) {
    // The children listen; this process only supervises them.
    apiProcesses = await startRoleProcesses(
      { role: 'api', config: rt.config, databaseUrl: rt.databaseUrl, redisUrl: rt.redisUrl, queuePrefix: rt.queuePrefix, host: opts.host ?? '0.0.0.0', port: opts.port ?? rt.config.port },
      rt.config.apiProcesses, rt,
    );
    port = apiProcesses.port;
  } else if (roles.includes('api')) {
    const [{ createApp }, { answerClientError }] = await Promise.all([import('../read-api/app.js'), import('../read-api/http/errors.js')]);
    const app = createApp(rt.http);
    server = createServer({
      // Node would answer a bare 400 with no body; the app answers it in Motor's envelope (read-api/http/requestChecks.ts).
      requireHostHeader: false,
      headersTimeout: rt.config.http.headersTimeoutSeconds * 1000,
      requestTimeout: rt.config.http.requestTimeoutSeconds * 1000,
      // How often Node looks for connections past those timeouts (its default, 30 s, would let a 20 s one run to 50 s).
      connectionsCheckingInterval: 1000,
    }, app);
    server.keepAliveTimeout = 65_000;
    server.on('clientError', answerClientError);
    await new Promise<void>((resolve, reject) => {
      server!.once('error', reject);
      server!.listen(opts.port ?? rt.config.port, opts.host ?? '0.0.0.0', () => resolve());
    });
    port = (server.address() as AddressInfo).port;
    rt.logger.info({ port }, 'HTTP API listening');
  }
  let smtp: SmtpListeners | null = null;
  if (roles.includes('smtp')) {
    const [{ startSmtpListeners }, { loadTlsMaterial }] = await Promise.all([import('../smtp/listener.js'), import('../smtp/tls.js')]);
    const c = rt.config;
    const tls = await loadTlsMaterial({ certPath: c.smtp.tlsCertPath, keyPath: c.smtp.tlsKeyPath, clientCaPath: c.smtp.clientCaPath, dataDir: c.dataDir, hostname: c.hostname });
    // Said once, by the process that starts the listeners (not again by each SMTP_PROCESSES child).
    if (tls.selfSigned && !cluster.isWorker) rt.logger.warn('SMTP listeners use a generated self-signed certificate (set SMTP_TLS_CERT and SMTP_TLS_KEY in production)');
    const host = opts.host ?? '0.0.0.0';
    const port = opts.smtpPort ?? c.smtp.port;
    const securePort = opts.smtpsPort ?? c.smtp.securePort;
    smtp = c.smtp.processes > 1
      // The certificate above is loaded (a self-signed one generated) before the children start, so they only read it.
      ? await startRoleProcesses(
        { role: 'smtp', config: c, databaseUrl: rt.databaseUrl, redisUrl: rt.redisUrl, queuePrefix: rt.queuePrefix, host, port, securePort, smtp: opts.smtp },
        c.smtp.processes, rt,
      ).then((p) => ({ port: p.port, securePort: p.securePort!, processes: p.processes, known: null, sessionsHeld: () => null, close: p.close }))
      : await startSmtpListeners(
        {
          send: { store: rt.store, directory: rt.directory, quota: rt.quota, config: c }, directory: rt.directory, redis: rt.redis, logger: rt.logger,
          clock: rt.clock, oauth: c, authLimiter: rt.smtpAuthLimiter, refusals: rt.smtpRefusals, logLines: rt.smtpLogLines, metrics: rt.metrics, eventstoreUrl: c.eventstoreUrl,
          dataBudget: rt.smtpDataBudget,
        },
        {
          hostname: c.hostname, host, port, securePort, tls, maxMessageBytes: c.smtp.maxMessageBytes, maxRecipients: c.smtp.maxRecipients,
          softErrorLimit: c.smtp.softErrorLimit, hardErrorLimit: c.smtp.hardErrorLimit, errorSleepMs: c.smtp.errorSleepMs, junkCommandLimit: c.smtp.junkCommandLimit,
          recipientOvershootLimit: c.smtp.recipientOvershootLimit, maxConnectionsPerAddress: c.smtp.maxConnectionsPerAddress,
          idleTimeoutMs: c.smtp.idleTimeoutSeconds * 1000, sessionTimeoutMs: c.smtp.sessionTimeoutSeconds * 1000, dataTransferTimeoutMs: c.smtp.dataTimeoutSeconds * 1000, ...opts.smtp,
        },
      );
  }

  let inbound: InboundListener | null = null;
  const bounceDomain = rt.config.inbound.bounceDomain;
  const inboundPort = opts.inboundPort ?? (rt.config.inbound.port === 0 ? null : rt.config.inbound.port);
  if (roles.includes('inbound') && bounceDomain && inboundPort !== null) {
    const [{ startInboundListener }, { loadTlsMaterial }] = await Promise.all([import('../smtp/inbound/listener.js'), import('../smtp/tls.js')]);
    const c = rt.config;
    const tls = await loadTlsMaterial({ certPath: c.smtp.tlsCertPath, keyPath: c.smtp.tlsKeyPath, dataDir: c.dataDir, hostname: c.hostname });
    inbound = await startInboundListener(
      { store: rt.store, logger: rt.logger, metrics: rt.metrics, clock: rt.clock, logLines: rt.smtpLogLines, dataBudget: rt.smtpDataBudget },
      {
        hostname: c.hostname, host: opts.host ?? '0.0.0.0', port: inboundPort, returnPath: returnPathSettings(bounceDomain, c.tokenSecret),
        tls, maxMessageBytes: c.inbound.maxMessageBytes,
        idleTimeoutMs: c.smtp.idleTimeoutSeconds * 1000, sessionTimeoutMs: c.smtp.sessionTimeoutSeconds * 1000, dataTransferTimeoutMs: c.smtp.dataTimeoutSeconds * 1000,
      },
    );
  }

  return {
    server, port, workers, smtp, inbound,
    async stop() {
      const smtpClosed = smtp ? smtp.close() : Promise.resolve();
      const inboundClosed = inbound ? inbound.close() : Promise.resolve();
      const apiClosed = apiProcesses ? apiProcesses.close() : Promise.resolve();
      // Open event streams end now: they would hold the server's close for its 5 s grace.
      rt.http.streams.closeAll();
      if (server) {
        const s = server;
        await new Promise<void>((resolve) => { s.close(() => resolve()); s.closeIdleConnections(); setTimeout(() => { s.closeAllConnections(); }, 5000).unref(); });
      }
      abort.abort();
      // Workers finish the jobs they hold before closing.
      await Promise.all([...workers, ...extraWorkers].map((w) => w.close()));
      await Promise.allSettled(background);
      await smtpClosed;
      await inboundClosed;
      await apiClosed;
    },
  };
}

export function parseRoles(argv: string[]): Role[] {
  const i = argv.indexOf('--role');
  if (i === -1) return ALL_ROLES;
  const raw = argv[i + 1] ?? '';
  const roles = raw.split(',').map((r) => r.trim()).filter(Boolean);
  const bad = roles.filter((r) => !(ALL_ROLES as string[]).includes(r));
  if (roles.length === 0 || bad.length > 0) throw new Error(`--role takes a comma-separated list of ${ALL_ROLES.join('|')} (got "${raw}")`);
  return roles as Role[];
}

export { catchUpUntil, openStorage } from './storage';
