import type { EventStore } from '../../domain/eventStore';
import { streamName } from '../../domain/eventStore';
import { foldGrant, GRANT_TYPES, initialGrantState, type GrantEvent, type GrantState } from '../../domain/oauth/grant';
import { eventsOf } from '../decideOnStream';

/**
 * A grant's state as the token checks of every request need it (agent requests:
 * activeAgentToken; SMTP AUTH and /api/oauth2/validate: activeAccessToken), without folding the
 * whole stream each time: the stream grows by an event per token issued and per refresh rotation,
 * and a connection kept alive for months holds thousands (docs/MCP.md "What a request costs").
 *
 * Each process keeps, per grant, the state it last folded and the stream revision it was folded
 * to. A check still reads the stream every time, but only the events after that revision
 * (`readStream` from the next one: none, mostly), and folds them onto the state kept. So the
 * answer is exactly the fold of the whole stream as the read found it, as before: a revocation
 * appended by any process before the read is seen by that very check. Nothing is ever served
 * from memory without that read, but for a revoked grant, which no event can make live again.
 *
 * Grant streams are never deleted (block deletion leaves them: workers/blockDeletion.ts); if one
 * were, the read after the kept revision would find nothing and keep serving the kept state, so
 * whatever deletes one must also drop it here (`forget`).
 */

interface Entry { state: GrantState; revision: bigint; weight: number }

/**
 * What the kept states may hold at most, counted as list items (token ids and spent refresh
 * hashes, about 100 bytes each) plus ENTRY_WEIGHT per grant: about 20 MB. The grants checked
 * least recently go first.
 */
const MAX_WEIGHT = 200_000;
const ENTRY_WEIGHT = 10;

export class GrantCache {
  private readonly entries = new Map<string, Entry>();
  private weight = 0;

  constructor(private readonly maxWeight = MAX_WEIGHT) {}

  /** The grant's state after every event its stream holds now; a grant without a stream is `initialGrantState()` (`exists` false). */
  async current(store: EventStore, grantId: string): Promise<GrantState> {
    const kept = this.entries.get(grantId);
    if (kept?.state.revoked) {
      this.touch(grantId, kept);
      return kept.state;
    }
    const recorded = await store.readStream(streamName('oauthGrant', grantId), kept ? { fromRevision: kept.revision + 1n } : undefined);
    if (recorded.length === 0) {
      if (kept) this.touch(grantId, kept);
      return kept?.state ?? initialGrantState();
    }
    const state = foldGrant(eventsOf<GrantEvent>(recorded, GRANT_TYPES), kept?.state);
    this.keep(grantId, { state, revision: recorded[recorded.length - 1].revision, weight: ENTRY_WEIGHT + state.tokenIds.length + state.spentRefreshHashes.length });
    return state;
  }

  /** Drops what is kept of a grant. */
  forget(grantId: string): void {
    const entry = this.entries.get(grantId);
    if (!entry) return;
    this.entries.delete(grantId);
    this.weight -= entry.weight;
  }

  /** Grants kept, and their weight (for tests). */
  get size(): { grants: number; weight: number } {
    return { grants: this.entries.size, weight: this.weight };
  }

  /** Most recently used last: a Map iterates in insertion order. */
  private touch(grantId: string, entry: Entry): void {
    this.entries.delete(grantId);
    this.entries.set(grantId, entry);
  }

  private keep(grantId: string, entry: Entry): void {
    const current = this.entries.get(grantId);
    // Two checks of one grant ran at once and the other one read further: its state is the newer.
    if (current && current.revision >= entry.revision) return;
    this.forget(grantId);
    if (entry.weight > this.maxWeight) return;
    for (const [oldest, e] of this.entries) {
      if (this.weight + entry.weight <= this.maxWeight) break;
      this.entries.delete(oldest);
      this.weight -= e.weight;
    }
    this.entries.set(grantId, entry);
    this.weight += entry.weight;
  }
}

/** One cache per event store: per process (a second store on the same database, in a test, is another process). */
const caches = new WeakMap<EventStore, GrantCache>();

export function grantCacheOf(store: EventStore): GrantCache {
  let cache = caches.get(store);
  if (!cache) {
    cache = new GrantCache();
    caches.set(store, cache);
  }
  return cache;
}

/** The grant's state now, read through this process's cache (see GrantCache). */
export const currentGrant = (store: EventStore, grantId: string): Promise<GrantState> => grantCacheOf(store).current(store, grantId);
