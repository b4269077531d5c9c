import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import { expect } from 'chai';
import express from 'express';
import { ExpressTemplateService, ValidateError, ValidationService, type FieldErrors, type TsoaRoute } from '@tsoa/runtime';
import { RegisterRoutes, tsoaModels, tsoaRouteArgs, tsoaValidationConfig } from '../../read-api/generated/routes';
import { BODY_FIELDS_CHECKED_BY_HANDLER } from '../../read-api/http/checkedByHandler';
import { argsAsValidated, modelsAsValidated, MotorTemplateService, TsoaFastCheck } from '../../read-api/http/tsoaArgs';

/**
 * The fast path of argument validation (read-api/http/tsoaArgs.ts) may pass a value only if tsoa's
 * own validation would accept it and hand it on unchanged. Checked on values generated from every
 * model of the API, valid ones and damaged ones.
 */

type Schema = TsoaRoute.PropertySchema;

/** A small seeded generator (mulberry32): the same values on every run. */
function random(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

// 1e400 is what JSON.parse makes of a number too large for a double: Infinity.
const JUNK: unknown[] = [
  null, 0, -0, 1.5, -7, 1e21, 2 ** 53 + 2, Infinity, -Infinity, '', 'x', 'null', 'true', '1', '2026-11-25', true, false,
  [], {}, ['a'], { a: 1 }, [-0], [Infinity], [[1]], { toString: 1 }, { constructor: 'x' },
];
/** Keys an object can get from JSON that name members of Object.prototype. */
const PROTOTYPE_KEYS = ['constructor', 'toString', 'valueOf', 'hasOwnProperty', '__proto__'];
const defineKey = (o: object, key: string, value: unknown) => Object.defineProperty(o, key, { value, enumerable: true, writable: true, configurable: true });

function valuesFor(models: TsoaRoute.Models, next: () => number) {
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(next() * xs.length)];

  function gen(schema: Schema, depth: number): unknown {
    switch (schema.dataType) {
      case 'string': return pick(['', 'a', 'ada@example.test', 'é', '1', 'true', 'x'.repeat(300)]);
      case 'boolean': return next() < 0.5;
      case 'double': case 'float': return pick([0, 1.5, -3, 7, 1e21, 2 ** 53 + 2, 5e-324, Infinity]);
      case 'integer': case 'long': return pick([0, 5, -2, 300, 3.5, 2 ** 60]);
      case 'enum': return pick(schema.enums ?? [null]);
      case 'array': return Array.from({ length: Math.floor(next() * 3) }, () => gen(schema.array ?? {}, depth + 1));
      case 'union': return gen(pick(schema.subSchemas ?? [{}]), depth);
      case 'intersection': return Object.assign({}, ...(schema.subSchemas ?? []).map((s) => gen(s, depth + 1)));
      case 'undefined': return undefined;
      case 'date': return '2026-11-25';
      case 'datetime': return '2026-11-25T10:00:00Z';
      case 'nestedObjectLiteral': return object(schema.nestedProperties ?? {}, schema.additionalProperties, depth);
      case 'any': return pick(JUNK);
      default: {
        if (schema.ref === undefined) return pick(JUNK);
        const model = models[schema.ref];
        if (model === undefined || depth > 5) return {};
        if (model.dataType === 'refEnum') return pick(model.enums);
        if (model.dataType === 'refAlias') return gen(model.type, depth + 1);
        return object(model.properties ?? {}, model.additionalProperties, depth);
      }
    }
  }

  function object(properties: Record<string, Schema>, additional: boolean | Schema | undefined, depth: number): Record<string, unknown> {
    const out: Record<string, unknown> = {};
    for (const [key, schema] of Object.entries(properties)) {
      if (!schema.required && next() < 0.3) continue;
      const v = gen(schema, depth + 1);
      if (v !== undefined || schema.required) out[key] = v;
    }
    if (typeof additional === 'object') {
      for (let i = Math.floor(next() * 3); i > 0; i--) out[`extra${i}`] = gen(additional, depth + 1);
    }
    return out;
  }

  /** A copy of `value` with one thing changed somewhere inside: a value replaced, a key added or removed. */
  function damage(value: unknown): unknown {
    const copy = structuredClone(value);
    const containers: Array<Record<string, unknown> | unknown[]> = [];
    const walk = (v: unknown): void => {
      if (typeof v !== 'object' || v === null) return;
      containers.push(v as Record<string, unknown>);
      for (const x of Object.values(v)) walk(x);
    };
    walk(copy);
    if (containers.length === 0) return pick(JUNK);
    const target = pick(containers) as Record<string, unknown>;
    const keys = Object.keys(target);
    const action = next();
    // JSON gives arrays no named keys: only objects get new ones.
    const isObject = !Array.isArray(target);
    if (action < 0.5 && keys.length > 0) target[pick(keys)] = pick(JUNK);
    else if (action < 0.65 && keys.length > 0) delete target[pick(keys)];
    else if (action < 0.75 && isObject) defineKey(target, pick(PROTOTYPE_KEYS), pick(JUNK));
    else if (action < 0.85 && keys.length > 0) target[pick(keys)] = undefined;
    else if (isObject) target.unexpected = pick(JUNK);
    return copy;
  }

  return { gen, damage, pick };
}

