import type { Tool } from '@modelcontextprotocol/sdk/types.js';
import { expect } from 'chai';
import fc from 'fast-check';
import { effectiveScopes, MCP_SERVERS, type AgentScope, type McpServerSpec } from '../../domain/oauth/agent';
import { toolsOf } from '../../read-api/mcp/catalogue';
import { grantAgentAccess } from '../support/agentGrant';
import { eventMark, writtenSince } from '../read-api/fuzz/appended';
import { jsonText } from '../read-api/fuzz/arbitraries';
import { DOCUMENTED, parsedBack, schemaViolation, storability } from '../read-api/fuzz/oracle';
import { startWorld, type World } from '../read-api/fuzz/world';
import { rpcBody, toolArguments, type Known, type RpcBody } from './arbitraries';
import { MCP_ENV, call, connectAgent } from './support';

/**
 * Property-based tests of the agent-tool (MCP) servers over their Streamable HTTP transport: every
 * tool of every server, called with each kind of grant a server takes (every scope it can be
 * granted; only its read scopes), with arguments generated from the JSON Schema the server lists
 * for the tool and made hostile (arbitraries.ts); then JSON-RPC that is malformed as JSON-RPC (bad
 * ids and methods, batches, missing params, oversized bodies). For each request:
 *
 *   - an answer arrives within ANSWER_MS, and it is not a 5xx;
 *   - no JSON-RPC error in it is -32603 (internal error), and no tool result is `internal_error`;
 *   - a body the HTTP layer must refuse (U+0000, a lone surrogate, nested over 32 levels) gets
 *     400 `invalid_json`; a call of a tool the grant lacks the scope of gets 403
 *     `insufficient_scope` (docs/MCP.md);
 *   - a tool failure is an `isError` result whose text is `{error, message, status}` with a code
 *     docs/ERRORS.md names with that status (docs/MCP.md "Tool results"), or a JSON-RPC error
 *     -32602 / -32600 (-32601 for an unknown method, -32700 for text that is not JSON-RPC);
 *   - arguments that break the listed schema are refused;
 *   - a refusal, a read-only tool (readOnlyHint) and a dry run append no event;
 *   - a send_email dry run gets the verdict POST /v1/send gives the same body;
 *   - afterwards the server still answers a valid call.
 *
 * Writes run first, then reads, then the tools that spoil the fixtures (deletions, deactivation,
 * DNS checks, the sandbox's conversion). Bounded: FUZZ_RUNS calls per tool and grant (default 8:
 * about a minute here) from the seed FUZZ_SEED (default fixed, printed); FUZZ_SHRINK=0 stops at
 * the first failure; FUZZ_STATS=1 prints the answers each tool got. The names are the HTTP fuzz
 * test's (test/read-api/fuzz/).
 */

type Json = any; // eslint-disable-line @typescript-eslint/no-explicit-any

const SEED = process.env.FUZZ_SEED ? Number(process.env.FUZZ_SEED) : 20_261_128;
const RUNS = process.env.FUZZ_RUNS ? Number(process.env.FUZZ_RUNS) : 8;
const ANSWER_MS = 5_000;
const STATS = process.env.FUZZ_STATS === '1';
const stats: Record<string, Record<string, number>> = {};
const ACCEPT = 'application/json, text/event-stream';

/** The JSON-RPC error codes an answer to bad input may carry (JSON-RPC 2.0 §5.1); -32603 is not one of them. */
const CLIENT_ERRORS = new Set([-32700, -32600, -32601, -32602]);

/** The grants a server is fuzzed with: every scope it can be granted, and its read scopes alone (calls of the others are refused with 403). */
interface Grant { server: McpServerSpec; kind: 'every scope' | 'read scopes'; scopes: AgentScope[] }
const GRANTS: Grant[] = MCP_SERVERS.flatMap((server): Grant[] => {
  const reads = server.scopes.filter((s) => s.startsWith('read:'));
  return [{ server, kind: 'every scope', scopes: [...server.scopes] }, ...(reads.length ? [{ server, kind: 'read scopes' as const, scopes: reads }] : [])];
});

/** Tools that change the fixtures the other calls name (a block deactivated or deleted, a domain re-checked, the sandbox converted): run last. */
const SPOILS = /^(deactivate_|reactivate_|delete_|remove_|convert_|rotate_|verify_domain|check_domain_dns)/;
const rank = (tool: string, readOnly: boolean) => (SPOILS.test(tool) ? 2 : readOnly ? 1 : 0);

