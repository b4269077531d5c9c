/**
 * Shared helpers of the benchmarks: settings from env / `--name=value` args, percentiles, tables,
 * child processes (the system under test runs in its own process so the load generator does not
 * share its event loop), a hard deadline and ordered cleanup.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { cpus } from 'node:os';
import { isAbsolute, join } from 'node:path';

/** `--duration=5` on the command line wins over `SEND_DURATION=5` in the environment. */
export function setting(envName: string, argName: string, fallback: string): string {
  const arg = process.argv.slice(2).find((a) => a.startsWith(`--${argName}=`));
  if (arg) return arg.slice(argName.length + 3);
  const v = process.env[envName];
  return v === undefined || v.trim() === '' ? fallback : v.trim();
}

export function intSetting(envName: string, argName: string, fallback: number): number {
  const raw = setting(envName, argName, String(fallback));
  const n = Number(raw.replace(/_/g, ''));
  if (!Number.isFinite(n) || n < 0) throw new Error(`${envName} / --${argName} must be a non-negative number (got "${raw}")`);
  return Math.round(n);
}

export function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[i];
}

export const fmt = (n: number, digits = 0): string =>
  Number.isFinite(n) ? n.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits }) : 'n/a';

export function table(headers: string[], rows: Array<Array<string | number>>): string {
  const cells = [headers, ...rows.map((r) => r.map(String))];
  const widths = headers.map((_, i) => Math.max(...cells.map((r) => (r[i] ?? '').length)));
  const line = (r: string[]) => `| ${r.map((c, i) => (i === 0 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join(' | ')} |`;
  return [line(headers), `|${widths.map((w, i) => (i === 0 ? `${'-'.repeat(w + 1)}-` : `${'-'.repeat(w + 1)}:`)).join('|')}|`, ...rows.map((r) => line(r.map(String)))].join('\n');
}

