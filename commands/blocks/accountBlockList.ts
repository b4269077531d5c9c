import type { Knex } from 'knex';
import type { EventStore, RecordedEvent } from '../../domain/eventStore';
import { streamName } from '../../domain/eventStore';
import { fail } from '../../domain/errors';
import {
  ACCOUNT_BLOCK_EVENTS, decideAddBlock, decideList, decideStartListing, fold, type AccountBlockEvent, type AccountBlocks,
} from '../../domain/account/blocks';
import type { MotorBlock } from '../../domain/motorBlock/motorBlock';
import { listLiveBlocksOfAccount } from '../../projections/directory/queries';
import { conflictAfterRetries, decideOnStream, eventsOf, type DecideOptions } from '../decideOnStream';
import { awaitDirectoryRow, type ReadYourWritesDeps } from '../readYourWrites';
import { loadBlock } from './grants';
import { withTurn } from '../../infra/advisoryLock';

/**
 * The account's blocks as the plan limit and name uniqueness see them (docs/BLOCKS.md "Plan
 * limit"): the ids the account's stream lists (domain/account/blocks.ts), each block read from its
 * own stream. Nothing here waits for the directory to show a recent write, so a projector that
 * lags (a replay, a slow host, a stopped projector role) cannot let a create past the limit.
 *
 * Callers hold the account's block lock (withBlockNamesLock): the commands that create or name a
 * block of one account run one at a time, so a listed id whose block stream does not exist is a create
 * that failed between its two appends, not one under way, and is no block.
 */

export interface AccountBlockDeps extends ReadYourWritesDeps { store: EventStore }

/** Blocks read from the store at once while listing an account's blocks. */
const READ_CONCURRENCY = 16;
/** How long the listing of an older account waits for the directory to reach its marker. */
const LISTING_WAIT_MS = 3000;
const RETRY_AFTER_SECONDS = 5;

const accountStream = (accountId: string) => streamName('account', accountId);
const options = (actor: string): DecideOptions => ({ actor, attempts: 8, exhausted: conflictAfterRetries('account_conflict', 'The account') });

const stateOf = (recorded: readonly RecordedEvent[]): AccountBlocks => {
  const state = fold(eventsOf<AccountBlockEvent>(recorded, ACCOUNT_BLOCK_EVENTS));
  if (state === null) throw fail('not_found', 404, 'No such account');
  return state;
};

/**
 * Plan limit and name uniqueness span the account's blocks, which no single stream holds: creates,
 * renames, sandbox conversions and the naming of the sandbox block at provisioning
 * (commands/sandbox/sandbox.ts) of one account take turns under a PostgreSQL advisory lock
 * (withTurn), each deciding on the streams as the previous one left them (readAccountBlocks). The
 * holder runs its directory reads on the lock's own connection (no second pool slot).
 */
export function withBlockNamesLock<T>(db: Knex, accountId: string, fn: (db: Knex) => Promise<T>): Promise<T> {
  return withTurn(db, `motor:block-names:${accountId}`, { waitMs: NAMES_TURN_WAIT_MS, busy: namesBusy, hash: 'hashtext' }, fn);
}

/** Longest wait for the account's turn (withTurn: the wait holds no pooled connection). */
const NAMES_TURN_WAIT_MS = 30_000;

/** 409 account_conflict: the account's other block creates and renames kept the turn for all of NAMES_TURN_WAIT_MS; nothing was decided. */
const namesBusy = () => fail('account_conflict', 409, 'Other changes to this account\'s Motor Blocks kept it busy while this request waited; nothing was changed', {
  nextAction: 'Retry the request',
});

/**
 * 503: the directory did not reach the account's listing marker in time, so the blocks of an
 * account made before this release cannot be listed yet; nothing was decided.
 */
const directoryUnavailable = () => fail('directory_unavailable', 503,
  'The directory is behind the event log, so this account\'s existing blocks cannot be counted yet; nothing was changed', {
    nextAction: `Retry in ${RETRY_AFTER_SECONDS} seconds`, details: { retryAfterSeconds: RETRY_AFTER_SECONDS },
  });

/**
 * The one-time listing of an account of an earlier release (no AccountBlocksListed): the marker,
 * then, once the directory row of the account shows it (the directory applies the log in order,
 * so it then has every block made before the marker), the directory's blocks of the account.
 * 503 directory_unavailable when the directory does not get there in time; the marker stays and
 * the next call waits for it again.
 */
async function listOlderAccount(deps: AccountBlockDeps, accountId: string, actor: string, now: Date): Promise<AccountBlocks> {
  const started = await decideOnStream(deps.store, accountStream(accountId), options(actor), (recorded) => decideStartListing(stateOf(recorded), now));
  if (!(await awaitDirectoryRow(deps, 'account_blocks.listing', 'accounts', accountId, started.revision!, LISTING_WAIT_MS))) throw directoryUnavailable();
  const motorBlockIds = (await listLiveBlocksOfAccount(deps.db, accountId)).map((b) => b.id);
  await decideOnStream(deps.store, accountStream(accountId), options(actor), (recorded) => decideList(stateOf(recorded), { motorBlockIds, now }));
  return stateOf(await deps.store.readStream(accountStream(accountId)));
}

async function readBlocks(store: EventStore, ids: readonly string[]): Promise<MotorBlock[]> {
  const out: MotorBlock[] = [];
  for (let i = 0; i < ids.length; i += READ_CONCURRENCY) {
    const states = await Promise.all(ids.slice(i, i + READ_CONCURRENCY).map(async (id) => (await loadBlock(store, id)).state));
    for (const s of states) if (s !== null) out.push(s);
  }
  return out;
}

/**
 * The account's plan and live blocks (not deleted; inactive and deletion_queued included, the
 * sandbox block too), from the streams. Call it under the account's block lock, with `deps.db`
 * the lock's connection. The directory's blocks of the account are added to the listed ids: a
 * block made by a process of an earlier release during an upgrade is then counted too once
 * projected (each is still read from its own stream).
 */
export async function readAccountBlocks(deps: AccountBlockDeps, accountId: string, actor: string, now: Date): Promise<{ plan: string; blocks: MotorBlock[] }> {
  let account = stateOf(await deps.store.readStream(accountStream(accountId)));
  if (!account.listed) account = await listOlderAccount(deps, accountId, actor, now);
  const inDirectory = (await listLiveBlocksOfAccount(deps.db, accountId)).map((b) => b.id);
  const blocks = await readBlocks(deps.store, [...new Set([...account.motorBlockIds, ...inDirectory])]);
  return { plan: account.plan, blocks: blocks.filter((b) => b.accountId === accountId && b.status !== 'deleted') };
}

/** Records a block about to be created on the account's stream (before the block's own stream; nothing when recorded already). */
export async function recordBlockAdded(store: EventStore, accountId: string, motorBlockId: string, actor: string, now: Date): Promise<void> {
  await decideOnStream(store, accountStream(accountId), options(actor), (recorded) => decideAddBlock(stateOf(recorded), { motorBlockId, now }));
}
