/**
 * The analytics projector. Per batch: load the state rows of every message the batch touches (one
 * query), fold the events in memory (state.ts), then ONE statement (a data-modifying CTE per table)
 * writes the changed states back, adds the difference of their rollup contributions to the rollup
 * tables (additive upserts) and records first sends per domain. Two round trips per batch, whatever
 * its size. Rollup rows and states commit with the checkpoint, in the runner's transaction.
 */
import type { Knex } from 'knex';
import type { RecordedEvent } from '../../domain/eventStore';
import { MESSAGE_CONTENT_FIELDS } from '../../domain/events';
import type { Projection } from '../runner';
import { analyticsMigrations } from './migrations';
import { TOMBSTONE, withTombstones } from '../blockTombstone';
import { selectByIds } from '../lookup';
import {
  ANALYTICS_EVENT_TYPES, COUNTERS, DOMAIN_COUNTERS, addContributions, applyStatEvent, contributions, statKey,
  type Contribution, type RecipientStat, type RollupTable, type StatOutcome,
} from './state';

const q = (schema: string, table: string) => `"${schema}"."${table}"`;

interface StatRow {
  message_id: string; recipient: string; ordinal: number; motor_block_id: string | null; account_id: string | null;
  accepted_at: Date | null; domain: string; mx: string | null; mx_at: Date | null; outcome: string; outcome_at: Date;
  smtp_code: string | null; enhanced_code: string | null; reply_at: Date | null;
}
const STAT_COLUMNS = [
  'message_id', 'recipient', 'ordinal', 'motor_block_id', 'account_id', 'accepted_at', 'domain', 'mx', 'mx_at', 'outcome',
  'outcome_at', 'smtp_code', 'enhanced_code', 'reply_at',
] as const satisfies readonly (keyof StatRow)[];

const fromRow = (r: StatRow): RecipientStat => ({
  messageId: r.message_id, recipient: r.recipient, ordinal: r.ordinal, motorBlockId: r.motor_block_id, accountId: r.account_id,
  acceptedAt: r.accepted_at, domain: r.domain, mx: r.mx, mxAt: r.mx_at, outcome: r.outcome as StatOutcome, outcomeAt: r.outcome_at,
  smtpCode: r.smtp_code, enhancedCode: r.enhanced_code, replyAt: r.reply_at,
});

/**
 * States go to PostgreSQL as JSON objects with one-letter keys and times as epoch milliseconds
 * (`json_to_recordset` names and types them): serializing Dates to ISO text was the projector's
 * largest JavaScript cost, and the payload is half the size.
 */
const ms = (d: Date | null): number | null => (d === null ? null : d.getTime());
const wireOf = (s: RecipientStat) => ({
  a: s.messageId, b: s.recipient, c: s.ordinal, d: s.motorBlockId, e: s.accountId, f: ms(s.acceptedAt), g: s.domain, h: s.mx,
  i: ms(s.mxAt), j: s.outcome, k: s.outcomeAt.getTime(), l: s.smtpCode, m: s.enhancedCode, n: ms(s.replyAt),
});
const WIRE_SELECT = `select a, b, c, d, e, to_timestamp(f / 1000.0), g, h, to_timestamp(i / 1000.0), j, to_timestamp(k / 1000.0), l, m, to_timestamp(n / 1000.0)
  from json_to_recordset(?::json) as x(a uuid, b text, c int, d uuid, e uuid, f float8, g text, h text, i float8, j text, k float8, l text, m text, n float8)`;

const ROLLUP_COUNTERS: Record<RollupTable, readonly string[]> = {
  block_hourly: COUNTERS,
  domain_hourly: DOMAIN_COUNTERS,
  domain_daily: DOMAIN_COUNTERS,
  code_hourly: ['count'],
};

/** One data-modifying CTE of the batch's single write statement, with its one JSON parameter. */
interface WritePart { sql: string; binding: Knex.RawBinding }

function rollupPart(schema: string, table: RollupTable, deltas: Contribution[]): WritePart | null {
  const counters = ROLLUP_COUNTERS[table];
  const rows: Array<Record<string, unknown>> = [];
  for (const d of deltas) {
    let nonZero = false;
    for (const c of counters) if ((d.counters[c as keyof typeof d.counters] ?? 0) !== 0) nonZero = true;
    if (!nonZero) continue;
    const row: Record<string, unknown> = { ...d.key, ...(d.attrs ?? {}) };
    for (const c of counters) row[c] = d.counters[c as keyof typeof d.counters] ?? 0;
    rows.push(row);
  }
  if (rows.length === 0) return null;
  const keyCols = Object.keys(deltas[0].key);
  const list = Object.keys(rows[0]).map((c) => `"${c}"`).join(', ');
  const set = counters.map((c) => `"${c}" = t."${c}" + excluded."${c}"`).join(', ');
  return {
    sql: `insert into ${q(schema, table)} as t (${list}) select ${list} from json_populate_recordset(null::${q(schema, table)}, ?::json)
     on conflict (${keyCols.map((c) => `"${c}"`).join(', ')}) do update set ${set}`,
    binding: JSON.stringify(rows),
  };
}

