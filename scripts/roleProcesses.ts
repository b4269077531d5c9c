/**
 * API_PROCESSES / SMTP_PROCESSES > 1: the HTTP API or the SMTP listeners run in that many child
 * processes (node:cluster) sharing the role's ports, so requests and SMTP sessions use every core.
 * This module is the primary's side; scripts/roleWorker.ts is each child.
 *
 * - The primary hands out connections (node:cluster's round-robin on Linux). Each child builds its
 *   own runtime (store pool, Redis, caches) through scripts/runtime.ts from the primary's validated
 *   configuration, as a `--role api` or `--role smtp` process would, and acknowledges a send only
 *   after its MessageAccepted is committed, as in one process.
 * - Quotas, request limits, idempotency and AUTH failure counters live in Redis or the store, so
 *   they are shared. Relayed through the primary: SMTP's recently authenticated addresses (a login
 *   in one child spares the address the pregreet wait in the others), and /metrics (the child
 *   answering asks the primary, which adds up every child's registry and its own). Kept by the
 *   primary: SMTP's connections per client address (each child asks at every connection), so the
 *   per-address cap holds across the children; a child's connections are forgotten when it exits.
 * - A child that dies is replaced after a second; stop() asks each child to drain and waits for it.
 *   A child whose primary disappears drains and exits by itself.
 */
import cluster, { type Worker } from 'node:cluster';
import { join } from 'node:path';
import { AggregatorRegistry, type MetricObjectWithValues, type MetricValue } from 'prom-client';
import type { Config } from '../infra/config';
import type { Logger } from '../infra/logger';
import type { Metrics } from '../infra/metrics';
import { AddressSlots } from '../smtp/server';

export type ProcessRole = 'api' | 'smtp';
type RegistryJson = MetricObjectWithValues<MetricValue<string>>[];

/** What a child runs on: its role, the primary's validated configuration (plain data), the resolved stores, its listen options. */
export interface RoleWorkerSpec {
  role: ProcessRole;
  config: Config;
  databaseUrl: string;
  redisUrl: string;
  queuePrefix: string;
  host: string;
  port: number;
  /** SMTP only: the implicit TLS port. */
  securePort?: number;
  /** SMTP only: StartOptions.smtp of the primary (tests shorten timeouts); JSON only. */
  smtp?: Record<string, unknown>;
}

export const ROLE_WORKER_ENV = 'MOTOR_ROLE_WORKER';

/** Messages between the primary and a child. */
export type RoleWorkerMessage =
  | { type: 'listening'; port: number; securePort?: number }
  | { type: 'failed'; error: string }
  | { type: 'known'; address: string }
  | { type: 'stop' }
  /** child → primary: a /metrics request arrived; primary → child: the added-up exposition. */
  | { type: 'metrics-request'; id: number }
  | { type: 'metrics-answer'; id: number; text?: string; error?: string }
  /** primary → every child: send your registry; child → primary: here it is. */
  | { type: 'metrics-collect'; id: number }
  | { type: 'metrics-part'; id: number; metrics: RegistryJson }
  /** child → primary: session `session` connected from `address`; primary → child: the address's connections now, in every child. */
  | { type: 'slot-take'; id: number; session: string; address: string }
  | { type: 'slot-count'; id: number; open: number }
  /** child → primary: that session closed. */
  | { type: 'slot-release'; session: string };

export interface RoleProcesses {
  port: number;
  securePort: number | null;
  processes: number;
  close(): Promise<void>;
}

const RESTART_DELAY_MS = 1000;
const STOP_TIMEOUT_MS = 30_000;
const METRICS_TIMEOUT_MS = 2000;

let collectIds = 0;

/** What sendToChild needs of a child: a node:cluster Worker, or anything with its IPC methods. */
export interface ChildChannel {
  isConnected(): boolean;
  send(message: RoleWorkerMessage, callback: (err: Error | null) => void): boolean;
}

/**
 * A message to a child that may be dying. isConnected() still says yes for a moment after the
 * child was killed, and a send that then fails without a callback becomes an 'error' event on the
 * child which, unhandled, takes the primary (and the projectors and workers it runs) down with it.
 * With the callback the failure is only logged; the exit handler replaces the child.
 */
export function sendToChild(child: ChildChannel, message: RoleWorkerMessage, log: Pick<Logger, 'debug'>): void {
  if (!child.isConnected()) return;
  child.send(message, (err) => {
    if (err) log.debug({ type: message.type, err: err.message }, 'message to a child not delivered');
  });
}

