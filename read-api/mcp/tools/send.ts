import { z } from 'zod';
import { isIdempotencyKey, MAX_IDEMPOTENCY_KEY, sendMessage } from '../../../commands/send/sendMessage';
import { acceptedData, dryRunData } from '../../../commands/send/sendResult';
import { unavailableCode } from '../../http/errors';
import { fail, isDomainError } from '../../../domain/errors';
import { defineTool, ownBlock } from '../tool';

/**
 * send_email: POST /v1/send for an agent. The grant is account-wide, so the tool names the block
 * (it must be the grant's account's); everything after that is the send path of the REST route:
 * `sendMessage`, with its validation, recipient rules, quota and error codes.
 */
export const sendEmail = defineTool({
  name: 'send_email',
  scope: 'send:transactional',
  readOnly: false,
  description: 'Send a transactional email from a Motor Block of the account (the same rules, quota and error codes as POST /v1/send). '
    + 'With dryRun true everything is validated and nothing is queued or charged. Returns the message id; read its outcome with get_message.',
  input: {
    motorBlockId: z.string().describe('The Motor Block to send from (list_motor_blocks)'),
    from: z.string().describe('Bare sender address; its domain must be the block\'s verified domain'),
    fromName: z.string().optional().describe('Display name, at most 78 characters'),
    to: z.union([z.string(), z.array(z.string())]).describe('One recipient address or a list'),
    subject: z.string(),
    text: z.string().optional().describe('Plain-text body (text or html is required)'),
    html: z.string().optional().describe('HTML body'),
    headers: z.record(z.string(), z.string()).optional().describe('Custom headers; reserved names are refused with DISALLOWED_HEADERS'),
    metadata: z.record(z.string(), z.union([z.string(), z.number(), z.boolean()])).optional()
      .describe('Up to 20 key/value pairs, searchable in search_logs as metadata.<key>:<value>'),
    dryRun: z.boolean().optional().describe('Validate only: nothing is queued, logged or charged'),
    idempotencyKey: z.string().optional()
      .describe(`1 to ${MAX_IDEMPOTENCY_KEY} visible ASCII characters; a retry with the same key within 24 hours returns the first send instead of sending again`),
  },
  async run(env, { motorBlockId, idempotencyKey, ...body }) {
    const { ctx } = env;
    const refused = (code: string) => ctx.metrics.sendsRefused.inc({ source: 'mcp', code });
    if (idempotencyKey !== undefined && !isIdempotencyKey(idempotencyKey)) {
      refused('validation_error');
      throw fail('validation_error', 422, `idempotencyKey must be 1 to ${MAX_IDEMPOTENCY_KEY} visible ASCII characters`, { details: { field: 'idempotencyKey' } });
    }
    const now = ctx.clock.now();
    let result;
    try {
      await ownBlock(env, motorBlockId);
      result = await sendMessage(
        { store: ctx.store, directory: ctx.directory, quota: ctx.quota, config: ctx.config },
        { motorBlockId, body, idempotencyKey: idempotencyKey ?? null, source: 'http', now, actor: env.agent.actor },
      );
    } catch (err) {
      refused(isDomainError(err) ? err.code : unavailableCode(err, ctx.config.eventstoreUrl) ?? 'internal_error');
      throw err;
    }
    switch (result.kind) {
      case 'validated':
        return { dryRun: true, ...dryRunData(result, now), message: 'Validation passed; nothing was queued, logged or charged' };
      case 'replayed':
        return { ...acceptedData(result), idempotent: true, message: 'idempotencyKey matched an earlier send; nothing new was queued' };
      case 'accepted': {
        ctx.metrics.sendsAccepted.inc({ source: 'mcp' });
        const daily = result.quota.kind === 'allowed' ? result.quota.effectiveDaily : null;
        return {
          ...acceptedData(result),
          ...(daily ? { rateLimit: { limit: daily.limit, remaining: daily.remaining, resetSeconds: daily.resetIn } } : {}),
          message: 'Message accepted for delivery; read its outcome with get_message',
        };
      }
    }
  },
});

export const SEND_TOOLS = [sendEmail];
