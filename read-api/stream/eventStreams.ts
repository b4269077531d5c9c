import { randomUUID } from 'node:crypto';
import type { Response } from 'express';
import type { Redis } from 'ioredis';
import type { Knex } from 'knex';
import { once } from 'node:events';
import type { EventStore, GlobalPosition, LogBatch } from '../../domain/eventStore';
import { MESSAGE_CONTENT_FIELDS } from '../../domain/events';
import { MESSAGE_EVENT_TYPES } from '../../domain/message/message';
import { fail } from '../../domain/errors';
import type { Logger } from '../../infra/logger';
import { maskEmail, maskEmailsInText } from '../../projections/messages/pii';
import { BlockEventFeed, comesAfter, parseStreamEventId, type StreamCursor, type StreamMessageEvent } from './blockEventFeed';

/**
 * `GET /api/public/v1/motor-blocks/{id}/events/stream` (SPEC "Event stream", docs/EVENTS.md):
 * Server-Sent Events `ready`, then `message` per outcome of the block's messages, `keepalive`
 * every EVENT_STREAM_KEEPALIVE_SECONDS. At most 3 streams per token at once, counted in Redis so
 * every API process sees the same count; a stream ends when its token expires, when the client
 * is too slow to read (1 MiB unread), or when the process shuts down.
 */

export const MAX_STREAMS_PER_TOKEN = 3;
const DAY_MS = 86_400_000;
const STREAM_HEADERS = { 'Content-Type': 'text/event-stream; charset=utf-8', 'Cache-Control': 'no-cache, no-transform', Connection: 'keep-alive', 'X-Accel-Buffering': 'no' };
/** Unread output past which a client is dropped rather than buffered without end. */
const MAX_UNREAD_BYTES = 1 << 20;
/** Events stamped this long before the connection still go out: the database's clock and ours may differ a little. */
const CLOCK_GRACE_MS = 2000;
/** Most events a resumed stream replays (and holds back meanwhile) before it says `gap` and goes live. */
export const MAX_CATCH_UP_EVENTS = 10_000;
/**
 * Longest a resumed stream reads the log before it says `gap` and goes live: a quiet block resumed
 * from an old id would otherwise scan much of the log (every other block's entries) while it holds
 * one of the process's replay places.
 */
export const MAX_CATCH_UP_MS = 10_000;
/** A catch-up read that waits this long for its next batch is at the head of the log. */
const CATCH_UP_IDLE_MS = 250;
/** Output held unread past which a catch-up waits for the client to read. */
const CATCH_UP_HIGH_WATER = 256 * 1024;
/**
 * Replays reading the log at once per process: after a restart every client reconnects with its
 * Last-Event-ID together; the others wait their turn (their live events held meanwhile).
 */
export const MAX_CONCURRENT_REPLAYS = 4;

export interface EventStreamLimits {
  /** Events a resumed stream replays before `gap` (default MAX_CATCH_UP_EVENTS). */
  maxCatchUp?: number;
  /** Replays at once in this process (default MAX_CONCURRENT_REPLAYS). */
  maxReplays?: number;
  /** Milliseconds a resumed stream reads the log before `gap` (default MAX_CATCH_UP_MS). */
  maxCatchUpMs?: number;
}

// KEYS[1]: the token's stream set. ARGV: now ms, stale-before ms, max, connection id, ttl s.
// A connection whose heartbeat is older than the stale mark no longer counts (a crashed process).
const ACQUIRE = `
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[2])
if not redis.call('ZSCORE', KEYS[1], ARGV[4]) and redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[3]) then return 0 end
redis.call('ZADD', KEYS[1], ARGV[1], ARGV[4])
redis.call('EXPIRE', KEYS[1], tonumber(ARGV[5]))
return 1
`;

/**
 * A Last-Event-ID (or ?lastEventId=) read as a place on the stream: after the event of that id
 * (streamEventId, docs/EVENTS.md "Event ids"). 400 invalid_last_event_id when it is not one.
 */
