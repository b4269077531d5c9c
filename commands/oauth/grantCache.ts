import type { EventStore } from '../../domain/eventStore';
import { streamName } from '../../domain/eventStore';
import { foldGrant, GRANT_TYPES, initialGrantState, type GrantEvent, type GrantState } from '../../domain/oauth/grant';
import { conflictAfterRetries, decideOnRead, eventsOf, type StreamRead } from '../decideOnStream';

/** A grant's stream (domain/oauth/grant.ts). */
export const grantStream = (grantId: string) => streamName('oauthGrant', grantId);

/**
 * A grant's state as the token checks of every request need it (agent requests:
 * activeAgentToken; SMTP AUTH and /api/oauth2/validate: activeAccessToken), and as the decisions
 * on it start from (code redeemed, refresh token rotated, grant revoked: `decideOnGrant`), without
 * folding the whole stream each time: the stream grows by an event per token issued and per refresh
 * rotation, and a connection kept alive for months holds thousands (docs/MCP.md "What a request costs").
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
    return (await this.read(store, grantId)).read;
  }

  /**
   * `current`, with the revision of the stream's last event that the state includes (null: no
   * stream), which a decision appends at. A grant kept revoked is read too: a decision's append
   * must be made at the stream's revision, not at the one the revocation was kept at.
   */
  async read(store: EventStore, grantId: string): Promise<StreamRead<GrantState>> {
    const kept = this.entries.get(grantId);
    const recorded = await store.readStream(grantStream(grantId), kept ? { fromRevision: kept.revision + 1n } : undefined);
    if (recorded.length === 0) {
      if (!kept) return { read: initialGrantState(), revision: null };
      this.touch(grantId, kept);
      return { read: kept.state, revision: kept.revision };
    }
    const state = foldGrant(eventsOf<GrantEvent>(recorded, GRANT_TYPES), kept?.state);
    const revision = recorded[recorded.length - 1].revision;
    this.keep(grantId, state, revision);
    return { read: state, revision };
  }

  /**
   * This process appended `events` to the grant right after the last event of `from` (an append
   * guarded by that state's revision succeeded); `revision` is the last of them. Keeps the state
   * after them, so that the next read starts after them too. Returns that state.
   */
  appended(grantId: string, from: GrantState, events: readonly GrantEvent[], revision: bigint): GrantState {
    const state = foldGrant(events, from);
    this.keep(grantId, state, revision);
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

  private keep(grantId: string, state: GrantState, revision: bigint): void {
    const entry: Entry = { state, revision, weight: ENTRY_WEIGHT + state.tokenIds.length + state.spentRefreshHashes.length };
    const current = this.entries.get(grantId);
    // Two reads of one grant (checks, decisions) ran at once and the other one read or appended
    // further: its state is the newer.
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

/** A grant decision's tries; when every one lost to other changes of the grant, 409 grant_conflict (docs/ERRORS.md "Any route: concurrent changes"). */
const GRANT_TRIES = { attempts: 8, exhausted: conflictAfterRetries('grant_conflict', 'This authorization') };

/**
 * Decides on a grant and appends what was decided, as `decideAndAppend` (commands/auth/streams.ts)
 * does, but from the state this process keeps (see GrantCache): each try reads only the events
 * after the revision kept, and appends at the revision of the last event read. Another process
 * that appended in between (a rotation of the same refresh token, a revocation) makes the append
 * fail; the next try reads its events and decides again on them: a refresh token spent by the
 * other process is then a reuse. What this process appended is folded onto the state kept, at the
 * revisions it was appended at. Returns `decide`'s result and the grant's state after the decision.
 */
export async function decideOnGrant<R>(
  store: EventStore, grantId: string, actor: string,
  decide: (state: GrantState) => { events: GrantEvent[]; result: R },
): Promise<{ result: R; state: GrantState }> {
  const cache = grantCacheOf(store);
  let result: R | undefined;
  const d = await decideOnRead(store, grantStream(grantId), { actor, ...GRANT_TRIES }, () => cache.read(store, grantId), (state) => {
    const decision = decide(state);
    result = decision.result;
    return decision.events;
  });
  const state = d.appended.length === 0 ? d.read : cache.appended(grantId, d.read, d.appended, d.revision!);
  return { result: result as R, state };
}
