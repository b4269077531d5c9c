/**
 * bench:deliver — messages per second from POST /v1/send to an SMTP sink on loopback (found through
 * a DNS server on loopback, STARTTLS offered, DKIM signing included), and the time from acceptance
 * to `delivered` (DeliverySucceeded.at − MessageAccepted.acceptedAt, read from the store; acceptedAt
 * is taken when the request starts, so this slightly overstates the time from the 200).
 *
 * Per mode, on a fresh database and queue prefix:
 *   1. saturation: N sends as fast as SEND connections allow; msg/s = N / (last delivery − first send);
 *   2. paced: M sends at a fixed rate, evenly spaced (default half the saturation rate); latency p50/p99 there is
 *      what a caller sees below saturation (in phase 1 latency is mostly queueing).
 * Baseline in the same run: the same sink receiving N already-built messages through nodemailer's
 * SMTP pool with the same concurrency (raw SMTP throughput of this machine), and, for diagnosis,
 * the same without a pool (one connection per message, as Motor's delivery engine does).
 *
 * Settings (env or --arg=value):
 *   DELIVER_N / --n                   messages of the saturation phase (default 5000)
 *   DELIVER_PACED_N / --paced-n       messages of the paced phase (default N/5, 0 = skip)
 *   DELIVER_PACED_RATE / --paced-rate msg/s of the paced phase (default 50% of the measured rate)
 *   DELIVER_MODES / --modes           "inproc" (one process, all roles), "split" (api | projector |
 *                                     worker processes); comma-separated (default "inproc,split")
 *   DELIVER_WORKERS / --workers       worker processes in split mode (default 1)
 *   DELIVER_CONCURRENCY / --concurrency  DELIVERY_CONCURRENCY per worker process (default 32)
 *   DELIVER_API_PROCESSES / --api-processes  API_PROCESSES of the Motor process(es) with the api role (default 1)
 *   DELIVER_SEND_CONNECTIONS / --send-connections  HTTP connections sending (default 50)
 *   DELIVER_BASELINES / --baselines   "pool,nopool" (default), "pool" or "none"
 *   DELIVER_SINK / --sink             "postfix" (Postfix's smtp-sink, no TLS; the default when installed)
 *                                     or "node" (test/support/smtpSink.ts: STARTTLS, but a 100 ms greeting delay)
 *   SINK_STARTTLS / --sink-starttls   1 (default) or 0 (node sink only)
 *   DELIVER_ENGINE_POOL / --engine-pool  "on" (default), "off" (one connection per message, as before
 *                                     the connection cache) or "both" (each mode run twice, off first)
 *   DELIVER_TIMEOUT / --timeout       seconds to wait for all deliveries of a phase (default 600)
 *   DELIVER_PROJECTION_INTERVAL / --projection-interval  PROJECTION_BATCH_INTERVAL_MS of the Motor
 *                                     processes (default: Motor's own default)
 *   BENCH_CPU_PROF=<dir>              --cpu-prof the Motor processes
 *   BENCH_ALLOC_PROF=<dir>            allocation sampling of the Motor processes, collected objects included
 *   BENCH_NODE_FLAGS="..."            extra Node/V8 flags for the Motor processes
 * Each phase also prints CPU per message (user + system, from /proc on Linux): the Motor
 * processes, every PostgreSQL process and Redis, and the rig (this process and Postfix's smtp-sink).
 */
import { fmt, intSetting, machine, onCleanup, percentile, runBench, setting, sleep, spawnChild, table, type Child } from './lib/common';
import { benchEnv, createFixture, motorChildEnv, type Fixture } from './lib/fixture';
import { cpuPerItem, cpuSnapshot } from './lib/cpu';
import { pacedLoad, runLoad, sendBody } from './lib/load';
import { startDnsServer } from '../test/support/dnsServer';
import { startSmtpSink } from '../test/support/smtpSink';
import { SMTP_SINK_BIN, startPostfixSink, type BenchSink } from './lib/postfixSink';

