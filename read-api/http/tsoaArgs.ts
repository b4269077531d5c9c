import { ExpressTemplateService, ValidationService, type FieldErrors, type TsoaRoute } from '@tsoa/runtime';
import type { Request as ExRequest } from 'express';
import { checkIdConflict } from '../../commands/blocks/accountBlocks';
import { BODY_FIELDS_CHECKED_BY_HANDLER, HEADERS_CHECKED_BY_HANDLER } from './checkedByHandler';

/**
 * tsoa's argument validation with a fast path (decision, docs/ARCHITECTURE.md "Argument validation").
 *
 * tsoa's ValidationService interprets the route metadata for every request, and validates each
 * member of a union on a JSON.parse(JSON.stringify()) copy of the value: on POST /v1/send (`to`
 * and every metadata value are unions) that was 5–8 % of the API process's CPU per request.
 *
 * The fast path answers one question per argument: is this value one that tsoa would accept and
 * hand on unchanged? It says yes only for the cases it models exactly (strings, booleans, finite
 * numbers, enums, arrays and objects of those, unions of those, `any`, models without defaults,
 * no validators such as minLength or pattern, no extra properties); for anything else it says
 * "not sure", and tsoa validates the request as before. So a request the fast path passes is one
 * tsoa would have passed with the same values, and every refusal (its status, code and message)
 * is still tsoa's. test/read-api/tsoaArgs.unit.test.ts holds the two to that on generated values for
 * every model of the API.
 */

type Schema = TsoaRoute.PropertySchema;
type ExtrasPolicy = 'throw-on-extras' | 'silently-remove-extras' | 'ignore';
type Check = (value: unknown) => boolean;
type ValidationArgs = Parameters<ExpressTemplateService['getValidatedArgs']>[0];
type FloatValidators = Parameters<ValidationService['validateFloat']>[4];
type IntValidators = Parameters<ValidationService['validateInt']>[4];

const isEmpty = (o: object | undefined): boolean => o === undefined || Object.keys(o).length === 0;
const isPlainObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const own = (o: object, key: string): boolean => Object.prototype.hasOwnProperty.call(o, key);

/**
 * Decides, for a body value and a tsoa schema, whether tsoa's ValidationService (body parameter,
 * bodyCoercion off) would accept the value and return it as it is. False means "not sure", never
 * "invalid". Checks are compiled once per schema object.
 */
export class TsoaFastCheck {
  private readonly compiled = new WeakMap<Schema, Check>();

  constructor(private readonly models: TsoaRoute.Models, private readonly extras: ExtrasPolicy) {}

  /** True when tsoa would accept `value` for `schema` (a property or a body parameter) unchanged. */
  accepts(schema: Schema, value: unknown): boolean {
    let check = this.compiled.get(schema);
    if (check === undefined) {
      check = this.compileProperty(schema);
      this.compiled.set(schema, check);
    }
    return check(value);
  }

  /** ValidateParam's handling of undefined, then the type's check. */
  private compileProperty(schema: Schema): Check {
    const type = this.compileType(schema);
    // undefined with a default, or a union admitting undefined, is replaced or revalidated by tsoa; required is
    // refused, or (of type undefined) written back as a key holding undefined.
    const undefinedPasses = !schema.required && schema.default === undefined &&
      !(schema.dataType === 'union' && schema.subSchemas?.some((s) => s.dataType === 'undefined'));
    return (value) => (value === undefined ? undefinedPasses : type(value));
  }

