/**
 * bench:replay — replay speed of the messages projection: seeds realistic message streams
 * (MessageAccepted + DeliveryStarted + DeliverySucceeded, one 3-event append per message, many
 * appends in flight over several store instances so group commit fills its batches), VACUUM
 * ANALYZEs the log (as autovacuum would have on a long-lived store), then times:
 *   baseline  plain readAll() over the whole log, batches of the rebuild's size, nothing applied
 *             (the store's read ceiling);
 *   rebuild   projections/runner.ts rebuild() of the messages projection (replay into
 *             rm_messages__next, secondary indexes, swap).
 *
 * Settings (env or --arg=value):
 *   REPLAY_EVENTS / --events      events to seed (default 1,000,000; rounded up to whole messages)
 *   REPLAY_BATCH / --batch        rebuild and readAll batch size (default 5000, rebuild's default)
 *   REPLAY_SEED_STORES / --seed-stores   store instances appending in parallel (default 2)
 *   REPLAY_SEED_INFLIGHT / --seed-inflight  appends in flight per store (default 1000)
 *   BENCH_CPU_PROF=<dir>          write a .cpuprofile of the rebuild phase (this process)
 */
import { randomUUID } from 'node:crypto';
import { Session } from 'node:inspector/promises';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { EventData } from '../domain/eventStore';
import { streamName } from '../domain/eventStore';
import { PostgresEventStore } from '../infra/eventstore';
import { messagesProjection } from '../projections/messages/projection';
import { rebuild } from '../projections/runner';
import { fmt, intSetting, machine, onCleanup, runBench, table } from './lib/common';
import { benchEnv, createFixture } from './lib/fixture';

const EVENTS = intSetting('REPLAY_EVENTS', 'events', 1_000_000);
const BATCH = Math.max(1, intSetting('REPLAY_BATCH', 'batch', 5000));
const SEED_STORES = Math.max(1, intSetting('REPLAY_SEED_STORES', 'seed-stores', 2));
const SEED_INFLIGHT = Math.max(1, intSetting('REPLAY_SEED_INFLIGHT', 'seed-inflight', 1000));
const MESSAGES = Math.ceil(EVENTS / 3);

runBench('bench:replay', 600 + Math.ceil(EVENTS / 1000) * 2, async () => {
  console.log(`bench:replay — ${machine()}`);
  console.log(`${fmt(MESSAGES * 3)} events (${fmt(MESSAGES)} messages × 3), batch ${BATCH}, seeding with ${SEED_STORES} store(s) × ${SEED_INFLIGHT} appends in flight\n`);
  const f = await createFixture('replay', benchEnv());
  const { db } = f.rt;

  // ------------------------------------------------------------------ seed
  const t0 = performance.now();
  const stores = await Promise.all(Array.from({ length: SEED_STORES }, async () => {
    const s = new PostgresEventStore(f.databaseUrl, { poolSize: 2, applicationName: 'bench-seed' });
    await s.init();
    return s;
  }));
  onCleanup('seed stores', () => Promise.all(stores.map((s) => s.close())));
  let next = 0;
  let appended = 0;
  let lastReport = performance.now();
  const base = Date.now() - 3 * 24 * 3600 * 1000;
  await Promise.all(stores.flatMap((store) => Array.from({ length: SEED_INFLIGHT }, async () => {
    while (next < MESSAGES) {
      const i = next++;
      const id = randomUUID();
      await store.append(streamName('message', id), messageEvents(id, i, base), { expectedRevision: 'no_stream' });
      appended += 3;
      if (performance.now() - lastReport > 5000) {
        lastReport = performance.now();
        console.log(`  seeded ${fmt(appended)} events (${fmt(appended / ((lastReport - t0) / 1000))}/s)`);
      }
    }
  })));
  const seedMs = performance.now() - t0;
  await Promise.all(stores.map((s) => s.close()));
  console.log(`seeded ${fmt(appended)} events in ${fmt(seedMs / 1000, 1)} s (${fmt(appended / (seedMs / 1000))} events/s)`);
  const v0 = performance.now();
  await db.raw('VACUUM (ANALYZE) events');
  const size = (await db.raw(`select pg_size_pretty(pg_total_relation_size('events')) as s, (select count(*) from events)::int as n`)).rows[0];
  console.log(`VACUUM ANALYZE ${fmt(performance.now() - v0)} ms; events table ${size.s}, ${fmt(size.n)} rows (incl. the fixture's block)\n`);

  // ------------------------------------------------------------------ baseline: readAll
  const r0 = performance.now();
  let read = 0;
  let after: string | null = null;
  for (;;) {
    const batch = await f.rt.store.readAll({ after, maxCount: BATCH });
    if (batch.length === 0) break;
    read += batch.length;
    after = batch[batch.length - 1].position;
  }
  const readMs = performance.now() - r0;
  const readRate = read / (readMs / 1000);
  console.log(`readAll: ${fmt(read)} events in ${fmt(readMs / 1000, 2)} s = ${fmt(readRate)} events/s`);

  // ------------------------------------------------------------------ rebuild
  const profDir = process.env.BENCH_CPU_PROF;
  const session = profDir ? new Session() : null;
  if (session) { session.connect(); await session.post('Profiler.enable'); await session.post('Profiler.start'); }
  let replayMs = 0;
  let lastLog = performance.now();
  // Time inside the projection's applyBatch (its SQL and the in-memory fold) vs the rest of the
  // rebuild (reading, transactions, checkpoint, index build, swap).
  let applyMs = 0;
  const timedProjection = {
    ...messagesProjection,
    applyBatch: async (...args: Parameters<typeof messagesProjection.applyBatch>) => {
      const t = performance.now();
      try { await messagesProjection.applyBatch(...args); } finally { applyMs += performance.now() - t; }
    },
  };
  const res = await rebuild(db, f.rt.store, timedProjection, {
    batchSize: BATCH,
    onProgress: (p) => {
      if (p.phase === 'swap') replayMs = p.elapsedMs;
      if (p.phase === 'replay' && performance.now() - lastLog > 5000) {
        lastLog = performance.now();
        console.log(`  rebuild: ${fmt(p.done)} events, ${fmt(p.eventsPerSecond)}/s`);
      }
    },
  });
  if (session) {
    const { profile } = await session.post('Profiler.stop');
    mkdirSync(profDir!, { recursive: true });
    const file = join(profDir!, `replay-rebuild-${Date.now()}.cpuprofile`);
    writeFileSync(file, JSON.stringify(profile));
    session.disconnect();
    console.log(`profile: ${file}`);
  }
  const rebuildRate = res.events / (res.durationMs / 1000);
  console.log(`rebuild: ${fmt(res.events)} events (${fmt(res.applied)} applied, ${fmt(res.skipped)} skipped) in ${fmt(res.durationMs / 1000, 2)} s = ${fmt(rebuildRate)} events/s` +
    ` (replay incl. index build until swap ${fmt(replayMs / 1000, 2)} s; inside applyBatch ${fmt(applyMs / 1000, 2)} s = ${fmt((100 * applyMs) / res.durationMs)}%)`);
  const rows = (await db.raw('select (select count(*) from rm_messages.messages)::int as m, (select count(*) from rm_messages.message_events)::int as e')).rows[0];
  const ok = rows.m === MESSAGES;
  console.log(`read model: ${fmt(rows.m)} messages, ${fmt(rows.e)} timeline rows → ${ok ? 'OK' : `MISMATCH (expected ${MESSAGES} messages)`}`);
  if (!ok) process.exitCode = 2;

  console.log('\n' + table(['', 'events', 'seconds', 'events/s', 'ratio'], [
    ['readAll (store read ceiling)', fmt(read), fmt(readMs / 1000, 2), fmt(readRate), '1.00'],
    ['rebuild(messages)', fmt(res.events), fmt(res.durationMs / 1000, 2), fmt(rebuildRate), fmt(rebuildRate / readRate, 2)],
  ]));
});