const N = intSetting('DELIVER_N', 'n', 5000);
const PACED_N = intSetting('DELIVER_PACED_N', 'paced-n', Math.round(N / 5));
const PACED_RATE = intSetting('DELIVER_PACED_RATE', 'paced-rate', 0);
const MODES = setting('DELIVER_MODES', 'modes', 'inproc,split').split(',').map((s) => s.trim()).filter((s): s is 'inproc' | 'split' => s === 'inproc' || s === 'split');
const WORKERS = Math.max(1, intSetting('DELIVER_WORKERS', 'workers', 1));
const CONCURRENCY = Math.max(1, intSetting('DELIVER_CONCURRENCY', 'concurrency', 32));
const API_PROCESSES = Math.max(1, intSetting('DELIVER_API_PROCESSES', 'api-processes', 1));
const SEND_CONNECTIONS = Math.max(1, intSetting('DELIVER_SEND_CONNECTIONS', 'send-connections', 50));
const BASELINES = setting('DELIVER_BASELINES', 'baselines', 'pool,nopool').split(',').map((s) => s.trim()).filter((s) => s === 'pool' || s === 'nopool');
const SINK = setting('DELIVER_SINK', 'sink', SMTP_SINK_BIN ? 'postfix' : 'node') === 'node' ? 'node' : 'postfix';
const STARTTLS = SINK === 'node' && setting('SINK_STARTTLS', 'sink-starttls', '1') !== '0';
const ENGINE_POOL = setting('DELIVER_ENGINE_POOL', 'engine-pool', 'on');
const POOL_VARIANTS: boolean[] = ENGINE_POOL === 'both' ? [false, true] : [ENGINE_POOL !== 'off'];
const TIMEOUT_S = intSetting('DELIVER_TIMEOUT', 'timeout', 600);
const PROJECTION_INTERVAL = setting('DELIVER_PROJECTION_INTERVAL', 'projection-interval', '');

const TARGET_RATE = 500;
const TARGET_P50_MS = 100;

interface PhaseResult { sent: number; sendSeconds: number; msgPerSec: number; p50: number; p90: number; p99: number; max: number; notDelivered: Record<string, number> }

