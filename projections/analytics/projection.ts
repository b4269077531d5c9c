/**
 * The analytics projector. Per batch: load the state rows of every message the batch touches (one
 * query), fold the events in memory (state.ts), write the changed states back (one statement), and
 * add the difference of their rollup contributions to the rollup tables (one additive upsert per
 * table). Rollup rows and states commit with the checkpoint, in the runner's transaction.
 */
import type { Knex } from 'knex';
import type { RecordedEvent } from '../../domain/eventStore';
import type { Projection } from '../runner';
import { analyticsMigrations } from './migrations';
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
const toRow = (s: RecipientStat): StatRow => ({
  message_id: s.messageId, recipient: s.recipient, ordinal: s.ordinal, motor_block_id: s.motorBlockId, account_id: s.accountId,
  accepted_at: s.acceptedAt, domain: s.domain, mx: s.mx, mx_at: s.mxAt, outcome: s.outcome, outcome_at: s.outcomeAt,
  smtp_code: s.smtpCode, enhanced_code: s.enhancedCode, reply_at: s.replyAt,
});

const ROLLUP_COUNTERS: Record<RollupTable, readonly string[]> = {
  block_hourly: COUNTERS,
  domain_hourly: DOMAIN_COUNTERS,
  domain_daily: DOMAIN_COUNTERS,
  code_hourly: ['count'],
};

async function addToRollup(trx: Knex.Transaction, schema: string, table: RollupTable, deltas: Contribution[]): Promise<void> {
  const counters = ROLLUP_COUNTERS[table];
  const rows = deltas
    .filter((d) => counters.some((c) => (d.counters[c as keyof typeof d.counters] ?? 0) !== 0))
    .map((d) => {
      const row: Record<string, unknown> = { ...d.key, ...(d.attrs ?? {}) };
      for (const c of counters) row[c] = d.counters[c as keyof typeof d.counters] ?? 0;
      return row;
    });
  if (rows.length === 0) return;
  const keyCols = Object.keys(deltas[0].key);
  const cols = Object.keys(rows[0]);
  const list = cols.map((c) => `"${c}"`).join(', ');
  const set = counters.map((c) => `"${c}" = t."${c}" + excluded."${c}"`).join(', ');
  await trx.raw(
    `insert into ${q(schema, table)} as t (${list}) select ${list} from json_populate_recordset(null::${q(schema, table)}, ?::json)
     on conflict (${keyCols.map((c) => `"${c}"`).join(', ')}) do update set ${set}`,
    [JSON.stringify(rows)],
  );
}

export async function applyAnalyticsEvents(trx: Knex.Transaction, schema: string, events: RecordedEvent[]): Promise<void> {
  const ids = [...new Set(events.map((e) => (e.data as { messageId?: unknown } | null)?.messageId).filter((id): id is string => typeof id === 'string'))];
  if (ids.length === 0) return;
  const loaded = (await trx.raw(`select * from ${q(schema, 'recipient_stats')} where message_id = any(?::uuid[])`, [ids])).rows as StatRow[];
  const before = new Map<string, RecipientStat>();
  for (const r of loaded) {
    const s = fromRow(r);
    before.set(statKey(s), s);
  }
  const states = new Map(before);
  for (const e of events) applyStatEvent(states, e);

  const deltas = new Map<string, Contribution>();
  const changed: StatRow[] = [];
  for (const [k, s] of states) {
    const old = before.get(k);
    if (old === s) continue;
    changed.push(toRow(s));
    addContributions(deltas, contributions(old), -1);
    addContributions(deltas, contributions(s), 1);
  }
  if (changed.length === 0) return;
  const cols = STAT_COLUMNS.map((c) => `"${c}"`).join(', ');
  const set = STAT_COLUMNS.filter((c) => c !== 'message_id' && c !== 'recipient').map((c) => `"${c}" = excluded."${c}"`).join(', ');
  await trx.raw(
    `insert into ${q(schema, 'recipient_stats')} (${cols}) select ${cols} from json_populate_recordset(null::${q(schema, 'recipient_stats')}, ?::json)
     on conflict (message_id, recipient) do update set ${set}`,
    [JSON.stringify(changed)],
  );
  const byTable = new Map<RollupTable, Contribution[]>();
  for (const d of deltas.values()) {
    const list = byTable.get(d.table);
    if (list) list.push(d);
    else byTable.set(d.table, [d]);
  }
  for (const [table, list] of byTable) await addToRollup(trx, schema, table, list);
}

export const analyticsProjection: Projection = {
  name: 'analytics',
  migrations: analyticsMigrations,
  handles: ANALYTICS_EVENT_TYPES,
  applyBatch: applyAnalyticsEvents,
};
