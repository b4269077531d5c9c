/**
 * A Motor process for the benchmarks: the roles given in MOTOR_CHILD (JSON: databaseUrl, redisUrl,
 * queuePrefix, roles, env), assembled through scripts/runtime.ts like `npm start`, HTTP on
 * 127.0.0.1 and an ephemeral port. Sends {type:'ready', port} and stops on {type:'stop'}.
 */
import { loadConfig } from '../../infra/config';
import { createLogger } from '../../infra/logger';
import { createRuntime, startRoles, type Role } from '../../scripts/runtime';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { Session } from 'node:inspector/promises';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import { childMain, percentile } from './common';
import { stageSampler } from './stageSampler';

/** BENCH_DIAG=1: counts the SQL statements this process sends, by their first words (printed at stop). */
function countQueries(): () => string {
  const counts = new Map<string, number>();
  const proto = pg.Client.prototype as unknown as { query: (...a: unknown[]) => unknown };
  const orig = proto.query;
  proto.query = function (this: unknown, ...args: unknown[]) {
    const q = args[0] as string | { text?: string; name?: string };
    const text = typeof q === 'string' ? q : q?.name ?? q?.text ?? '?';
    const key = text.replace(/\s+/g, ' ').trim().slice(0, 70);
    counts.set(key, (counts.get(key) ?? 0) + 1);
    return orig.apply(this, args);
  };
  return () => {
    const total = [...counts.values()].reduce((a, b) => a + b, 0);
    const top = [...counts].sort((a, b) => b[1] - a[1]).slice(0, 25).map(([k, n]) => `  ${String(n).padStart(7)}  ${k}`);
    return `SQL statements sent: ${total}\n${top.join('\n')}`;
  };
}

/**
 * BENCH_DIAG=1: times every event store call and the event loop delay of this process, printed
 * (stderr) when it stops. Wraps the store object's methods, so every role sees the timed ones.
 */
function instrument(store: Record<string, unknown>): () => string {
  const timings = new Map<string, number[]>();
  for (const name of ['append', 'readStream', 'readAll']) {
    const orig = store[name] as (...a: unknown[]) => Promise<unknown>;
    const list: number[] = [];
    timings.set(name, list);
    store[name] = function (this: unknown, ...args: unknown[]) {
      const t = performance.now();
      const p = orig.apply(this, args);
      p.then(() => list.push(performance.now() - t), () => list.push(performance.now() - t));
      return p;
    };
  }
  const loop = monitorEventLoopDelay({ resolution: 10 });
  loop.enable();
  return () => {
    const parts = [...timings].map(([n, l]) => {
      const s = [...l].sort((a, b) => a - b);
      return `${n} n=${s.length} p50=${percentile(s, 50).toFixed(1)} p99=${percentile(s, 99).toFixed(1)} max=${(s[s.length - 1] ?? NaN).toFixed(1)} ms`;
    });
    const cpu = process.cpuUsage();
    return `${parts.join('; ')}; event loop delay p50=${(loop.percentile(50) / 1e6).toFixed(1)} p99=${(loop.percentile(99) / 1e6).toFixed(1)} max=${(loop.max / 1e6).toFixed(1)} ms; cpu user ${(cpu.user / 1e6).toFixed(1)} s sys ${(cpu.system / 1e6).toFixed(1)} s`;
  };
}

/**
 * BENCH_ALLOC_PROF=<dir>: samples allocations from ready to stop, including the objects that
 * scavenges and mark-compacts collect (what the garbage collector's time goes to), into
 * <dir>/<roles>-<pid>.heapprofile (Chrome DevTools' Memory tab opens it).
 */
async function allocationSampler(dir: string, label: string): Promise<() => Promise<void>> {
  const session = new Session();
  session.connect();
  await session.post('HeapProfiler.startSampling', { samplingInterval: 32 * 1024, includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: true });
  return async () => {
    const { profile } = await session.post('HeapProfiler.stopSampling');
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, `${label}-${process.pid}.heapprofile`), JSON.stringify(profile));
    session.disconnect();
  };
}

childMain(async () => {
  const spec = JSON.parse(process.env.MOTOR_CHILD ?? '{}') as {
    databaseUrl: string; redisUrl: string; queuePrefix: string; roles: Role[]; env: Record<string, string>;
  };
  const config = loadConfig(spec.env);
  const rt = await createRuntime(config, {
    databaseUrl: spec.databaseUrl, redisUrl: spec.redisUrl, queuePrefix: spec.queuePrefix, logger: createLogger(config.logLevel, { roles: spec.roles.join(',') }),
  });
  // Experiment knobs (no effect unless set), set on the PostgreSQL store instance after construction:
  // group-commit transactions in flight at once (the product's default is 2) and most events in one
  // (default 1000).
  const inflight = Number(process.env.BENCH_STORE_INFLIGHT ?? 0);
  if (inflight > 0) (rt.store as unknown as { maxInFlightBatches: number }).maxInFlightBatches = inflight;
  const maxBatch = Number(process.env.BENCH_STORE_MAXBATCH ?? 0);
  if (maxBatch > 0) (rt.store as unknown as { maxBatchEvents: number }).maxBatchEvents = maxBatch;
  const diag = process.env.BENCH_DIAG === '1' ? instrument(rt.store as unknown as Record<string, unknown>) : null;
  const queries = process.env.BENCH_DIAG === '1' ? countQueries() : null;
  const stages = process.env.BENCH_STAGES === '1' ? stageSampler(rt.store, rt.redisBatch) : null;
  const started = await startRoles(rt, spec.roles, { port: 0, host: '127.0.0.1' });
  const allocDir = process.env.BENCH_ALLOC_PROF;
  const stopAlloc = allocDir ? await allocationSampler(allocDir, spec.roles.join('+')) : null;
  let stopping = false;
  const stop = async () => {
    if (stopping) return;
    stopping = true;
    await stopAlloc?.();
    await started.stop();
    await rt.close();
    if (diag) console.error(`[diag ${spec.roles.join(',')}] ${diag()}`);
    if (stages) console.error(`[stages] ${stages()}`);
    if (queries) console.error(`[diag ${spec.roles.join(',')}] ${queries()}`);
    if (diag) {
      const b = rt.redisBatch.stats;
      console.error(`[diag ${spec.roles.join(',')}] request-path Redis operations: ${b.operations} in ${b.calls} script calls (${(b.operations / Math.max(1, b.calls)).toFixed(2)} per call)`);
    }
    process.exit(0);
  };
  process.on('message', (m: { type?: string }) => { if (m.type === 'stop') void stop(); });
  process.on('SIGTERM', () => void stop());
  process.send!({ type: 'ready', port: started.port });
});