  private compileType(schema: Schema): Check {
    const plain = isEmpty(schema.validators);
    switch (schema.dataType) {
      case 'string':
        return plain ? (v) => typeof v === 'string' : () => false;
      case 'boolean':
        return (v) => v === true || v === false;
      case 'double':
      case 'float':
        // tsoa returns toFloat(String(v)): the same number for every finite one but -0.
        return plain ? (v) => typeof v === 'number' && Number.isFinite(v) && !Object.is(v, -0) : () => false;
      case 'integer':
      case 'long':
        return plain ? (v) => Number.isSafeInteger(v) && !Object.is(v, -0) : () => false;
      case 'enum': {
        const members = schema.enums ?? [];
        // tsoa returns the first member whose String() equals the value's (String() of an object may even throw).
        return (v) => isPrimitive(v) && members.find((m) => String(m) === String(v)) === v;
      }
      case 'array': {
        const item = schema.array;
        if (!plain || item === undefined) return () => false;
        return (v) => {
          if (!Array.isArray(v)) return false;
          // An undefined member or a hole (never in JSON) would be null in the copy a union validates: not modelled.
          for (let i = 0; i < v.length; i++) if (v[i] === undefined || !this.accepts(item, v[i])) return false;
          return true;
        };
      }
      case 'union': {
        const subs = schema.subSchemas ?? [];
        if (!plain || subs.length === 0) return () => false;
        // tsoa takes the first member that validates, and validates it on a JSON copy of the value,
        // which it then hands on: each earlier member must be sure to refuse, and the copy must equal the value.
        return (v) => {
          for (const sub of subs) {
            if (this.accepts(sub, v)) return survivesJsonCopy(v);
            if (!refuses(sub, v)) return false;
          }
          return false;
        };
      }
      case 'undefined':
        return (v) => v === undefined;
      case 'any':
        return () => true;
      case 'nestedObjectLiteral':
        return this.compileObject(schema.nestedProperties ?? {}, schema.additionalProperties, false);
      case 'intersection':
      case 'date':
      case 'datetime':
      case 'buffer':
        return () => false;
      default: {
        // ValidateParam's default branch: a model by reference, else the value as it is.
        const ref = schema.ref;
        if (ref === undefined) return () => true;
        let model: Check | undefined;
        return (v) => (model ??= this.compileModel(ref))(v);
      }
    }
  }

  private compileModel(ref: string): Check {
    const model = this.models[ref];
    if (model === undefined) return () => false;
    switch (model.dataType) {
      case 'refEnum': return this.compileType({ dataType: 'enum', enums: model.enums });
      case 'refAlias': return this.compileType(model.type);
      case 'refObject': return this.compileObject(model.properties ?? {}, model.additionalProperties, true);
    }
  }

  /**
   * An object's declared properties and its other keys. `isModel`: a refObject, where an absent
   * additionalProperties means any key is allowed; in a nested object literal it means none is.
   */
  private compileObject(properties: Record<string, Schema>, additional: boolean | Schema | undefined, isModel: boolean): Check {
    const declared = Object.entries(properties);
    const extraAllowed: 'any' | 'none' | Schema =
      typeof additional === 'object' ? additional
        : additional === true || (isModel && additional === undefined) || this.extras === 'ignore' ? 'any'
          : 'none';
    return (v) => {
      if (!isPlainObject(v)) return false;
      for (const [key, schema] of declared) {
        const value = v[key];
        // A key present with undefined (never in JSON) would be dropped by a union's copy: not modelled.
        if (value === undefined && own(v, key)) return false;
        if (!this.accepts(schema, value)) return false;
      }
      for (const key in v) {
        // "__proto__", "constructor", "toString"...: tsoa writes values back with value[key] = ... and takes
        // an inherited member of a literal's properties for a declared one; such keys are left to it.
        if (key in Object.prototype) return false;
        if (own(properties, key)) continue;
        if (extraAllowed === 'none') return false;
        if (extraAllowed !== 'any' && (v[key] === undefined || !this.accepts(extraAllowed, v[key]))) return false;
      }
      return true;
    };
  }
}

function isPrimitive(v: unknown): v is string | number | boolean | null {
  return v === null || typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean';
}

/**
 * True when JSON.parse(JSON.stringify(v)) equals v. Of what JSON.parse makes, only -0 (→ 0) and
 * the infinities of numbers too large for a double (1e400 → null) do not survive the copy.
 */
function survivesJsonCopy(v: unknown): boolean {
  if (typeof v === 'number') return Number.isFinite(v) && !Object.is(v, -0);
  if (typeof v !== 'object' || v === null) return typeof v !== 'undefined' && typeof v !== 'function' && typeof v !== 'bigint' && typeof v !== 'symbol';
  if (Array.isArray(v)) {
    for (let i = 0; i < v.length; i++) if (!survivesJsonCopy(v[i])) return false;
    return true;
  }
  for (const key in v) if (!survivesJsonCopy((v as Record<string, unknown>)[key])) return false;
  return true;
}

/** True when tsoa's validation of a (defined) body value against `schema` is sure to report an error. */
function refuses(schema: Schema, v: unknown): boolean {
  switch (schema.dataType) {
    case 'string': return typeof v !== 'string';
    case 'boolean': return v !== true && v !== false;
    case 'double': case 'float': case 'integer': case 'long': return typeof v !== 'number';
    case 'enum': return isPrimitive(v) && !(schema.enums ?? []).some((m) => String(m) === String(v));
    case 'array': return !Array.isArray(v);
    case 'nestedObjectLiteral': return !isPlainObject(v);
    case 'undefined': return v !== undefined;
    default: return false;
  }
}

