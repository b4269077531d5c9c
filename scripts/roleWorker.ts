/**
 * One child process of API_PROCESSES / SMTP_PROCESSES > 1 (scripts/roleProcesses.ts starts it
 * with node:cluster): a `--role api` or `--role smtp` runtime on the stores the primary resolved,
 * listening on the shared port(s). It drains and exits when the primary says stop, on
 * SIGTERM/SIGINT, or when the primary is gone.
 */
import cluster from 'node:cluster';
import { createLogger } from '../infra/logger';
import type { AddressCounter } from '../smtp/server';
import { createRuntime, roleApplicationName, startRoles } from './runtime';
import { ROLE_WORKER_ENV, type RoleWorkerMessage, type RoleWorkerSpec } from './roleProcesses';

// With a callback, a primary that died between the check and the write is not an 'error' event.
const send = (m: RoleWorkerMessage) => { if (process.connected) process.send!(m, undefined, {}, () => undefined); };

let stopRequested: string | null = null;
let stop: ((why: string) => void) | null = null;
const requestStop = (why: string) => {
  if (stopRequested) return;
  stopRequested = why;
  stop?.(why);
};
const handlers: Partial<{ [K in RoleWorkerMessage['type']]: (m: Extract<RoleWorkerMessage, { type: K }>) => void }> = {};
// Installed before anything else: a stop asked for while the runtime is still starting is acted on
// as soon as it has started.
process.on('message', (m: RoleWorkerMessage) => {
  if (m.type === 'stop') return requestStop('asked by the primary');
  (handlers[m.type] as ((m: RoleWorkerMessage) => void) | undefined)?.(m);
});
process.on('disconnect', () => requestStop('the primary is gone'));
process.on('SIGTERM', () => requestStop('SIGTERM'));
process.on('SIGINT', () => requestStop('SIGINT'));

/** The primary's answers to a child's requests (/metrics, an SMTP connection's count), each carrying the request's id. */
type Answer = Extract<RoleWorkerMessage, { type: 'metrics-answer' | 'slot-count' }>;
let asks = 0;
const asked = new Map<number, (answer: Answer | null) => void>();
const answered = (m: Answer) => {
  asked.get(m.id)?.(m);
  asked.delete(m.id);
};
handlers['metrics-answer'] = answered;
handlers['slot-count'] = answered;

/** Sends the primary what `ask` makes of a fresh id; its answer with that id, or null when none came within `timeoutMs`. */
function askPrimary(ask: (id: number) => RoleWorkerMessage, timeoutMs: number): Promise<Answer | null> {
  const id = ++asks;
  return new Promise((resolve) => {
    asked.set(id, resolve);
    send(ask(id));
    setTimeout(() => { if (asked.delete(id)) resolve(null); }, timeoutMs).unref();
  });
}

/** How long a connection waits for the primary's count of its address before it is let in uncounted. */
const SLOT_ANSWER_MS = 2000;

/**
 * The SMTP connections per client address of every child, counted by the primary: one message at
 * each connection and one at its close (in that order on the one channel). A primary that does not
 * answer lets the connection in (it is then on its way out, and this child with it).
 */
function primaryAddressCounter(): AddressCounter {
  return {
    take: async (session, address) => {
      const answer = await askPrimary((id) => ({ type: 'slot-take', id, session, address }), SLOT_ANSWER_MS);
      return answer?.type === 'slot-count' ? answer.open : 0;
    },
    release: (session) => send({ type: 'slot-release', session }),
  };
}

async function main(): Promise<void> {
  const spec = JSON.parse(process.env[ROLE_WORKER_ENV] ?? 'null') as RoleWorkerSpec | null;
  if (!cluster.isWorker || !spec) throw new Error('scripts/roleWorker.ts is started by API_PROCESSES / SMTP_PROCESSES (scripts/roleProcesses.ts), not by hand');
  // This process is one of the children: it serves the role itself.
  const config = { ...spec.config, apiProcesses: 1, smtp: { ...spec.config.smtp, processes: 1 } };
  const logger = createLogger(config.logLevel, { roles: spec.role, child: cluster.worker!.id });
  const rt = await createRuntime(config, { databaseUrl: spec.databaseUrl, redisUrl: spec.redisUrl, queuePrefix: spec.queuePrefix, logger, applicationName: roleApplicationName([spec.role]) });

  // /metrics answers for the whole cluster: the primary adds up every child's registry.
  handlers['metrics-collect'] = (m) => {
    void rt.metrics.registry.getMetricsAsJSON().then((metrics) => send({ type: 'metrics-part', id: m.id, metrics }));
  };
  rt.metrics.exposition = async () => {
    const answer = await askPrimary((id) => ({ type: 'metrics-request', id }), 5000);
    if (answer === null) throw new Error('the primary did not answer with the metrics');
    if (answer.type !== 'metrics-answer' || answer.text === undefined) throw new Error((answer.type === 'metrics-answer' && answer.error) || 'no metrics');
    return answer.text;
  };

  const started = spec.role === 'api'
    ? await startRoles(rt, ['api'], { host: spec.host, port: spec.port })
    : await startRoles(rt, ['smtp'], { host: spec.host, smtpPort: spec.port, smtpsPort: spec.securePort, smtp: { ...spec.smtp, addressCounter: primaryAddressCounter() } });
  if (started.smtp) {
    const known = started.smtp.known!;
    known.onRemember((address) => send({ type: 'known', address }));
    handlers.known = (m) => known.learn(m.address);
  }

  stop = (why: string) => {
    logger.info({ why }, `${spec.role} process draining`);
    void started.stop().then(() => rt.close()).then(() => process.exit(0));
  };
  if (stopRequested) return stop(stopRequested);
  send(started.smtp ? { type: 'listening', port: started.smtp.port, securePort: started.smtp.securePort } : { type: 'listening', port: started.port! });
}

main().catch((err: Error) => {
  // The primary fails Motor's start with this reason and logs it.
  send({ type: 'failed', error: err.message });
  process.exit(1);
});