export function resumeCursor(id: string, store: Pick<EventStore, 'isPosition'>): StreamCursor {
  const cursor = parseStreamEventId(id, store);
  if (!cursor) throw fail('invalid_last_event_id', 400, 'Last-Event-ID is not the id of an event of this stream', { nextAction: 'Send the id of the last message event received, or none' });
  return cursor;
}

/** `work`, or the moment `deadline` (performance.now() time) passes, whichever comes first. */
async function untilDeadline(work: Promise<void>, deadline: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([work, new Promise<void>((r) => { timer = setTimeout(r, Math.max(0, deadline - performance.now())); })]);
  clearTimeout(timer);
}

interface StreamSlotCommands { motorStreamSlot(key: string, now: number, staleBefore: number, max: number, member: string, ttl: number): Promise<number> }

export interface StreamOptions {
  motorBlockId: string;
  tokenId: string;
  /** The stream ends then (the token's expiry). */
  endsAt: Date;
  unmasked: boolean;
  /**
   * The id of the last event the client saw (Last-Event-ID): the stream first replays the block's
   * events after it, then goes live without a gap or a repeat. 400 invalid_last_event_id when it is
   * not an id of this stream (resumeCursor).
   */
  resumeAfter?: string;
  /**
   * The plan's retention window (SPEC "Data retention", docs/EVENTS.md "Retention"): no event
   * recorded, or of a message accepted, before its start goes out, live or replayed; a resume from
   * before it says `gap` and goes on from the window's first event. Omitted: no window (tests).
   */
  retention?: { days: number; now: () => Date };
}

/** The start of the retention window at this moment. */
type WindowStart = () => Date;

function windowStartOf(retention: { days: number; now: () => Date }): WindowStart {
  return () => new Date(retention.now().getTime() - retention.days * DAY_MS);
}

/** How a resumed stream's catch-up writes to its client. */
interface ResumeOutput {
  send(e: StreamMessageEvent): void;
  /** Inside the retention window: an event that is not is never sent. */
  visible(e: StreamMessageEvent): boolean;
  write(event: string, data: unknown, id?: string): void;
  ended(): boolean;
  /** Bytes written and not yet taken by the client. */
  unread(): number;
  /** Resolves when the client has read what was written, or the stream ended. */
  drained(): Promise<void>;
}

export class EventStreams {
  private readonly feed: BlockEventFeed;
  private readonly open = new Set<() => void>();
  /** This process's open streams per token: the limit's fallback while Redis is unavailable. */
  private readonly held = new Map<string, Set<string>>();
  private closing = false;

  private readonly maxCatchUp: number;
  private readonly maxReplays: number;
  private readonly maxCatchUpMs: number;
  private replaying = 0;
  private readonly replayQueue: Array<() => void> = [];

  constructor(
    db: Knex, private readonly store: EventStore, private readonly redis: Redis, private readonly logger: Logger, private readonly keepaliveSeconds: number,
    limits: EventStreamLimits = {},
  ) {
    this.maxCatchUp = limits.maxCatchUp ?? MAX_CATCH_UP_EVENTS;
    this.maxReplays = limits.maxReplays ?? MAX_CONCURRENT_REPLAYS;
    this.maxCatchUpMs = limits.maxCatchUpMs ?? MAX_CATCH_UP_MS;
    this.feed = new BlockEventFeed(db, store, logger);
    redis.defineCommand('motorStreamSlot', { numberOfKeys: 1, lua: ACQUIRE });
  }

  /**
   * Takes (or refreshes) one of the token's slots; true when held. Redis down: the limit holds per
   * process (this process's own streams of the token are counted), not across processes.
   */
  private async slot(key: string, member: string): Promise<boolean> {
    const now = Date.now();
    const stale = now - this.keepaliveSeconds * 3000;
    let held: boolean;
    try {
      held = (await (this.redis as unknown as StreamSlotCommands).motorStreamSlot(key, now, stale, MAX_STREAMS_PER_TOKEN, member, this.keepaliveSeconds * 4)) === 1;
    } catch (err) {
      this.logger.warn({ err: (err as Error).message }, 'event stream limit checked in this process only (Redis unavailable)');
      const mine = this.held.get(key);
      held = (mine?.has(member) ?? false) || (mine?.size ?? 0) < MAX_STREAMS_PER_TOKEN;
    }
    if (held) {
      const mine = this.held.get(key) ?? new Set<string>();
      this.held.set(key, mine.add(member));
    }
    return held;
  }

