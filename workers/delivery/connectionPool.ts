import type SMTPConnection from 'nodemailer/lib/smtp-connection';

/**
 * Per-destination cache of open SMTP sessions, as MTAs keep them (Postfix's connection cache):
 * after a transaction the session (connected, EHLO'd, TLS'd, authenticated) is parked idle for a
 * few seconds and the next message to the same destination takes it instead of connecting again.
 * A destination is (MX host name, IP, port, TLS mode) or the relay (URL + IP). A session is closed
 * after `maxMessages` transactions, after `idleMs` idle, when the server drops it, or when more than
 * `maxIdlePerDestination` are already parked. The pool never opens connections: smtpClient.ts
 * does, and hands them back with `release()`.
 *
 * It also bounds the connections open at once to one server address (IP and port), in use or
 * parked, to `maxPerAddress`, as Postfix bounds a destination's concurrency: receivers refuse or
 * throttle a client that opens too many. `acquire()` gives a parked session, or a place to open a
 * new one, or waits for either, first come first served: a session handed back goes straight to
 * the next waiter for its destination, and a closed one makes room for the next waiter.
 */

export interface SmtpPoolOptions {
  /** Transactions per connection before it is closed (default 100). */
  maxMessages?: number;
  /** Idle time before a parked connection is closed, ms (default 5000). */
  idleMs?: number;
  /** Parked connections kept per destination (default 32); more are closed on release. */
  maxIdlePerDestination?: number;
  /** Connections open at once to one server address, in use or parked (default 20). */
  maxPerAddress?: number;
  /**
   * How long a session may expect to wait for a place at a full address, and how long a full
   * address may go without freeing one while sessions wait (default 10 000 ms;
   * DELIVERY_MAX_ADDRESS_WAIT_SECONDS). Past either the session gives up on the address: a waiting
   * session holds a worker slot that messages to other destinations could use.
   */
  maxQueueMs?: number;
  /** Called each time a session has to wait for a place (metrics). */
  onWait?: () => void;
  /** Called each time a session gives up on a full address (metrics), with why. */
  onGiveUp?: (reason: BusyReason) => void;
  /** Clock in ms (tests); default performance.now. */
  now?: () => number;
}

export interface PooledConnection {
  key: string;
  /** The server's IP and port: what `maxPerAddress` counts. */
  address: string;
  conn: SMTPConnection;
  /** Transactions started on this connection. */
  messages: number;
  /** Set while parked. */
  timer: NodeJS.Timeout | null;
  dead: boolean;
}

/** What `acquire()` gives: a parked session of the destination, or a place to open a new one. */
export type Grant = { kind: 'parked'; pc: PooledConnection } | { kind: 'open' };

/**
 * Why a session gave up on a full address: `queue`, the sessions waiting ahead would take longer
 * than maxQueueMs at the pace places have been freeing up; `stalled`, no place came free for
 * maxQueueMs; `timeout`, the caller's own bound (maxWaitMs) passed.
 */
export type BusyReason = 'queue' | 'stalled' | 'timeout';

/** What `acquire()` gives instead of a grant when the address stays full: what to tell the sender. */
export interface Busy { kind: 'busy'; reason: BusyReason; detail: string }

interface Waiter {
  key: string;
  grant: (g: Grant) => void;
}

/** Connections open to one address (each counted from its place granted until it ends) and who waits. */
interface AddressState {
  open: number;
  waiting: Waiter[];
  /** When a place or session last came free here, or the address last became full (ms, the pool's clock). */
  lastFreed: number;
  /** Moving average of the time between places coming free while the address is full; null until measured. */
  freeInterval: number | null;
}

/** Weight of the newest interval in AddressState.freeInterval. */
const INTERVAL_WEIGHT = 0.2;

export class SmtpConnectionPool {
  readonly maxMessages: number;
  readonly idleMs: number;
  readonly maxIdlePerDestination: number;
  readonly maxPerAddress: number;
  readonly maxQueueMs: number;
  private readonly idle = new Map<string, PooledConnection[]>();
  private readonly addresses = new Map<string, AddressState>();
  private readonly onWait: () => void;
  private readonly onGiveUp: (reason: BusyReason) => void;
  private readonly now: () => number;
  private closed = false;
  /** Connections taken from the pool (for tests and metrics). */
  reused = 0;

  constructor(opts: SmtpPoolOptions = {}) {
    this.maxMessages = opts.maxMessages ?? 100;
    this.idleMs = opts.idleMs ?? 5000;
    this.maxIdlePerDestination = opts.maxIdlePerDestination ?? 32;
    this.maxPerAddress = opts.maxPerAddress ?? 20;
    this.maxQueueMs = opts.maxQueueMs ?? 10_000;
    this.onWait = opts.onWait ?? (() => undefined);
    this.onGiveUp = opts.onGiveUp ?? (() => undefined);
    this.now = opts.now ?? (() => performance.now());
  }