/** The catalogue orders the tests (they are defined before any listing); the properties read what tools/list says (schema, readOnlyHint). */
const catalogue = (server: McpServerSpec) => [...toolsOf(server).values()];
const CASES = [0, 1, 2].flatMap((r) => GRANTS.flatMap((grant) => catalogue(grant.server).filter((t) => rank(t.name, t.readOnly) === r).map((t) => ({ grant, tool: t.name }))));

/** What is wrong with an `isError` result's text: the coded body of docs/MCP.md "Tool results", with a code docs/ERRORS.md names with that status (the REST routes' codes). */
function toolErrorProblems(text: string): string[] {
  let body: Json;
  try { body = JSON.parse(text); } catch { return [`an isError result without the coded body: ${text.slice(0, 200)}`]; }
  if (typeof body?.error !== 'string' || typeof body.message !== 'string' || typeof body.status !== 'number') return [`an isError result that is not {error, message, status}: ${text.slice(0, 200)}`];
  // The database is up: a 5xx is the tool failing (internal_error), not the input.
  if (body.status >= 500) return [`a tool failure ${body.status} ${body.error} (${body.message})`];
  const statuses = DOCUMENTED.get(body.error);
  if (!statuses) return [`${body.status} ${body.error}: a code docs/ERRORS.md does not name (${body.message})`];
  if (!statuses.has(body.status)) return [`${body.status} ${body.error}: docs/ERRORS.md names this code with ${[...statuses].join(' or ')} (${body.message})`];
  return [];
}

/** What is wrong with the JSON-RPC errors of an answer (one response or a batch's). */
function rpcErrorProblems(answer: unknown): string[] {
  const out: string[] = [];
  for (const r of Array.isArray(answer) ? answer : [answer]) {
    const code = (r as Json)?.error?.code;
    if (code !== undefined && !CLIENT_ERRORS.has(code)) out.push(`JSON-RPC error ${code}: ${JSON.stringify((r as Json).error).slice(0, 200)}`);
  }
  return out;
}

interface Answer { status: number; type: string; text: string; ms: number; json: Json }

/** One POST of `body` (JSON text, or not) to a server with a grant's token. */
async function post(w: World, path: string, token: string, body: string): Promise<Answer> {
  const started = Date.now();
  const res = await fetch(`${w.h.motor.baseUrl}${path}`, {
    method: 'POST', body, signal: AbortSignal.timeout(ANSWER_MS),
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', accept: ACCEPT },
  });
  const text = await res.text();
  let json: Json;
  try { json = JSON.parse(text); } catch { json = undefined; }
  return { status: res.status, type: res.headers.get('content-type') ?? '', text, ms: Date.now() - started, json };
}

/** FUZZ_STATS=1: counts the answer under `key` by what it was (a status and code, a JSON-RPC error, a tool failure's code, ok). */
function tally(key: string, a: Answer): void {
  if (!STATS) return;
  const r = a.json?.result;
  const toolCode = () => { try { return JSON.parse(r.content[0].text).error; } catch { return String(r.content?.[0]?.text).slice(0, 40); } };
  const outcome = a.status !== 200 ? `${a.status} ${a.json?.code ?? a.json?.error?.code ?? a.json?.error ?? ''}`
    : a.json?.error ? `rpc ${a.json.error.code}` : r?.isError ? `isError ${toolCode()}` : 'ok';
  (stats[key] ??= {})[outcome] = (stats[key][outcome] ?? 0) + 1;
}

let w: World;

