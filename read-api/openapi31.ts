/**
 * tsoa emits OpenAPI 3.0; the spec requires 3.1.0. The differences that matter for a tsoa
 * document: `nullable: true` becomes a `null` member of `type`, `example` becomes `examples`,
 * exclusiveMinimum/Maximum become numbers, and `info` gains the API version 1.2.0.
 */
/* eslint-disable @typescript-eslint/no-explicit-any */
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

export function toOpenApi31(spec30: Json): Json {
  const spec = convertSchema(spec30);
  spec.openapi = '3.1.0';
  spec.info = { ...spec.info, title: 'Motor API', version: '1.2.0' };
  spec.jsonSchemaDialect = 'https://spec.openapis.org/oas/3.1/dialect/base';
  spec.servers = [{ url: '/', description: 'This Motor instance' }];
  // tsoa's examples inside media types stay as `example` (allowed in 3.1); only schemas were rewritten.
  return spec;
}
