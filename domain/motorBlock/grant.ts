/**
 * Grants (docs/BLOCKS.md "Grants"): the set of Motor Blocks a delegated credential may act on,
 * read live on every call. Public bearer tokens minted with an account API key or a dashboard
 * session act for the whole account: their grant is `account:<accountId>` and covers every block
 * of the account that is not deleted (inactive included). Other grant ids (reserved for narrower
 * delegations) cover exactly the blocks added to them by name (MotorBlockCreated.grantId).
 */

export const accountGrantId = (accountId: string): string => `account:${accountId}`;

/** The grant a caller acts under: every credential kind we have today acts for its account. */
export const grantOf = (principal: { accountId: string }): string => accountGrantId(principal.accountId);

export interface CoverableBlock { accountId: string; status: string; grantIds: readonly string[] }

/** True when `grantId` covers the block. Deleted blocks are covered by nothing. */
export function covers(grantId: string, block: CoverableBlock | null): boolean {
  if (block === null || block.status === 'deleted') return false;
  if (grantId === accountGrantId(block.accountId)) return true;
  return block.grantIds.includes(grantId);
}
