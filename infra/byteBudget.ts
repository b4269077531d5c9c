/**
 * A process's room for bytes held in memory on behalf of clients: what it holds now, taken only
 * while it fits under the limit and given back once done. Used for SMTP messages being received
 * (smtp/dataBudget.ts, SMTP_MAX_BUFFERED_BYTES) and HTTP request bodies being read
 * (read-api/http/requestChecks.ts bodyBudget, HTTP_MAX_BUFFERED_BYTES).
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

  private change(n: number): void {
    this.heldBytes += n;
    this.onChange(this.heldBytes);
  }
}
