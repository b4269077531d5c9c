/**
 * tsoa emits OpenAPI 3.0; the spec requires 3.1.0. The differences that matter for a tsoa
 * document: `nullable: true` becomes a `null` member of `type`, `example` becomes `examples`,
 * exclusiveMinimum/Maximum become numbers, and `info` gains the API version 1.2.0.
 */
/* eslint-disable @typescript-eslint/no-explicit-any */
import { UUID_PATH_PARAMS } from './http/params';
type Json = any;

function convertSchema(node: Json): Json {
  if (Array.isArray(node)) return node.map(convertSchema);
  if (node === null || typeof node !== 'object') return node;
  const out: Json = {};
  for (const [k, v] of Object.entries(node)) out[k] = convertSchema(v);
  if (out.nullable === true) {
    delete out.nullable;
    if (typeof out.type === 'string') out.type = [out.type, 'null'];
    else if (out.$ref || out.allOf || out.oneOf || out.anyOf) {
      const { description, ...rest } = out;
      return { ...(description ? { description } : {}), anyOf: [rest.$ref ? { $ref: rest.$ref } : rest, { type: 'null' }] };
    }
    if (Array.isArray(out.enum) && !out.enum.includes(null)) out.enum = [...out.enum, null];
  } else if (out.nullable === false) {
    delete out.nullable;
  }
  if (out.exclusiveMinimum === true && typeof out.minimum === 'number') { out.exclusiveMinimum = out.minimum; delete out.minimum; }
  if (out.exclusiveMaximum === true && typeof out.maximum === 'number') { out.exclusiveMaximum = out.maximum; delete out.maximum; }
  if (out.exclusiveMinimum === false) delete out.exclusiveMinimum;
  if (out.exclusiveMaximum === false) delete out.exclusiveMaximum;
  if ('example' in out && !('examples' in out) && (out.type !== undefined || out.$ref !== undefined || out.properties)) {
    out.examples = [out.example];
    delete out.example;
  }
  return out;
}

const METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'];

/** First sentence of an operation's description (tsoa puts the JSDoc there and sets no summary). */
function summaryOf(op: Json): string {
  const text = String(op.description ?? '').replace(/\s+/g, ' ').trim();
  const first = /^(.+?)[.:](\s|$)/.exec(text)?.[1] ?? text;
  if (first) return first.length > 100 ? `${first.slice(0, 97)}...` : first;
  return String(op.operationId ?? '').replace(/([a-z])([A-Z])/g, '$1 $2');
}

/**
 * The bounds an integer query parameter's description states (`@param limit 1 to 1000, default
 * 100`; `1 up to the plan's retention`), as JSON Schema. Declared by tsoa's `@minimum`, they would
 * be validated by tsoa, whose refusal is not the route's own 400 (`validation_error` naming the
 * field, `invalid_query`, `outside_retention_window`); the routes check them, the document states them.
 */
export function queryBounds(description: unknown): { minimum?: number; maximum?: number } {
  const text = String(description ?? '');
  const range = /^(\d[\d,]*) to (\d[\d,]*)\b/.exec(text);
  if (range) return { minimum: Number(range[1].replace(/,/g, '')), maximum: Number(range[2].replace(/,/g, '')) };
  const floor = /^(\d[\d,]*) up to\b/.exec(text);
  return floor ? { minimum: Number(floor[1].replace(/,/g, '')) } : {};
}

export function toOpenApi31(spec30: Json): Json {
  const spec = convertSchema(spec30);
  spec.openapi = '3.1.0';
  const { contact, ...info } = spec.info ?? {};
  // 3.1 licenses name an SPDX identifier (or a url); an empty contact object says nothing.
  spec.info = {
    ...info, ...(contact && Object.keys(contact).length > 0 ? { contact } : {}), title: 'Motor API', version: '1.2.0',
    ...(info.license ? { license: { identifier: info.license.name, ...info.license } } : {}),
  };
  const ops = Object.entries<Json>(spec.paths ?? {}).flatMap(([path, item]) => METHODS.filter((m) => item[m]).map((method) => ({ path, method, op: item[method] })));
  for (const { op } of ops) if (!op.summary) op.summary = summaryOf(op);
  // Path ids are uuids on every route (read-api/http/params.ts, where the route answers 400
  // invalid_id for anything else); tsoa declares them plain strings, and validating them there
  // would answer with tsoa's error instead, so the document alone says so.
  for (const { op } of ops) {
    for (const p of op.parameters ?? []) {
      if (p.in === 'path' && (UUID_PATH_PARAMS as readonly string[]).includes(p.name)) p.schema = { ...p.schema, type: 'string', format: 'uuid' };
      if (p.in === 'query' && p.schema?.type === 'integer') Object.assign(p.schema, queryBounds(p.description));
    }
  }
  // tsoa names an operation after its controller method, so two controllers' `list` collide, and
  // operationIds must be unique: a shared one is qualified with its path (MotorBlocksApiKeysList).
  const uses = new Map<string, number>();
  for (const { op } of ops) if (op.operationId) uses.set(op.operationId, (uses.get(op.operationId) ?? 0) + 1);
  const taken = new Set(ops.map(({ op }) => op.operationId).filter((id) => uses.get(id) === 1));
  for (const { path, method, op } of ops) {
    if (!op.operationId || uses.get(op.operationId) === 1) continue;
    const qualifier = path.split('/').filter((seg) => seg && !seg.startsWith('{') && !['api', 'public', 'v1'].includes(seg))
      .map((seg) => seg.split(/[^A-Za-z0-9]+/).map((w) => w.charAt(0).toUpperCase() + w.slice(1)).join('')).join('');
    let id = `${qualifier}${op.operationId}`;
    if (taken.has(id)) id = `${id}${method.charAt(0).toUpperCase()}${method.slice(1)}`;
    taken.add(id);
    op.operationId = id;
  }
  spec.jsonSchemaDialect = 'https://spec.openapis.org/oas/3.1/dialect/base';
  spec.servers = [{ url: '/', description: 'This Motor instance' }];
  // tsoa's examples inside media types stay as `example` (allowed in 3.1); only schemas were rewritten.
  return spec;
}
