/** Event builders shared by the projection tests (uuids everywhere: the PostgreSQL store requires them). */
import { randomUUID } from 'node:crypto';
import type { EventData, EventStore } from '../../domain/eventStore.js';

export const iso = (ms: number) => new Date(Date.UTC(2026, 0, 1) + ms).toISOString();

export function acceptedEvent(messageId: string, motorBlockId: string, to: string[], atMs: number, metadata: Record<string, string> = {}): EventData {
  return {
    id: randomUUID(),
    type: 'MessageAccepted',
    version: 1,
    data: {
      messageId, motorBlockId, accountId: '33333333-3333-4333-8333-333333333333', domainId: '44444444-4444-4444-8444-444444444444',
      from: 'app@sender.test', fromName: null, to, subject: `subject ${messageId.slice(0, 8)}`, text: 'hello', html: null, headers: {},
      smtpMessageId: `${messageId}@sender.test`, idempotencyKey: null, source: 'http', metadata, acceptedAt: iso(atMs),
    },
  };
}

export function recipientEvent(type: string, messageId: string, recipient: string, atMs: number, extra: Record<string, unknown> = {}): EventData {
  const reply: Record<string, unknown> =
    type === 'DeliverySucceeded' ? { smtpCode: '250', smtpResponse: '250 2.0.0 ok', enhancedCode: '2.0.0', mx: 'mx.test' }
    : type === 'DeliveryDeferred' ? { smtpCode: '451', smtpResponse: '451 try later', nextAttemptAt: iso(atMs + 60_000) }
    : type === 'DeliveryBounced' ? { smtpCode: '550', smtpResponse: '550 5.1.1 unknown user', enhancedCode: '5.1.1' }
    : type === 'DeliveryFailed' ? { smtpCode: null, smtpResponse: null, reason: 'lifetime_exceeded' }
    : type === 'ComplaintReceived' ? { feedbackType: 'abuse' }
    : {};
  return { id: randomUUID(), type, version: 1, data: { messageId, recipient, at: iso(atMs), attempt: 1, ...reply, ...extra } };
}

const OUTCOME_EVENTS = ['DeliverySucceeded', 'DeliveryBounced', 'DeliveryFailed'];

/**
 * Appends a realistic mix for `count` messages (1-3 recipients, deferrals, complaints, foreign
 * event types in between). Returns the message ids. Deterministic per `seed`.
 */
export async function appendTraffic(store: EventStore, opts: { count: number; motorBlockId: string; seed?: number; startMs?: number }): Promise<{ ids: string[]; eventCount: number }> {
  let s = opts.seed ?? 1;
  const rnd = () => {
    s = (s * 1103515245 + 12345) % 2147483648;
    return s / 2147483648;
  };
  const ids: string[] = [];
  let eventCount = 0;
  const base = opts.startMs ?? 0;
  let pending: Promise<unknown>[] = [];
  const flush = async () => {
    await Promise.all(pending);
    pending = [];
  };
  for (let i = 0; i < opts.count; i++) {
    const id = randomUUID();
    ids.push(id);
    const n = 1 + Math.floor(rnd() * 3);
    const to = Array.from({ length: n }, (_, k) => `user${i}.${k}@d${(i + k) % 5}.test`);
    const t0 = base + i * 1000;
    const events: EventData[] = [acceptedEvent(id, opts.motorBlockId, to, t0, { order: String(i % 10), batch: `b${i % 3}` })];
    to.forEach((r, k) => {
      events.push(recipientEvent('DeliveryStarted', id, r, t0 + 10 + k));
      if (rnd() < 0.3) events.push(recipientEvent('DeliveryDeferred', id, r, t0 + 20 + k));
      if (rnd() < 0.85) events.push(recipientEvent(OUTCOME_EVENTS[Math.floor(rnd() * 3)], id, r, t0 + 30 + k));
      if (rnd() < 0.05) events.push(recipientEvent('ComplaintReceived', id, r, t0 + 40 + k));
    });
    eventCount += events.length;
    pending.push(store.append(`message-${id}`, events, { expectedRevision: 'no_stream' }));
    if (i % 7 === 0) {
      eventCount++;
      pending.push(store.append(`account-${randomUUID()}`, [{ id: randomUUID(), type: 'AccountCreated', version: 1, data: { accountId: randomUUID(), email: 'x@y.test', plan: 'free', createdAt: iso(t0) } }]));
    }
    if (pending.length >= 50) await flush();
  }
  await flush();
  return { ids, eventCount };
}

/** Every row of the given tables of a schema, as JSON text ordered by the full row (for exact comparison). */
export async function dumpTables(db: import('knex').Knex, schema: string, tables: readonly string[]): Promise<Record<string, string[]>> {
  const out: Record<string, string[]> = {};
  for (const table of tables) {
    const r = await db.raw(`select row_to_json(t)::text as j from "${schema}"."${table}" t order by 1`);
    out[table] = (r.rows as Array<{ j: string }>).map((x) => x.j);
  }
  return out;
}

export const MESSAGE_TABLES = ['messages', 'message_recipients', 'message_events'] as const;

/**
 * Runs catchUp() until `expected` events were consumed. The PostgreSQL store holds back events while
 * any older transaction of the cluster runs (other suites share the server), so one catchUp() may
 * stop short of what was just appended.
 */
export async function catchUpAll(runner: { catchUp(): Promise<number> }, expected: number, timeoutMs = 30_000): Promise<number> {
  let consumed = 0;
  const until = Date.now() + timeoutMs;
  while (consumed < expected) {
    consumed += await runner.catchUp();
    if (consumed >= expected) break;
    if (Date.now() > until) throw new Error(`catchUp consumed ${consumed} of ${expected} events before timing out`);
    await new Promise((r) => setTimeout(r, 20));
  }
  return consumed;
}

export async function waitFor(cond: () => Promise<boolean>, timeoutMs = 30_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (!(await cond())) {
    if (Date.now() > until) throw new Error('timed out waiting');
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Waits until the store's global log shows `n` events (see catchUpAll on held-back events). */
export async function waitVisible(store: EventStore, n: number): Promise<void> {
  await waitFor(async () => (await store.readAll({ after: null, maxCount: n + 1 })).length >= n);
}
