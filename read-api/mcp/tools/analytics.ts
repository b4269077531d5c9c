import { z } from 'zod';
import { listBlocks } from '../../../commands/blocks/accountBlocks';
import { fail } from '../../../domain/errors';
import { blockSeries, blockTotals, hourRange, reputation, withRates, type HourRange } from '../../../projections/analytics';
import { searchLogs } from '../../../projections/messages';
import { maskEmail } from '../../../projections/messages/pii';
import { listBlockSuppressions } from '../../../projections/blockSuppressions/queries';
import { retentionDaysOfAccount } from '../../http/plan';
import { requireInsideRetention, retentionRange } from '../../http/retention';
import { readMessage, readRecipients } from '../../messages/messageReads';
import { messageDto, recipientsDto } from '../../messages/present';
import { defineTool, ownBlock, type ToolEnv } from '../tool';

/**
 * read:analytics: the account's blocks, block analytics, logs and messages: the queries of
 * /api/public/v1/motor-blocks/{id}/overview, /metrics, /logs and /messages/{id}. Recipients are
 * always masked: logs.pii is never granted to an agent client (SPEC).
 */

const HOUR_MS = 3_600_000;

const blockDeps = ({ ctx }: ToolEnv) => ({ store: ctx.store, db: ctx.db, logger: ctx.logger, metrics: ctx.metrics, clock: ctx.clock, config: ctx.config });

/** The block (the grant's account's) and from/to as whole hours inside the plan's retention window, as the REST analytics routes take them. */
async function scopedRange(env: ToolEnv, motorBlockId: string, from: string | undefined, to: string | undefined): Promise<{ range: HourRange; retentionDays: number }> {
  await ownBlock(env, motorBlockId);
  const retentionDays = await retentionDaysOfAccount(env.ctx, env.agent.accountId);
  const now = env.ctx.clock.now();
  const r = retentionRange({ from, to }, retentionDays, now);
  return { range: hourRange(r.from, r.to ?? now), retentionDays };
}

const isoRange = (range: HourRange) => ({ from: range.fromHour.toISOString(), to: new Date(range.toHour.getTime() + HOUR_MS - 1).toISOString() });

const blockId = z.string().describe('A Motor Block of the account (list_motor_blocks)');
const from = z.string().optional().describe('ISO 8601, inside the plan\'s retention window (default: the window\'s start)');
const to = z.string().optional().describe('ISO 8601 (default: now)');

export const listMotorBlocks = defineTool({
  name: 'list_motor_blocks',
  scope: 'read:analytics',
  readOnly: true,
  description: 'List the account\'s Motor Blocks (transactional and general-purpose, inactive included) with their domain and status. Never returns credentials.',
  input: {},
  async run(env) {
    return { motorBlocks: await listBlocks(blockDeps(env), { accountId: env.agent.accountId, actor: env.agent.actor }) };
  },
});

export const getBlockOverview = defineTool({
  name: 'get_block_overview',
  scope: 'read:analytics',
  readOnly: true,
  description: 'Totals and rates (delivered, bounced, complained, failed, deferred) of a Motor Block over a range, with its reputation score over the retention window.',
  input: { motorBlockId: blockId, from, to },
  async run(env, { motorBlockId, from, to }) {
    const { range, retentionDays } = await scopedRange(env, motorBlockId, from, to);
    const [totals, rep] = await Promise.all([
      blockTotals(env.ctx.db, motorBlockId, range), reputation(env.ctx.db, motorBlockId, retentionDays, env.ctx.clock.now()),
    ]);
    return { motorBlockId, ...isoRange(range), totals: withRates(totals), reputation: rep };
  },
});

export const getBlockMetrics = defineTool({
  name: 'get_block_metrics',
  scope: 'read:analytics',
  readOnly: true,
  description: 'A zero-filled time series (per hour or per day, oldest first) of a Motor Block\'s sends and outcomes.',
  input: { motorBlockId: blockId, interval: z.enum(['hour', 'day']), from, to },
  async run(env, { motorBlockId, interval, from, to }) {
    const { range } = await scopedRange(env, motorBlockId, from, to);
    return { motorBlockId, interval, ...isoRange(range), points: await blockSeries(env.ctx.db, motorBlockId, range, interval) };
  },
});

