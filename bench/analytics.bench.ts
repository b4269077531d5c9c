/**
 * bench:analytics — the analytics read model at volume (docs/ANALYTICS.md "Performance"):
 *
 * 1. seed: MESSAGES sends of one block spread over the last 29 days, appended to the event store
 *    (MessageAccepted + outcomes; 10 % have two recipients; ~95 % delivered, 2 % bounced, 1 %
 *    failed, 1 % still deferred, 0.1 % complained; 200 recipient domains, some hosted by Google);
 * 2. project: the analytics projector catches up from zero (ProjectionRunner.catchUp, live batches),
 *    reporting events/s;
 * 3. query: every analytics route over HTTP (bearer token, the real API), QUERIES requests each,
 *    p50/p95/max in ms;
 * 4. lag: LAG_SECONDS of sustained load (LAG_RATE sends/s appended while the projector runs),
 *    projection lag sampled every 250 ms (age of the oldest unapplied event).
 *
 * Settings (env or --arg=value): ANALYTICS_MESSAGES / --messages (default 5,000,000),
 * ANALYTICS_QUERIES / --queries (default 200), LAG_RATE / --lag-rate (1000), LAG_SECONDS / --lag-seconds (30),
 * ANALYTICS_BATCH / --batch (projector batch size from zero, default 5000), LAG_BATCH / --lag-batch
 * (batch size of the live runner in the lag phase, default = ANALYTICS_BATCH; the projector role runs 500).
 */
import { randomUUID } from 'node:crypto';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import type { Knex } from 'knex';
import type { EventData } from '../domain/eventStore';
import { streamName } from '../domain/eventStore';
import { uuidV7 } from '../domain/ids';
import { PostgresEventStore } from '../infra/eventstore';
import { analyticsProjection } from '../projections/analytics/projection';
import { ProjectionRunner } from '../projections/runner';
import { startRoles } from '../scripts/runtime';
import { fmt, intSetting, machine, onCleanup, percentile, runBench, sleep, table } from './lib/common';
import { benchEnv, createFixture } from './lib/fixture';

const MESSAGES = intSetting('ANALYTICS_MESSAGES', 'messages', 5_000_000);
const QUERIES = intSetting('ANALYTICS_QUERIES', 'queries', 200);
const LAG_RATE = intSetting('LAG_RATE', 'lag-rate', 1000);
const LAG_SECONDS = intSetting('LAG_SECONDS', 'lag-seconds', 30);
const BATCH = intSetting('ANALYTICS_BATCH', 'batch', 5000);
// Live runner's batch in the lag phase (the projector role runs the framework's default, 500).
const LAG_BATCH = intSetting('LAG_BATCH', 'lag-batch', BATCH);
const SEED_STORES = 2;
const SEED_INFLIGHT = 500;
const DAY = 86_400_000;
const DIAG = process.env.BENCH_DIAG === '1';

/**
 * BENCH_DIAG=1 (needs pg_stat_statements in shared_preload_libraries): the server time of each
 * phase by statement, from a reset at the phase start.
 */
async function statementTimes(db: Knex, phase: string, reset: boolean): Promise<void> {
  if (!DIAG) return;
  try {
    await db.raw('create extension if not exists pg_stat_statements');
    if (reset) {
      await db.raw('select pg_stat_statements_reset()');
      return;
    }
    const r = await db.raw(`select calls, round(total_exec_time)::int8 as total_ms, round(mean_exec_time::numeric, 2) as mean_ms, rows,
        shared_blks_hit as hit, shared_blks_read as read, shared_blks_dirtied as dirtied, wal_fpi, left(regexp_replace(query, '\\s+', ' ', 'g'), 90) as q
      from pg_stat_statements where dbid = (select oid from pg_database where datname = current_database())
      order by total_exec_time desc limit 12`);
    console.log(`server time by statement (${phase}):`);
    for (const x of r.rows) console.log(`  ${String(x.total_ms).padStart(8)} ms ${String(x.calls).padStart(7)} calls ${String(x.mean_ms).padStart(8)} ms/call rows ${x.rows} hit ${x.hit} read ${x.read} dirtied ${x.dirtied} fpi ${x.wal_fpi}  ${x.q}`);
  } catch (err) {
    console.log(`server time by statement (${phase}): unavailable (${(err as Error).message})`);
  }
}