export async function startRoleProcesses(spec: RoleWorkerSpec, count: number, deps: { logger: Logger; metrics: Metrics }): Promise<RoleProcesses> {
  const log = deps.logger.child({ component: `${spec.role}-processes` });
  // The children run this repository's TypeScript through the same loader as the primary (tsx's
  // flags are in process.execArgv, which fork() passes on by default).
  cluster.setupPrimary({ exec: join(__dirname, 'roleWorker.ts') });
  const children = new Set<Worker>();
  const pendingParts = new Map<number, { parts: RegistryJson[]; waiting: number; done: () => void }>();
  let stopping = false;
  // SMTP connections per client address in every child, by `<child id>/<session id>`.
  const slots = new AddressSlots();
  const held = new Map<Worker, Set<string>>();

  const sendTo = (child: Worker, message: RoleWorkerMessage): void => sendToChild(child, message, log);

  /** Every child's registry and this process's own, added up (counters and histograms summed). */
  const clusterMetrics = async (): Promise<string> => {
    const id = ++collectIds;
    const live = [...children].filter((c) => c.isConnected());
    const parts: RegistryJson[] = [await deps.metrics.registry.getMetricsAsJSON()];
    await new Promise<void>((resolve) => {
      // Done when every live child has answered, or after METRICS_TIMEOUT_MS with what came.
      const done = () => { clearTimeout(timer); pendingParts.delete(id); resolve(); };
      const timer = setTimeout(done, METRICS_TIMEOUT_MS);
      pendingParts.set(id, { parts, waiting: live.length, done });
      if (live.length === 0) return done();
      for (const c of live) sendTo(c, { type: 'metrics-collect', id });
    });
    return AggregatorRegistry.aggregate(parts).metrics();
  };

  const fork = (): Promise<{ port: number; securePort?: number }> => new Promise((resolve, reject) => {
    const child = cluster.fork({ [ROLE_WORKER_ENV]: JSON.stringify(spec) });
    children.add(child);
    // Backstop for anything else the channel reports (the exit handler below does the rest).
    child.on('error', (err: Error) => log.debug({ pid: child.process.pid, err: err.message }, 'child process channel error'));
    let listening = false;
    child.on('message', (m: RoleWorkerMessage) => {
      if (m.type === 'listening') {
        listening = true;
        log.info({ pid: child.process.pid, port: m.port, securePort: m.securePort }, `${spec.role} process ready`);
        resolve({ port: m.port, securePort: m.securePort });
      } else if (m.type === 'failed') {
        reject(new Error(`${spec.role} process ${child.process.pid} could not start: ${m.error}`));
      } else if (m.type === 'known') {
        for (const other of children) if (other !== child) sendTo(other, m);
      } else if (m.type === 'metrics-request') {
        clusterMetrics().then(
          (text) => sendTo(child, { type: 'metrics-answer', id: m.id, text }),
          (err: Error) => sendTo(child, { type: 'metrics-answer', id: m.id, error: err.message }),
        );
      } else if (m.type === 'slot-take') {
        const key = `${child.id}/${m.session}`;
        const keys = held.get(child) ?? new Set<string>();
        held.set(child, keys.add(key));
        sendTo(child, { type: 'slot-count', id: m.id, open: slots.take(key, m.address) });
      } else if (m.type === 'slot-release') {
        const key = `${child.id}/${m.session}`;
        slots.release(key);
        held.get(child)?.delete(key);
      } else if (m.type === 'metrics-part') {
        const entry = pendingParts.get(m.id);
        if (!entry) return;
        entry.parts.push(m.metrics);
        if (--entry.waiting === 0) entry.done();
      }
    });
    child.on('exit', (code, signal) => {
      children.delete(child);
      // Its sessions ended with it: their connections no longer count against their addresses.
      for (const key of held.get(child) ?? []) slots.release(key);
      held.delete(child);
      if (!listening) return reject(new Error(`${spec.role} process ${child.process.pid} exited before listening (${signal ?? code})`));
      if (stopping) return;
      log.error({ pid: child.process.pid, code, signal }, `${spec.role} process died; starting another`);
      setTimeout(() => {
        if (!stopping) fork().catch((err: Error) => log.error({ err: err.message }, `${spec.role} process could not be restarted`));
      }, RESTART_DELAY_MS).unref();
    });
  });

  const stop = async () => {
    stopping = true;
    await Promise.all([...children].map((child) => new Promise<void>((resolve) => {
      if (child.isDead()) return resolve();
      const force = setTimeout(() => child.process.kill('SIGKILL'), STOP_TIMEOUT_MS);
      child.once('exit', () => { clearTimeout(force); resolve(); });
      if (child.isConnected()) sendTo(child, { type: 'stop' });
      else child.process.kill('SIGTERM');
    })));
  };

  let ports: { port: number; securePort?: number };
  try {
    // Every child asks for the same ports; the primary binds each once and shares it (port 0 too:
    // the children all get the same free port).
    const all = await Promise.all(Array.from({ length: count }, () => fork()));
    ports = all[0];
    if (all.some((p) => p.port !== ports.port || p.securePort !== ports.securePort)) throw new Error(`${spec.role} processes did not share the ports`);
  } catch (err) {
    await stop();
    throw err;
  }
  log.info({ processes: count, ...ports }, `${spec.role} listening in several processes`);
  return { port: ports.port, securePort: ports.securePort ?? null, processes: count, close: stop };
}