/**
 * How a number is written where it arrives as text (a query parameter; a path or header one would
 * be the same): decimal digits, a minus sign allowed so that a negative count reaches the route's
 * range check and gets the route's code for it, as before. Every number the API takes so is a
 * whole count (limit, days, hours; test/read-api/tsoaArgs.unit.test.ts holds the routes to it): a
 * fractional one would need its own rule here.
 */
const DECIMAL_DIGITS = /^-?[0-9]+$/;

/**
 * tsoa's validation, with numbers given as text written in plain decimal digits, and enums
 * refusing what is not a primitive.
 *
 * tsoa turns text into a number with validator.js's isFloat/toFloat (isInt/toInt for integers):
 * `?limit=1e1` was 10, `+1`, `1.0` and `1.` were 1, and passed the routes' whole-number checks. Such
 * a value is now a field error as `?limit=abc` is (400 invalid_query on a read,
 * read-api/http/errors.ts), so every route refuses it alike, before its own range check. What
 * tsoa refuses itself keeps tsoa's message.
 *
 * tsoa matches an enum member on String(value): for an object JSON made with a `toString` that is
 * no function (`{"toString": 1}`) String() throws, and the request was a 500; an array printed as its only member (`["txt"]` as
 * "txt") and passed where the schema names a string. Such a value is now the field error tsoa gives
 * any other non-member. (tsoa validates intersections with a ValidationService of its own; no
 * request body has one.)
 */
export class MotorValidationService extends ValidationService {
  override validateFloat(name: string, value: unknown, fieldErrors: FieldErrors, isBodyParam: boolean, validators?: FloatValidators, parent = ''): number | undefined {
    return writtenInDigits(super.validateFloat(name, value, fieldErrors, isBodyParam, validators, parent), name, value, fieldErrors, isBodyParam, parent);
  }

  override validateInt(name: string, value: unknown, fieldErrors: FieldErrors, isBodyParam: boolean, validators?: IntValidators, parent = ''): number | undefined {
    return writtenInDigits(super.validateInt(name, value, fieldErrors, isBodyParam, validators, parent), name, value, fieldErrors, isBodyParam, parent);
  }

  override validateEnum(name: string, value: unknown, fieldErrors: FieldErrors, members?: Array<string | number | boolean | null>, parent = ''): unknown {
    if (typeof value === 'object' && value !== null) {
      const listed = (members ?? []).map((m) => (typeof m === 'string' ? `'${m}'` : String(m))).join(',');
      fieldErrors[parent + name] = { message: `should be one of the following; [${listed}]`, value };
      return undefined;
    }
    return super.validateEnum(name, value, fieldErrors, members, parent);
  }
}

/** `n`, tsoa's number for `value`, unless `value` is text that is not DECIMAL_DIGITS: then a field error. */
function writtenInDigits(n: number | undefined, name: string, value: unknown, fieldErrors: FieldErrors, isBodyParam: boolean, parent: string): number | undefined {
  if (n === undefined || isBodyParam || typeof value !== 'string' || DECIMAL_DIGITS.test(value)) return n;
  fieldErrors[parent + name] = { message: 'must be a whole number written in decimal digits (10, not 1e1, +10 or 10.0)', value };
  return undefined;
}

/**
 * The models as tsoa validates them: each field of BODY_FIELDS_CHECKED_BY_HANDLER (its handler
 * checks it, read-api/http/checkedByHandler.ts) an optional `any`. The models keep their real types
 * for the OpenAPI document.
 */
export function modelsAsValidated(models: TsoaRoute.Models): TsoaRoute.Models {
  const out: TsoaRoute.Models = { ...models };
  for (const [name, fields] of Object.entries(BODY_FIELDS_CHECKED_BY_HANDLER)) {
    // Models not given (a test's own) have nothing to relax; the unit test checks every name against the API's.
    const model = models[name];
    if (model === undefined) continue;
    if (model.dataType !== 'refObject') throw new Error(`checkedByHandler: ${name} is not an object model`);
    const properties = { ...model.properties };
    for (const field of fields) properties[field] = { dataType: 'any' };
    out[name] = { ...model, properties };
  }
  return out;
}

/** A route's parameters as tsoa validates them: a header of HEADERS_CHECKED_BY_HANDLER optional, without validators. */
export function argsAsValidated(args: Record<string, TsoaRoute.ParameterSchema>): Record<string, TsoaRoute.ParameterSchema> {
  const checked = (p: TsoaRoute.ParameterSchema) => p.in === 'header' && HEADERS_CHECKED_BY_HANDLER.has(p.name.toLowerCase());
  if (!Object.values(args).some(checked)) return args;
  const out: Record<string, TsoaRoute.ParameterSchema> = {};
  for (const [key, p] of Object.entries(args)) {
    if (!checked(p)) {
      out[key] = p;
      continue;
    }
    const relaxed = { ...p };
    delete relaxed.required;
    delete relaxed.validators;
    out[key] = relaxed;
  }
  return out;
}