runBench('bench:deliver', 300 + MODES.length * (2 * TIMEOUT_S) + 600, async () => {
  console.log(`bench:deliver — ${machine()}`);
  console.log(`N=${N}, paced ${PACED_N}${PACED_RATE ? ` at ${PACED_RATE}/s` : ''}, modes ${MODES.join(',')}, DELIVERY_CONCURRENCY=${CONCURRENCY}` +
    `${MODES.includes('split') ? `, split workers ${WORKERS}` : ''}, send connections ${SEND_CONNECTIONS}, sink ${SINK === 'postfix' ? 'Postfix smtp-sink' : 'smtp-server'} STARTTLS ${STARTTLS ? 'on' : 'off'},` +
    ` engine connection cache ${POOL_VARIANTS.map((v) => (v ? 'on' : 'off')).join(' then ')}` +
    `${PROJECTION_INTERVAL ? `, PROJECTION_BATCH_INTERVAL_MS=${PROJECTION_INTERVAL}` : ''}\n`);

  const dns = await startDnsServer({
    'rcpt.test': { MX: [{ exchange: 'mx.rcpt.test', priority: 10 }] },
    'mx.rcpt.test': { A: ['127.0.0.1'] },
  });
  const sink: BenchSink = SINK === 'postfix' ? await startPostfixSink() : await (async () => {
    const s = await startSmtpSink({ starttls: STARTTLS });
    return { port: s.port, received: () => s.messages.length, sessions: () => s.connections, close: () => s.close() };
  })();
  onCleanup('dns + sink', async () => { await sink.close(); await dns.close(); });
  const received = () => sink.received();

  const rows: Array<Array<string | number>> = [];
  let poolRate = NaN;

  // ------------------------------------------------------------------ baselines
  for (const kind of BASELINES) {
    const conc = CONCURRENCY * (MODES.includes('split') ? Math.max(1, WORKERS) : 1);
    const child = spawnChild('rawSmtpChild.ts', `raw-smtp-${kind}`, { RAW_SMTP_CHILD: JSON.stringify({ port: sink.port, count: N, concurrency: conc, pooled: kind === 'pool' }) });
    await child.next('ready', 120_000);
    const before = received();
    child.send({ type: 'go' });
    const done = await child.next<{ ms: number; failed: number }>('done', TIMEOUT_S * 1000);
    await child.stop();
    const rate = (N - done.failed) / (done.ms / 1000);
    if (kind === 'pool') poolRate = rate;
    console.log(`baseline ${kind}: ${N} messages in ${fmt(done.ms)} ms = ${fmt(rate)} msg/s (${done.failed} failed, sink got ${received() - before})`);
    rows.push([`raw SMTP, nodemailer ${kind === 'pool' ? 'pool' : 'no pool (1 connection/message)'}, ${conc} at once`, fmt(rate), '', '', '', '', kind === 'pool' ? '1.00' : fmt(rate / poolRate, 2)]);
  }

  // ------------------------------------------------------------------ Motor
  const results: Array<{ mode: string; sat: PhaseResult; paced: PhaseResult | null }> = [];
  for (const modeName of MODES) for (const enginePool of POOL_VARIANTS) {
    const mode = POOL_VARIANTS.length > 1 || !enginePool ? `${modeName}${enginePool ? '' : ' (no conn. cache)'}` : modeName;
    const poolEnv: Record<string, string> = enginePool ? {} : { BENCH_SMTP_POOL: '0' };
    const f = await createFixture(`deliver_${modeName}_${enginePool ? 'p' : 'np'}`, benchEnv({
      DNS_SERVERS: dns.address, MX_PORT: String(sink.port), MX_ALLOW_PRIVATE_ADDRESSES: 'true', DELIVERY_CONCURRENCY: String(CONCURRENCY), DELIVERY_RETRY_SCHEDULE: '1,2,5',
      API_PROCESSES: String(API_PROCESSES),
      ...(PROJECTION_INTERVAL ? { PROJECTION_BATCH_INTERVAL_MS: PROJECTION_INTERVAL } : {}),
    }));
    const children: Child[] = [];
    const sessions0 = sink.sessions();
    if (modeName === 'inproc') {
      children.push(spawnChild('motorChild.ts', 'motor-all', { ...motorChildEnv(f, ['api', 'projector', 'worker']), ...poolEnv }));
    } else {
      children.push(spawnChild('motorChild.ts', 'motor-api', motorChildEnv(f, ['api'])));
      children.push(spawnChild('motorChild.ts', 'motor-projector', motorChildEnv(f, ['projector'])));
      for (let i = 0; i < WORKERS; i++) children.push(spawnChild('motorChild.ts', `motor-worker${i + 1}`, { ...motorChildEnv(f, ['worker']), ...poolEnv }));
    }
    const ready = await Promise.all(children.map((c) => c.next<{ port: number | null }>('ready')));
    const port = ready[0].port!;
    const url = `http://127.0.0.1:${port}/v1/send`;
    const headers = { 'x-api-key': f.block.apiKey };
    const body = sendBody(`app@${f.senderDomain}`);

    // One message end to end first: the whole chain works before anything is timed.
    const probe = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body });
    if (probe.status !== 200) throw new Error(`Motor answered ${probe.status}: ${await probe.text()}`);
    await waitDelivered(f, 1, 60);

    const pids = children.map((c) => c.proc.pid).filter((p): p is number => p !== undefined);
    const roles = new Map(children.flatMap((c) => (c.proc.pid === undefined ? [] : [[c.proc.pid, c.label.replace(/^motor-/, '')] as const])));
    const sat = await phase(f, sink, { url, headers, body, amount: N, label: `${mode} saturation`, pids, roles });
    const rate = PACED_RATE || Math.max(1, Math.round(sat.msgPerSec * 0.5));
    const paced = PACED_N > 0 ? await phase(f, sink, { url, headers, body, amount: PACED_N, rate, label: `${mode} paced ${rate}/s`, pids, roles }) : null;
    results.push({ mode, sat, paced });
    for (const c of children) await c.stop();
    await sleep(300);
    console.log(`  ${mode}: the sink saw ${sink.sessions() - sessions0} SMTP sessions for ${sat.sent + (paced?.sent ?? 0) + 1} messages`);
    const procs = modeName === 'inproc' ? '1 process' : `api | projector | ${WORKERS} worker process${WORKERS > 1 ? 'es' : ''}`;
    rows.push([`Motor ${mode} (${procs}), saturated`, fmt(sat.msgPerSec), fmt(sat.sent / sat.sendSeconds), fmt(sat.p50), fmt(sat.p99), fmt(sat.max), fmt(sat.msgPerSec / poolRate, 2)]);
    if (paced) rows.push([`Motor ${mode}, paced at ${rate}/s`, fmt(paced.msgPerSec), fmt(paced.sent / paced.sendSeconds), fmt(paced.p50), fmt(paced.p99), fmt(paced.max), '']);
  }

  console.log('\n' + table(['', 'delivered msg/s', 'sent/s', 'p50 ms', 'p99 ms', 'max ms', 'ratio to pool'], rows));
  for (const r of results) {
    const p50 = r.paced?.p50 ?? r.sat.p50;
    console.log(`${r.mode}: ${fmt(r.sat.msgPerSec)} msg/s (target ≥${TARGET_RATE}) ${r.sat.msgPerSec >= TARGET_RATE ? 'met' : 'MISSED'};` +
      ` p50 ${fmt(p50)} ms ${r.paced ? 'paced' : 'saturated'} (target <${TARGET_P50_MS}) ${p50 < TARGET_P50_MS ? 'met' : 'MISSED'}` +
      `${Object.keys(r.sat.notDelivered).length ? `; not delivered: ${JSON.stringify(r.sat.notDelivered)}` : ''}`);
  }
});

