import { fail } from '../../domain/errors';

/** A whole-number query parameter in [min, max], `fallback` when absent; else 400 validation_error naming it. */
export function intParam(name: string, value: number | undefined, min: number, max: number, fallback: number): number {
  if (value === undefined) return fallback;
  if (!Number.isInteger(value) || value < min || value > max) throw fail('validation_error', 400, `${name} must be a whole number from ${min} to ${max}`, { details: { field: name } });
  return value;
}