const DOMAINS = ['gmail.com', 'outlook.com', 'yahoo.com', 'hotmail.com', ...Array.from({ length: 196 }, (_, i) => `corp${i}.test`)];
const mxOf = (domain: string, i: number): string =>
  domain === 'gmail.com' || /corp\d*[05]\.test/.test(domain) ? 'gmail-smtp-in.l.google.com'
  : domain === 'outlook.com' || domain === 'hotmail.com' ? 'outlook-com.olc.protection.outlook.com'
  : domain === 'yahoo.com' ? 'mta5.am0.yahoodns.net' : `mx${i % 3}.${domain}`;

// Ids as the product makes them: the message and its MessageAccepted event get version 7 ids of
// the acceptance time (domain/ids.ts newId), the worker's outcome events name-derived v5 ids,
// which are as scattered as random ones.
function messageEvents(motorBlockId: string, accountId: string, i: number, acceptedAt: number): EventData[] {
  const id = uuidV7(acceptedAt);
  const n = i % 10 === 0 ? 2 : 1;
  const to = Array.from({ length: n }, (_, k) => `user${(i + k) % 100_000}@${DOMAINS[(i * 7 + k) % DOMAINS.length]}`);
  const events: EventData[] = [{
    id: uuidV7(acceptedAt), type: 'MessageAccepted', version: 1,
    data: {
      messageId: id, motorBlockId, accountId, domainId: '00000000-0000-4000-8000-00000000d0d0', from: 'app@shop.example', fromName: null, to,
      subject: `Order ${i}`, text: 'Your order has shipped.', html: null, headers: {}, smtpMessageId: `${id}@shop.example`, idempotencyKey: null,
      source: 'http', metadata: {}, acceptedAt: new Date(acceptedAt).toISOString(),
    },
  }];
  to.forEach((recipient, k) => {
    const at = new Date(acceptedAt + 1000 + k).toISOString();
    const domain = recipient.slice(recipient.indexOf('@') + 1);
    const reply = (code: string, enhanced: string) => ({ smtpCode: code, enhancedCode: enhanced, smtpResponse: `${code} ${enhanced}`, mx: mxOf(domain, i), attempt: 1 });
    const r = (i * 31 + k * 17) % 1000;
    const base = { messageId: id, recipient, at };
    if (r < 20) events.push({ id: randomUUID(), type: 'DeliveryBounced', version: 1, data: { ...base, ...reply('550', r < 10 ? '5.1.1' : '5.7.1') } });
    else if (r < 30) events.push({ id: randomUUID(), type: 'DeliveryFailed', version: 1, data: { ...base, smtpCode: null, smtpResponse: null, attempt: 1, reason: 'no_mx' } });
    else if (r < 40) events.push({ id: randomUUID(), type: 'DeliveryDeferred', version: 1, data: { ...base, ...reply('421', '4.7.0'), nextAttemptAt: new Date(acceptedAt + 600_000).toISOString() } });
    else {
      events.push({ id: randomUUID(), type: 'DeliverySucceeded', version: 1, data: { ...base, ...reply('250', '2.0.0') } });
      if (r === 999) events.push({ id: randomUUID(), type: 'ComplaintReceived', version: 1, data: { messageId: id, recipient, at: new Date(acceptedAt + 3_600_000).toISOString(), feedbackType: 'abuse' } });
    }
  });
  return events;
}