/** What tsoa itself makes of a body value: its errors, and the value it hands on. */
function tsoaValidates(schema: Schema, value: unknown): { errors: FieldErrors; out: unknown } {
  const errors: FieldErrors = {};
  const out = new ValidationService(tsoaModels, tsoaValidationConfig).ValidateParam(schema, structuredClone(value), 'body', errors, true, undefined);
  return { errors, out };
}

describe('argument validation fast path (unit)', () => {
  const fast = new TsoaFastCheck(tsoaModels, tsoaValidationConfig.noImplicitAdditionalProperties);

  it('passes only values tsoa accepts and hands on unchanged, for every model of the API', () => {
    const next = random(20261125);
    const { gen, damage } = valuesFor(tsoaModels, next);
    let passed = 0;
    let checked = 0;
    const passedModels = new Set<string>();
    for (const name of Object.keys(tsoaModels)) {
      const schema: Schema = { ref: name, required: true };
      for (let i = 0; i < 60; i++) {
        const valid = gen(schema, 0);
        for (const value of [valid, damage(valid), damage(valid), damage(damage(valid))]) {
          checked++;
          if (!fast.accepts(schema, value)) continue;
          const { errors, out } = tsoaValidates(schema, value);
          expect(errors, `${name}: ${JSON.stringify(value)}`).to.deep.equal({});
          expect(out, `${name}: ${JSON.stringify(value)}`).to.deep.equal(value);
          passed++;
          passedModels.add(name);
        }
      }
    }
    // The fast path is taken for most models, not only for refusals (else it would speed nothing up).
    expect(passed, `${passed} of ${checked}`).to.be.greaterThan(checked / 10);
    expect(passedModels.size).to.be.greaterThan(Object.keys(tsoaModels).length / 2);
  });

  it('takes a typical send body as it is', () => {
    const schema: Schema = { ref: 'SendRequest', required: true };
    const body = {
      from: 'app@example.test', fromName: 'The Shop', to: 'ada@example.test', subject: 'Shipped', text: 'Hello', html: '<p>Hello</p>',
      headers: { 'X-Campaign': 'shipping' }, metadata: { orderId: 'A-10442', tier: 'gold', attempt: 2, vip: true },
    };
    expect(fast.accepts(schema, body)).to.equal(true);
    expect(fast.accepts(schema, { ...body, to: ['ada@example.test', 'bob@example.test'], dryRun: true })).to.equal(true);
    expect(tsoaValidates(schema, body)).to.deep.equal({ errors: {}, out: body });
  });

  it('leaves to tsoa what it would refuse or change', () => {
    const schema: Schema = { ref: 'SendRequest', required: true };
    const body = { from: 'app@example.test', to: 'ada@example.test', subject: 'Shipped', text: 'Hello' };
    const refused: Array<[string, unknown]> = [
      ['an unknown property', { ...body, cc: 'x@example.test' }],
      ['null for an optional string', { ...body, fromName: null }],
      ['a number for a string', { ...body, subject: 5 }],
      ['a required property missing', { to: body.to, subject: body.subject, text: body.text }],
      ['an array member of the wrong type', { ...body, to: ['ada@example.test', 3] }],
      ['a nested object in metadata', { ...body, metadata: { a: { b: 1 } } }],
      ['not an object', [body]],
      ['no body', undefined],
    ];
    for (const [what, value] of refused) {
      expect(fast.accepts(schema, value), what).to.equal(false);
      expect(Object.keys(tsoaValidates(schema, value).errors), what).to.not.deep.equal([]);
    }
    // Accepted by tsoa, but changed (-0 becomes 0) or written back through a setter (__proto__): tsoa's to handle.
    const minusZero = { ...body, metadata: { a: -0 } };
    expect(fast.accepts(schema, minusZero)).to.equal(false);
    expect(Object.is((tsoaValidates(schema, minusZero).out as typeof minusZero).metadata.a, 0)).to.equal(true);
    expect(fast.accepts(schema, { ...body, headers: JSON.parse('{"__proto__": "x"}') })).to.equal(false);
  });

  it('leaves to tsoa the values its union copy or its write-back would change (schemas no route has yet)', () => {
    const models: TsoaRoute.Models = {};
    const check = new TsoaFastCheck(models, 'throw-on-extras');
    const cases: Array<[string, Schema, unknown]> = [
      ['-0 under any, in a union (tsoa hands on 0)', { dataType: 'union', subSchemas: [{ dataType: 'nestedObjectLiteral', nestedProperties: { a: { dataType: 'any' } } }] }, { a: -0 }],
      ['1e400 under any, in a union (tsoa hands on null)', { dataType: 'union', subSchemas: [{ dataType: 'any' }, { dataType: 'string' }] }, { a: Infinity }],
      ['Infinity in an untyped member of a union', { dataType: 'union', subSchemas: [{ dataType: 'object' as TsoaRoute.PropertySchema['dataType'] }] }, [Infinity]],
      ['a required property of type undefined (tsoa writes the key)', { dataType: 'nestedObjectLiteral', nestedProperties: { u: { dataType: 'undefined', required: true } } }, {}],
    ];
    for (const [what, schema, value] of cases) {
      expect(check.accepts(schema, value), what).to.equal(false);
      const errors: FieldErrors = {};
      let out: unknown;
      try {
        out = new ValidationService(models, tsoaValidationConfig).ValidateParam(schema, structuredClone(value), 'body', errors, true, undefined);
      } catch {
        continue; // tsoa itself throws (String() of an object): left to it, as the fast path does
      }
      expect(Object.keys(errors).length === 0 && isDeepStrictEqual(out, value), what).to.equal(false);
    }
    // An extra key named like a member of Object.prototype, whose value String() cannot print: tsoa takes the
    // key for a declared one and passes it; the fast path must not throw on it (it did), only leave it to tsoa.
    const enumExtras: Schema = { dataType: 'nestedObjectLiteral', nestedProperties: {}, additionalProperties: { dataType: 'enum', enums: ['a'] } };
    expect(check.accepts(enumExtras, JSON.parse('{"constructor": {"toString": 1}}'))).to.equal(false);
    expect(check.accepts(enumExtras, { a: { toString: 1 } })).to.equal(false);
  });

  it('refuses an object or an array for an enum with a field error, never a TypeError (a 500) or the array taken for its member', () => {
    const args: Record<string, TsoaRoute.ParameterSchema> = {
      body: { in: 'body', name: 'body', required: true, dataType: 'nestedObjectLiteral', nestedProperties: { mode: { dataType: 'enum', enums: ['txt', 'cname_managed'] } } },
    };
    const motor = new MotorTemplateService({}, tsoaValidationConfig);
    const validated = (mode: unknown) => motor.getValidatedArgs({ args, request: { body: { mode } } as express.Request, response: {} as express.Response });
    for (const mode of [JSON.parse('{"toString": 1}'), JSON.parse('{"toString": 1, "valueOf": 1}'), ['txt'], {}]) {
      let err: unknown;
      try { validated(mode); } catch (e) { err = e; }
      expect(err, JSON.stringify(mode)).to.be.instanceOf(ValidateError);
      expect(Object.keys((err as ValidateError).fields), JSON.stringify(mode)).to.deep.equal(['body.mode']);
    }
    expect(validated('txt')).to.deep.equal([{ mode: 'txt' }]);
  });

  it('takes a number from the query string only in decimal digits: 1e1, +1, 1.0 are field errors as abc is (tsoa took them)', () => {
    const args = (dataType: 'double' | 'integer'): Record<string, TsoaRoute.ParameterSchema> => ({ limit: { in: 'query', name: 'limit', dataType } });
    const validated = (service: ExpressTemplateService, dataType: 'double' | 'integer', limit: string) => {
      const req = Object.create(express.request) as express.Request;
      Object.defineProperty(req, 'query', { value: { limit } });
      try {
        return service.getValidatedArgs({ args: args(dataType), request: req, response: {} as express.Response })[0];
      } catch (err) {
        expect(err).to.be.instanceOf(ValidateError);
        expect(Object.keys((err as ValidateError).fields)).to.deep.equal(['limit']);
        return 'refused';
      }
    };
    const motor = new MotorTemplateService(tsoaModels, tsoaValidationConfig);
    const tsoa = new ExpressTemplateService(tsoaModels, tsoaValidationConfig);
    for (const dataType of ['double', 'integer'] as const) {
      for (const v of ['1e1', '1E1', '+1', '1.0', '1.', '10.0', ' 1', '1 ', '0x10', '1_0', '', 'abc', '１']) expect(validated(motor, dataType, v), `${dataType} ${JSON.stringify(v)}`).to.equal('refused');
      for (const [v, n] of [['10', 10], ['010', 10], ['0', 0], ['-1', -1]] as const) expect(validated(motor, dataType, v), `${dataType} ${v}`).to.equal(n);
    }
    // What tsoa itself made of them: the numbers the routes' whole-number checks then let through.
    expect(['1e1', '+1', '1.0'].map((v) => validated(tsoa, 'double', v))).to.deep.equal([10, 1, 1]);
    // The rule fits because every number a route takes outside its body is a whole count: a fractional one would need its own.
    RegisterRoutes(express.Router());
    const numeric = Object.values(tsoaRouteArgs).flatMap((a) => Object.values(a))
      .filter((p) => p.in !== 'body' && p.in !== 'request' && ['double', 'float', 'integer', 'long'].includes(p.dataType ?? ''));
    expect([...new Set(numeric.map((p) => `${p.in} ${p.name}`))].sort()).to.deep.equal(['query days', 'query hours', 'query limit']);
    // Declared whole (`@isInt`): validated with validateInt, and `integer` in the OpenAPI document, not `number`.
    expect([...new Set(numeric.map((p) => p.dataType))]).to.deep.equal(['integer']);
    const spec = JSON.parse(readFileSync(join(__dirname, '../../read-api/generated/openapi.json'), 'utf8')) as { paths: Record<string, Record<string, { parameters?: Array<{ in: string; name: string; schema: { type: string } }> }>> };
    const counts = Object.values(spec.paths).flatMap((ops) => Object.values(ops)).flatMap((op) => op.parameters ?? []).filter((q) => ['limit', 'days', 'hours'].includes(q.name));
    expect(counts.length).to.be.greaterThan(15);
    expect([...new Set(counts.map((q) => `${q.in} ${q.schema.type}`))]).to.deep.equal(['query integer']);
  });

  it('gives every route the arguments tsoa gives it, or tsoa\'s error, and takes the fast path for most', () => {
    RegisterRoutes(express.Router());
    const routes = Object.entries(tsoaRouteArgs);
    expect(routes.length).to.be.greaterThan(100);
    const next = random(7);
    const { gen, pick } = valuesFor(tsoaModels, next);
    // tsoa as Motor has it validate: the arguments a handler checks itself as optional `any` (read-api/http/checkedByHandler.ts).
    const tsoa = new ExpressTemplateService(modelsAsValidated(tsoaModels), tsoaValidationConfig);
    const motor = new MotorTemplateService(tsoaModels, tsoaValidationConfig);
    const request = (body: unknown, headers: Record<string, string>, query: Record<string, unknown>, params: Record<string, string>) => {
      const req = Object.create(express.request) as express.Request & Record<string, unknown>;
      req.headers = headers;
      Object.defineProperty(req, 'query', { value: query });
      req.params = params;
      req.body = structuredClone(body);
      return req;
    };
    const outcome = (service: ExpressTemplateService, args: Record<string, TsoaRoute.ParameterSchema>, req: express.Request) => {
      try {
        return { args: service.getValidatedArgs({ args, request: req, response: {} as express.Response }).map((v) => (v === req ? '<request>' : v)) };
      } catch (err) {
        return { error: String((err as Error).name), fields: (err as { fields?: unknown }).fields };
      }
    };
    let fast = 0;
    let total = 0;
    const tsoaValidated = ExpressTemplateService.prototype.getValidatedArgs;
    for (const [route, args] of routes) {
      const params = Object.values(args);
      for (let i = 0; i < 40; i++) {
        const bodyParam = params.find((p) => p.in === 'body');
        const body = bodyParam ? (next() < 0.05 ? undefined : gen(bodyParam, 0)) : undefined;
        const headers: Record<string, string> = {};
        const query: Record<string, unknown> = {};
        const path: Record<string, string> = {};
        for (const p of params) {
          const v = pick<unknown>([undefined, '', 'abc', 'ABC-123', ['a', 'b'], '10', 'true', 'day', '7b0c0e1e-1111-4222-8333-444455556666']);
          if (p.in === 'header' && typeof v === 'string') headers[p.name.toLowerCase()] = v;
          if (p.in === 'query' && v !== undefined) query[p.name] = v;
          if (p.in === 'path') path[p.name] = typeof v === 'string' ? v : 'abc';
        }
        let tookFastPath = true;
        ExpressTemplateService.prototype.getValidatedArgs = function (this: ExpressTemplateService, p) { tookFastPath = false; return tsoaValidated.call(this, p); };
        let ours;
        try {
          ours = outcome(motor, args, request(body, headers, query, path));
        } finally {
          ExpressTemplateService.prototype.getValidatedArgs = tsoaValidated;
        }
        const theirs = outcome(tsoa, argsAsValidated(args), request(body, headers, query, path));
        expect(isDeepStrictEqual(ours, theirs), `${route}: ${JSON.stringify({ body, headers, query, path })}`).to.equal(true);
        total++;
        if (tookFastPath) fast++;
      }
    }
    expect(fast, `${fast} of ${total}`).to.be.greaterThan(total / 3);
  });

  it('leaves to their handlers only fields of body models, and those fields only', () => {
    RegisterRoutes(express.Router());
    const bodies = new Set(Object.values(tsoaRouteArgs).flatMap((a) => Object.values(a)).filter((p) => p.in === 'body').map((p) => p.ref));
    const validated = modelsAsValidated(tsoaModels);
    for (const [name, fields] of Object.entries(BODY_FIELDS_CHECKED_BY_HANDLER)) {
      expect(bodies.has(name), `${name} is a request body`).to.equal(true);
      const real = tsoaModels[name] as TsoaRoute.RefObjectModelSchema;
      const asValidated = validated[name] as TsoaRoute.RefObjectModelSchema;
      for (const [field, schema] of Object.entries(real.properties)) {
        expect(asValidated.properties[field], `${name}.${field}`).to.deep.equal(fields.includes(field) ? { dataType: 'any' } : schema);
      }
      expect(asValidated.additionalProperties, name).to.deep.equal(real.additionalProperties);
    }
    // The others are tsoa's models as generated.
    for (const name of Object.keys(tsoaModels)) if (!(name in BODY_FIELDS_CHECKED_BY_HANDLER)) expect(validated[name]).to.equal(tsoaModels[name]);
    // Idempotency-Key is required in the document, and optional to tsoa: the handler answers 400 invalid_idempotency_key.
    const create = tsoaRouteArgs['AccountMotorBlocksController.createAccountBlock'];
    expect(create.idempotencyKey.required).to.equal(true);
    expect(argsAsValidated(create).idempotencyKey).to.deep.equal({ in: 'header', name: 'Idempotency-Key', dataType: 'string' });
  });
});
