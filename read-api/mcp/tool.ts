import type { z } from 'zod';
import { ownedBlock } from '../../commands/auth/credentials';
import type { AgentClaims } from '../../commands/oauth/agentTokens';
import type { AgentScope } from '../../domain/oauth/agent';
import type { MotorBlock } from '../../domain/motorBlock/motorBlock';
import type { HttpContext } from '../http/context';

/**
 * One agent tool (docs/MCP.md "Agent-tool (MCP) servers"): its name, the one scope a call needs,
 * whether it only reads, its zod arguments, and a `run` that parses nothing itself beyond what
 * the shared command or query handler does. A tool is an edge like a controller: it calls the
 * same handler the REST route calls and shapes the answer; a DomainError it throws becomes an
 * `isError` result (read-api/mcp/server.ts).
 */

/** Who calls: the grant's account, acting as `agent:<grantId>` in event metadata. */
export interface AgentCaller {
  accountId: string;
  grantId: string;
  clientId: string;
  userId: string;
  /** Event metadata actor of everything a tool appends. */
  actor: string;
}

export const agentCaller = (c: AgentClaims): AgentCaller => ({
  accountId: c.accountId, grantId: c.grantId, clientId: c.clientId, userId: c.userId, actor: `agent:${c.grantId}`,
});

export interface ToolEnv { ctx: HttpContext; agent: AgentCaller }

export interface AgentTool {
  name: string;
  scope: AgentScope;
  /** Read tools are annotated readOnlyHint and are all a read:* scope grants. */
  readOnly: boolean;
  /** Deletes or irreversibly changes something (annotated destructiveHint). */
  destructive?: boolean;
  description: string;
  input: z.ZodRawShape;
  run(env: ToolEnv, args: Record<string, unknown>): Promise<unknown>;
}

/** A tool whose `run` sees its arguments typed by its own schema. */
export function defineTool<S extends z.ZodRawShape>(t: Omit<AgentTool, 'input' | 'run'> & {
  input: S;
  run(env: ToolEnv, args: z.infer<z.ZodObject<S>>): Promise<unknown>;
}): AgentTool {
  return { ...t, run: (env, args) => t.run(env, args as z.infer<z.ZodObject<S>>) };
}

/**
 * A grant is account-wide: a block named by a tool must be the grant's account's (404
 * motor_block_not_found otherwise, as the REST routes answer for another account's block; a
 * malformed id is 400 invalid_id).
 */
export async function ownBlock(env: ToolEnv, motorBlockId: string): Promise<MotorBlock> {
  return (await ownedBlock(env.ctx.store, env.agent.accountId, motorBlockId)).block;
}
