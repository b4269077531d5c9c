import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { objectFromShape } from '@modelcontextprotocol/sdk/server/zod-compat.js';
import { toJsonSchemaCompat } from '@modelcontextprotocol/sdk/server/zod-json-schema-compat.js';
import {
  CallToolRequestSchema, ErrorCode, InitializeRequestSchema, isJSONRPCRequest, isTaskAugmentedRequestParams, ListToolsRequestSchema, McpError, PingRequestSchema,
  type CallToolResult, type JSONRPCErrorResponse, type JSONRPCMessage, type ListToolsResult,
} from '@modelcontextprotocol/sdk/types.js';
import { AjvJsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/ajv-provider.js';
import { z } from 'zod';
import { InvalidEventDataError, WrongExpectedRevisionError } from '../../domain/eventStore';
import { isDomainError } from '../../domain/errors';
import { isUuid } from '../../domain/ids';
import type { McpServerSpec } from '../../domain/oauth/agent';
import { unavailableCode } from '../http/errors';
import type { AgentTool, ToolEnv } from './tool';

/**
 * The MCP server of one agent-tool endpoint for one request (stateless Streamable HTTP: built per
 * POST, closed with its response), over what every request of that endpoint shares, built once
 * (`mcpEndpoint`): its tools, their argument schemas and the `tools/list` answer. Tool failures
 * never leave as HTTP errors: every one becomes a tool result with isError and the JSON
 * `{ error, message, status }` (docs/MCP.md).
 */

const INSTRUCTIONS = 'Motor transactional email tools. Each tool needs one OAuth scope (named in its description); '
  + 'a call whose scope the connection was not granted is refused with HTTP 403 insufficient_scope before it runs: ask the user to reconnect with that scope. '
  + 'Recipient addresses in logs and messages are always masked.';

export interface ToolErrorBody {
  error: string;
  message: string;
  status: number;
  nextAction?: string;
  details?: Record<string, unknown>;
}

/** The error table of this edge, the same codes the HTTP error middleware gives (read-api/http/errors.ts). */
export function toolErrorOf(err: unknown, env: ToolEnv): ToolErrorBody | null {
  if (isDomainError(err)) {
    return { error: err.code, message: err.message, status: err.status, ...(err.nextAction ? { nextAction: err.nextAction } : {}), ...(err.details ? { details: err.details } : {}) };
  }
  if (err instanceof InvalidEventDataError) return { error: 'invalid_json', message: `The arguments hold text that cannot be stored: ${err.problem}`, status: 400 };
  if (err instanceof WrongExpectedRevisionError) {
    return { error: 'concurrent_update', message: 'What this call changes was changed by another request meanwhile; nothing was written', status: 409, nextAction: 'Read it again and retry the call' };
  }
  const unavailable = unavailableCode(err, env.ctx.config.eventstoreUrl);
  if (unavailable) {
    return { error: unavailable, message: `The ${unavailable === 'event_store_unavailable' ? 'event store' : 'database'} is unavailable; retry shortly`, status: 503 };
  }
  return null;
}

/**
 * An id in capitals is the same id (docs/ARCHITECTURE.md "Ids in paths"): a uuid argument named
 * `…Id` is put in lower case before the tool reads it, as the HTTP routes do with their path ids.
 */
function lowerCaseIds(args: Record<string, unknown>): Record<string, unknown> {
  const out = { ...args };
  for (const [name, value] of Object.entries(args)) if (name.endsWith('Id') && isUuid(value)) out[name] = value.toLowerCase();
  return out;
}

/** Runs a tool; whatever it throws comes back as an isError result (an unexpected failure is logged, its detail withheld). */
export async function callTool(tool: AgentTool, env: ToolEnv, args: Record<string, unknown>): Promise<CallToolResult> {
  try {
    const result = await tool.run(env, lowerCaseIds(args));
    env.ctx.metrics.mcpToolCalls.inc({ tool: tool.name, outcome: 'ok' });
    return { content: [{ type: 'text', text: JSON.stringify(result) }] };
  } catch (err) {
    let body = toolErrorOf(err, env);
    if (body === null) {
      env.ctx.logger.error({ err, tool: tool.name, grantId: env.agent.grantId }, 'agent tool failed');
      body = { error: 'internal_error', message: 'Internal error', status: 500 };
    }
    env.ctx.metrics.mcpToolCalls.inc({ tool: tool.name, outcome: body.error });
    return { isError: true, content: [{ type: 'text', text: JSON.stringify(body) }] };
  }
}

/** The requests these servers answer, each with MCP's schema of it. A Map: a method named `__proto__` finds nothing. */
const REQUEST_SCHEMAS = new Map<string, z.ZodType>([
  ['initialize', InitializeRequestSchema], ['ping', PingRequestSchema], ['tools/list', ListToolsRequestSchema], ['tools/call', CallToolRequestSchema],
]);

/**
 * The JSON-RPC error for a request the SDK would answer -32603 Internal error, or null: params
 * that break MCP's schema of the method (`initialize` without a protocolVersion, `tools/call`
 * whose arguments are an array) are -32602 Invalid params, since the SDK throws the schema's
 * failure as is and reports every error without a numeric code as internal; a request asking to
 * run as a task (`params.task`) is -32601 Method not found, what MCP says of a tool whose
 * taskSupport is forbidden, as every tool here is (the SDK throws a bare Error: no tasks capability).
 */
export function protocolRefusal(message: JSONRPCMessage): JSONRPCErrorResponse | null {
  if (!isJSONRPCRequest(message)) return null;
  const parsed = REQUEST_SCHEMAS.get(message.method)?.safeParse(message);
  if (!parsed) return null;
  const refuse = (code: ErrorCode, text: string): JSONRPCErrorResponse => ({ jsonrpc: '2.0', id: message.id, error: { code, message: text } });
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    return refuse(ErrorCode.InvalidParams, `Invalid params: ${issue.path.map(String).join('.')}: ${issue.message}`);
  }
  // The SDK's own test of a task request (any params pass its schema; what counts is a task in them).
  const task = isTaskAugmentedRequestParams(message.params) ? message.params.task : undefined;
  if (task) return refuse(ErrorCode.MethodNotFound, 'These servers run no request as a task: send it without params.task');
  return null;
}

