/**
 * bench:send — accepted sends per second and latency of POST /v1/send under autocannon, next to a
 * floor measured in the same run: a bare Express 5 route parsing the same JSON and doing one
 * INSERT (uuid + jsonb, synchronous_commit on) into the same PostgreSQL, same connection count.
 * Afterwards checks that every 200 has its MessageAccepted in the store (nothing acknowledged and
 * lost).
 *
 * Settings (env or --arg=value):
 *   SEND_DURATION / --duration      measured seconds per run (default 10)
 *   SEND_WARMUP / --warmup          warm-up seconds before each measured run (default 3)
 *   SEND_CONNECTIONS / --connections autocannon connections (default 50)
 *   SEND_ROUNDS / --rounds          floor/Motor alternations (default 3: the host's speed drifts
 *                                   between runs, and one pair of runs carries all of that drift into the ratio)
 *   SEND_ROLES / --roles            roles of the Motor process (default "api"; e.g. "api,projector")
 *   FLOOR_POOL / --floor-pool       PostgreSQL pool of the floor (default 10 = the store's pool)
 *   SEND_RATE / --rate              requests/s for both (open model, fixed rate); 0 = as fast as
 *                                   the connections allow (default)
 *   SEND_PROCESSES / --processes    server processes on each side (default 1): Motor with
 *                                   API_PROCESSES=N, the floor in N node:cluster children, both
 *                                   sharing one port
 *   BENCH_STORE_INFLIGHT=<n>        experiment: group-commit batches in flight in the Motor process
 *   BENCH_CPU_PROF=<dir>            --cpu-prof the server processes
 */
import { fmt, intSetting, machine, runBench, setting, spawnChild, table, sleep } from './lib/common';
import { benchEnv, createFixture, motorChildEnv } from './lib/fixture';
import { runLoad, sendBody, type LoadResult } from './lib/load';
import { cpuPerItem, cpuSnapshot } from './lib/cpu';

const DURATION = intSetting('SEND_DURATION', 'duration', 10);
const WARMUP = intSetting('SEND_WARMUP', 'warmup', 3);
const CONNECTIONS = intSetting('SEND_CONNECTIONS', 'connections', 50);
const ROUNDS = Math.max(1, intSetting('SEND_ROUNDS', 'rounds', 3));
const ROLES = setting('SEND_ROLES', 'roles', 'api').split(',').map((s) => s.trim()).filter(Boolean);
const FLOOR_POOL = intSetting('FLOOR_POOL', 'floor-pool', 10);
const RATE = intSetting('SEND_RATE', 'rate', 0);
const PROCESSES = Math.max(1, intSetting('SEND_PROCESSES', 'processes', 1));

const TARGET_RATIO = 0.7;
const GOAL_RATIO = 1.0;
const TARGET_P99_MS = 50;

