import fc from 'fast-check';
import { hostileValue, mutatedObject, Nest, Repeat } from '../read-api/fuzz/arbitraries';

/**
 * Generators of the MCP fuzz test (test/mcp/fuzz.int.test.ts): a tool's arguments built from the
 * JSON Schema `tools/list` declares for it, then made hostile with the HTTP fuzz test's mutations
 * (test/read-api/fuzz/arbitraries.ts); and JSON-RPC messages and batches that are malformed as
 * JSON-RPC rather than as arguments. Plain data, so that fast-check prints a failing request as
 * what was sent.
 */

type Json = any; // eslint-disable-line @typescript-eslint/no-explicit-any

/** A value a field of this name accepts for a tool (the fixtures' ids, a send's addresses...), or undefined: any of its schema's type. */
export type Known = (tool: string, key: string) => fc.Arbitrary<unknown> | undefined;

/** A value of a JSON Schema (the subset zod writes: type, enum, anyOf, items, properties, required, additionalProperties). */
export function schemaValue(schema: Json, tool: string, key: string, known: Known): fc.Arbitrary<unknown> {
  const own = known(tool, key);
  if (own) return own;
  if (Array.isArray(schema?.anyOf)) return fc.oneof(...schema.anyOf.map((s: Json) => schemaValue(s, tool, key, known)));
  if (Array.isArray(schema?.enum)) return fc.constantFrom(...schema.enum);
  switch (schema?.type) {
    case 'string': return fc.string({ maxLength: 20 });
    case 'integer': return fc.integer({ min: schema.minimum ?? 1, max: schema.maximum ?? 100 });
    case 'number': return fc.double({ noNaN: true, noDefaultInfinity: true });
    case 'boolean': return fc.boolean();
    case 'array': return fc.array(schemaValue(schema.items, tool, key, known), { maxLength: 3 });
    case 'object': {
      const props = (schema.properties ?? {}) as Record<string, Json>;
      if (Object.keys(props).length > 0) {
        const model = Object.fromEntries(Object.entries(props).map(([k, s]) => [k, schemaValue(s, tool, k, known)]));
        return fc.record(model, { requiredKeys: (schema.required ?? []) as string[] });
      }
      // A record (metadata, headers): its keys include the ones an object lookup or copy trips on.
      const values = typeof schema.additionalProperties === 'object' ? schemaValue(schema.additionalProperties, tool, key, known) : fc.string({ maxLength: 10 });
      const keys = fc.oneof({ arbitrary: fc.string({ minLength: 1, maxLength: 8 }), weight: 3 }, fc.constantFrom('__proto__', 'constructor', 'toString', 'hasOwnProperty'));
      return fc.dictionary(keys, values, { maxKeys: 3 });
    }
    default: return fc.jsonValue({ maxDepth: 1 });
  }
}

/**
 * A `tools/call`'s `arguments`: a value of the tool's schema with up to three hostile mutations (a
 * field left out, of the wrong type, huge, with NUL or a lone surrogate, nested deep, an array
 * where a scalar is expected; `__proto__`, `constructor` and other undeclared fields added; the
 * whole replaced by a scalar or an array), or no `arguments` at all.
 */
export function toolArguments(tool: string, schema: Json, known: Known): fc.Arbitrary<unknown> {
  const base = schemaValue(schema, tool, '', known) as fc.Arbitrary<Record<string, unknown>>;
  const mutated = base.chain((b) => mutatedObject(b, Object.keys(schema?.properties ?? {})));
  const scalarsAsArrays = base.map((b) => Object.fromEntries(Object.entries(b).map(([k, v]) => [k, Array.isArray(v) ? v : [v]])));
  return fc.oneof(
    { arbitrary: mutated, weight: 12 },
    { arbitrary: scalarsAsArrays, weight: 1 },
    { arbitrary: fc.constant(undefined), weight: 1 },
  );
}

// ---------- JSON-RPC envelopes ----------

/**
 * Tools a call may name here: read tools, and write tools that refuse `{}` (a required argument
 * missing), so that nothing here may write; each is offered by some servers and not by others.
 */
const CALLED = ['list_domains', 'list_motor_blocks', 'get_sandbox_status', 'add_domain', 'send_email', 'create_webhook', 'add_free_recipient'];

/** The requests a server answers. */
const wellFormed = (id: number, tool: string): Array<Record<string, unknown>> => [
  { jsonrpc: '2.0', id, method: 'tools/list' },
  { jsonrpc: '2.0', id, method: 'ping' },
  { jsonrpc: '2.0', id, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'fuzz', version: '1' } } },
  { jsonrpc: '2.0', id, method: 'tools/call', params: { name: tool, arguments: {} } },
  { jsonrpc: '2.0', method: 'notifications/initialized' },
];

