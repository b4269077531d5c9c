/**
 * `tsx scripts/projector.ts <projection> [--batch-size=N]`: runs one projection's runner until
 * SIGTERM/SIGINT. A minimal process (the kill test SIGKILLs it mid-stream); the main process runs
 * the same runners under `--role projector`.
 */
import { ConfigError, loadConfig } from '../infra/config.js';
import { createDb, processApplicationName } from '../infra/db.js';
import { createEventStore } from '../infra/eventstore/index.js';
import { createLogger } from '../infra/logger.js';
import { allProjections } from '../projections/index.js';
import { ProjectionRunner } from '../projections/runner.js';

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  const name = args.find((a) => !a.startsWith('--'));
  const batchArg = args.find((a) => a.startsWith('--batch-size='));
  const batchSize = batchArg ? Number(batchArg.slice('--batch-size='.length)) : 500;
  const projection = allProjections().find((p) => p.name === name);
  if (!projection || !Number.isInteger(batchSize) || batchSize < 1) {
    process.stderr.write(`usage: tsx scripts/projector.ts <projection> [--batch-size=N]\nknown projections: ${allProjections().map((p) => p.name).join(', ')}\n`);
    process.exit(2);
  }
  let config;
  try {
    config = loadConfig();
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`${err.message}\n`);
      process.exit(2);
    }
    throw err;
  }
  if (!config.databaseUrl) {
    process.stderr.write('DATABASE_URL is not set: the projector needs the PostgreSQL database that holds the read models.\n');
    process.exit(2);
  }

  const logger = createLogger(config.logLevel, { role: 'projector', projection: projection.name });
  const db = createDb(config.databaseUrl, { applicationName: processApplicationName(`motor-projector-${projection.name}`), pool: { min: 0, max: 4 }, queryTimeoutMs: config.databaseQueryTimeoutMs, logger });
  const store = await createEventStore({ databaseUrl: config.databaseUrl, eventstoreUrl: config.eventstoreUrl, queryTimeoutMs: config.databaseQueryTimeoutMs });
  const runner = new ProjectionRunner(db, store, projection, { batchSize, logger });
  const abort = new AbortController();
  for (const sig of ['SIGTERM', 'SIGINT'] as const) process.once(sig, () => abort.abort());
  await runner.init();
  logger.info({ checkpoint: await runner.checkpoint(), batchSize }, 'projector started');
  // As in the projector role: beside another projector of this projection, one of them applies it.
  await runner.runAlone(abort.signal);
  logger.info(runner.stats(), 'projector stopped');
  await store.close().catch(() => undefined);
  await db.destroy().catch(() => undefined);
}

main().catch((err) => {
  process.stderr.write(`projector failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