/**
 * tsoa's Express template service (used by the routes generated from read-api/http/tsoaRoutes.hbs)
 * with the fast path above: a request whose every argument passes gets its arguments without
 * tsoa's interpretation; any other request is validated by tsoa (MotorValidationService) as before.
 * Arguments a handler checks itself are validated as modelsAsValidated and argsAsValidated say,
 * decided once: the models here, a route's parameters on its first request.
 */
export class MotorTemplateService extends ExpressTemplateService {
  /** Null when tsoa coerces body values (bodyCoercion): the fast path models validation without coercion only. */
  private readonly fast: TsoaFastCheck | null;
  /** Per route (its generated args object): its parameters as validated, as a record and as a list. */
  private readonly routes = new WeakMap<object, { args: Record<string, TsoaRoute.ParameterSchema>; params: TsoaRoute.ParameterSchema[] }>();
  private readonly blockInPath = new WeakMap<object, boolean>();

  constructor(models: TsoaRoute.Models, config: ConstructorParameters<typeof ExpressTemplateService>[1]) {
    const validated = modelsAsValidated(models);
    super(validated, config);
    this.validationService = new MotorValidationService(validated, config);
    this.fast = config.bodyCoercion === false ? new TsoaFastCheck(validated, config.noImplicitAdditionalProperties) : null;
  }

  override getValidatedArgs(params: ValidationArgs): unknown[] {
    let route = this.routes.get(params.args);
    if (route === undefined) {
      const args = argsAsValidated(params.args);
      route = { args, params: Object.values(args) };
      this.routes.set(params.args, route);
    }
    const values = this.fastArgs(route.params, params.request)
      ?? super.getValidatedArgs(route.args === params.args ? params : { ...params, args: route.args });
    if (this.namesBlockInPath(params.args, params.request)) checkQueryBlockId(params.request);
    return values;
  }

  /**
   * Whether the route names its Motor Block in the path (`/motor-blocks/{id}...`) and does not take
   * a `motorBlockId` query parameter of its own (the account block routes do, and their handlers
   * check it: checkIdConflict). Decided once per route.
   */
  private namesBlockInPath(args: Record<string, TsoaRoute.ParameterSchema>, request: ExRequest): boolean {
    let names = this.blockInPath.get(args);
    if (names === undefined) {
      const path = typeof request.route?.path === 'string' ? request.route.path : '';
      const params = Object.values(args);
      names = /\/motor-blocks\/:id(\/|$)/.test(path)
        && params.some((p) => p.in === 'path' && p.name === 'id')
        && !params.some((p) => p.in === 'query' && p.name === 'motorBlockId');
      this.blockInPath.set(args, names);
    }
    return names;
  }

  private fastArgs(params: TsoaRoute.ParameterSchema[], request: ExRequest): unknown[] | undefined {
    if (this.fast === null) return undefined;
    const values: unknown[] = new Array(params.length);
    for (let i = 0; i < params.length; i++) {
      const param = params[i];
      let value: unknown;
      switch (param.in) {
        case 'request':
          values[i] = request;
          continue;
        case 'body':
          value = request.body;
          break;
        // Other parameters are validated as body values are only when they are plain strings (no coercion involved).
        case 'header':
          if (param.dataType !== 'string') return undefined;
          value = request.header(param.name);
          break;
        case 'path':
          if (param.dataType !== 'string') return undefined;
          value = request.params[param.name];
          break;
        case 'query':
          if (param.dataType !== 'string') return undefined;
          value = request.query[param.name];
          break;
        default:
          return undefined;
      }
      if (!this.fast.accepts(param, value)) return undefined;
      values[i] = value;
    }
    return values;
  }
}

/**
 * SPEC "Account and block routes": two different block ids named, the path's and a `motorBlockId`
 * query parameter, is 400 motor_block_id_conflict on every block route, not only on those that
 * declare the parameter; a route that ignored it would answer about the path's block to a caller
 * who may have meant the other. Checked after authentication and argument validation, as the
 * account routes check it. Given more than once, each value must name the path's block.
 */
function checkQueryBlockId(request: ExRequest): void {
  const given = (request.query as Record<string, unknown>).motorBlockId;
  if (given === undefined) return;
  const pathId = String(request.params.id);
  for (const v of Array.isArray(given) ? given : [given]) checkIdConflict(pathId, typeof v === 'string' ? v : '');
}
