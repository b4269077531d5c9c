import type { ChainableCommander, Redis } from 'ioredis';

/**
 * The request path's Redis commands (request limiter, send quota) sent together: every command
 * asked for during one turn of the event loop goes out in ONE pipeline when the loop reaches its
 * check phase (setImmediate), after it has handled all the sockets that were ready.
 *
 * Why: a write to a loopback socket costs tens of microseconds of the event loop on the VMs Motor
 * was measured on (docs/PERFORMANCE.md), and each request made two. ioredis's own auto-pipelining
 * flushes on process.nextTick, i.e. after each socket's callback, so requests handled in the same
 * turn still went out one by one. Nothing waits longer than before: the batch leaves at the end of
 * the turn in which its first command was asked for.
 *
 * Each caller gets its own command's result or error; if the pipeline cannot be sent (Redis down,
 * no offline queue), every command of it fails, as each would have alone.
 */

interface Entry { queue: (p: ChainableCommander) => void; resolve: (v: unknown) => void; reject: (e: Error) => void }

export class RedisBatch {
  private pending: Entry[] = [];
  private scheduled = false;
  /** Pipelines sent and the commands they carried (tests, diagnostics). */
  readonly stats = { pipelines: 0, commands: 0 };

  constructor(private readonly redis: Redis) {}

  /** Queues one command on the next pipeline (`queue` adds it, e.g. `(p) => p.get(key)`); resolves with its reply. */
  call<T>(queue: (p: ChainableCommander) => void): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.pending.push({ queue, resolve: resolve as (v: unknown) => void, reject });
      if (!this.scheduled) {
        this.scheduled = true;
        setImmediate(() => this.flush());
      }
    });
  }

  private flush(): void {
    this.scheduled = false;
    const batch = this.pending;
    this.pending = [];
    this.stats.pipelines++;
    this.stats.commands += batch.length;
    let pipeline: ChainableCommander;
    try {
      pipeline = this.redis.pipeline();
      for (const e of batch) e.queue(pipeline);
    } catch (err) {
      for (const e of batch) e.reject(err as Error);
      return;
    }
    pipeline.exec().then((results) => {
      batch.forEach((e, i) => {
        const [err, value] = results?.[i] ?? [new Error('no reply'), null];
        if (err) e.reject(err);
        else e.resolve(value);
      });
    }, (err: Error) => {
      for (const e of batch) e.reject(err);
    });
  }
}