async function phase(f: Fixture, sink: BenchSink, o: { url: string; headers: Record<string, string>; body: string; amount: number; rate?: number; label: string; pids: number[]; roles: Map<number, string> }): Promise<PhaseResult> {
  const acceptedBefore = await f.countEvents('MessageAccepted');
  const receivedBefore = sink.received();
  const deliveredBefore = (await f.rt.db.raw(`select count(*)::int as n from events where type in ('DeliverySucceeded', 'DeliveryBounced', 'DeliveryFailed')`)).rows[0].n as number;
  const since = new Date();
  const cpu0 = cpuSnapshot(o.pids);
  const t0 = Date.now();
  // Paced: evenly spaced arrivals (autocannon's overallRate sends one burst per second).
  const load = o.rate
    ? await pacedLoad({ url: o.url, headers: o.headers, body: o.body, connections: SEND_CONNECTIONS, amount: o.amount, rate: o.rate, timeoutS: 60 })
    : await runLoad({ url: o.url, headers: o.headers, body: o.body, connections: SEND_CONNECTIONS, amount: o.amount, timeoutS: 60 });
  const sendSeconds = (Date.now() - t0) / 1000;
  if (load.ok !== o.amount) console.log(`  ${o.label}: ${load.ok} of ${o.amount} sends answered 200 (${JSON.stringify(load.statusCodes)}, errors ${load.errors})`);
  await sleep(200);
  const accepted = (await f.countEvents('MessageAccepted')) - acceptedBefore;
  await waitDelivered(f, deliveredBefore + accepted, TIMEOUT_S, { sink, count: receivedBefore + accepted });
  const cpu1 = cpuSnapshot(o.pids);
  // Per message: accepted → DeliveryStarted (log → enqueuer → BullMQ → a worker picks it up) and
  // DeliveryStarted → DeliverySucceeded (fold, MIME, DKIM, DNS, SMTP session).
  const r = await f.rt.db.raw(
    `select extract(epoch from ((s.data->>'at')::timestamptz - (a.data->>'acceptedAt')::timestamptz)) * 1000 as ms,
            extract(epoch from ((d.data->>'at')::timestamptz - (a.data->>'acceptedAt')::timestamptz)) * 1000 as queued_ms,
            extract(epoch from ((s.data->>'at')::timestamptz - (d.data->>'at')::timestamptz)) * 1000 as deliver_ms,
            extract(epoch from (s.data->>'at')::timestamptz) * 1000 as at,
            extract(epoch from (a.data->>'acceptedAt')::timestamptz) * 1000 as accepted_at,
            extract(epoch from (d.data->>'at')::timestamptz) * 1000 as started_at,
            a.data->>'messageId' as message_id
       from events a
       join events s on s.stream_id = a.stream_id and s.type = 'DeliverySucceeded'
       join events d on d.stream_id = a.stream_id and d.type = 'DeliveryStarted' and d.data->>'attempt' = s.data->>'attempt'
      where a.type = 'MessageAccepted' and (a.data->>'acceptedAt')::timestamptz >= ?`, [since.toISOString()]);
  const rows = r.rows as Array<{ ms: string; queued_ms: string; deliver_ms: string; at: string; accepted_at: string; started_at: string; message_id: string }>;
  // The queued part, split with the BullMQ job's own times: accepted → job added (commit, log
  // subscription, enqueuer) and job added → DeliveryStarted (queue wait, worker pick-up, readStream).
  const byId = new Map(rows.map((x) => [x.message_id, x]));
  const toQueue: number[] = [];
  const inQueue: number[] = [];
  const pickup: number[] = [];
  for (const job of await f.rt.queue.getJobs(['completed'], 0, -1)) {
    const x = byId.get(job.data.messageId);
    if (!x || job.opts.delay) continue;
    toQueue.push(job.timestamp - Number(x.accepted_at));
    inQueue.push(Number(x.started_at) - job.timestamp);
    // BullMQ's processedOn: when the worker moved it to active (its run may have started later).
    if (job.processedOn) pickup.push(job.processedOn - job.timestamp);
  }
  pickup.sort((a, b) => a - b);
  toQueue.sort((a, b) => a - b);
  inQueue.sort((a, b) => a - b);
  const lat = rows.map((x) => Number(x.ms)).sort((a, b) => a - b);
  const queued = rows.map((x) => Number(x.queued_ms)).sort((a, b) => a - b);
  const delivering = rows.map((x) => Number(x.deliver_ms)).sort((a, b) => a - b);
  const lastAt = Math.max(...rows.map((x) => Number(x.at)));
  const other = await f.rt.db.raw(
    `select type, count(*)::int as n from events where type in ('DeliveryDeferred','DeliveryBounced','DeliveryFailed') and created_at >= ? group by type`, [since]);
  const notDelivered = Object.fromEntries((other.rows as Array<{ type: string; n: number }>).map((x) => [x.type, x.n]));
  const res: PhaseResult = {
    sent: accepted, sendSeconds, msgPerSec: rows.length / ((lastAt - t0) / 1000),
    p50: percentile(lat, 50), p90: percentile(lat, 90), p99: percentile(lat, 99), max: lat[lat.length - 1], notDelivered,
  };
  console.log(`  ${o.label}: ${accepted} accepted in ${fmt(sendSeconds, 1)} s (${fmt(accepted / sendSeconds)}/s, HTTP p50 ${load.p50} ms p99 ${load.p99} ms);` +
    ` ${rows.length} delivered, ${fmt(res.msgPerSec)} msg/s end to end; accepted→delivered p50 ${fmt(res.p50)} ms, p90 ${fmt(res.p90)} ms, p99 ${fmt(res.p99)} ms, max ${fmt(res.max)} ms` +
    `${Object.keys(notDelivered).length ? `; other outcomes ${JSON.stringify(notDelivered)}` : ''} (sink total ${sink.received()})\n` +
    `    of which accepted→DeliveryStarted p50 ${fmt(percentile(queued, 50))} ms p99 ${fmt(percentile(queued, 99))} ms;` +
    ` DeliveryStarted→delivered p50 ${fmt(percentile(delivering, 50))} ms p99 ${fmt(percentile(delivering, 99))} ms\n` +
    `    queued part: accepted→job added p50 ${fmt(percentile(toQueue, 50))} ms p99 ${fmt(percentile(toQueue, 99))} ms;` +
    ` job added→DeliveryStarted p50 ${fmt(percentile(inQueue, 50))} ms p99 ${fmt(percentile(inQueue, 99))} ms` +
    ` (job added→active p50 ${fmt(percentile(pickup, 50))} ms p99 ${fmt(percentile(pickup, 99))} ms)\n` +
    `    CPU per message, send to delivered: ${cpuPerItem(cpu0, cpu1, accepted, o.roles)}`);
  return res;
}

/**
 * Waits until `n` messages reached a terminal outcome (delivered, bounced or failed; deferrals
 * retry). The count scans the phase's events, so it runs once the sink has received `sinkTarget`
 * messages and at most once a second before that: polling it ten times a second cost PostgreSQL
 * CPU that the benchmark then charged to Motor.
 */
async function waitDelivered(f: Fixture, n: number, timeoutS: number, sinkTarget?: { sink: BenchSink; count: number }): Promise<void> {
  const deadline = Date.now() + timeoutS * 1000;
  let lastCount = 0;
  for (;;) {
    if (!sinkTarget || sinkTarget.sink.received() >= sinkTarget.count || Date.now() - lastCount >= 1000) {
      lastCount = Date.now();
      const r = await f.rt.db.raw(`select count(*)::int as n from events where type in ('DeliverySucceeded', 'DeliveryBounced', 'DeliveryFailed')`);
      const got = r.rows[0].n as number;
      if (got >= n) return;
      if (Date.now() > deadline) throw new Error(`only ${got} of ${n} messages reached an outcome after ${timeoutS} s`);
    }
    await sleep(50);
  }
}
