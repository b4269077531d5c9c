import type { DomainEvent, MotorBlockType } from '../events';

/**
 * The account's list of its Motor Blocks (stream `account-<uuid>`), what the plan's `maxBlocks`
 * and block-name uniqueness are decided on (docs/BLOCKS.md "Plan limit"). The list only says
 * which blocks are the account's; whether one is live, its name and its type are read from the
 * block's own stream. Pure: clock and ids come in as arguments.
 *
 * Where the ids come from:
 * - `SandboxProvisioned` names the sandbox block (appended before the block's stream exists);
 * - `AccountBlockAdded`: a create records its block here before appending the block's stream;
 * - `AccountBlocksListed`: the blocks made before the stream recorded them. New accounts start
 *   with an empty one. An account of an earlier release gets it once, on its first create,
 *   rename or conversion: `AccountBlockListingStarted` first, then the directory's blocks once
 *   the directory has projected the log up to that event (every block made before it is there,
 *   every block made after it is recorded).
 */

export const ACCOUNT_BLOCK_EVENTS = [
  'AccountCreated', 'AccountPlanChanged', 'SandboxProvisioned', 'AccountBlockListingStarted', 'AccountBlocksListed', 'AccountBlockAdded',
] as const;
export type AccountBlockEvent = DomainEvent<(typeof ACCOUNT_BLOCK_EVENTS)[number]>;

export interface AccountBlocks {
  accountId: string;
  plan: string;
  /** AccountBlockListingStarted is on the stream (the listing of an older account is under way). */
  listingStarted: boolean;
  /** AccountBlocksListed is on the stream: `motorBlockIds` names every block of the account. */
  listed: boolean;
  /** In the order they were recorded, each once. */
  motorBlockIds: string[];
}
/** null: no AccountCreated on the stream. */
export type AccountBlocksState = AccountBlocks | null;

const withIds = (s: AccountBlocks, ids: readonly string[]): AccountBlocks => {
  const fresh = ids.filter((id, i) => !s.motorBlockIds.includes(id) && ids.indexOf(id) === i);
  return fresh.length === 0 ? s : { ...s, motorBlockIds: [...s.motorBlockIds, ...fresh] };
};

export function evolve(state: AccountBlocksState, e: AccountBlockEvent): AccountBlocksState {
  switch (e.type) {
    // The plan as domain/account/plan.ts folds it.
    case 'AccountCreated': return state ?? { accountId: e.data.accountId, plan: e.data.plan, listingStarted: false, listed: false, motorBlockIds: [] };
    case 'AccountPlanChanged': return state && { ...state, plan: e.data.plan };
    case 'SandboxProvisioned': return state && withIds(state, [e.data.motorBlockId]);
    case 'AccountBlockListingStarted': return state && { ...state, listingStarted: true };
    case 'AccountBlocksListed': return state && { ...withIds(state, e.data.motorBlockIds), listed: true };
    case 'AccountBlockAdded': return state && withIds(state, [e.data.motorBlockId]);
  }
}

export const fold = (events: readonly AccountBlockEvent[]): AccountBlocksState => events.reduce(evolve, null as AccountBlocksState);

/** The events that start a new account's list: nothing before it (`motorBlockIds`: the blocks made with the account). */
export function newAccountBlocks(accountId: string, motorBlockIds: readonly string[], now: Date): AccountBlockEvent[] {
  const at = now.toISOString();
  return [
    { type: 'AccountBlocksListed', data: { accountId, motorBlockIds: [], listedAt: at } },
    ...motorBlockIds.map((motorBlockId): AccountBlockEvent => ({ type: 'AccountBlockAdded', data: { accountId, motorBlockId, addedAt: at } })),
  ];
}

/** An older account's first step: from here on its blocks are recorded. Nothing when listed or started already. */
export function decideStartListing(state: AccountBlocks, now: Date): AccountBlockEvent[] {
  if (state.listed || state.listingStarted) return [];
  return [{ type: 'AccountBlockListingStarted', data: { accountId: state.accountId, startedAt: now.toISOString() } }];
}

/** The blocks the account had before: once (nothing when listed already). */
export function decideList(state: AccountBlocks, cmd: { motorBlockIds: readonly string[]; now: Date }): AccountBlockEvent[] {
  if (state.listed) return [];
  return [{ type: 'AccountBlocksListed', data: { accountId: state.accountId, motorBlockIds: [...new Set(cmd.motorBlockIds)], listedAt: cmd.now.toISOString() } }];
}

/** A block about to be created in the account; nothing when the id is recorded already (a retried create). */
export function decideAddBlock(state: AccountBlocks, cmd: { motorBlockId: string; now: Date }): AccountBlockEvent[] {
  if (state.motorBlockIds.includes(cmd.motorBlockId)) return [];
  return [{ type: 'AccountBlockAdded', data: { accountId: state.accountId, motorBlockId: cmd.motorBlockId, addedAt: cmd.now.toISOString() } }];
}

// ------------------------------------------------------------------------------------------ rules

/** What the plan limit and the name rule look at, per live block of the account (read from the block's stream). */
export interface BlockFacts { id: string; name: string; type: MotorBlockType }

/**
 * The blocks the plan's `maxBlocks` counts among the account's live blocks: all but the sandbox
 * block (docs/BLOCKS.md "Plan limit"). Creates and sandbox conversions both check against it.
 */
export const blocksCountedByPlan = (blocks: readonly BlockFacts[]): number => blocks.filter((b) => b.type !== 'sandbox').length;

const nameKey = (n: string) => n.trim().toLowerCase();
/** Another live block of the account (not `except`) has this name, case-insensitively. */
export const nameTaken = (blocks: readonly BlockFacts[], name: string, except?: string): boolean =>
  blocks.some((b) => b.id !== except && nameKey(b.name) === nameKey(name));
