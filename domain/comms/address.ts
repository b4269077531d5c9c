import { fail } from '../errors';
import { isValidAddress } from '../message/sendRules';

/**
 * An address as the communications product keys it (contacts, suppressions): trimmed and
 * lower-cased whole. Mailbox providers compare local parts case-insensitively, and a suppression
 * list errs on the side of not mailing.
 */
export const commAddress = (email: string): string => email.trim().toLowerCase();

/** A body's `email`: required, a string, a valid address once trimmed and lower-cased (400 validation_error, field `email`). */
export function requiredAddress(value: unknown): string {
  const invalid = (message: string) => fail('validation_error', 400, message, { details: { field: 'email' } });
  if (value === undefined || value === null) throw invalid('email is required');
  if (typeof value !== 'string') throw invalid('email must be a string');
  const email = commAddress(value);
  if (!isValidAddress(email)) throw invalid('email is not a valid address');
  return email;
}
