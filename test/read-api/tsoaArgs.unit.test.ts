import { expect } from 'chai';
import { ValidationService, type FieldErrors, type TsoaRoute } from '@tsoa/runtime';
import { tsoaModels, tsoaValidationConfig } from '../../read-api/generated/routes';
import { TsoaFastCheck } from '../../read-api/http/tsoaArgs';

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

const JUNK: unknown[] = [null, 0, -0, 1.5, -7, 1e21, 2 ** 53 + 2, '', 'x', 'true', '1', '2026-11-25', true, false, [], {}, ['a'], { a: 1 }];

function valuesFor(models: TsoaRoute.Models, next: () => number) {
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(next() * xs.length)];

  function gen(schema: Schema, depth: number): unknown {
    switch (schema.dataType) {
      case 'string': return pick(['', 'a', 'ada@example.test', 'é', '1', 'true', 'x'.repeat(300)]);
      case 'boolean': return next() < 0.5;
      case 'double': case 'float': return pick([0, 1.5, -3, 7, 1e21, 2 ** 53 + 2]);
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
    if (action < 0.5 && keys.length > 0) target[pick(keys)] = pick(JUNK);
    else if (action < 0.65 && keys.length > 0) delete target[pick(keys)];
    else if (action < 0.75) Object.defineProperty(target, '__proto__', { value: 'x', enumerable: true, writable: true, configurable: true });
    else if (action < 0.85 && keys.length > 0) target[pick(keys)] = undefined;
    else target.unexpected = pick(JUNK);
    return copy;
  }

  return { gen, damage };
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
});
