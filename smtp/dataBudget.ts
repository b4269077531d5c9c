import type { SMTPServerDataStream } from 'smtp-server';
import { ByteBudget } from '../infra/byteBudget';

/**
 * The process's budget of message bytes held in memory while they arrive over SMTP
 * (SMTP_MAX_BUFFERED_BYTES, docs/SMTP.md "Memory for messages being received"). Motor keeps a
 * message in memory from its 354 until it is answered (the 250 comes only once its MessageAccepted
 * is committed), so each listener alone bounds one message (SMTP_MAX_MESSAGE_BYTES,
 * INBOUND_MAX_MESSAGE_BYTES) and its clients, but not their sum: enough sessions sending large
 * messages at once would take the heap, and with it every session of the process. One budget is
 * shared by every listener of the process (submission on both ports, inbound), created where they
 * are started (scripts/runtime.ts).
 *
 * A message takes its bytes chunk by chunk as they arrive. The chunk that would take the process
 * over the budget is not taken: the message stops being kept (`overBudget`; what it held is given
 * back at once) and the listener answers it, after its final dot, with a temporary refusal. A
 * message gives its bytes back once, when it is answered or cut (`release`); whatever calls come
 * after that change nothing.
 */
export class DataBudget extends ByteBudget {
  /** One message's buffer, its bytes counted against the budget as they arrive. (`fits`: for the SIZE= a client declares at MAIL FROM, RFC 1870.) */
  message(): MessageBuffer {
    let chunks: Buffer[] = [];
    let bytes = 0;
    let overBudget = false;
    let released = false;
    const drop = () => {
      if (bytes > 0) this.give(bytes);
      bytes = 0;
      chunks = [];
    };
    return {
      get overBudget() { return overBudget; },
      get bytes() { return bytes; },
      push: (chunk) => {
        if (overBudget || released || chunk.length === 0) return;
        if (!this.take(chunk.length)) {
          overBudget = true;
          drop();
          return;
        }
        chunks.push(chunk);
        bytes += chunk.length;
      },
      data: () => {
        // One buffer instead of the chunks: the same bytes held, not twice while the message is read.
        const whole = Buffer.concat(chunks, bytes);
        chunks = [whole];
        return whole;
      },
      release: () => {
        released = true;
        drop();
      },
    };
  }
}

/** smtp-server's answer to a DATA: an error, or the text of the 250. */
export type DataCallback = (err?: Error | null, message?: string) => void;

/**
 * One DATA stream's bytes held against `budget`: taken as they arrive (let go once the message is
 * over the size limit, which the library answers 552), given back when `answer` replies, or when
 * the stream closes before its final dot (the client went away, a deadline, an error) and nothing
 * will answer it. Both listeners receive their messages so (smtp/listener.ts, smtp/inbound/listener.ts).
 */
export function receiveMessage(budget: DataBudget, stream: SMTPServerDataStream, cb: DataCallback): { buffer: MessageBuffer; answer: DataCallback } {
  const buffer = budget.message();
  let received = false;
  stream.on('data', (chunk: Buffer) => {
    if (stream.sizeExceeded) buffer.release();
    else buffer.push(chunk);
  });
  stream.once('end', () => { received = true; });
  stream.on('close', () => { if (!received) buffer.release(); });
  return {
    buffer,
    answer: (err, message) => {
      buffer.release();
      cb(err, message);
    },
  };
}

export interface MessageBuffer {
  /** A chunk would have taken the process over the budget: the message is no longer kept. */
  readonly overBudget: boolean;
  /** Bytes this message holds of the budget now. */
  readonly bytes: number;
  /** The next chunk of the message; ignored once over the budget or released. */
  push(chunk: Buffer): void;
  /** The message as received so far, in one buffer (still held until `release`). */
  data(): Buffer;
  /** Lets the message go and gives its bytes back; no more are taken after it. Safe to call again. */
  release(): void;
}

/** The SIZE= a client declared at MAIL FROM (RFC 1870; smtp-server checked its syntax and its maximum), or null. */
export const declaredSize = (args: object | false): number | null => {
  const size = args ? (args as Record<string, unknown>).SIZE : undefined;
  return typeof size === 'string' && /^\d+$/.test(size) ? Number(size) : null;
};