  private unhold(key: string, member: string): void {
    const mine = this.held.get(key);
    if (!mine?.delete(member)) return;
    if (mine.size === 0) this.held.delete(key);
  }

  /** Serves one stream on `res` until it ends; throws 429 stream_limit before writing anything when the token has 3 open. */
  async serve(res: Response, opts: StreamOptions): Promise<void> {
    if (res.req?.method === 'HEAD') {
      // Headers only: a HEAD has no body to stream, and takes no slot.
      res.writeHead(200, STREAM_HEADERS).end();
      return;
    }
    const resumeAfter = opts.resumeAfter === undefined ? null : { id: opts.resumeAfter, cursor: resumeCursor(opts.resumeAfter, this.store) };
    if (this.closing) throw fail('shutting_down', 503, 'This process is shutting down', { nextAction: 'Reconnect: another process (or this one restarted) will serve the stream' });
    if (resumeAfter) await this.refuseBeyondHead(resumeAfter.cursor, opts.motorBlockId);
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
      this.unhold(key, member);
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
    write('ready', {
      motorBlockId: opts.motorBlockId, connectedAt: connectedAt.toISOString(), piiMasked: !opts.unmasked, endsAt: opts.endsAt.toISOString(),
      ...(resumeAfter ? { resumedAfter: resumeAfter.id } : {}),
    });
    const send = (e: StreamMessageEvent) => write('message', this.payload(e, opts.unmasked), e.id);
    const retention = opts.retention && { days: opts.retention.days, since: windowStartOf(opts.retention) };
    // The logs route lists a message by its acceptance: an outcome of a message accepted before the window stays out too.
    const visible = (e: StreamMessageEvent): boolean => {
      if (!retention) return true;
      const from = retention.since().getTime();
      return e.createdAt.getTime() >= from && e.acceptedAt.getTime() >= from;
    };
    // Armed before a replay: the token's end ends the stream whatever the replay is doing.
    expiry = setTimeout(end, Math.max(0, opts.endsAt.getTime() - Date.now()));
    if (resumeAfter) {
      const stopListening = await this.resume(opts.motorBlockId, resumeAfter, retention ?? null, {
        send, visible, write, ended: () => ended, unread: () => res.writableLength,
        drained: () => Promise.race([once(res, 'drain').then(() => undefined, () => undefined), done]),
      });
      // The client may have gone during the replay: end() ran then, before this listener was known to it.
      if (ended) {
        stopListening();
        return;
      }
      unlisten = stopListening;
    } else {
      unlisten = this.feed.listen(opts.motorBlockId, (events) => {
        for (const e of events) if (e.createdAt.getTime() >= connectedAt.getTime() - CLOCK_GRACE_MS && visible(e)) send(e);
      });
    }
    keepalive = setInterval(() => {
      write('keepalive', { at: new Date().toISOString() });
      void this.slot(key, member);
    }, this.keepaliveSeconds * 1000);
    await done;
  }

