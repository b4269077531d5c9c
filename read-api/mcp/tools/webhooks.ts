import { z } from 'zod';
import {
  createWebhook, deleteWebhook, listDeliveries, listWebhooks, rotateWebhookSecret, testWebhook, updateWebhook, webhookStats, type WebhookCaller, type WebhookDeps,
} from '../../../commands/webhooks/webhooks';
import { WEBHOOK_EVENTS } from '../../../domain/webhooks/webhooks';
import { intParam } from '../../http/params';
import { retentionDaysOfAccount } from '../../http/plan';
import { defineTool, ownBlock, type ToolEnv } from '../tool';

/**
 * read:webhooks and manage:webhooks: a block's outgoing webhooks (commands/webhooks/webhooks.ts, as
 * /api/public/v1/motor-blocks/{id}/webhooks calls it). The block must be the grant's account's.
 */

async function callerOf(env: ToolEnv, motorBlockId: string): Promise<{ deps: WebhookDeps; caller: WebhookCaller }> {
  await ownBlock(env, motorBlockId);
  const { ctx, agent } = env;
  return {
    deps: { store: ctx.store, db: ctx.db, logger: ctx.logger, metrics: ctx.metrics, keys: ctx.keys, clock: ctx.clock, allowPrivateAddresses: ctx.config.webhooks.allowPrivateAddresses },
    caller: { accountId: agent.accountId, motorBlockId, actor: agent.actor },
  };
}

/** The grant's account's retention window, as the REST routes read it. */
const retentionWindow = async (env: ToolEnv) => ({ retentionDays: await retentionDaysOfAccount(env.ctx, env.agent.accountId), now: env.ctx.clock.now() });

const motorBlockId = z.string().describe('A Motor Block of the account (list_motor_blocks)');
const webhookId = z.string().describe('A webhook of that block (list_webhooks)');
const events = z.array(z.enum(WEBHOOK_EVENTS as [string, ...string[]])).describe(`Event names: ${WEBHOOK_EVENTS.join(', ')}`);

export const listWebhooksTool = defineTool({
  name: 'list_webhooks',
  scope: 'read:webhooks',
  readOnly: true,
  description: 'List a Motor Block\'s webhook endpoints, oldest first (never their secrets).',
  input: { motorBlockId },
  async run(env, { motorBlockId }) {
    const { caller } = await callerOf(env, motorBlockId);
    return { webhooks: await listWebhooks(env.ctx.db, caller.motorBlockId) };
  },
});

export const listWebhookDeliveriesTool = defineTool({
  name: 'list_webhook_deliveries',
  scope: 'read:webhooks',
  readOnly: true,
  description: 'A webhook\'s deliveries, newest first, with the last attempt\'s HTTP status, error and duration.',
  input: { motorBlockId, webhookId, limit: z.number().int().optional().describe('1 to 200, default 50') },
  async run(env, { motorBlockId, webhookId, limit }) {
    const { caller } = await callerOf(env, motorBlockId);
    const n = intParam('limit', limit, 1, 200, 50);
    return { deliveries: await listDeliveries(env.ctx.db, caller.motorBlockId, webhookId, n, await retentionWindow(env)), limit: n };
  },
});

export const getWebhookStatsTool = defineTool({
  name: 'get_webhook_stats',
  scope: 'read:webhooks',
  readOnly: true,
  description: 'Delivered, failed, queued and retrying deliveries of a webhook, its failure rate and attempt latency over the last `hours`.',
  input: { motorBlockId, webhookId, hours: z.number().int().optional().describe('1 to 168 and within the plan\'s retention, default 24') },
  async run(env, { motorBlockId, webhookId, hours }) {
    const { caller } = await callerOf(env, motorBlockId);
    const h = intParam('hours', hours, 1, 168, 24);
    return webhookStats(env.ctx.db, caller.motorBlockId, webhookId, h, await retentionWindow(env));
  },
});

export const createWebhookTool = defineTool({
  name: 'create_webhook',
  scope: 'manage:webhooks',
  readOnly: false,
  description: 'Create a webhook endpoint on a Motor Block. The answer carries its signing secret ONCE: every delivery has X-Service-Signature, the hex HMAC-SHA256 of the raw body with it.',
  input: { motorBlockId, url: z.string().describe('http or https URL the events are POSTed to'), events: events.optional().describe('Default: all six message events') },
  async run(env, { motorBlockId, ...body }) {
    const { deps, caller } = await callerOf(env, motorBlockId);
    const { webhook, secret } = await createWebhook(deps, caller, body);
    return { ...webhook, secret, message: 'Keep the secret: it is not shown again' };
  },
});

export const updateWebhookTool = defineTool({
  name: 'update_webhook',
  scope: 'manage:webhooks',
  readOnly: false,
  description: 'Change a webhook\'s url, events or enabled (pause with false, resume with true); what is left out keeps its value.',
  input: { motorBlockId, webhookId, url: z.string().optional(), events: events.optional(), enabled: z.boolean().optional() },
  async run(env, { motorBlockId, webhookId, ...body }) {
    const { deps, caller } = await callerOf(env, motorBlockId);
    return updateWebhook(deps, caller, webhookId, body);
  },
});

export const rotateWebhookSecretTool = defineTool({
  name: 'rotate_webhook_secret',
  scope: 'manage:webhooks',
  readOnly: false,
  description: 'Replace a webhook\'s signing secret. The answer carries the new secret ONCE: it signs X-Service-Signature from now on; the replaced one signs X-Service-Signature-Previous for previousSecretValidForSeconds (default 86400, 0 drops it at once) so the receiver can switch without downtime.',
  input: { motorBlockId, webhookId, previousSecretValidForSeconds: z.number().int().optional().describe('0 to 604800, default 86400') },
  async run(env, { motorBlockId, webhookId, ...body }) {
    const { deps, caller } = await callerOf(env, motorBlockId);
    const { webhook, secret } = await rotateWebhookSecret(deps, caller, webhookId, body);
    return { ...webhook, secret, message: 'Keep the new secret: it is not shown again' };
  },
});

export const deleteWebhookTool = defineTool({
  name: 'delete_webhook',
  scope: 'manage:webhooks',
  readOnly: false,
  destructive: true,
  description: 'Delete a webhook endpoint: nothing more is queued for it; deliveries in flight stop at their next attempt.',
  input: { motorBlockId, webhookId },
  async run(env, { motorBlockId, webhookId }) {
    const { deps, caller } = await callerOf(env, motorBlockId);
    return deleteWebhook(deps, caller, webhookId);
  },
});

export const testWebhookTool = defineTool({
  name: 'test_webhook',
  scope: 'manage:webhooks',
  readOnly: false,
  description: 'Queue a synthetic webhook.test delivery (also to a disabled endpoint); read its outcome with list_webhook_deliveries.',
  input: { motorBlockId, webhookId },
  async run(env, { motorBlockId, webhookId }) {
    const { deps, caller } = await callerOf(env, motorBlockId);
    return testWebhook(deps, caller, webhookId);
  },
});

export const WEBHOOK_TOOLS = [
  listWebhooksTool, listWebhookDeliveriesTool, getWebhookStatsTool, createWebhookTool, updateWebhookTool, rotateWebhookSecretTool, deleteWebhookTool, testWebhookTool,
];