/** At most this many of a call's argument problems are named in its refusal. */
const MAX_ARGUMENT_PROBLEMS = 20;

/**
 * A call's arguments once the tool's schema accepts them (no `arguments` is `{}`), or their refusal:
 * 422 `validation_error` naming each field, as the public REST routes refuse a body of the wrong
 * shape (docs/MCP.md "Tool results").
 */
export function parseArguments(tool: AgentTool, args: unknown): { ok: true; args: Record<string, unknown> } | { ok: false; body: ToolErrorBody } {
  const sent = (args ?? {}) as Record<string, unknown>;
  const parsed = argumentSchema(tool).safeParse(sent);
  // The tool gets the declared fields as sent, not zod's copy: the schemas add nothing (no
  // defaults, no transforms), and the copy of a record loses a `__proto__` key, which the shared
  // send rules refuse (422 on POST /v1/send) and would never see.
  if (parsed.success) return { ok: true, args: Object.fromEntries(Object.keys(tool.input).filter((k) => Object.hasOwn(sent, k)).map((k) => [k, sent[k]])) };
  const fields = parsed.error.issues.slice(0, MAX_ARGUMENT_PROBLEMS).map((i) => ({ field: i.path.map(String).join('.') || 'arguments', message: i.message }));
  return {
    ok: false,
    body: { error: 'validation_error', message: `Invalid arguments for ${tool.name}: ${fields.map((f) => `${f.field}: ${f.message}`).join('; ')}`, status: 422, details: { fields } },
  };
}