export const searchLogsTool = defineTool({
  name: 'search_logs',
  scope: 'read:analytics',
  readOnly: true,
  description: 'Delivery logs of a Motor Block, newest first, paginated with nextCursor. Recipient addresses are always masked. '
    + '`query` filters with recipient:<email>, domain:<recipient domain>, status:<outcome>, metadata.<key>:<value> (terms ANDed).',
  input: {
    motorBlockId: blockId,
    query: z.string().optional(),
    status: z.string().optional().describe('queued, processed, deferred, delivered, bounced, failed, complained or sent; a comma-separated list is ORed'),
    from,
    to,
    limit: z.number().int().optional().describe('1 to 1000, default 100'),
    cursor: z.string().optional().describe('nextCursor of the previous page'),
  },
  async run(env, { motorBlockId, query, status, from, to, limit, cursor }) {
    await ownBlock(env, motorBlockId);
    const { ctx } = env;
    const range = retentionRange({ from, to }, await retentionDaysOfAccount(ctx, env.agent.accountId), ctx.clock.now());
    const page = await searchLogs(ctx.db, { motorBlockId, from: range.from, to: range.to, query, status, limit, cursor });
    return { items: page.items.map((m) => messageDto(m, false)), nextCursor: page.nextCursor, limit: limit ?? 100, pii_masked: true };
  },
});

export const getMessage = defineTool({
  name: 'get_message',
  scope: 'read:analytics',
  readOnly: true,
  description: 'One message by the id send_email returned: its current outcome and each recipient\'s outcome (attempts, SMTP reply). Recipient addresses are masked.',
  input: { messageId: z.string() },
  async run(env, { messageId }) {
    const { ctx } = env;
    const notFound = () => fail('message_not_found', 404, 'Message not found');
    const m = await readMessage(ctx.db, ctx.store, messageId);
    if (!m || m.motorBlockId === null) throw notFound();
    // A message of another account is not found (its id does not leak), like a block of another account.
    const block = await ctx.directory.block(m.motorBlockId);
    if (!block || block.accountId !== env.agent.accountId) throw notFound();
    requireInsideRetention(m.queuedAt, await retentionDaysOfAccount(ctx, env.agent.accountId), ctx.clock.now());
    const r = await readRecipients(ctx.db, ctx.store, messageId);
    if (!r) throw notFound();
    return { message: messageDto(m, false), recipients: { ...recipientsDto(r, false, ''), pii_unmask_path: null }, pii_masked: true };
  },
});

export const listBlockSuppressionsTool = defineTool({
  name: 'list_block_suppressions',
  scope: 'read:analytics',
  readOnly: true,
  description: 'The addresses a Motor Block no longer delivers to after a hard bounce or a complaint, most recently suppressed first, paginated with nextCursor. '
    + 'Addresses are always masked. Sends to them are still accepted and end failed, until a hard bounce is lifted (lift_block_suppression); a complaint is never lifted.',
  input: {
    motorBlockId: blockId,
    limit: z.number().int().optional().describe('1 to 1000, default 100'),
    cursor: z.string().optional().describe('nextCursor of the previous page'),
  },
  async run(env, { motorBlockId, limit, cursor }) {
    await ownBlock(env, motorBlockId);
    const page = await listBlockSuppressions(env.ctx.db, motorBlockId, { limit, cursor });
    return { items: page.items.map((r) => ({ ...r, address: maskEmail(r.address) })), nextCursor: page.nextCursor, limit: limit ?? 100, pii_masked: true };
  },
});

export const ANALYTICS_TOOLS = [listMotorBlocks, getBlockOverview, getBlockMetrics, searchLogsTool, getMessage, listBlockSuppressionsTool];