  /**
   * A resumed stream (docs/EVENTS.md "Resuming"): listens to the live feed at once but holds its
   * events back, replays the block's events after `after` (the rest of its log entry, then the
   * log after it up to its head), then lets through the held and later live events that come after
   * the last one replayed (comesAfter: positions compared by the store, then the index within an
   * entry). Past `maxCatchUp` events, or after reading the log for `maxCatchUpMs`, it sends `gap`
   * and goes live from there. Only events inside the retention window (`out.visible`) go out; a
   * resume from before the window's start says `gap` (outside_retention_window) first and goes on
   * from the window's first event, found without reading the log in between
   * (BlockEventFeed.windowStart). Returns the function that stops listening.
   */
  private async resume(
    motorBlockId: string, after: { id: string; cursor: StreamCursor }, retention: { days: number; since: WindowStart } | null, out: ResumeOutput,
  ): Promise<() => void> {
    const { write, ended } = out;
    let held: StreamMessageEvent[] | null = [];
    let overflow = false;
    let last = after.cursor;
    let lastId = after.id;
    const later = (e: StreamMessageEvent) => comesAfter(this.store, e, last);
    const send = (e: StreamMessageEvent) => {
      out.send(e);
      last = { position: e.position, index: e.index };
      lastId = e.id;
    };
    const unlisten = this.feed.listen(motorBlockId, (events) => {
      if (held === null) {
        for (const e of events) if (later(e) && out.visible(e)) send(e);
      } else if (held.length + events.length <= this.maxCatchUp) held.push(...events);
      else overflow = true;
    });
    /** `caughtUpTo`: a log position up to which every event of the block has been sent (set when the time budget stops the replay between batches). */
    const res: { sent: number; complete: boolean; caughtUpTo: GlobalPosition | null } = { sent: 0, complete: true, caughtUpTo: null };
    /**
     * Sends replayed events in order until maxCatchUp; false once past it, or when the client has
     * not read its backlog by the deadline (a client that stops reading must not keep a replay place).
     */
    const replay = async (events: StreamMessageEvent[]): Promise<boolean> => {
      for (const e of events) {
        if (ended()) return true;
        if (!later(e) || !out.visible(e)) continue;
        if (res.sent >= this.maxCatchUp) return (res.complete = false);
        send(e);
        res.sent += 1;
        if (out.unread() > CATCH_UP_HIGH_WATER) {
          await untilDeadline(out.drained(), deadline);
          if (!ended() && out.unread() > CATCH_UP_HIGH_WATER) return (res.complete = false);
        }
      }
      return true;
    };
    const release = await this.replaySlot();
    const deadline = performance.now() + this.maxCatchUpMs;
    const abort = new AbortController();
    /** Where the replay reads from: the client's id, or the retention window's start when that id is older. */
    let start = after.cursor;
    let log: AsyncIterator<LogBatch> | undefined;
    let scanned: GlobalPosition = start.position;
    const pull = () => {
      const p = log!.next();
      p.catch(() => undefined);
      return p;
    };
    try {
      if (retention) {
        const windowStart = retention.since();
        if (await this.feed.recordedBefore(after.cursor.position, windowStart)) {
          const first = await this.feed.windowStart(motorBlockId, windowStart);
          if (first && this.store.comparePositions(first.position, start.position) > 0) {
            start = last = first;
            scanned = first.position;
          }
          // As a `gap` says: after the id given, events are missing (these for good). A start that is
          // a bare position is an id to resume from; one just before an entry is not (the id given does as well).
          write('gap', {
            after: lastId, reason: 'outside_retention_window', oldestAllowed: windowStart.toISOString(),
            nextAction: `Nothing older than the ${retention.days}-day retention window of this plan is replayed: the stream goes on from the first event inside it`,
          }, start !== after.cursor && start.index === null ? start.position : undefined);
        }
      }
      // The entry of the id itself first: the log is read after its position, which leaves out its remaining events.
      if (await replay(await this.feed.restOfEntry(start, motorBlockId))) {
        log = this.store.subscribeToAll({ after: start.position, types: MESSAGE_EVENT_TYPES, omitData: MESSAGE_CONTENT_FIELDS, batchSize: 1000, signal: abort.signal })[Symbol.asyncIterator]();
        let next = pull();
        while (!ended()) {
          const step = await Promise.race([next, new Promise<null>((r) => setTimeout(() => r(null), CATCH_UP_IDLE_MS))]);
          if (step === null) {
            // Waiting: at the head of the log, or a slow read? Ask the store when it can tell.
            if (await this.atHead(scanned)) break;
            if (performance.now() > deadline) {
              Object.assign(res, { complete: false, caughtUpTo: scanned });
              break;
            }
            continue;
          }
          if (step.done) break;
          scanned = step.value.position;
          if (!(await replay(await this.feed.resolve(step.value.events, (b) => b === motorBlockId)))) break;
          if (step.value.more === false) break;
          if (performance.now() > deadline) {
            Object.assign(res, { complete: false, caughtUpTo: scanned });
            break;
          }
          next = pull();
        }
      }
    } catch (err) {
      this.logger.warn({ err: (err as Error).message, motorBlockId }, 'event stream catch-up failed: going live');
      res.complete = false;
    } finally {
      abort.abort();
      void log?.return?.().catch(() => undefined);
      release();
    }
    if (!res.complete || overflow) {
      // Stopped by the time budget, every event of the block up to `caughtUpTo` has gone out: the gap
      // carries that position as its SSE id, so a reconnect resumes from there, not again from the
      // old id (a quiet block would otherwise scan the same stretch of log on every reconnect).
      const resumeFrom = res.caughtUpTo !== null && this.store.comparePositions(res.caughtUpTo, last.position) > 0 ? res.caughtUpTo : undefined;
      write('gap', { after: lastId, reason: 'too_far_behind', nextAction: 'Read what is missing from GET .../logs' }, resumeFrom);
    }
    const pending = held;
    held = null;
    for (const e of pending) if (later(e)) send(e);
    return unlisten;
  }

