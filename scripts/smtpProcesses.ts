/**
 * SMTP_PROCESSES > 1: the submission listeners run in that many child processes (node:cluster)
 * sharing the two ports, so SMTP sessions use every core, as Postfix's one smtpd per connection
 * does. This module is the primary's side; scripts/smtpWorker.ts is each child.
 *
 * - The primary hands out connections (node:cluster's round-robin on Linux); each child has its own
 *   runtime (store pool, Redis, caches) built by scripts/runtime.ts, as a `--role smtp` process
 *   would, and accepts only after its MessageAccepted is committed, as the in-process listener does.
 * - AUTH failure counters and the send quota live in Redis, so they are shared. The "recently
 *   authenticated" addresses that skip the pregreet wait are passed between children through the
 *   primary. The per-address connection cap (50) applies per child process.
 * - A child that dies is replaced after a second; stop() asks each child to drain (sessions in flight
 *   finish) and waits for it to exit. A child whose primary disappears drains and exits by itself.
 */
import cluster, { type Worker } from 'node:cluster';
import { join } from 'node:path';
import type { Config } from '../infra/config';
import type { Logger } from '../infra/logger';
import type { SmtpListeners } from '../smtp/listener';

/** What a child runs on: the primary's validated configuration (plain data), the resolved stores, its listen options. */
export interface SmtpWorkerSpec {
  config: Config;
  databaseUrl: string;
  redisUrl: string;
  host: string;
  port: number;
  securePort: number;
  /** StartOptions.smtp of the primary (tests shorten timeouts); JSON only. */
  smtp?: Record<string, unknown>;
}

export const SMTP_WORKER_ENV = 'MOTOR_SMTP_WORKER';

/** Messages between the primary and a child. */
export type SmtpWorkerMessage =
  | { type: 'listening'; port: number; securePort: number }
  | { type: 'failed'; error: string }
  | { type: 'known'; address: string }
  | { type: 'stop' };

const RESTART_DELAY_MS = 1000;
const STOP_TIMEOUT_MS = 30_000;

export async function startSmtpProcesses(count: number, spec: SmtpWorkerSpec, logger: Logger): Promise<SmtpListeners> {
  const log = logger.child({ component: 'smtp-processes' });
  // The children run this repository's TypeScript through the same loader as the primary (tsx's
  // flags are in process.execArgv, which fork() passes on by default).
  cluster.setupPrimary({ exec: join(__dirname, 'smtpWorker.ts') });
  const children = new Set<Worker>();
  let stopping = false;

  const fork = (): Promise<{ port: number; securePort: number }> => new Promise((resolve, reject) => {
    const child = cluster.fork({ [SMTP_WORKER_ENV]: JSON.stringify(spec) });
    children.add(child);
    let listening = false;
    child.on('message', (m: SmtpWorkerMessage) => {
      if (m.type === 'listening') {
        listening = true;
        log.info({ pid: child.process.pid, port: m.port, securePort: m.securePort }, 'SMTP listener process ready');
        resolve({ port: m.port, securePort: m.securePort });
      } else if (m.type === 'failed') {
        reject(new Error(`SMTP listener process ${child.process.pid} could not start: ${m.error}`));
      } else if (m.type === 'known') {
        for (const other of children) if (other !== child && other.isConnected()) other.send(m);
      }
    });
    child.on('exit', (code, signal) => {
      children.delete(child);
      if (!listening) return reject(new Error(`SMTP listener process ${child.process.pid} exited before listening (${signal ?? code})`));
      if (stopping) return;
      log.error({ pid: child.process.pid, code, signal }, 'SMTP listener process died; starting another');
      setTimeout(() => {
        if (!stopping) fork().catch((err: Error) => log.error({ err: err.message }, 'SMTP listener process could not be restarted'));
      }, RESTART_DELAY_MS).unref();
    });
  });

  const stop = async () => {
    stopping = true;
    await Promise.all([...children].map((child) => new Promise<void>((resolve) => {
      if (child.isDead()) return resolve();
      const force = setTimeout(() => child.process.kill('SIGKILL'), STOP_TIMEOUT_MS);
      child.once('exit', () => { clearTimeout(force); resolve(); });
      if (child.isConnected()) child.send({ type: 'stop' } satisfies SmtpWorkerMessage);
      else child.process.kill('SIGTERM');
    })));
  };

  let ports: { port: number; securePort: number };
  try {
    // Every child asks for the same ports; the primary binds each once and shares it (port 0 too:
    // the children all get the same free port).
    const all = await Promise.all(Array.from({ length: count }, () => fork()));
    ports = all[0];
    if (all.some((p) => p.port !== ports.port || p.securePort !== ports.securePort)) throw new Error('SMTP listener processes did not share the ports');
  } catch (err) {
    await stop();
    throw err;
  }
  log.info({ processes: count, ...ports }, 'SMTP submission listening in several processes');
  return { ...ports, processes: count, known: null, close: stop };
}
