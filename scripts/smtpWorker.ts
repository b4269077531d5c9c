/**
 * One SMTP listener process of SMTP_PROCESSES > 1 (scripts/smtpProcesses.ts starts it with
 * node:cluster): a `--role smtp` runtime on the stores the primary resolved, listening on the
 * shared ports. It drains and exits when the primary says stop, on SIGTERM/SIGINT, or when the
 * primary is gone.
 */
import cluster from 'node:cluster';
import { createLogger } from '../infra/logger';
import { createRuntime, startRoles } from './runtime';
import { SMTP_WORKER_ENV, type SmtpWorkerMessage, type SmtpWorkerSpec } from './smtpProcesses';

const send = (m: SmtpWorkerMessage) => { if (process.connected) process.send!(m); };

let stopRequested: string | null = null;
let stop: ((why: string) => void) | null = null;
const requestStop = (why: string) => {
  if (stopRequested) return;
  stopRequested = why;
  stop?.(why);
};
let learn: ((address: string) => void) | null = null;
// Installed before anything else: a stop asked for while the runtime is still starting is acted on
// as soon as it has started.
process.on('message', (m: SmtpWorkerMessage) => {
  if (m.type === 'known') learn?.(m.address);
  else if (m.type === 'stop') requestStop('asked by the primary');
});
process.on('disconnect', () => requestStop('the primary is gone'));
process.on('SIGTERM', () => requestStop('SIGTERM'));
process.on('SIGINT', () => requestStop('SIGINT'));

async function main(): Promise<void> {
  const spec = JSON.parse(process.env[SMTP_WORKER_ENV] ?? 'null') as SmtpWorkerSpec | null;
  if (!cluster.isWorker || !spec) throw new Error('scripts/smtpWorker.ts is started by SMTP_PROCESSES (scripts/smtpProcesses.ts), not by hand');
  // This process is one of the SMTP_PROCESSES: it listens itself.
  const config = { ...spec.config, smtp: { ...spec.config.smtp, processes: 1 } };
  const logger = createLogger(config.logLevel, { roles: 'smtp', smtpProcess: cluster.worker!.id });
  const rt = await createRuntime(config, { databaseUrl: spec.databaseUrl, redisUrl: spec.redisUrl, logger });
  const started = await startRoles(rt, ['smtp'], { host: spec.host, smtpPort: spec.port, smtpsPort: spec.securePort, smtp: spec.smtp });
  const known = started.smtp!.known!;
  known.onRemember((address) => send({ type: 'known', address }));
  learn = (address) => known.learn(address);

  stop = (why: string) => {
    logger.info({ why }, 'SMTP listener process draining');
    void started.stop().then(() => rt.close()).then(() => process.exit(0));
  };
  if (stopRequested) return stop(stopRequested);
  send({ type: 'listening', port: started.smtp!.port, securePort: started.smtp!.securePort });
}

main().catch((err: Error) => {
  send({ type: 'failed', error: err.message });
  console.error(err.stack ?? err.message);
  process.exit(1);
});
