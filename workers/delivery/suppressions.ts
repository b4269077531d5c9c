import type { Knex } from 'knex';
import { blockSuppressionCounts, blockSuppressionsAmong, type BlockSuppressionRecord } from '../../projections/blockSuppressions/queries';

/**
 * What the delivery worker asks before a round: which of the due recipients are on the block's
 * suppression list (docs/DELIVERY.md "Suppressions").
 */
export interface SuppressionSource {
  /** The suppressed ones among `recipients`, by lower-cased address (empty when none). */
  among(motorBlockId: string, recipients: readonly string[]): Promise<ReadonlyMap<string, BlockSuppressionRecord>>;
}

/** How old the per-process count of suppressions per block may get: the staleness window of a new suppression. */
export const SUPPRESSION_COUNTS_REFRESH_MS = 5000;

const NONE: ReadonlyMap<string, BlockSuppressionRecord> = new Map();

/**
 * The worker's SuppressionSource. Most blocks have no suppression, and a delivery round costs
 * ~2.8 ms of CPU: a query per round for them would be a noticeable share. So each process keeps
 * how many suppressions each block has, read from `block_counts` (a row per block with any, not
 * per address) at most every `refreshMs`; only a block with any costs a query per round (its
 * addresses among the round's recipients, by primary key).
 *
 * The staleness this buys: the first suppression of a block is seen up to `refreshMs` after the
 * read model has it (a send in that window is attempted, as before the list existed). Lifts and
 * further suppressions of a block that has any are read live. Concurrent rounds share one refresh.
 */
export class BlockSuppressionCache implements SuppressionSource {
  private counts: ReadonlyMap<string, number> = new Map();
  private loadedAt = Number.NEGATIVE_INFINITY;
  private loading: Promise<void> | null = null;

  constructor(private readonly db: Knex, private readonly refreshMs = SUPPRESSION_COUNTS_REFRESH_MS, private readonly clock: () => number = () => performance.now()) {}

  async among(motorBlockId: string, recipients: readonly string[]): Promise<ReadonlyMap<string, BlockSuppressionRecord>> {
    if (this.clock() - this.loadedAt >= this.refreshMs) await this.refresh();
    const block = motorBlockId.toLowerCase();
    if (!this.counts.has(block)) return NONE;
    return blockSuppressionsAmong(this.db, block, recipients);
  }

  private refresh(): Promise<void> {
    this.loading ??= blockSuppressionCounts(this.db).then((counts) => {
      this.counts = counts;
      this.loadedAt = this.clock();
    }).finally(() => { this.loading = null; });
    return this.loading;
  }
}
