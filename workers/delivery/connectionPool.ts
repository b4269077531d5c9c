import type SMTPConnection from 'nodemailer/lib/smtp-connection';

/**
 * Per-destination cache of open SMTP sessions, as MTAs keep them (Postfix's connection cache):
 * after a transaction the session (connected, EHLO'd, TLS'd, authenticated) is parked idle for a
 * few seconds and the next message to the same destination takes it instead of connecting again.
 * A destination is (MX host name, IP, port, TLS mode) or the relay (URL + IP). A session is closed
 * after `maxMessages` transactions, after `idleMs` idle, when the server drops it, or when more than
 * `maxIdlePerDestination` are already parked. The pool never opens connections: smtpClient.ts
 * does, and hands them back with `release()`.
 */

export interface SmtpPoolOptions {
  /** Transactions per connection before it is closed (default 100). */
  maxMessages?: number;
  /** Idle time before a parked connection is closed, ms (default 5000). */
  idleMs?: number;
  /** Parked connections kept per destination (default 32); more are closed on release. */
  maxIdlePerDestination?: number;
}

export interface PooledConnection {
  key: string;
  conn: SMTPConnection;
  /** Transactions started on this connection. */
  messages: number;
  /** Set while parked. */
  timer: NodeJS.Timeout | null;
  dead: boolean;
}

export class SmtpConnectionPool {
  readonly maxMessages: number;
  readonly idleMs: number;
  readonly maxIdlePerDestination: number;
  private readonly idle = new Map<string, PooledConnection[]>();
  private closed = false;
  /** Connections taken from the pool (for tests and metrics). */
  reused = 0;

  constructor(opts: SmtpPoolOptions = {}) {
    this.maxMessages = opts.maxMessages ?? 100;
    this.idleMs = opts.idleMs ?? 5000;
    this.maxIdlePerDestination = opts.maxIdlePerDestination ?? 32;
  }

  /** Wraps a fresh, ready connection; it is discarded from the pool when the server ends it. */
  adopt(key: string, conn: SMTPConnection): PooledConnection {
    const pc: PooledConnection = { key, conn, messages: 0, timer: null, dead: false };
    conn.once('end', () => {
      pc.dead = true;
      this.unpark(pc);
    });
    return pc;
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

  /** Hands a connection back after a finished transaction (its session state must be clean). */
  release(pc: PooledConnection): void {
    if (pc.dead || isDestroyed(pc.conn)) return;
    const list = this.idle.get(pc.key) ?? [];
    if (this.closed || pc.messages >= this.maxMessages || list.length >= this.maxIdlePerDestination) {
      pc.conn.quit();
      return;
    }
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

  /** Closes every parked connection; connections released later are closed instead of parked. */
  async close(): Promise<void> {
    this.closed = true;
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
