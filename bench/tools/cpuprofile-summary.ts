/**
 * `tsx bench/tools/cpuprofile-summary.ts <file.cpuprofile> [top]`: self time by function and by
 * package/folder, to read a BENCH_CPU_PROF profile without DevTools.
 */
import { readFileSync } from 'node:fs';

interface Node { id: number; callFrame: { functionName: string; url: string; lineNumber: number }; children?: number[] }
const [file, topArg] = process.argv.slice(2);
if (!file) { console.error('usage: cpuprofile-summary <file.cpuprofile> [top]'); process.exit(2); }
const top = Number(topArg ?? 25);
const prof = JSON.parse(readFileSync(file, 'utf8')) as { nodes: Node[]; samples: number[]; timeDeltas: number[]; startTime: number; endTime: number };
const byId = new Map(prof.nodes.map((n) => [n.id, n]));
const self = new Map<number, number>();
prof.samples.forEach((id, i) => self.set(id, (self.get(id) ?? 0) + (prof.timeDeltas[i] ?? 0)));
const total = [...self.values()].reduce((a, b) => a + b, 0);

const area = (url: string, fn: string): string => {
  if (!url) return fn.startsWith('(') ? fn : '(native/vm)';
  const m = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (m) return m[1];
  if (url.startsWith('node:')) return url;
  const w = /\/work\/[^/]+\/(.+?)(?:\/[^/]+)?$/.exec(url.replace(/^file:\/\//, ''));
  return w ? w[1] : url;
};
const byFn = new Map<string, number>();
const byArea = new Map<string, number>();
for (const [id, t] of self) {
  const n = byId.get(id)!;
  const { functionName, url, lineNumber } = n.callFrame;
  const key = `${functionName || '(anonymous)'} ${url.replace(/^.*node_modules\//, '').replace(/^file:\/\/\/work\/[^/]+\//, '')}:${lineNumber + 1}`;
  byFn.set(key, (byFn.get(key) ?? 0) + t);
  const a = area(url, functionName);
  byArea.set(a, (byArea.get(a) ?? 0) + t);
}
const pct = (t: number) => `${((100 * t) / total).toFixed(1).padStart(5)}%`;
console.log(`${file}: ${(total / 1e6).toFixed(2)} s sampled over ${((prof.endTime - prof.startTime) / 1e6).toFixed(2)} s wall`);
console.log('\nself time by package / folder:');
for (const [k, t] of [...byArea].sort((a, b) => b[1] - a[1]).slice(0, top)) console.log(`${pct(t)}  ${k}`);
console.log('\nself time by function:');
for (const [k, t] of [...byFn].sort((a, b) => b[1] - a[1]).slice(0, top)) console.log(`${pct(t)}  ${k}`);

// Inclusive (self + callees) time of project functions: synchronous work only; time across awaits is not attributed.
const children = new Map<number, number[]>();
for (const n of prof.nodes) children.set(n.id, n.children ?? []);
const inclusive = new Map<number, number>();
const incl = (id: number): number => {
  const cached = inclusive.get(id);
  if (cached !== undefined) return cached;
  const t = (self.get(id) ?? 0) + (children.get(id) ?? []).reduce((s, c) => s + incl(c), 0);
  inclusive.set(id, t);
  return t;
};
const byFnIncl = new Map<string, number>();
const onStack = new Set<string>();
const walk = (id: number): void => {
  const n = byId.get(id)!;
  const { functionName, url, lineNumber } = n.callFrame;
  const project = url.startsWith('file:///work/') && !url.includes('node_modules');
  const key = `${functionName || '(anonymous)'} ${url.replace(/^file:\/\/\/work\/[^/]+\//, '')}:${lineNumber + 1}`;
  const counted = project && !onStack.has(key);
  if (counted) { byFnIncl.set(key, (byFnIncl.get(key) ?? 0) + incl(id)); onStack.add(key); }
  for (const c of children.get(id) ?? []) walk(c);
  if (counted) onStack.delete(key);
};
walk(prof.nodes[0].id);
console.log('\ninclusive synchronous time of project functions:');
for (const [k, t] of [...byFnIncl].sort((a, b) => b[1] - a[1]).slice(0, top)) console.log(`${pct(t)}  ${k}`);