/** One realistic delivered message: accepted, started and delivered 0.3–2 s later. */
function messageEvents(id: string, i: number, base: number): EventData[] {
  const acceptedAt = new Date(base + i * 50);
  const started = new Date(acceptedAt.getTime() + 80 + (i % 7) * 40);
  const delivered = new Date(started.getTime() + 200 + (i % 13) * 120);
  const to = `customer${i % 50_000}@example${i % 97}.test`;
  const motorBlockId = '00000000-0000-4000-8000-00000000b10c';
  return [
    {
      id: randomUUID(), type: 'MessageAccepted', version: 1, metadata: { actor: `motorBlock:${motorBlockId}` },
      data: {
        messageId: id, motorBlockId, accountId: '00000000-0000-4000-8000-0000000acc01', domainId: '00000000-0000-4000-8000-00000000d0d0',
        from: 'orders@shop.example', fromName: 'The Shop', to: [to], subject: `Your order #A-${10_000 + i} has shipped`,
        text: `Hello,\n\nYour order #A-${10_000 + i} has shipped and should arrive on Thursday.\n\n${'Track it any time from your account page. '.repeat(8)}\n\nThanks,\nThe Shop`,
        html: `<!doctype html><html><body><p>Hello,</p><p>Your order <b>#A-${10_000 + i}</b> has shipped.</p>${'<p>Track it any time from <a href="https://shop.example/orders">your account page</a>.</p>'.repeat(8)}</body></html>`,
        headers: { 'X-Campaign': 'shipping' }, smtpMessageId: `${id}@shop.example`, idempotencyKey: null, source: 'http',
        metadata: { orderId: `A-${10_000 + i}` }, acceptedAt: acceptedAt.toISOString(),
      },
    },
    {
      id: randomUUID(), type: 'DeliveryStarted', version: 1, metadata: { actor: 'worker' },
      data: { messageId: id, recipient: to, at: started.toISOString(), attempt: 1 },
    },
    {
      id: randomUUID(), type: 'DeliverySucceeded', version: 1, metadata: { actor: 'worker' },
      data: {
        messageId: id, recipient: to, at: delivered.toISOString(), attempt: 1, smtpCode: '250', enhancedCode: '2.0.0',
        smtpResponse: `250 2.0.0 Ok: queued as ${id.slice(0, 10).toUpperCase()}`, mx: `mx.example${i % 97}.test`,
      },
    },
  ];
}
