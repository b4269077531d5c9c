import type { RecordedEvent } from '../../../domain/eventStore';

/**
 * The log windows the subscriptions of one store read at the head of the log, kept a moment so the
 * other subscriptions of the process take them from memory instead of reading them again.
 *
 * A process follows the log with several subscriptions at once (the projector role runs four
 * projections over every message event; a worker, the delivery enqueuer and the webhook
 * dispatcher), each with its own type filter. Read one by one, each message event crossed the
 * socket, was parsed and was held in memory once per subscription. A subscription that is at the
 * head (its last read did not fill its window) reads instead a window of every type wanted by the
 * store's subscriptions that leave out the same data keys (omitData) as it does; the window is
 * remembered, and another subscription of that kind whose position falls inside it takes the
 * events after its position, filtered to its own types. That is exactly what its own read would have
 * returned at the time the window was read: below the snapshot horizon the log never changes, and
 * the window holds every entry of its types between its two ends.
 *
 * A window taken from memory, or a read joined after it was sent, may end before where another
 * read of the store has got to since: the store then hands the batch over with `more` set (it had
 * more of the log at hand; the consumer reads on at once, as after a full window). So `more: false`
 * still means that no subscription of the store has handed over anything past the batch (an event
 * stream resume relies on it: what the feed hands over later reaches the resumed stream live).
 * A window read before a NOTIFY for the subscription's types that its loop has already taken in
 * is followed by another read as soon as the consumer asks for its next batch (no wake-up lost).
 */

export interface Cursor { txId: string; globalPosition: string }

export function compareCursors(a: Cursor, b: Cursor): number {
  if (a.txId !== b.txId) {
    const ta = BigInt(a.txId);
    const tb = BigInt(b.txId);
    return ta < tb ? -1 : 1;
  }
  if (a.globalPosition === b.globalPosition) return 0;
  return BigInt(a.globalPosition) < BigInt(b.globalPosition) ? -1 : 1;
}

/** What a subscription wants: event types (null: all) and the data keys it never reads (`omitKey`: them sorted, comma-joined). */
export interface Filter { types: ReadonlySet<string> | null; omit: ReadonlySet<string>; omitKey: string }

export const omitKeyOf = (omit: Iterable<string>): string => [...new Set(omit)].sort().join(',');

export interface SharedWindow extends Filter {
  /** The window covers the log entries after `from` up to and including `last`. */
  from: Cursor;
  last: Cursor;
  /** Every entry of the window whose type is in `types`, in log order, with its position. */
  entries: Array<{ at: Cursor; event: RecordedEvent }>;
  examined: number;
  batchSize: number;
  heldBack: boolean;
  /** The store's NOTIFY count when the read was sent. */
  notifications: number;
  /** performance.now() when the read came back: windows are remembered in that order. */
  readAt: number;
}

/** A subscription's view of a window: what its own read would have returned. */
export interface WindowView { events: RecordedEvent[]; examined: number; last: Cursor; heldBack: boolean; full: boolean; notifications: number }

/** Windows are kept this long, at most MAX_WINDOWS of them (the subscriptions at the head read within milliseconds of each other). */
export const WINDOW_TTL_MS = 2000;
const MAX_WINDOWS = 8;

/**
 * Whether a window read with filter `w` holds exactly what a subscription with filter `f` would
 * read: every type it wants, and data trimmed of the same keys (no more: it would miss them; no
 * fewer: a subscription that leaves message bodies out must not be handed them).
 */
export function covers(w: Filter, f: Filter): boolean {
  if (w.omitKey !== f.omitKey) return false;
  if (w.types === null) return true;
  if (f.types === null) return false;
  for (const t of f.types) if (!w.types.has(t)) return false;
  return true;
}

/** The filter of `me`'s shared read: every type wanted by the subscriptions that leave out the same keys. */
export function unionFilter(me: Filter, filters: Iterable<Filter>): Filter {
  let types: Set<string> | null = me.types === null ? null : new Set(me.types);
  for (const f of filters) {
    if (types === null) break;
    if (f.omitKey !== me.omitKey) continue;
    if (f.types === null) types = null;
    else for (const t of f.types) types.add(t);
  }
  return { types, omit: me.omit, omitKey: me.omitKey };
}

export class WindowCache {
  private windows: SharedWindow[] = [];

  remember(w: SharedWindow): void {
    this.windows.push(w);
    this.prune(w.readAt);
  }

  clear(): void {
    this.windows = [];
  }

  /**
   * The events after `cursor` of a remembered window that holds `cursor` and everything `filter`
   * wants, or null. Never more than `batchSize` entries examined: a larger window is not used.
   */
  find(cursor: Cursor, batchSize: number, filter: Filter, now: number): WindowView | null {
    this.prune(now);
    const usable = (w: SharedWindow) => w.examined <= batchSize && covers(w, filter);
    let first: SharedWindow | undefined;
    for (let i = this.windows.length - 1; i >= 0 && !first; i--) {
      const w = this.windows[i];
      if (usable(w) && compareCursors(w.from, cursor) <= 0 && compareCursors(cursor, w.last) < 0) first = w;
    }
    if (!first) return null;
    // The windows that follow it end to end, as one batch (up to `batchSize` entries examined): a
    // subscription that applies its batches more slowly than another reads takes what that one
    // has read since in one go, not window by window.
    const v = view(first, cursor, filter);
    let examined = first.examined;
    for (let next = this.after(first.last, usable); next && examined + next.examined <= batchSize; next = this.after(next.last, usable)) {
      const more = view(next, next.from, filter);
      v.events.push(...more.events);
      examined += next.examined;
      Object.assign(v, { last: more.last, heldBack: more.heldBack, full: more.full, notifications: more.notifications });
    }
    v.examined = examined;
    return v;
  }

  /** The remembered window that starts at `from` and `usable` accepts. */
  private after(from: Cursor, usable: (w: SharedWindow) => boolean): SharedWindow | undefined {
    for (let i = this.windows.length - 1; i >= 0; i--) {
      const w = this.windows[i];
      if (usable(w) && compareCursors(w.from, from) === 0) return w;
    }
    return undefined;
  }

  /** Drops the oldest windows: past WINDOW_TTL_MS, or beyond MAX_WINDOWS (kept in the order they were read). */
  private prune(now: number): void {
    let stale = 0;
    while (stale < this.windows.length && now - this.windows[stale].readAt >= WINDOW_TTL_MS) stale++;
    stale = Math.max(stale, this.windows.length - MAX_WINDOWS);
    if (stale > 0) this.windows.splice(0, stale);
  }
}

/** The window's entries after `cursor` that `filter` wants. */
export function view(w: SharedWindow, cursor: Cursor, filter: Filter): WindowView {
  const events: RecordedEvent[] = [];
  let i = 0;
  if (compareCursors(cursor, w.from) > 0) while (i < w.entries.length && compareCursors(w.entries[i].at, cursor) <= 0) i++;
  for (; i < w.entries.length; i++) {
    const e = w.entries[i].event;
    if (filter.types === null || filter.types.has(e.type)) events.push(e);
  }
  return { events, examined: w.examined, last: w.last, heldBack: w.heldBack, full: w.examined === w.batchSize, notifications: w.notifications };
}
