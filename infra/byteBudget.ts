/**
 * A process's room for bytes held in memory on behalf of clients: what it holds now, taken only
 * while it fits under the limit and given back once done. Used for SMTP messages being received
 * (smtp/dataBudget.ts, SMTP_MAX_BUFFERED_BYTES) and HTTP request bodies being read
 * (read-api/http/requestChecks.ts bodyBudget, HTTP_MAX_BUFFERED_BYTES); WaitingByteBudget below
 * for the messages the delivery worker builds and sends (DELIVERY_MAX_BUFFERED_BYTES).
 */
export class ByteBudget {
  private heldBytes = 0;

  /** `onChange` is told the bytes held after each change (a gauge of infra/metrics.ts). */
  constructor(readonly limitBytes: number, private readonly onChange: (heldBytes: number) => void = () => {}) {
    if (!Number.isSafeInteger(limitBytes) || limitBytes < 1) throw new RangeError(`a byte budget is a positive whole number of bytes (got ${limitBytes})`);
  }

  /** Bytes held now. */
  get held(): number {
    return this.heldBytes;
  }

  /** Whether `bytes` more would fit now. */
  fits(bytes: number): boolean {
    return this.heldBytes + bytes <= this.limitBytes;
  }

  /** Takes `bytes` if they fit; false, and nothing taken, if they do not. */
  take(bytes: number): boolean {
    if (!this.fits(bytes)) return false;
    this.change(bytes);
    return true;
  }

  /** Gives back `bytes` taken earlier. */
  give(bytes: number): void {
    this.change(-bytes);
  }

  protected change(n: number): void {
    this.heldBytes += n;
    this.onChange(this.heldBytes);
  }
}

/**
 * A ByteBudget whose takers wait for room instead of being refused, first come first served (a
 * large holding waits its turn rather than being passed by smaller ones forever). A holding larger
 * than the whole limit is let in alone, when nothing else is held: it cannot be refused, only kept
 * from adding to others. Used by the delivery worker (DELIVERY_MAX_BUFFERED_BYTES).
 */
export class WaitingByteBudget extends ByteBudget {
  private readonly waiting: Array<{ bytes: number; admit: () => void }> = [];

  /** `onWait` is called each time a holding has to wait for room (a counter of infra/metrics.ts). */
  constructor(limitBytes: number, onChange?: (heldBytes: number) => void, private readonly onWait: () => void = () => {}) {
    super(limitBytes, onChange);
  }

  /** Resolves with the function that gives the bytes back (once; later calls do nothing) when they are held. */
  async hold(bytes: number): Promise<() => void> {
    if (this.waiting.length > 0 || !this.admits(bytes)) {
      this.onWait();
      await new Promise<void>((admit) => this.waiting.push({ bytes, admit }));
    } else {
      this.change(bytes);
    }
    let held = true;
    return () => {
      if (!held) return;
      held = false;
      this.give(bytes);
      this.admitWaiting();
    };
  }

  /** Holdings waiting for room. */
  get waitingCount(): number {
    return this.waiting.length;
  }

  private admits(bytes: number): boolean {
    return this.fits(bytes) || this.held === 0;
  }

  private admitWaiting(): void {
    while (this.waiting.length > 0 && this.admits(this.waiting[0].bytes)) {
      const next = this.waiting.shift()!;
      this.change(next.bytes);
      next.admit();
    }
  }
}