runBench('bench:send', 120 + ROUNDS * 2 * (DURATION + WARMUP + 30), async () => {
  console.log(`bench:send — ${machine()}`);
  console.log(`duration ${DURATION}s (+${WARMUP}s warm-up) × ${ROUNDS} round(s), ${CONNECTIONS} connections${RATE ? ` at ${RATE} req/s` : ' (closed loop)'}, Motor roles: ${ROLES.join(',')}, floor pool ${FLOOR_POOL}, ${PROCESSES} server process(es) per side\n`);

  const f = await createFixture('send', benchEnv());
  const body = sendBody(`app@${f.senderDomain}`);
  console.log(`request body ${Buffer.byteLength(body)} bytes`);

  const floor = spawnChild('floorChild.ts', 'floor', { FLOOR_CHILD: JSON.stringify({ databaseUrl: f.databaseUrl, pool: FLOOR_POOL, processes: PROCESSES }) });
  const motor = spawnChild('motorChild.ts', 'motor-send', motorChildEnv(f, ROLES, { API_PROCESSES: String(PROCESSES) }));
  const [{ port: floorPort }, { port: motorPort }] = await Promise.all([
    floor.next<{ port: number }>('ready'), motor.next<{ port: number }>('ready'),
  ]);

  const targets = {
    floor: { url: `http://127.0.0.1:${floorPort}/v1/send`, headers: {} as Record<string, string> },
    motor: { url: `http://127.0.0.1:${motorPort}/v1/send`, headers: { 'x-api-key': f.block.apiKey } },
  };
  // A single request first: the Motor route answers 200 (not 401/403/429) before anything is measured.
  const probe = await fetch(targets.motor.url, { method: 'POST', headers: { 'content-type': 'application/json', ...targets.motor.headers }, body });
  if (probe.status !== 200) throw new Error(`Motor answered ${probe.status}: ${await probe.text()}`);
  let motorAcknowledged = 1;
  let motorRequestsStarted = 1;

  const results: Record<'floor' | 'motor', LoadResult[]> = { floor: [], motor: [] };
  for (let round = 1; round <= ROUNDS; round++) {
    for (const name of ['floor', 'motor'] as const) {
      const t = targets[name];
      if (WARMUP > 0) {
        const w = await runLoad({ ...t, body, connections: CONNECTIONS, duration: WARMUP, overallRate: RATE || undefined });
        if (name === 'motor') { motorAcknowledged += w.ok; motorRequestsStarted += w.requests + CONNECTIONS; }
      }
      const server = name === 'floor' ? floor : motor;
      const cpu0 = cpuSnapshot([server.proc.pid!]);
      const r = await runLoad({ ...t, body, connections: CONNECTIONS, duration: DURATION, overallRate: RATE || undefined });
      const cpu1 = cpuSnapshot([server.proc.pid!]);
      if (name === 'motor') { motorAcknowledged += r.ok; motorRequestsStarted += r.requests + CONNECTIONS; }
      results[name].push(r);
      console.log(`round ${round} ${name.padEnd(5)}: ${fmt(r.rps)} req/s, p50 ${r.p50} ms, p99 ${r.p99} ms, non-2xx ${r.non2xx}, errors ${r.errors}, timeouts ${r.timeouts}, load generator ${fmt(r.clientCores, 2)} cores${r.non2xx ? ` ${JSON.stringify(r.statusCodes)}` : ''}\n` +
        `        CPU per request: ${cpuPerItem(cpu0, cpu1, r.requests, undefined, name === 'floor' ? 'floor' : 'Motor')}`);
      await sleep(1000); // let the server drain (and autovacuum/checkpoints settle) between runs
    }
  }

  // Stop Motor (its pending appends finish) before counting what the store holds.
  await motor.stop();
  await floor.stop();
  const accepted = await f.countEvents('MessageAccepted');

  const agg = (rs: LoadResult[]) => {
    const ok = rs.reduce((s, r) => s + r.ok, 0);
    const secs = rs.reduce((s, r) => s + r.durationS, 0);
    const med = (k: 'p50' | 'p99') => [...rs.map((r) => r[k])].sort((a, b) => a - b)[Math.floor(rs.length / 2)];
    return { rps: ok / secs, p50: med('p50'), p99: med('p99'), non2xx: rs.reduce((s, r) => s + r.non2xx + r.errors + r.timeouts, 0) };
  };
  const fl = agg(results.floor);
  const mo = agg(results.motor);
  const ratio = mo.rps / fl.rps;

  console.log('\n' + table(['', 'req/s', 'p50 ms', 'p99 ms', 'non-2xx/errors', 'ratio'], [
    ['floor (Express + 1 INSERT)', fmt(fl.rps), fl.p50, fl.p99, fl.non2xx, '1.00'],
    [`Motor POST /v1/send (${ROLES.join(',')})`, fmt(mo.rps), mo.p50, mo.p99, mo.non2xx, fmt(ratio, 2)],
  ]));
  const verdict = ratio >= GOAL_RATIO && mo.p99 < TARGET_P99_MS ? 'GOAL met'
    : ratio >= TARGET_RATIO && mo.p99 < TARGET_P99_MS ? 'target met (goal ≥1.0× not reached)' : 'TARGET MISSED';
  console.log(`\nratio Motor/floor = ${fmt(ratio, 2)}× (target ≥${TARGET_RATIO}× with p99 < ${TARGET_P99_MS} ms, goal ≥${GOAL_RATIO}×): ${verdict}`);

  // Durability check: every 200 has its event. autocannon drops responses still in flight when a
  // timed run ends, so the store may hold up to `connections` more events per run than 200s counted.
  const lost = Math.max(0, motorAcknowledged - accepted);
  console.log(`durability: ${motorAcknowledged} sends answered 200, ${accepted} MessageAccepted in the store` +
    ` (${accepted - motorAcknowledged} accepted while the client was stopping) → ${lost === 0 && accepted <= motorRequestsStarted ? 'OK, nothing acknowledged and lost' : `FAILED: ${lost} acknowledged sends missing`}`);
  if (lost > 0) process.exitCode = 2;
});
