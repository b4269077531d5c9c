import { z } from 'zod';
import { authDepsOf } from '../../../commands/auth/deps';
import { listFreeRecipients, removeFreeRecipient, requestFreeRecipient } from '../../../commands/freeRecipients/freeRecipients';
import { defineTool } from '../tool';

/** manage:recipients: the Free plan's free recipients (commands/freeRecipients/freeRecipients.ts, as /api/public/v1/account/free-recipients calls it). */

export const listFreeRecipientsTool = defineTool({
  name: 'list_free_recipients',
  scope: 'manage:recipients',
  readOnly: true,
  description: 'The addresses a Free account may send test mail to besides its own, each pending or confirmed, with the limit and usage.',
  input: {},
  async run({ ctx, agent }) {
    return listFreeRecipients(authDepsOf(ctx), agent.accountId);
  },
});

export const addFreeRecipientTool = defineTool({
  name: 'add_free_recipient',
  scope: 'manage:recipients',
  readOnly: false,
  description: 'Ask an address to confirm it accepts test mail: a confirmation link is mailed to it, and sends to it are allowed once its owner opens it. The answer is the same whether a mail was sent or withheld.',
  input: { email: z.string() },
  async run({ ctx, agent }, body) {
    const recipient = await requestFreeRecipient({ ...authDepsOf(ctx), limiter: ctx.limiter }, { accountId: agent.accountId, actor: agent.actor }, body, ctx.clock.now());
    return { recipient, message: 'If the address can receive it, a confirmation link is on its way; sends are allowed once it is opened' };
  },
});

export const removeFreeRecipientTool = defineTool({
  name: 'remove_free_recipient',
  scope: 'manage:recipients',
  readOnly: false,
  destructive: true,
  description: 'Remove an address (pending or confirmed) from the free recipients; Free-plan sends to it are refused again.',
  input: { recipientId: z.string().describe('The id list_free_recipients shows') },
  async run({ ctx, agent }, { recipientId }) {
    return removeFreeRecipient(authDepsOf(ctx), { accountId: agent.accountId, actor: agent.actor }, recipientId, ctx.clock.now());
  },
});

export const RECIPIENT_TOOLS = [listFreeRecipientsTool, addFreeRecipientTool, removeFreeRecipientTool];