/** Earliest acceptedAt per sending domain (MessageAccepted.domainId): the start of its warm-up. */
function firstSendPart(schema: string, events: RecordedEvent[]): WritePart | null {
  const first = new Map<string, string>();
  for (const e of events) {
    if (e.type !== 'MessageAccepted') continue;
    const d = e.data as { domainId?: unknown; acceptedAt?: unknown } | null;
    if (typeof d?.domainId !== 'string' || typeof d.acceptedAt !== 'string' || Number.isNaN(Date.parse(d.acceptedAt))) continue;
    const at = new Date(d.acceptedAt).toISOString();
    const cur = first.get(d.domainId);
    if (cur === undefined || at < cur) first.set(d.domainId, at);
  }
  if (first.size === 0) return null;
  return {
    sql: `insert into ${q(schema, 'domain_first_send')} as t (domain_id, first_send_at)
     select domain_id, first_send_at from json_populate_recordset(null::${q(schema, 'domain_first_send')}, ?::json)
     on conflict (domain_id) do update set first_send_at = excluded.first_send_at where excluded.first_send_at < t.first_send_at`,
    binding: JSON.stringify([...first].map(([domain_id, first_send_at]) => ({ domain_id, first_send_at }))),
  };
}

/**
 * Writes every part in ONE statement (data-modifying CTEs; each touches its own table once): one
 * round trip per batch instead of one per table, which matters most when the machine is busy.
 */
async function writeParts(trx: Knex.Transaction, parts: WritePart[]): Promise<void> {
  if (parts.length === 0) return;
  if (parts.length === 1) {
    await trx.raw(parts[0].sql, [parts[0].binding]);
    return;
  }
  const sql = `with ${parts.map((p, i) => `w${i} as (${p.sql})`).join(',\n')} select 1`;
  await trx.raw(sql, parts.map((p) => p.binding));
}

export async function applyAnalyticsEvents(trx: Knex.Transaction, schema: string, events: RecordedEvent[]): Promise<void> {
  const parts: WritePart[] = [];
  const firstSends = firstSendPart(schema, events);
  if (firstSends) parts.push(firstSends);
  const ids = [...new Set(events.map((e) => (e.data as { messageId?: unknown } | null)?.messageId).filter((id): id is string => typeof id === 'string'))];
  if (ids.length === 0) return writeParts(trx, parts);
  const loaded = await selectByIds<StatRow>(trx, q(schema, 'recipient_stats'), 'message_id', ids);
  const before = new Map<string, RecipientStat>();
  for (const r of loaded) {
    const s = fromRow(r);
    before.set(statKey(s), s);
  }
  const states = new Map(before);
  for (const e of events) applyStatEvent(states, e);

  const deltas = new Map<string, Contribution>();
  const changed: Array<ReturnType<typeof wireOf>> = [];
  for (const [k, s] of states) {
    const old = before.get(k);
    if (old === s) continue;
    changed.push(wireOf(s));
    addContributions(deltas, contributions(old), -1);
    addContributions(deltas, contributions(s), 1);
  }
  if (changed.length > 0) {
    const cols = STAT_COLUMNS.map((c) => `"${c}"`).join(', ');
    const set = STAT_COLUMNS.filter((c) => c !== 'message_id' && c !== 'recipient').map((c) => `"${c}" = excluded."${c}"`).join(', ');
    parts.push({
      sql: `insert into ${q(schema, 'recipient_stats')} (${cols}) ${WIRE_SELECT}
     on conflict (message_id, recipient) do update set ${set}`,
      binding: JSON.stringify(changed),
    });
    const byTable = new Map<RollupTable, Contribution[]>();
    for (const d of deltas.values()) {
      const list = byTable.get(d.table);
      if (list) list.push(d);
      else byTable.set(d.table, [d]);
    }
    for (const [table, list] of byTable) {
      const part = rollupPart(schema, table, list);
      if (part) parts.push(part);
    }
  }
  await writeParts(trx, parts);
}

/**
 * A deleted block's rows go with its history (projections/blockTombstone.ts, docs/BLOCKS.md).
 * domain_first_send belongs to the domain, which other blocks may share: it is kept.
 */
async function forgetBlockAnalytics(trx: Knex.Transaction, schema: string, motorBlockId: string): Promise<void> {
  for (const table of ['recipient_stats', 'block_hourly', 'domain_hourly', 'domain_daily', 'code_hourly']) {
    await trx.raw(`delete from ${q(schema, table)} where motor_block_id = ?`, [motorBlockId]);
  }
}

export const analyticsProjection: Projection = {
  name: 'analytics',
  migrations: analyticsMigrations,
  handles: [...ANALYTICS_EVENT_TYPES, TOMBSTONE],
  followsMessageTraffic: true,
  ignoresData: MESSAGE_CONTENT_FIELDS,
  applyBatch: withTombstones(applyAnalyticsEvents, forgetBlockAnalytics),
};