export function machine(): string {
  const c = cpus();
  return `${c.length} cores (${c[0]?.model.trim() ?? 'unknown'}), Node ${process.version}, ${new Date().toISOString()}`;
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

// ------------------------------------------------------------------------------ cleanup

const cleanups: Array<{ name: string; fn: () => Promise<unknown> | unknown }> = [];
let cleaning: Promise<void> | null = null;

/** Registered cleanups run in reverse order on normal end, error, SIGINT/SIGTERM or the deadline. */
export function onCleanup(name: string, fn: () => Promise<unknown> | unknown): void {
  cleanups.push({ name, fn });
}

export function cleanup(): Promise<void> {
  if (!cleaning) {
    cleaning = (async () => {
      while (cleanups.length > 0) {
        const c = cleanups.pop()!;
        try {
          await Promise.race([c.fn(), sleep(20_000).then(() => { throw new Error('timeout'); })]);
        } catch (err) {
          console.error(`cleanup "${c.name}" failed: ${(err as Error).message}`);
        }
      }
    })();
  }
  return cleaning;
}

/**
 * Runs a benchmark's main with a hard deadline (it always stops by itself) and cleanup whatever
 * happens. Exit code 0 = ran (targets missed are reported, not failures), 1 = error.
 */
export function runBench(name: string, deadlineSeconds: number, main: () => Promise<void>): void {
  const deadline = setTimeout(() => {
    console.error(`${name}: hard deadline of ${deadlineSeconds} s reached, cleaning up`);
    void cleanup().finally(() => process.exit(3));
  }, deadlineSeconds * 1000);
  deadline.unref();
  for (const sig of ['SIGINT', 'SIGTERM'] as const) {
    process.once(sig, () => {
      console.error(`${name}: ${sig}, cleaning up`);
      void cleanup().finally(() => process.exit(130));
    });
  }
  main().then(
    async () => { await cleanup(); process.exit(typeof process.exitCode === 'number' ? process.exitCode : 0); },
    async (err) => { console.error(err instanceof Error ? err.stack : err); await cleanup(); process.exit(1); },
  );
}

// ------------------------------------------------------------------------------ children

export interface Child {
  proc: ChildProcess;
  /** The label it was spawned with (names its profiles and its share of CPU). */
  label: string;
  /** Next IPC message of this type (rejects if the child exits first). */
  next<T = Record<string, unknown>>(type: string, timeoutMs?: number): Promise<T>;
  send(msg: Record<string, unknown>): void;
  /** Asks the child to stop, waits for its exit (kills it after `graceMs`). */
  stop(graceMs?: number): Promise<void>;
}

/**
 * Forks a bench/lib child script (or the script at an absolute path) under tsx. BENCH_CPU_PROF=<dir> adds --cpu-prof: profiles land in
 * <dir>/<label>/ (one per thread; the largest is the main thread, the small one tsx's loader).
 */
export function spawnChild(script: string, label: string, env: Record<string, string> = {}, nodeFlags: string[] = []): Child {
  const execArgv = ['--import', 'tsx', ...nodeFlags];
  const profDir = process.env.BENCH_CPU_PROF;
  if (profDir) execArgv.push('--cpu-prof', `--cpu-prof-dir=${join(profDir, label)}`);
  // BENCH_NODE_FLAGS: extra Node/V8 flags for the children (e.g. "--max-semi-space-size=32").
  if (process.env.BENCH_NODE_FLAGS) execArgv.push(...process.env.BENCH_NODE_FLAGS.split(/\s+/).filter(Boolean));
  const proc = fork(isAbsolute(script) ? script : join(__dirname, script), [], { execArgv, env: { ...process.env, ...env }, stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const inbox: Array<Record<string, unknown>> = [];
  const waiters: Array<{ type: string; resolve: (m: Record<string, unknown>) => void; reject: (e: Error) => void }> = [];
  let exited = false;
  proc.on('message', (m: Record<string, unknown>) => {
    if (m.type === 'error') {
      for (const w of waiters.splice(0)) w.reject(new Error(`${label}: ${String(m.message)}`));
      return;
    }
    const i = waiters.findIndex((w) => w.type === m.type);
    if (i >= 0) waiters.splice(i, 1)[0].resolve(m);
    else inbox.push(m);
  });
  proc.on('exit', (code, signal) => {
    exited = true;
    for (const w of waiters.splice(0)) w.reject(new Error(`${label} exited (${code ?? signal}) before "${w.type}"`));
  });
  const child: Child = {
    proc,
    label,
    next<T>(type: string, timeoutMs = 60_000) {
      const i = inbox.findIndex((m) => m.type === type);
      if (i >= 0) return Promise.resolve(inbox.splice(i, 1)[0] as T);
      if (exited) return Promise.reject(new Error(`${label} already exited`));
      return new Promise<T>((resolve, reject) => {
        const t = setTimeout(() => reject(new Error(`${label}: no "${type}" within ${timeoutMs} ms`)), timeoutMs);
        waiters.push({ type, resolve: (m) => { clearTimeout(t); resolve(m as T); }, reject: (e) => { clearTimeout(t); reject(e); } });
      });
    },
    send(msg) { if (!exited && proc.connected) proc.send(msg); },
    async stop(graceMs = 30_000) {
      if (exited) return;
      const done = new Promise<void>((r) => proc.once('exit', () => r()));
      child.send({ type: 'stop' });
      const t = setTimeout(() => { if (!exited) proc.kill('SIGKILL'); }, graceMs);
      await done;
      clearTimeout(t);
    },
  };
  onCleanup(`child ${label}`, () => child.stop(10_000));
  return child;
}

/** Child side: report an error to the parent and exit. */
export function childMain(main: () => Promise<void>): void {
  main().catch((err) => {
    process.send?.({ type: 'error', message: err instanceof Error ? err.stack ?? err.message : String(err) });
    setTimeout(() => process.exit(1), 100);
  });
  // An orphaned child (parent killed) must not linger.
  process.on('disconnect', () => setTimeout(() => process.exit(0), 2000).unref());
}