describe('fuzzing the agent-tool (MCP) servers: a coded refusal, never a 5xx, an internal error, a hang or a write (int)', function () {
  this.timeout(300_000);
  const tokens = new Map<Grant, string>();
  const listed = new Map<Grant, Map<string, Tool>>();
  let checked = 0;
  const started = Date.now();

  before(async () => {
    console.log(`      mcp fuzz: seed ${SEED}, ${RUNS} runs per tool and grant (FUZZ_SEED, FUZZ_RUNS)`); // eslint-disable-line no-console
    w = await startWorld({ ...MCP_ENV, DOMAIN_DNS_TIMEOUT_MS: '700' });
    for (const grant of GRANTS) {
      tokens.set(grant, (await grantAgentAccess(w.h.motor, { accountId: w.accountId, path: grant.server.path, scopes: grant.scopes })).accessToken);
    }
  });
  after(async () => {
    console.log(`      mcp fuzz: ${CASES.length} tool and grant pairs, ${checked} requests, ${((Date.now() - started) / 1000).toFixed(1)} s`); // eslint-disable-line no-console
    if (STATS) for (const [key, t] of Object.entries(stats)) console.log(`      ${key}: ${Object.entries(t).sort((x, y) => y[1] - x[1]).map(([k, n]) => `${k} ×${n}`).join(', ')}`); // eslint-disable-line no-console
    await w?.h.close();
  });

  /** A value of each field a tool accepts, where its schema says only "string": the fixtures, a send's addresses, dates in the window. */
  const known: Known = (tool, key) => {
    const lifecycle = /_motor_block$/.test(tool);
    switch (key) {
      case 'motorBlockId': return fc.constant(lifecycle ? w.victimBlock : w.block);
      case 'domainId': return fc.constant(w.domainId);
      case 'messageId': return fc.constant(w.message);
      case 'webhookId': return fc.constant(w.webhookId);
      case 'recipientId': return fc.constant(w.freeRecipientId);
      case 'jobId': return fc.uuid();
      case 'idempotencyKey': return fc.uuid({ version: 4 });
      case 'from': return fc.constant(tool === 'send_email' ? w.from : new Date(Date.now() - 3_600_000).toISOString());
      case 'to': return tool === 'send_email' ? fc.constantFrom<unknown>('user@rcpt.test', ['user@rcpt.test']) : fc.constant(new Date().toISOString());
      case 'subject': case 'text': return fc.constant('fuzz');
      case 'html': return fc.constant('<p>fuzz</p>');
      case 'email': return fc.constant('friend2@rcpt.test');
      case 'addresses': return fc.constant(['user@rcpt.test']);
      case 'url': return fc.constant('https://hooks.example.test/mcp-fuzz');
      case 'domain': return fc.constant('mcp-fuzz.example.test');
      case 'handle': return fc.constant('mcpfuzz');
      case 'name': return fc.constant('MCP fuzz');
      case 'query': return fc.constant('recipient:user@rcpt.test');
      case 'status': return fc.constant('delivered');
      case 'cursor': return fc.constant(undefined);
      default: return undefined;
    }
  };

  const mark = () => eventMark(w.h.motor.rt.db);

  it('every server lists the tools of its catalogue, whatever the grant, each with an object input schema', async () => {
    for (const grant of GRANTS) {
      const agent = await connectAgent(w.h.motor, grant.server.path, tokens.get(grant)!);
      const { tools } = await agent.listTools();
      await agent.close();
      expect(tools.map((t) => t.name).sort(), `${grant.server.path} (${grant.kind})`).to.deep.equal(catalogue(grant.server).map((t) => t.name).sort());
      for (const t of tools) expect(t.inputSchema.type, t.name).to.equal('object');
      listed.set(grant, new Map(tools.map((t) => [t.name, t])));
    }
  });

  /** What is wrong with one call of `tool` with `args` (undefined: no `arguments`). */
  async function judgeCall(grant: Grant, tool: Tool, args: unknown): Promise<string[]> {
    const message = { jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name: tool.name, ...(args === undefined ? {} : { arguments: args }) } };
    const before = await mark();
    let a: Answer;
    try {
      a = await post(w, grant.server.path, tokens.get(grant)!, jsonText(message)!);
    } catch (err) {
      return [`no answer: ${(err as Error).message}`];
    }
    checked++;
    tally(`${grant.server.path} [${grant.kind}] ${tool.name}`, a);
    const problems: string[] = [];
    if (a.status >= 500) problems.push(`${a.status}: ${a.text.slice(0, 300)}`);
    if (a.ms > ANSWER_MS) problems.push(`answered after ${a.ms} ms`);
    const sent = parsedBack(message) as Json;
    const st = storability(sent);
    const scopeMissing = !effectiveScopes(grant.scopes).has(toolsOf(grant.server).get(tool.name)!.scope);
    let refused = true;
    if (st.depth > 32 || st.badString) {
      if (a.status !== 400 || a.json?.code !== 'invalid_json') problems.push(`${a.status} for a body the HTTP layer refuses (depth ${st.depth}, bad string ${st.badString}); expected 400 invalid_json: ${a.text.slice(0, 200)}`);
    } else if (scopeMissing) {
      if (a.status !== 403 || a.json?.error !== 'insufficient_scope') problems.push(`${a.status} for a call the grant has no scope for; expected 403 insufficient_scope: ${a.text.slice(0, 200)}`);
    } else if (a.status !== 200) {
      problems.push(`${a.status} for a tool call: ${a.text.slice(0, 200)}`);
    } else {
      problems.push(...rpcErrorProblems(a.json));
      const result = a.json?.result;
      const violation = schemaViolation(tool.inputSchema, sent.params.arguments ?? {}, 'arguments');
      if (result?.isError === true) problems.push(...toolErrorProblems(result.content?.[0]?.text ?? ''));
      else if (result && violation) problems.push(`accepted arguments that break the listed schema (${violation}): ${a.text.slice(0, 200)}`);
      else if (!result && !a.json?.error) problems.push(`neither a result nor an error: ${a.text.slice(0, 200)}`);
      refused = !result || result.isError === true;
      const dryRun = !refused && tool.name === 'send_email' && JSON.parse(result.content[0].text).dryRun === true;
      if (!refused && !tool.annotations?.readOnlyHint && !dryRun) return problems;
    }
    const written = await writtenSince(w.h.motor.rt.db, before);
    if (written.length) problems.push(`${refused ? 'refused' : 'a read or dry run'}, yet appended ${written.join(', ')}`);
    return problems;
  }

  for (const { grant, tool: name } of CASES) {
    it(`${grant.server.path} [${grant.kind}] ${name}`, async function () {
      const tool = listed.get(grant)?.get(name);
      if (!tool) this.skip();
      await fc.assert(fc.asyncProperty(toolArguments(name, tool.inputSchema, known), async (args) => {
        const problems = await judgeCall(grant, tool, args);
        expect(problems, problems.join('\n')).to.deep.equal([]);
      }), { seed: SEED, numRuns: RUNS, endOnFailure: process.env.FUZZ_SHRINK === '0' });
      // The server keeps serving: a valid request right after.
      const after = await post(w, grant.server.path, tokens.get(grant)!, JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }));
      expect([after.status, after.json?.result?.tools?.length], after.text.slice(0, 200)).to.deep.equal([200, listed.get(grant)!.size]);
    });
  }

  // send_email is POST /v1/send with the block named (docs/MCP.md): the same body gets the same
  // verdict on both edges. Dry runs only (nothing is sent twice), with the fixture block, so that
  // only the body differs; its fields only (the tool drops others, the route refuses them).
  it('a send_email dry run gets the verdict POST /v1/send gives the same body (accepted, or the same code)', async () => {
    const full = GRANTS.find((g) => g.server.path === '/v1/service/mcp' && g.kind === 'every scope')!;
    const tool = listed.get(full)!.get('send_email')!;
    const declared = new Set(Object.keys(tool.inputSchema.properties ?? {}));
    const isObject = (a: unknown): a is Record<string, unknown> => typeof a === 'object' && a !== null && !Array.isArray(a);
    const sendArgs = toolArguments('send_email', tool.inputSchema, known).filter((a): a is Record<string, unknown> => isObject(a)
      && a.motorBlockId === w.block && a.idempotencyKey === undefined && Object.keys(a).every((k) => declared.has(k))
      && !storability(parsedBack(a)).badString && storability(parsedBack(a)).depth <= 30);
    await fc.assert(fc.asyncProperty(sendArgs, async (generated) => {
      const args: Record<string, unknown> = { ...generated, dryRun: true };
      const body = Object.fromEntries(Object.keys(args).filter((k) => k !== 'motorBlockId').map((k) => [k, args[k]]));
      const viaTool = await post(w, full.server.path, tokens.get(full)!, jsonText({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'send_email', arguments: args } })!);
      const result = viaTool.json?.result;
      const toolVerdict = !result ? `rpc ${viaTool.json?.error?.code}` : result.isError ? JSON.parse(result.content[0].text).error : 'ok';
      const viaRoute = await fetch(`${w.h.motor.baseUrl}/v1/send`, {
        method: 'POST', body: jsonText(body), signal: AbortSignal.timeout(ANSWER_MS), headers: { 'content-type': 'application/json', ...w.creds.blockApiKey },
      });
      const routeBody = (await viaRoute.json()) as Json;
      const routeVerdict = viaRoute.status === 200 ? 'ok' : routeBody.code;
      checked += 2;
      expect(toolVerdict, `POST /v1/send: ${viaRoute.status} ${JSON.stringify(routeBody).slice(0, 200)}; send_email: ${JSON.stringify(result ?? viaTool.json).slice(0, 200)}`).to.equal(routeVerdict);
    }), { seed: SEED, numRuns: RUNS * 10, endOnFailure: process.env.FUZZ_SHRINK === '0' });
  });

  /** The bytes of a generated body. */
  const textOf = (b: RpcBody): string => (b.kind === 'json' ? jsonText(b.value) ?? '' : b.kind === 'text' ? b.text
    : `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"pad":"${'x'.repeat(b.bytes - 60)}"}}`);

  it('malformed JSON-RPC (bad ids and methods, batches, missing params, oversized bodies): a 4xx or a JSON-RPC error, never -32603, a 5xx or a write', async () => {
    const byLabel = new Map(GRANTS.map((g) => [`${g.server.path} [${g.kind}]`, g]));
    await fc.assert(fc.asyncProperty(fc.constantFrom(...byLabel.keys()), rpcBody, async (label, body) => {
      const grant = byLabel.get(label)!;
      const before = await mark();
      const text = textOf(body);
      let a: Answer;
      try { a = await post(w, grant.server.path, tokens.get(grant)!, text); } catch (err) { expect.fail(`no answer: ${(err as Error).message}`); }
      checked++;
      tally('JSON-RPC', a);
      const problems: string[] = [];
      if (a.status >= 500) problems.push(`${a.status}: ${a.text.slice(0, 300)}`);
      if (a.ms > ANSWER_MS) problems.push(`answered after ${a.ms} ms`);
      if (Buffer.byteLength(text) > 12 * 1024 * 1024 && a.status !== 413) problems.push(`${a.status} for a body over 12 MB; expected 413`);
      if (a.status === 200) {
        problems.push(...rpcErrorProblems(a.json));
        for (const r of Array.isArray(a.json) ? a.json : [a.json]) if (r?.result?.isError === true) problems.push(...toolErrorProblems(r.result.content?.[0]?.text ?? ''));
      }
      else if (a.status >= 400 && a.status < 500) {
        // The HTTP layer's envelope (invalid_json, payload_too_large...), the scope check's 403, or a JSON-RPC error from the transport.
        const coded = typeof a.json?.code === 'string' && DOCUMENTED.get(a.json.code)?.has(a.status);
        const scope = a.status === 403 && a.json?.error === 'insufficient_scope';
        const rpc = a.json?.jsonrpc === '2.0' && typeof a.json?.error?.code === 'number';
        if (!coded && !scope && !rpc) problems.push(`${a.status} that is neither a documented error envelope nor a JSON-RPC error: ${a.text.slice(0, 200)}`);
        if (rpc) problems.push(...rpcErrorProblems(a.json));
      }
      const written = await writtenSince(w.h.motor.rt.db, before);
      if (written.length) problems.push(`appended ${written.join(', ')}`);
      expect(problems, problems.join('\n')).to.deep.equal([]);
    }), { seed: SEED, numRuns: RUNS * 15, endOnFailure: process.env.FUZZ_SHRINK === '0' });
  });

  it('afterwards, each server still answers an agent\'s valid call, and nothing was polluted', async () => {
    for (const grant of GRANTS.filter((g) => g.kind === 'every scope')) {
      const agent = await connectAgent(w.h.motor, grant.server.path, tokens.get(grant)!);
      const name = [...listed.get(grant)!.values()].find((t) => t.annotations?.readOnlyHint && !t.inputSchema.required?.length)?.name;
      if (name) {
        const r = await call(agent, name);
        expect(r.isError, `${grant.server.path} ${name}: ${JSON.stringify(r.json)}`).to.equal(false);
      } else {
        expect((await agent.listTools()).tools.length).to.be.above(0);
      }
      await agent.close();
    }
    expect(({} as Record<string, unknown>).polluted, 'Object.prototype').to.equal(undefined);
  });
});
