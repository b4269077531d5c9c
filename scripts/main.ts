/**
 * `npm start`: runs Motor. All roles in one process by default (HTTP API, SMTP submission,
 * projectors, delivery workers); `--role api|smtp|projector|worker|inbound` (comma-separated; inbound only with BOUNCE_DOMAIN) runs only some, so roles can be split
 * across processes and scaled (two worker processes share the queue without double delivery).
 */
import { ConfigError, loadConfig } from '../infra/config';
import { resolveRedis, startEmbeddedPostgres } from '../infra/embedded';
import { createLogger } from '../infra/logger';
import { createRuntime, parseRoles, roleApplicationName, startRoles } from './runtime';

async function main(): Promise<void> {
  let config;
  try {
    config = loadConfig(process.env);
  } catch (e) {
    if (e instanceof ConfigError) {
      console.error(e.message);
      process.exit(2);
    }
    throw e;
  }
  const roles = parseRoles(process.argv.slice(2));
  if (process.argv.includes('--role') && roles.includes('inbound') && !config.inbound.bounceDomain) {
    console.error('--role inbound needs BOUNCE_DOMAIN (docs/DELIVERY.md "Asynchronous bounces and complaints")');
    process.exit(2);
  }
  const logger = createLogger(config.logLevel, { roles: roles.join(',') });

  const stops: (() => Promise<void>)[] = [];
  let databaseUrl = config.databaseUrl;
  if (!databaseUrl) {
    const pg = await startEmbeddedPostgres(config.dataDir, logger);
    databaseUrl = pg.url;
    stops.push(pg.stop);
  }
  const redis = await resolveRedis(config.redisUrl, config.dataDir, logger);
  stops.push(redis.stop);

  const rt = await createRuntime(config, { databaseUrl, redisUrl: redis.url, logger, applicationName: roleApplicationName(roles) });
  const started = await startRoles(rt, roles);
  logger.info({ port: started.port }, 'Motor started');

  let stopping = false;
  const shutdown = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, 'shutting down: draining in-flight work');
    const force = setTimeout(() => { logger.error('shutdown took over 30 s; exiting'); process.exit(1); }, 30_000);
    await started.stop();
    await rt.close();
    for (const stop of stops.reverse()) await stop().catch(() => {});
    clearTimeout(force);
    // The line an operator (or a supervisor's log) looks for: the drain finished, nothing was cut off.
    logger.info({ signal }, 'Motor stopped');
    logger.flush();
    process.exit(0);
  };
  process.on('SIGTERM', () => void shutdown('SIGTERM'));
  process.on('SIGINT', () => void shutdown('SIGINT'));
}

main().catch((err) => {
  console.error(err instanceof Error ? err.stack ?? err.message : err);
  process.exit(1);
});
