import { randomUUID } from 'node:crypto';
import type { Response } from 'express';
import type { Redis } from 'ioredis';
import type { Knex } from 'knex';
import type { EventStore } from '../../domain/eventStore';
import { fail } from '../../domain/errors';
import type { Logger } from '../../infra/logger';
import { maskEmail } from '../../projections/messages/pii';
import { BlockEventFeed, type StreamMessageEvent } from './blockEventFeed';

/**
 * `GET /api/public/v1/motor-blocks/{id}/events/stream` (SPEC "Event stream", docs/EVENTS.md):
 * Server-Sent Events `ready`, then `message` per outcome of the block's messages, `keepalive`
 * every EVENT_STREAM_KEEPALIVE_SECONDS. At most 3 streams per token at once, counted in Redis so
 * every API process sees the same count; a stream ends when its token expires, when the client
 * is too slow to read (1 MiB unread), or when the process shuts down.
 */

export const MAX_STREAMS_PER_TOKEN = 3;
const STREAM_HEADERS = { 'Content-Type': 'text/event-stream; charset=utf-8', 'Cache-Control': 'no-cache, no-transform', Connection: 'keep-alive', 'X-Accel-Buffering': 'no' };
/** Unread output past which a client is dropped rather than buffered without end. */
const MAX_UNREAD_BYTES = 1 << 20;
/** Events stamped this long before the connection still go out: the database's clock and ours may differ a little. */
const CLOCK_GRACE_MS = 2000;

// KEYS[1]: the token's stream set. ARGV: now ms, stale-before ms, max, connection id, ttl s.
// A connection whose heartbeat is older than the stale mark no longer counts (a crashed process).
const ACQUIRE = `
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[2])
if not redis.call('ZSCORE', KEYS[1], ARGV[4]) and redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[3]) then return 0 end
redis.call('ZADD', KEYS[1], ARGV[1], ARGV[4])
redis.call('EXPIRE', KEYS[1], tonumber(ARGV[5]))
return 1
`;

interface StreamSlotCommands { motorStreamSlot(key: string, now: number, staleBefore: number, max: number, member: string, ttl: number): Promise<number> }

export interface StreamOptions {
  motorBlockId: string;
  tokenId: string;
  /** The stream ends then (the token's expiry). */
  endsAt: Date;
  unmasked: boolean;
}

export class EventStreams {
  private readonly feed: BlockEventFeed;
  private readonly open = new Set<() => void>();
  private closing = false;

  constructor(db: Knex, store: EventStore, private readonly redis: Redis, private readonly logger: Logger, private readonly keepaliveSeconds: number) {
    this.feed = new BlockEventFeed(db, store, logger);
    redis.defineCommand('motorStreamSlot', { numberOfKeys: 1, lua: ACQUIRE });
  }

  /** Takes (or refreshes) one of the token's slots; true when held. Redis down: allowed (the limit is not enforced). */
  private async slot(key: string, member: string): Promise<boolean> {
    const now = Date.now();
    const stale = now - this.keepaliveSeconds * 3000;
    try {
      return (await (this.redis as unknown as StreamSlotCommands).motorStreamSlot(key, now, stale, MAX_STREAMS_PER_TOKEN, member, this.keepaliveSeconds * 4)) === 1;
    } catch (err) {
      this.logger.warn({ err: (err as Error).message }, 'event stream limit not checked (Redis unavailable)');
      return true;
    }
  }

  /** Serves one stream on `res` until it ends; throws 429 stream_limit before writing anything when the token has 3 open. */
  async serve(res: Response, opts: StreamOptions): Promise<void> {
    if (res.req?.method === 'HEAD') {
      // Headers only: a HEAD has no body to stream, and takes no slot.
      res.writeHead(200, STREAM_HEADERS).end();
      return;
    }
    if (this.closing) throw fail('shutting_down', 503, 'This process is shutting down', { nextAction: 'Reconnect: another process (or this one restarted) will serve the stream' });
    const key = `stream:{${opts.tokenId}}`;
    const member = randomUUID();
    if (!(await this.slot(key, member))) {
      throw fail('stream_limit', 429, `At most ${MAX_STREAMS_PER_TOKEN} event streams per token are open at once`, {
        nextAction: 'Close one of this token\'s streams, or mint another token',
      });
    }
    const connectedAt = new Date();
    let ended = false;
    let keepalive: NodeJS.Timeout | undefined;
    let expiry: NodeJS.Timeout | undefined;
    let unlisten = (): void => undefined;
    let finish!: () => void;
    const done = new Promise<void>((resolve) => { finish = resolve; });
    const end = () => {
      if (ended) return;
      ended = true;
      clearInterval(keepalive);
      clearTimeout(expiry);
      unlisten();
      this.open.delete(end);
      void this.redis.zrem(key, member).catch(() => undefined);
      if (!res.writableEnded) res.end();
      finish();
    };
    const write = (event: string, data: unknown, id?: string) => {
      if (ended) return;
      res.write(`${id ? `id: ${id}\n` : ''}event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
      if (res.writableLength > MAX_UNREAD_BYTES) {
        this.logger.warn({ motorBlockId: opts.motorBlockId }, 'event stream client too slow: stream closed');
        end();
      }
    };
    res.writeHead(200, STREAM_HEADERS);
    res.on('close', end);
    this.open.add(end);
    // The client may have gone while the slot was taken: its 'close' is then behind us.
    if (res.destroyed || res.req?.destroyed) {
      end();
      return;
    }
    write('ready', { motorBlockId: opts.motorBlockId, connectedAt: connectedAt.toISOString(), piiMasked: !opts.unmasked, endsAt: opts.endsAt.toISOString() });
    unlisten = this.feed.listen(opts.motorBlockId, (events) => {
      for (const e of events) if (e.createdAt.getTime() >= connectedAt.getTime() - CLOCK_GRACE_MS) write('message', this.payload(e, opts.unmasked), e.position);
    });
    keepalive = setInterval(() => {
      write('keepalive', { at: new Date().toISOString() });
      void this.slot(key, member);
    }, this.keepaliveSeconds * 1000);
    expiry = setTimeout(end, Math.max(0, opts.endsAt.getTime() - Date.now()));
    await done;
  }

  private payload(e: StreamMessageEvent, unmasked: boolean): Record<string, unknown> {
    const { position: _position, createdAt: _createdAt, motorBlockId: _block, ...rest } = e;
    return { ...rest, recipient: unmasked ? e.recipient : maskEmail(e.recipient) };
  }

  /** Ends every open stream and the feed (shutdown). */
  closeAll(): void {
    this.closing = true;
    for (const end of [...this.open]) end();
    this.feed.stop();
  }
}