  /**
   * 400 invalid_last_event_id for an id after the last entry of the log (docs/EVENTS.md
   * "Resuming"): every id this log handed out is at or before its head, so such an id is another
   * deployment's or of the log before a rebuild, and a resume from it would wait, silently, until
   * the log reached it. Checked against the head at connect time. When the store cannot say, the
   * stream resumes as before: a 5xx here would close an EventSource for good over an outage.
   */
  private async refuseBeyondHead(cursor: StreamCursor, motorBlockId: string): Promise<void> {
    let head: GlobalPosition | null;
    try {
      head = await this.store.headPosition();
    } catch (err) {
      this.logger.warn({ err: (err as Error).message, motorBlockId }, 'event stream: the log\'s head could not be read to check Last-Event-ID; resuming from it');
      return;
    }
    if (head !== null && this.store.comparePositions(cursor.position, head) > 0) {
      throw fail('invalid_last_event_id', 400, 'Last-Event-ID is beyond the end of the event log: it is not an id of this deployment\'s log (another deployment\'s, or of the log before it was rebuilt)', {
        nextAction: 'Reconnect without Last-Event-ID (the stream then shows what happens from now on); read what was missed from GET .../logs',
      });
    }
  }

  /** Waits for one of the maxReplays places; returns its release. */
  private async replaySlot(): Promise<() => void> {
    while (this.replaying >= this.maxReplays) await new Promise<void>((r) => this.replayQueue.push(r));
    this.replaying += 1;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.replaying -= 1;
      this.replayQueue.shift()?.();
    };
  }

  /** Nothing in the log after `position` (stores without countAfter: assumed after CATCH_UP_IDLE_MS without a batch). */
  private async atHead(position: GlobalPosition): Promise<boolean> {
    if (!this.store.countAfter) return true;
    return (await this.store.countAfter({ after: position, maxCount: 1 })).examined === 0;
  }

  private payload(e: StreamMessageEvent, unmasked: boolean): Record<string, unknown> {
    const { position: _position, index: _index, id: _id, createdAt: _createdAt, acceptedAt: _acceptedAt, motorBlockId: _block, ...rest } = e;
    if (unmasked) return rest;
    // A receiving server's reply may quote the recipient (as on the message routes, read-api/messages/present.ts).
    const smtpResponse = 'smtpResponse' in rest && typeof rest.smtpResponse === 'string' ? { smtpResponse: maskEmailsInText(rest.smtpResponse) } : {};
    return { ...rest, recipient: maskEmail(e.recipient), ...smtpResponse };
  }

  /** Ends every open stream and the feed (shutdown). */
  closeAll(): void {
    this.closing = true;
    for (const end of [...this.open]) end();
    this.feed.stop();
  }
}