const methodish = fc.oneof(
  fc.constantFrom('tools/list', 'tools/call', 'ping', 'initialize', 'TOOLS/LIST', 'tools/list ', ' tools/call', 'tools/', 'tools', '/', '', 'tools/call/x',
    'resources/list', 'prompts/get', 'completion/complete', 'logging/setLevel', 'notifications/cancelled', 'rpc.discover', '__proto__', 'constructor',
    'hasOwnProperty', 'toString', 'tools/list\u0000'),
  fc.string({ maxLength: 12 }),
  hostileValue,
);

const idish = fc.oneof(
  fc.constantFrom<unknown>(0, -1, 1.5, 2 ** 53, 1e308, -0, '', '1', 'x'.repeat(300), null, true, false, {}, [], [1], { $ne: null }, { toString: 1 }),
  fc.string({ maxLength: 10 }),
  hostileValue,
);

/** The params fields of the methods above (MCP's schema), for mutations to pick. */
const PARAMS = ['name', 'arguments', 'cursor', '_meta', 'task', 'protocolVersion', 'capabilities', 'clientInfo'];

/**
 * One message made malformed: its jsonrpc, id, method or params of the wrong type or missing,
 * fields added, or the whole replaced; or its params so (a well-formed envelope around them).
 */
const malformedMessage: fc.Arbitrary<unknown> = fc.tuple(fc.nat(), fc.nat(4), fc.constantFrom(...CALLED)).chain(([id, which, tool]) => {
  const base = wellFormed(id % 1000, tool)[which];
  return fc.oneof(
    { arbitrary: mutatedObject(base, ['jsonrpc', 'id', 'method', 'params']), weight: 4 },
    { arbitrary: mutatedObject((base.params ?? {}) as Record<string, unknown>, PARAMS).map((params) => ({ ...base, params })), weight: 4 },
    { arbitrary: methodish.map((method) => ({ ...base, method })), weight: 2 },
    { arbitrary: idish.map((badId) => ({ ...base, id: badId })), weight: 2 },
    { arbitrary: fc.constant(base), weight: 1 },
  );
});

/** What is POSTed: a message, a batch (of messages, garbage, huge), a body over the size limit, or text that is not JSON. */
export type RpcBody =
  | { kind: 'json'; value: unknown }
  | { kind: 'text'; text: string }
  /** `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"pad":"x…"}}` of this many bytes. */
  | { kind: 'oversized'; bytes: number };

export const rpcBody: fc.Arbitrary<RpcBody> = fc.oneof(
  { arbitrary: malformedMessage.map((value): RpcBody => ({ kind: 'json', value })), weight: 8 },
  { arbitrary: fc.array(malformedMessage, { minLength: 1, maxLength: 20 }).map((value): RpcBody => ({ kind: 'json', value })), weight: 4 },
  // One message sent twice in a batch: the same id twice.
  { arbitrary: malformedMessage.map((m): RpcBody => ({ kind: 'json', value: [m, m] })), weight: 1 },
  { arbitrary: fc.constantFrom(1_000, 5_000).map((n): RpcBody => ({ kind: 'json', value: Array.from({ length: n }, (_, i) => ({ jsonrpc: '2.0', id: i, method: 'ping' })) })), weight: 1 },
  { arbitrary: fc.oneof(hostileValue, fc.constantFrom<unknown>([], [[]], [null], new Nest('array', 40), new Repeat('x', 100_000))).map((value): RpcBody => ({ kind: 'json', value })), weight: 2 },
  { arbitrary: fc.oneof(fc.constantFrom('', ' ', '{', '[', '[{]', '{"jsonrpc":"2.0","id":1,"method":"ping"', '{"jsonrpc":"2.0","id":1,"method":"ping"}{}',
    '{"jsonrpc":"2.0","id":1,"id":2,"method":"ping"}', '{"jsonrpc":"2.0","id":NaN,"method":"ping"}', "{'jsonrpc':'2.0'}", '\ufeff{"jsonrpc":"2.0","id":1,"method":"ping"}'),
  fc.string({ maxLength: 30 })).map((text): RpcBody => ({ kind: 'text', text })), weight: 2 },
  { arbitrary: fc.constantFrom(12 * 1024 * 1024 - 200, 12 * 1024 * 1024 + 1).map((bytes): RpcBody => ({ kind: 'oversized', bytes })), weight: 1 },
);