runBench('bench:analytics', 7200, async () => {
  console.log(`bench:analytics — ${machine()}`);
  console.log(`${fmt(MESSAGES)} messages over 29 days, projector batch ${BATCH} (lag phase ${LAG_BATCH}), ${QUERIES} requests per route, lag at ${LAG_RATE} sends/s for ${LAG_SECONDS} s\n`);
  const f = await createFixture('analytics', benchEnv());
  const { db } = f.rt;
  const blockId = f.block.motorBlockId;
  const accountId = f.block.accountId;

  // ------------------------------------------------------------------ seed
  const stores = await Promise.all(Array.from({ length: SEED_STORES }, async () => {
    const s = new PostgresEventStore(f.databaseUrl, { poolSize: 2, applicationName: 'bench-seed' });
    await s.init();
    return s;
  }));
  onCleanup('seed stores', () => Promise.all(stores.map((s) => s.close())));
  const t0 = performance.now();
  const now = Date.now();
  const start = now - 29 * DAY;
  const span = now - 60_000 - start;
  let next = 0;
  let appended = 0;
  let lastReport = t0;
  await Promise.all(stores.flatMap((store) => Array.from({ length: SEED_INFLIGHT }, async () => {
    while (next < MESSAGES) {
      const i = next++;
      const events = messageEvents(blockId, accountId, i, start + Math.floor((i / MESSAGES) * span));
      await store.append(streamName('message', (events[0].data as { messageId: string }).messageId), events, { expectedRevision: 'no_stream' });
      appended += events.length;
      if (performance.now() - lastReport > 10_000) {
        lastReport = performance.now();
        console.log(`  seeded ${fmt(i)} messages, ${fmt(appended)} events (${fmt(appended / ((lastReport - t0) / 1000))} events/s)`);
      }
    }
  })));
  const seedMs = performance.now() - t0;
  console.log(`seeded ${fmt(MESSAGES)} messages = ${fmt(appended)} events in ${fmt(seedMs / 1000, 1)} s`);
  await db.raw('VACUUM (ANALYZE) events');

  // ------------------------------------------------------------------ project from zero
  const runner = new ProjectionRunner(db, f.rt.store, analyticsProjection, { batchSize: BATCH });
  await statementTimes(db, 'project from zero', true);
  const p0 = performance.now();
  let projected = 0;
  let lastLog = p0;
  for (;;) {
    const n = await runner.catchUp();
    projected += n;
    if (performance.now() - lastLog > 10_000) {
      lastLog = performance.now();
      console.log(`  projected ${fmt(projected)} events (${fmt(projected / ((lastLog - p0) / 1000))}/s)`);
    }
    if (n === 0 && projected >= appended) break;
    if (n === 0) await sleep(50);
  }
  const projMs = performance.now() - p0;
  const projRate = projected / (projMs / 1000);
  await statementTimes(db, 'project from zero', false);
  await db.raw('VACUUM (ANALYZE) rm_analytics.block_hourly, rm_analytics.domain_hourly, rm_analytics.domain_daily, rm_analytics.code_hourly');
  const sizes = (await db.raw(`select
    (select count(*) from rm_analytics.recipient_stats)::int8 as stats, (select count(*) from rm_analytics.block_hourly)::int8 as bh,
    (select count(*) from rm_analytics.domain_hourly)::int8 as dh, (select count(*) from rm_analytics.domain_daily)::int8 as dd,
    (select count(*) from rm_analytics.code_hourly)::int8 as ch`)).rows[0];
  console.log(`projected ${fmt(projected)} events in ${fmt(projMs / 1000, 1)} s = ${fmt(projRate)} events/s; rows: recipient_stats ${fmt(Number(sizes.stats))}, block_hourly ${fmt(Number(sizes.bh))}, domain_hourly ${fmt(Number(sizes.dh))}, domain_daily ${fmt(Number(sizes.dd))}, code_hourly ${fmt(Number(sizes.ch))}\n`);

  // ------------------------------------------------------------------ queries over HTTP
  const roles = await startRoles(f.rt, ['api'], { port: 0, host: '127.0.0.1' });
  onCleanup('api', () => roles.stop());
  const base = `http://127.0.0.1:${roles.port}`;
  const tokenRes = await fetch(`${base}/api/public/token/account-key`, {
    method: 'POST', headers: { 'content-type': 'application/json', authorization: `ApiKey ${f.block.accountApiKey}` },
    body: JSON.stringify({ motorBlockId: blockId, scopes: ['analytics.read', 'usage.read'], ttlSeconds: 900 }),
  });
  const token = ((await tokenRes.json()) as { data: { token: string } }).data.token;
  const week = new Date(now - 7 * DAY).toISOString();
  const routes = [
    'overview', `overview?from=${week}`, 'daily-summary?days=30', 'metrics?interval=hour', 'metrics?interval=day', 'deliverability',
    `deliverability?from=${week}`, 'providers', 'error-codes', 'reputation', 'anomalies', 'rate-limits',
  ];
  const rows: Array<Array<string | number>> = [];
  let worstP95 = 0;
  for (const route of routes) {
    const url = `${base}/api/public/v1/motor-blocks/${blockId}/${route}`;
    const times: number[] = [];
    for (let i = 0; i < QUERIES + 5; i++) {
      const q0 = performance.now();
      const res = await fetch(url, { headers: { authorization: `Bearer ${token}` } });
      await res.arrayBuffer();
      if (res.status !== 200) throw new Error(`${route}: HTTP ${res.status}`);
      if (i >= 5) times.push(performance.now() - q0);
    }
    times.sort((x, y) => x - y);
    const p95 = percentile(times, 95);
    worstP95 = Math.max(worstP95, p95);
    rows.push([route, fmt(percentile(times, 50), 1), fmt(p95, 1), fmt(times[times.length - 1], 1)]);
  }
  console.log(table(['route (GET /motor-blocks/{id}/…)', 'p50 ms', 'p95 ms', 'max ms'], rows));
  console.log(`worst p95: ${fmt(worstP95, 1)} ms → ${worstP95 < 50 ? 'OK (< 50 ms)' : 'OVER 50 ms'}\n`);

  // ------------------------------------------------------------------ lag under sustained load
  await statementTimes(db, 'lag', true);
  const abort = new AbortController();
  const batches: Array<{ n: number; ms: number }> = [];
  // Spaced like the projector role's (PROJECTION_BATCH_INTERVAL_MS, docs/PROJECTIONS.md "Batch interval").
  const live = new ProjectionRunner(db, f.rt.store, analyticsProjection, {
    batchSize: LAG_BATCH, minBatchIntervalMs: f.config.projectionBatchIntervalMs, onBatch: (r) => { if (r.applied + r.skipped > 0) batches.push({ n: r.applied + r.skipped, ms: r.durationMs }); },
  });
  const running = live.run(abort.signal);
  const lags: number[] = [];
  let sampling = true;
  const sampler = (async () => {
    while (sampling) {
      try { lags.push((await live.lag(1)).secondsBehind); } catch { /* busy */ }
      await sleep(250);
    }
  })();
  // Event-loop delay of this process (load generator and projector share it) during the load.
  const eld = monitorEventLoopDelay({ resolution: 10 });
  eld.enable();
  const l0 = performance.now();
  let sent = 0;
  const inflight = new Set<Promise<unknown>>();
  while (performance.now() - l0 < LAG_SECONDS * 1000) {
    const due = Math.floor(((performance.now() - l0) / 1000) * LAG_RATE);
    while (sent < due) {
      const events = messageEvents(blockId, accountId, MESSAGES + sent, Date.now());
      const store = stores[sent % stores.length];
      const p = store.append(streamName('message', (events[0].data as { messageId: string }).messageId), events, { expectedRevision: 'no_stream' });
      inflight.add(p);
      void p.finally(() => inflight.delete(p));
      sent++;
    }
    await sleep(5);
  }
  await Promise.all(inflight);
  const achieved = sent / ((performance.now() - l0) / 1000);
  eld.disable();
  await sleep(2000);
  sampling = false;
  await sampler;
  abort.abort();
  await running.catch(() => undefined);
  await statementTimes(db, 'lag', false);
  lags.sort((x, y) => x - y);
  const lagP95 = percentile(lags, 95);
  const lagMax = lags[lags.length - 1] ?? 0;
  const bn = batches.map((x) => x.n).sort((x, y) => x - y);
  const bms = batches.map((x) => x.ms).sort((x, y) => x - y);
  console.log(`lag: ${fmt(batches.length)} batches, events per batch p50 ${fmt(percentile(bn, 50))} max ${fmt(bn[bn.length - 1] ?? 0)}; batch transaction ms p50 ${fmt(percentile(bms, 50), 1)} p95 ${fmt(percentile(bms, 95), 1)} max ${fmt(bms[bms.length - 1] ?? 0, 1)}; event-loop delay p50 ${fmt(eld.percentile(50) / 1e6, 1)} ms p99 ${fmt(eld.percentile(99) / 1e6, 1)} ms`);
  console.log(`lag: ${fmt(sent)} sends at ${fmt(achieved)} sends/s for ${LAG_SECONDS} s; projection lag p50 ${fmt(percentile(lags, 50), 2)} s, p95 ${fmt(lagP95, 2)} s, max ${fmt(lagMax, 2)} s → ${lagMax < 1 ? 'OK (< 1 s)' : 'OVER 1 s'}`);
  console.log('\n' + table(['', 'value'], [
    ['messages in the read model', fmt(MESSAGES)],
    ['projector events/s (from zero)', fmt(projRate)],
    ['worst route p95 (ms)', fmt(worstP95, 1)],
    ['lag max at load (s)', fmt(lagMax, 2)],
  ]));
});