  /**
   * A parked session of `key`, else a place to open a connection to `address` (the caller opens
   * it and then calls `adopt()`, or `vacate()` if it could not), else waits for either. Gives up
   * (`busy`) without waiting when the sessions already waiting would take longer than maxQueueMs at
   * the pace places have been freeing up, or when none has come free for maxQueueMs; while
   * waiting, once none has come free for maxQueueMs, or after the caller's `maxWaitMs`. Null when
   * `signal` aborts first.
   */
  acquire(key: string, address: string, opts: { signal?: AbortSignal; maxWaitMs?: number } = {}): Promise<Grant | Busy | null> {
    const { signal, maxWaitMs } = opts;
    const parked = this.take(key);
    if (parked) return Promise.resolve({ kind: 'parked', pc: parked });
    const state = this.state(address);
    if (this.hasRoom(state)) {
      state.open++;
      if (!this.hasRoom(state)) state.lastFreed = this.now();
      return Promise.resolve({ kind: 'open' });
    }
    if (signal?.aborted) return Promise.resolve(null);
    // Full with sessions parked for other destinations at this address: one makes room, so the
    // place is as good as free. Otherwise every place is in use.
    const other = this.parkedAt(address);
    if (other) {
      this.unpark(other);
      other.conn.quit();
    } else {
      const refused = this.refusal(address, state);
      if (refused) return Promise.resolve(refused);
    }
    this.onWait();
    const since = this.now();
    return new Promise<Grant | Busy | null>((resolve) => {
      let timer: NodeJS.Timeout | undefined;
      const leave = (result: Busy | null): void => {
        signal?.removeEventListener('abort', aborted);
        clearTimeout(timer);
        const i = state.waiting.indexOf(waiter);
        if (i !== -1) state.waiting.splice(i, 1);
        this.forget(address, state);
        resolve(result);
      };
      const aborted = (): void => leave(null);
      // Wakes at the earlier of the caller's bound and maxQueueMs after the last place freed;
      // a place freed since moves the second further.
      const check = (): void => {
        const now = this.now();
        if (maxWaitMs !== undefined && now - since >= maxWaitMs) {
          return leave(this.busy('timeout', `All ${this.maxPerAddress} connections allowed to ${address} stayed busy for ${maxWaitMs} ms`));
        }
        if (now - state.lastFreed >= this.maxQueueMs) return leave(this.stalled(address, now - state.lastFreed));
        const next = Math.min(maxWaitMs === undefined ? Infinity : since + maxWaitMs, state.lastFreed + this.maxQueueMs);
        timer = setTimeout(check, Math.max(1, Math.ceil(next - now)));
      };
      const waiter: Waiter = {
        key,
        grant: (g) => {
          signal?.removeEventListener('abort', aborted);
          clearTimeout(timer);
          resolve(g);
        },
      };
      state.waiting.push(waiter);
      signal?.addEventListener('abort', aborted, { once: true });
      check();
    });
  }

  /**
   * Wraps a fresh, ready connection opened in a place `acquire()` granted; the place is given back
   * when the connection ends, and the pool forgets it when the server ends it.
   */
  adopt(key: string, address: string, conn: SMTPConnection): PooledConnection {
    const pc: PooledConnection = { key, address, conn, messages: 0, timer: null, dead: false };
    const ended = (): void => {
      pc.dead = true;
      this.unpark(pc);
      this.vacate(address);
    };
    if (isDestroyed(conn)) ended();
    else conn.once('end', ended);
    return pc;
  }

  /** Gives back a place `acquire()` granted whose connection was never adopted (it could not be opened). */
  vacate(address: string): void {
    const state = this.addresses.get(address);
    if (!state) return;
    this.freed(state);
    state.open--;
    this.admitWaiting(address, state);
  }

  /** The most recently parked live connection of this destination, or null. */
  take(key: string): PooledConnection | null {
    const list = this.idle.get(key);
    while (list && list.length > 0) {
      const pc = list.pop()!;
      if (pc.timer) clearTimeout(pc.timer);
      pc.timer = null;
      if (list.length === 0) this.idle.delete(key);
      if (pc.dead || isDestroyed(pc.conn)) continue;
      this.reused++;
      return pc;
    }
    return null;
  }

  /**
   * Hands a connection back after a finished transaction (its session state must be clean): to the
   * first waiter for its destination, else parked. With waiters for other destinations at its
   * address it is closed instead, to make room for them.
   */
  release(pc: PooledConnection): void {
    if (pc.dead || isDestroyed(pc.conn)) return;
    const reusable = !this.closed && pc.messages < this.maxMessages;
    const state = this.addresses.get(pc.address);
    const waiting = state?.waiting ?? [];
    if (reusable && waiting.length > 0) {
      const i = waiting.findIndex((w) => w.key === pc.key);
      if (i !== -1) {
        this.freed(state!);
        this.reused++;
        waiting.splice(i, 1)[0].grant({ kind: 'parked', pc });
        return;
      }
    }
    const list = this.idle.get(pc.key) ?? [];
    if (!reusable || waiting.length > 0 || list.length >= this.maxIdlePerDestination) {
      // Its place comes free when the connection ends (vacate).
      pc.conn.quit();
      return;
    }
    if (state) this.freed(state);
    list.push(pc);
    this.idle.set(pc.key, list);
    pc.timer = setTimeout(() => {
      this.unpark(pc);
      pc.conn.quit();
    }, this.idleMs);
    pc.timer.unref();
  }

