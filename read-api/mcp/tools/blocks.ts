import { z } from 'zod';
import {
  createBlock, deactivateBlock, deleteBlock, deletionStatus, reactivateBlock, renameBlock, type BlockDeps, type Caller,
} from '../../../commands/blocks/accountBlocks';
import { liftBlockSuppression } from '../../../commands/blocks/suppressions';
import { defineTool, ownBlock, type ToolEnv } from '../tool';

/**
 * manage:motor-blocks: the block lifecycle (commands/blocks/accountBlocks.ts, as
 * /api/public/v1/account/motor-blocks calls it), with the same confirm rules: deactivate and
 * delete need confirm: true (400 confirmation_required otherwise), delete needs deleteHistory.
 */

const callerOf = ({ ctx, agent }: ToolEnv): { deps: BlockDeps; caller: Caller } => ({
  deps: { store: ctx.store, db: ctx.db, logger: ctx.logger, metrics: ctx.metrics, clock: ctx.clock, config: ctx.config },
  caller: { accountId: agent.accountId, actor: agent.actor },
});

const motorBlockId = z.string().describe('A Motor Block of the account (list_motor_blocks)');

export const createMotorBlockTool = defineTool({
  name: 'create_motor_block',
  scope: 'manage:motor-blocks',
  readOnly: false,
  description: 'Create a Motor Block on a verified domain of the account. Retrying with the same idempotencyKey and input returns the same block (created false); '
    + 'the same key with another input is refused with idempotency_conflict. Never returns credentials (see dashboardUrl).',
  input: {
    name: z.string().describe('1 to 100 characters, unique in the account'),
    domainId: z.string().describe('A verified, non-sandbox domain of the account (list_domains)'),
    type: z.enum(['transactional', 'general_purpose']).optional().describe('Default general_purpose'),
    description: z.string().optional().describe('At most 500 characters'),
    idempotencyKey: z.string().describe('A UUID v4 you generate; the same one when retrying'),
  },
  async run(env, { idempotencyKey, ...body }) {
    const { deps, caller } = callerOf(env);
    const { block, created } = await createBlock(deps, caller, body, idempotencyKey);
    return { created, ...block };
  },
});

export const renameMotorBlockTool = defineTool({
  name: 'rename_motor_block',
  scope: 'manage:motor-blocks',
  readOnly: false,
  description: 'Rename a Motor Block; its SMTP username never changes.',
  input: { motorBlockId, name: z.string() },
  async run(env, { motorBlockId, name }) {
    const { deps, caller } = callerOf(env);
    return renameBlock(deps, caller, motorBlockId, { name });
  },
});

export const deactivateMotorBlockTool = defineTool({
  name: 'deactivate_motor_block',
  scope: 'manage:motor-blocks',
  readOnly: false,
  description: 'Deactivate a Motor Block: its sends are refused until it is reactivated; nothing is deleted. Needs confirm: true.',
  input: { motorBlockId, confirm: z.boolean().optional().describe('Must be true') },
  async run(env, { motorBlockId, confirm }) {
    const { deps, caller } = callerOf(env);
    return deactivateBlock(deps, caller, motorBlockId, { confirm });
  },
});

export const reactivateMotorBlockTool = defineTool({
  name: 'reactivate_motor_block',
  scope: 'manage:motor-blocks',
  readOnly: false,
  description: 'Reactivate an inactive Motor Block whose domain is a verified production domain.',
  input: { motorBlockId },
  async run(env, { motorBlockId }) {
    const { deps, caller } = callerOf(env);
    return reactivateBlock(deps, caller, motorBlockId);
  },
});

export const deleteMotorBlockTool = defineTool({
  name: 'delete_motor_block',
  scope: 'manage:motor-blocks',
  readOnly: false,
  destructive: true,
  description: 'Queue the deletion of an INACTIVE Motor Block; returns a jobId (get_motor_block_deletion). Needs confirm: true and deleteHistory: '
    + 'true also deletes its logs and events; false is refused with motor_block_history_present when it ever sent '
    + '(history_unknown, 503: that cannot be told yet, retry shortly).',
  input: { motorBlockId, confirm: z.boolean().optional().describe('Must be true'), deleteHistory: z.boolean() },
  async run(env, { motorBlockId, ...body }) {
    const { deps, caller } = callerOf(env);
    return deleteBlock(deps, caller, motorBlockId, body);
  },
});

export const motorBlockDeletionTool = defineTool({
  name: 'get_motor_block_deletion',
  scope: 'manage:motor-blocks',
  readOnly: true,
  description: 'Status of a block deletion job (queued, running, completed, failed) with what it deleted.',
  input: { jobId: z.string() },
  async run(env, { jobId }) {
    const { deps, caller } = callerOf(env);
    return deletionStatus(deps, caller, jobId);
  },
});

export const liftBlockSuppressionTool = defineTool({
  name: 'lift_block_suppression',
  scope: 'manage:motor-blocks',
  readOnly: false,
  description: 'Lift an address (any case) from a Motor Block\'s suppression list (list_block_suppressions): the next message to it is attempted again. '
    + 'Only hard bounces are lifted; an address the recipient complained about is refused with suppression_not_liftable.',
  input: { motorBlockId, address: z.string().describe('The recipient address, written out (the list shows it masked)') },
  async run(env, { motorBlockId, address }) {
    await ownBlock(env, motorBlockId);
    const lifted = await liftBlockSuppression(env.ctx, motorBlockId, env.agent.actor, address);
    return { ...lifted, lifted: true };
  },
});

export const BLOCK_TOOLS = [
  createMotorBlockTool, renameMotorBlockTool, deactivateMotorBlockTool, reactivateMotorBlockTool, deleteMotorBlockTool, motorBlockDeletionTool, liftBlockSuppressionTool,
];
