import { fail } from '../../domain/errors';
import { isUuid } from '../../domain/ids';
import type { Principal } from './principal';

/**
 * Block ownership: a public bearer token is bound to exactly one Motor Block. A token for another
 * block gets 403 (SPEC "Public bearer tokens"); a malformed id is a 400.
 */
export function requireBlock(principal: Principal, motorBlockId: string): void {
  if (!isUuid(motorBlockId)) throw fail('invalid_id', 400, 'Motor Block id must be a uuid');
  if (principal.kind !== 'publicBearer' || principal.motorBlockId !== motorBlockId) {
    throw fail('motor_block_forbidden', 403, 'This token is not bound to that Motor Block', {
      nextAction: 'Mint a token for this Motor Block',
    });
  }
}

/** True when the caller may see PII; `includePII` without logs.pii is a 403. */
/** Whether the caller may see recipient addresses in clear (a public token with logs.pii). */
export const hasPiiScope = (principal: Principal): boolean => principal.kind === 'publicBearer' && principal.scopes.includes('logs.pii');

export function piiAllowed(principal: Principal, includePII: boolean | undefined): boolean {
  if (!includePII) return false;
  if (hasPiiScope(principal)) return true;
  throw fail('insufficient_scope', 403, 'includePII needs the logs.pii scope', { details: { requiredScopes: ['logs.pii'] } });
}
