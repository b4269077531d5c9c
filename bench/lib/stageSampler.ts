/**
 * BENCH_STAGES=1 (bench/lib/motorChild.ts): where the requests are while the event loop has nothing
 * to do. A 1 ms timer samples, only when it fires on time (the loop was free), how many HTTP
 * requests are open, how many appends are queued for a group commit or in one, how many group
 * commits are running, and how many Redis operations await their reply. Printed (stderr) at stop,
 * most frequent first. Samples with every count at 0 are the process idling between loads.
 *
 * How the group-commit finding of 2026-11-25 was made (docs/PERFORMANCE.md): most idle samples
 * had all 50 requests in the store's appends, the first two alone in the two batches and the rest
 * queued behind them.
 */
import http from 'node:http';

interface StoreInternals { queue: unknown[]; inFlightBatches: number; append: (...a: unknown[]) => Promise<unknown> }
interface RedisBatchInternals { run: (name: string, keys: unknown, args: unknown) => Promise<unknown> }

const bucket = (n: number): number => Math.round(n / 5) * 5;

export function stageSampler(store: unknown, redisBatch: unknown): () => string {
  const s = store as StoreInternals;
  const rb = redisBatch as RedisBatchInternals;

  let open = 0;
  const emit = http.Server.prototype.emit;
  http.Server.prototype.emit = function (this: http.Server, event: string, ...args: unknown[]) {
    if (event === 'request') {
      open++;
      (args[1] as http.ServerResponse).once('close', () => open--);
    }
    return (emit as (this: http.Server, event: string, ...a: unknown[]) => boolean).call(this, event, ...args);
  } as typeof emit;

  const counted = <A extends unknown[]>(fn: (...a: A) => Promise<unknown>, onChange: (d: number) => void) => (...a: A) => {
    onChange(1);
    const p = fn(...a);
    p.then(() => onChange(-1), () => onChange(-1));
    return p;
  };
  let redisAwaiting = 0;
  let appendsOpen = 0;
  rb.run = counted(rb.run.bind(rb), (d) => { redisAwaiting += d; });
  s.append = counted(s.append.bind(s), (d) => { appendsOpen += d; });

  const histogram = new Map<string, number>();
  let samples = 0;
  let last = performance.now();
  const timer = setInterval(() => {
    const now = performance.now();
    const late = now - last - 1;
    last = now;
    if (late > 0.3) return; // the loop was busy: not an idle moment
    const key = `open requests ${bucket(open)}, appends ${bucket(appendsOpen)} (queued ${bucket(s.queue.length)}, group commits running ${s.inFlightBatches}), Redis replies awaited ${bucket(redisAwaiting)}`;
    histogram.set(key, (histogram.get(key) ?? 0) + 1);
    samples++;
  }, 1);
  timer.unref();

  return () => {
    const rows = [...histogram].sort((a, b) => b[1] - a[1]).slice(0, 15).map(([k, n]) => `  ${String(n).padStart(6)}  ${k}`);
    return `idle samples (1 ms each, counts rounded to 5): ${samples}\n${rows.join('\n')}`;
  };
}