/** Each tool's arguments as one zod object, made once (z.object of a shape is a few dozen objects per call). */
const argumentSchemas = new WeakMap<AgentTool, z.ZodObject>();
function argumentSchema(tool: AgentTool): z.ZodObject {
  let schema = argumentSchemas.get(tool);
  if (!schema) {
    schema = z.object(tool.input);
    argumentSchemas.set(tool, schema);
  }
  return schema;
}

/** What every request of one server shares, built once: its tools and its `tools/list` answer. */
export interface McpEndpoint {
  spec: McpServerSpec;
  tools: ReadonlyMap<string, AgentTool>;
  toolList: ListToolsResult;
}

/**
 * The `tools/list` answer of these tools, as the SDK's McpServer answers it for tools registered
 * with `registerTool` (its tools/list handler: the same fields in the same order, the input
 * schema through the same zod-to-JSON-Schema conversion; test/mcp/server.unit.test.ts holds the
 * two side by side). McpServer made it on every request: the JSON Schemas of 32 tools were most of
 * a `tools/list`'s CPU.
 */
function toolListOf(tools: ReadonlyMap<string, AgentTool>): ListToolsResult {
  return {
    tools: [...tools.values()].map((tool) => ({
      name: tool.name,
      description: `${tool.description} Requires scope ${tool.scope}.`,
      inputSchema: toJsonSchemaCompat(objectFromShape(tool.input), { strictUnions: true, pipeStrategy: 'input' }) as ListToolsResult['tools'][number]['inputSchema'],
      annotations: tool.readOnly ? { readOnlyHint: true } : { readOnlyHint: false, destructiveHint: tool.destructive ?? false },
      execution: { taskSupport: 'forbidden' },
    })),
  };
}

export function mcpEndpoint(spec: McpServerSpec, tools: ReadonlyMap<string, AgentTool>): McpEndpoint {
  return { spec, tools, toolList: deepFreeze(toolListOf(tools)) };
}

/** The answer is handed to every request: nothing may change it. */
function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const v of Object.values(value)) deepFreeze(v);
  }
  return value;
}

/**
 * The SDK's Server makes an Ajv instance (with its formats) per server unless given one: it only
 * checks what a client answers to a server's elicitation, which these servers never ask for, and
 * it was a tenth of a request's CPU. One, shared by every request.
 */
const schemaValidator = new AjvJsonSchemaValidator();

export function agentMcpServer(endpoint: McpEndpoint, env: ToolEnv): Server {
  const { spec, tools } = endpoint;
  // What McpServer declared once tools were registered: tools, with listChanged (no session ever hears of a change).
  const server = new Server({ name: `motor${spec.path.replace(/\//g, '-')}`, version: '1.0.0' }, {
    instructions: INSTRUCTIONS, capabilities: { tools: { listChanged: true } }, jsonSchemaValidator: schemaValidator,
  });
  server.setRequestHandler(ListToolsRequestSchema, () => endpoint.toolList);
  // The SDK's own tools/call answers arguments that break the schema, and an unknown tool, with an
  // isError result of bare text: no code a client can branch on. This edge answers them itself:
  // arguments with the coded 422 above, an unknown tool as MCP's protocol error (-32602).
  server.setRequestHandler(CallToolRequestSchema, async (request) => {
    const tool = tools.get(request.params.name);
    if (!tool) throw new McpError(ErrorCode.InvalidParams, `Tool ${request.params.name.slice(0, 100)} not found`);
    const parsed = parseArguments(tool, request.params.arguments);
    if (!parsed.ok) {
      env.ctx.metrics.mcpToolCalls.inc({ tool: tool.name, outcome: parsed.body.error });
      return { isError: true, content: [{ type: 'text', text: JSON.stringify(parsed.body) }] };
    }
    return callTool(tool, env, parsed.args);
  });
  return server;
}