  /** A connection that must not be used again. */
  discard(pc: PooledConnection): void {
    pc.dead = true;
    this.unpark(pc);
    pc.conn.close();
  }

  /** Parked connections per destination (tests). */
  idleCount(key?: string): number {
    if (key !== undefined) return this.idle.get(key)?.length ?? 0;
    let n = 0;
    for (const l of this.idle.values()) n += l.length;
    return n;
  }

  /** Connections open to an address (in use or parked) and sessions waiting for one (tests, metrics). */
  addressLoad(address: string): { open: number; waiting: number } {
    const state = this.addresses.get(address);
    return { open: state?.open ?? 0, waiting: state?.waiting.length ?? 0 };
  }

  /**
   * Closes every parked connection; connections released later are closed instead of parked, and
   * sessions still waiting for a place get one (nothing is left to wait for).
   */
  async close(): Promise<void> {
    this.closed = true;
    for (const [address, state] of this.addresses) this.admitWaiting(address, state);
    const all = [...this.idle.values()].flat();
    this.idle.clear();
    await Promise.all(all.map((pc) => new Promise<void>((resolve) => {
      if (pc.timer) clearTimeout(pc.timer);
      pc.timer = null;
      if (pc.dead || isDestroyed(pc.conn)) return resolve();
      const t = setTimeout(() => { pc.conn.close(); resolve(); }, 1000);
      t.unref();
      pc.conn.once('end', () => { clearTimeout(t); resolve(); });
      pc.conn.quit();
    })));
  }

  private state(address: string): AddressState {
    let state = this.addresses.get(address);
    if (!state) {
      state = { open: 0, waiting: [], lastFreed: this.now(), freeInterval: null };
      this.addresses.set(address, state);
    }
    return state;
  }

  /** A place for one more connection to the address (any number once the pool is closed: nothing is left to wait for). */
  private hasRoom(state: AddressState): boolean {
    return this.closed || state.open < this.maxPerAddress;
  }

  /**
   * Why a session should not join the waiters of a full address, or null: none has come free for
   * maxQueueMs, or those already waiting would take longer than that at the measured pace.
   */
  private refusal(address: string, state: AddressState): Busy | null {
    const now = this.now();
    if (now - state.lastFreed >= this.maxQueueMs) return this.stalled(address, now - state.lastFreed);
    const ahead = state.waiting.length;
    const expectedMs = (ahead + 1) * (state.freeInterval ?? 0);
    if (expectedMs <= this.maxQueueMs) return null;
    return this.busy('queue', `All ${this.maxPerAddress} connections allowed to ${address} are busy and ${ahead} sessions wait ahead: about ${Math.round(expectedMs)} ms at the pace they free up, more than the ${this.maxQueueMs} ms allowed`);
  }

  private stalled(address: string, forMs: number): Busy {
    return this.busy('stalled', `All ${this.maxPerAddress} connections allowed to ${address} are busy and none came free for ${Math.round(forMs)} ms`);
  }

  private busy(reason: BusyReason, detail: string): Busy {
    this.onGiveUp(reason);
    return { kind: 'busy', reason, detail };
  }

  /**
   * A place or session came free at the address: the pace a waiter can expect, measured while it is
   * full. One freed while it was not full shows the congestion over: the pace is measured anew.
   */
  private freed(state: AddressState): void {
    const now = this.now();
    if (state.open >= this.maxPerAddress || state.waiting.length > 0) {
      const gap = now - state.lastFreed;
      state.freeInterval = state.freeInterval === null ? gap : state.freeInterval + INTERVAL_WEIGHT * (gap - state.freeInterval);
    } else {
      state.freeInterval = null;
    }
    state.lastFreed = now;
  }

  /**
   * Gives the waiters places while there is room. A waiter's destination has nothing parked
   * (release() hands sessions to waiters): a place is what it needs.
   */
  private admitWaiting(address: string, state: AddressState): void {
    while (state.waiting.length > 0 && this.hasRoom(state)) {
      state.open++;
      state.waiting.shift()!.grant({ kind: 'open' });
    }
    this.forget(address, state);
  }

  /** Drops an address nobody uses, so the map holds only addresses with connections or waiters. */
  private forget(address: string, state: AddressState): void {
    if (state.open <= 0 && state.waiting.length === 0) this.addresses.delete(address);
  }

  private parkedAt(address: string): PooledConnection | null {
    for (const list of this.idle.values()) {
      if (list[0]?.address === address) return list[0];
    }
    return null;
  }

  private unpark(pc: PooledConnection): void {
    if (pc.timer) clearTimeout(pc.timer);
    pc.timer = null;
    const list = this.idle.get(pc.key);
    if (!list) return;
    const i = list.indexOf(pc);
    if (i !== -1) list.splice(i, 1);
    if (list.length === 0) this.idle.delete(pc.key);
  }
}

function isDestroyed(conn: SMTPConnection): boolean {
  const c = conn as unknown as { _destroyed?: boolean; _closing?: boolean };
  return !!c._destroyed || !!c._closing;
}
