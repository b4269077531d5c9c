import { z } from 'zod';
import { authDepsOf } from '../../../commands/auth/deps';
import { convertSandbox, provisionSandbox, sandboxStatus, setOutboundAllowlist, type SandboxActor } from '../../../commands/sandbox/sandbox';
import { defineTool, type ToolEnv } from '../tool';

/**
 * manage:sandbox: the account sandbox (commands/sandbox/sandbox.ts, as /api/public/v1/account/sandbox
 * and the dashboard's outbound allowlist route call it).
 */

const caller = ({ ctx, agent }: ToolEnv): { deps: ReturnType<typeof authDepsOf>; actor: SandboxActor; now: Date } =>
  ({ deps: authDepsOf(ctx), actor: { accountId: agent.accountId, actor: agent.actor }, now: ctx.clock.now() });

export const sandboxStatusTool = defineTool({
  name: 'get_sandbox_status',
  scope: 'manage:sandbox',
  readOnly: true,
  description: 'Whether the account sandbox is provisioned: its handle, sandbox domain, block id, effective outbound allowlist and whether it was converted.',
  input: {},
  async run(env) {
    const { deps, actor } = caller(env);
    return sandboxStatus(deps, actor.accountId);
  },
});

export const provisionSandboxTool = defineTool({
  name: 'provision_sandbox',
  scope: 'manage:sandbox',
  readOnly: false,
  description: 'Provision the account sandbox (a service-owned domain, no DNS, and an allowlist-locked block); answers the existing sandbox when there is one. Never returns a credential.',
  input: {
    handle: z.string().optional().describe('A DNS label (1 to 63 letters, digits, inner hyphens); generated when omitted. The domain is <handle>.sandbox.<service domain>'),
    channel: z.enum(['agent', 'dashboard', 'cli', 'api']).optional().describe('Default agent'),
  },
  async run(env, body) {
    const { deps, actor, now } = caller(env);
    const { created, status } = await provisionSandbox(deps, actor, body, now);
    return { created, ...status };
  },
});

export const setSandboxAllowlistTool = defineTool({
  name: 'set_sandbox_allowlist',
  scope: 'manage:sandbox',
  readOnly: false,
  description: 'Replace the addresses the sandbox block may send to (the account owner\'s address always stays on the allowlist). Returns the sandbox status.',
  input: { addresses: z.array(z.string()).describe('The whole list (an empty list clears it)') },
  async run(env, body) {
    const { deps, actor, now } = caller(env);
    return setOutboundAllowlist(deps, actor, body, now);
  },
});

export const convertSandboxTool = defineTool({
  name: 'convert_sandbox',
  scope: 'manage:sandbox',
  readOnly: false,
  destructive: true,
  description: 'One-way: move the sandbox block onto a verified domain of the account (same block, keys and password; new SMTP username) and lift the allowlist.',
  input: {
    domainId: z.string().describe('A verified, non-sandbox domain of the account'),
    name: z.string().optional().describe('New block name (default: the domain\'s name)'),
    type: z.enum(['transactional', 'general_purpose']).optional().describe('Default general_purpose'),
  },
  async run(env, body) {
    const { deps, actor, now } = caller(env);
    return convertSandbox(deps, actor, body, now);
  },
});

export const SANDBOX_TOOLS = [sandboxStatusTool, provisionSandboxTool, setSandboxAllowlistTool, convertSandboxTool];
