import type { Logger } from './logger';

/**
 * Caps log lines that a client can multiply (an SMTP client's refused AUTHs and commands, one line
 * each), as MTAs and syslog daemons do (rsyslog's and journald's rate limits, the kernel's
 * printk_ratelimit): the first lines are written in full, the rest counted, and one summary line
 * says how many were left out.
 *
 * A kind of line is one message (`SMTP AUTH refused`), written through the function `kind()`
 * returns, and is limited twice, per process, in windows of `windowMs` that start with the line
 * that opens them:
 * - per key, the field that names who caused it (`remoteAddress`, `motorBlockId`): at most
 *   `perKey` lines per key and window; the key's window ends with one line `<message>: <n> more
 *   suppressed in the last <s>s`, carrying the key, when lines were left out;
 * - per kind, every key together: at most `perKind` lines per window, the per-key summaries among
 *   them; past it every line of the kind is counted, and the kind's window ends with one summary of
 *   its own. A client that varies its address gets a fresh per-key allowance with each one, but
 *   not more lines.
 * So a kind writes at most `perKind + 1` lines per window however many keys it sees, and every
 * line left out is counted in exactly one summary.
 *
 * Memory: a key is kept only once one of its lines is written, and until its window ends, so a kind
 * holds at most twice `perKind` keys (those of its current window and of the one before), whatever
 * number of addresses a client goes through. One timer for the whole limiter, armed for the window
 * that ends first (every window has the same length, so that is the oldest one), never one per key.
 */

export interface LogLimitSettings {
  /** Lines of one kind per key (a client address, a block) per window. */
  perKey: number;
  /** Lines of one kind per window, every key together, per-key summaries included. */
  perKind: number;
  windowMs: number;
}

type Level = 'debug' | 'info' | 'warn' | 'error';
type Fields = Record<string, unknown>;

interface Window {
  end: number;
  lines: number;
  suppressed: number;
}

interface Kind {
  logger: Logger;
  level: Level;
  msg: string;
  keyField: string;
  /** Open windows by key, in the order they opened: the order they end in. */
  keys: Map<string, Window>;
  /** The kind's window, every key together; null between windows. */
  all: Window | null;
}

export class LogLimiter {
  private readonly kinds = new Map<string, Kind>();
  private timer: NodeJS.Timeout | null = null;
  private readonly seconds: number;

  constructor(readonly settings: LogLimitSettings, private readonly now: () => number = Date.now) {
    this.seconds = Math.round(settings.windowMs / 1000);
  }

  /**
   * The writer of one kind of line: `msg` at `level` on `logger`, limited per value of
   * `fields[keyField]`. Made once per kind (at start), not per line: the same message again
   * returns a writer of the same kind.
   */
  kind(logger: Logger, level: Level, msg: string, keyField: string): (fields: Fields) => void {
    let kind = this.kinds.get(msg);
    if (!kind) {
      kind = { logger, level, msg, keyField, keys: new Map(), all: null };
      this.kinds.set(msg, kind);
    }
    const k = kind;
    return (fields) => this.write(k, fields);
  }

  /** How many keys the limiter holds (every kind together). */
  get keyCount(): number {
    let n = 0;
    for (const k of this.kinds.values()) n += k.keys.size;
    return n;
  }

  /** Ends the windows that are over, writing their summaries (the timer calls it). */
  sweep(): void {
    const now = this.now();
    for (const kind of this.kinds.values()) this.endWindows(kind, now);
    this.arm();
  }

  /** Ends every window now, writing the summaries due (the process is stopping), and stops the timer. */
  flush(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    for (const kind of this.kinds.values()) {
      this.endWindows(kind, Infinity);
      // Summaries of keys folded into the kind's count just now.
      this.endAll(kind);
    }
  }

  private write(kind: Kind, fields: Fields): void {
    // A level the logger leaves out (debug in production) costs nothing and counts for nothing.
    if (!kind.logger.isLevelEnabled(kind.level)) return;
    const now = this.now();
    this.endWindows(kind, now);
    const key = String(fields[kind.keyField] ?? '');
    const own = kind.keys.get(key);
    if (own && own.lines >= this.settings.perKey) {
      own.suppressed += 1;
      return;
    }
    if (!this.takeLine(kind, now)) {
      kind.all!.suppressed += 1;
      return;
    }
    if (own) own.lines += 1;
    else kind.keys.set(key, { end: now + this.settings.windowMs, lines: 1, suppressed: 0 });
    kind.logger[kind.level](fields, kind.msg);
    if (!this.timer) this.arm();
  }

  /** A line of the kind's allowance, opening its window if none is open; false when it is spent. */
  private takeLine(kind: Kind, now: number): boolean {
    kind.all ??= { end: now + this.settings.windowMs, lines: 0, suppressed: 0 };
    if (kind.all.lines >= this.settings.perKind) return false;
    kind.all.lines += 1;
    return true;
  }

  private endWindows(kind: Kind, now: number): void {
    if (kind.all && kind.all.end <= now) this.endAll(kind);
    for (const [key, w] of kind.keys) {
      if (w.end > now) break;
      kind.keys.delete(key);
      if (w.suppressed === 0) continue;
      // A summary is a line of the kind: past the kind's allowance it is folded into the kind's own.
      if (this.takeLine(kind, now)) {
        kind.logger[kind.level]({ [kind.keyField]: key, suppressed: w.suppressed, windowSeconds: this.seconds },
          `${kind.msg}: ${w.suppressed} more suppressed in the last ${this.seconds}s`);
      } else {
        kind.all!.suppressed += w.suppressed;
      }
    }
  }

  private endAll(kind: Kind): void {
    const all = kind.all;
    kind.all = null;
    if (!all || all.suppressed === 0) return;
    kind.logger[kind.level]({ suppressed: all.suppressed, windowSeconds: this.seconds, perKindLimit: this.settings.perKind },
      `${kind.msg}: ${all.suppressed} more suppressed in the last ${this.seconds}s (over ${this.settings.perKind} lines of this kind)`);
  }

  /** The timer, for the window that ends first; none while no window is open. */
  private arm(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    let first = Infinity;
    for (const kind of this.kinds.values()) {
      if (kind.all) first = Math.min(first, kind.all.end);
      for (const w of kind.keys.values()) {
        first = Math.min(first, w.end);
        break;
      }
    }
    if (first === Infinity) return;
    this.timer = setTimeout(() => {
      this.timer = null;
      this.sweep();
    }, Math.max(0, first - this.now()));
    this.timer.unref();
  }
}
