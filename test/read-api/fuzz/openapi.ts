import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Operation, Param } from './arbitraries';

/** The API's OpenAPI document (read-api/generated/openapi.json: `npm run build:api`) and its operations. */

type Json = any; // eslint-disable-line @typescript-eslint/no-explicit-any

const spec = JSON.parse(readFileSync(join(__dirname, '../../../read-api/generated/openapi.json'), 'utf8'));

/** A schema with its `$ref`s followed. */
export function resolveRef(s: Json): Json {
  for (let depth = 0; s?.$ref && depth < 10; depth++) s = spec.components.schemas[s.$ref.split('/').pop()];
  return s;
}

/** Every operation of the document: its credential scheme (null: none), parameters and JSON body schema. */
export function operations(): Operation[] {
  const out: Operation[] = [];
  for (const [path, ops] of Object.entries(spec.paths as Record<string, Record<string, Json>>)) {
    for (const [method, op] of Object.entries(ops)) {
      const sec = (op.security ?? []) as Array<Record<string, string[]>>;
      out.push({
        method: method.toUpperCase(), path,
        scheme: sec.length ? Object.keys(sec[0])[0] : null,
        scopes: sec.length ? Object.values(sec[0])[0] : [],
        params: ((op.parameters ?? []) as Param[]).map((p) => ({ ...p, schema: resolveRef(p.schema) })),
        bodySchema: op.requestBody ? resolveRef(op.requestBody.content?.['application/json']?.schema) ?? null : null,
      });
    }
  }
  return out;
}
