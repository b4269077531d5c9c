/**
 * A/B of POST /v1/send between this checkout and another one (a baseline commit), in one run:
 * both Motors serve the same fixture (database, Redis, block), and the load alternates between
 * them round by round, so the host's drift weighs on both alike. Prints req/s and the CPU each
 * request costs the server process, per round and as medians. For judging a change that is
 * smaller than the spread between two bench:send runs.
 *
 *   git worktree add /tmp/base <commit> && ln -s "$PWD/node_modules" /tmp/base/node_modules
 *   npx tsx bench/tools/send-ab.ts --base=/tmp/base [--rounds=6] [--duration=8] [--warmup=2] [--jit-warmup=10] [--connections=50] [--flags-a="..."] [--flags-b="..."]
 */
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fmt, intSetting, machine, runBench, setting, sleep, spawnChild, table } from '../lib/common';
import { benchEnv, createFixture, motorChildEnv } from '../lib/fixture';
import { runLoad, sendBody } from '../lib/load';

const BASE = setting('SEND_AB_BASE', 'base', '');
const ROUNDS = intSetting('SEND_ROUNDS', 'rounds', 6);
const DURATION = intSetting('SEND_DURATION', 'duration', 8);
const WARMUP = intSetting('SEND_WARMUP', 'warmup', 2);
const CONNECTIONS = intSetting('SEND_CONNECTIONS', 'connections', 50);
/** Load on each side before the first round, not measured: the JIT's warm-up. */
const JIT_WARMUP = intSetting('SEND_AB_JIT_WARMUP', 'jit-warmup', 10);
/** Node/V8 flags for one side only (e.g. --flags-b="--single-threaded-gc"): a flag's A/B with --base=. (this checkout). */
const FLAGS = { A: setting('SEND_AB_FLAGS_A', 'flags-a', ''), B: setting('SEND_AB_FLAGS_B', 'flags-b', '') };
const flagList = (flags: string): string[] => flags.split(/\s+/).filter(Boolean);

/** CPU seconds (user + system) of one process so far. */
function cpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(f[11]) + Number(f[12])) / 100;
}

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

runBench('send-ab', 120 + ROUNDS * 2 * (DURATION + WARMUP + 5), async () => {
  if (!BASE) throw new Error('--base=<directory of the baseline checkout> is required');
  console.log(`send-ab — ${machine()}\nA = ${resolve(BASE)} ${FLAGS.A}, B = this checkout ${FLAGS.B}; ${ROUNDS} rounds × ${DURATION}s (+${WARMUP}s warm-up), ${CONNECTIONS} connections\n`);
  const f = await createFixture('send_ab', benchEnv());
  const body = sendBody(`app@${f.senderDomain}`);
  const sides = {
    A: spawnChild(join(resolve(BASE), 'bench', 'lib', 'motorChild.ts'), 'motor-a', { ...motorChildEnv(f, ['api']), TSX_TSCONFIG_PATH: join(resolve(BASE), 'tsconfig.json') }, flagList(FLAGS.A)),
    B: spawnChild('motorChild.ts', 'motor-b', motorChildEnv(f, ['api']), flagList(FLAGS.B)),
  };
  const ports = { A: (await sides.A.next<{ port: number }>('ready')).port, B: (await sides.B.next<{ port: number }>('ready')).port };
  const results = { A: [] as Array<{ rps: number; cpuMs: number; p99: number }>, B: [] as Array<{ rps: number; cpuMs: number; p99: number }> };
  for (const side of ['A', 'B'] as const) {
    await runLoad({ url: `http://127.0.0.1:${ports[side]}/v1/send`, headers: { 'x-api-key': f.block.apiKey }, body, connections: CONNECTIONS, duration: JIT_WARMUP });
  }
  for (let round = 1; round <= ROUNDS; round++) {
    // Alternate which side goes first, so neither always runs on the warmer (or cooler) half.
    const order = round % 2 === 1 ? (['A', 'B'] as const) : (['B', 'A'] as const);
    for (const side of order) {
      const target = { url: `http://127.0.0.1:${ports[side]}/v1/send`, headers: { 'x-api-key': f.block.apiKey }, body, connections: CONNECTIONS };
      if (WARMUP > 0) await runLoad({ ...target, duration: WARMUP });
      const pid = sides[side].proc.pid!;
      const c0 = cpuSeconds(pid);
      const r = await runLoad({ ...target, duration: DURATION });
      const cpuMs = ((cpuSeconds(pid) - c0) * 1000) / Math.max(1, r.requests);
      if (r.non2xx || r.errors) throw new Error(`${side}: ${r.non2xx} non-2xx, ${r.errors} errors ${JSON.stringify(r.statusCodes)}`);
      results[side].push({ rps: r.rps, cpuMs, p99: r.p99 });
      console.log(`round ${round} ${side}: ${fmt(r.rps)} req/s, p99 ${r.p99} ms, server CPU ${fmt(cpuMs, 3)} ms/request`);
      await sleep(500);
    }
  }
  await Promise.all([sides.A.stop(), sides.B.stop()]);
  const row = (side: 'A' | 'B') => [side, fmt(median(results[side].map((r) => r.rps))), fmt(median(results[side].map((r) => r.cpuMs)), 3), median(results[side].map((r) => r.p99))];
  console.log('\n' + table(['side', 'median req/s', 'median CPU ms/request', 'median p99 ms'], [row('A'), row('B')]));
  const pairs = results.A.map((a, i) => results.B[i].cpuMs / a.cpuMs);
  console.log(`\nB/A CPU per request, per round: ${pairs.map((p) => fmt(p, 3)).join(' ')}; median ${fmt(median(pairs), 3)}`);
  console.log(`B/A req/s, per round: ${results.A.map((a, i) => fmt(results.B[i].rps / a.rps, 3)).join(' ')}; median ${fmt(median(results.A.map((a, i) => results.B[i].rps / a.rps)), 3)}`);
});
