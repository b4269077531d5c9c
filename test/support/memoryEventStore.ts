import type {
  AppendResult,
  EventData,
  EventStore,
  ExpectedRevision,
  LogBatch,
  ReadAllOptions,
  ReadStreamOptions,
  RecordedEvent,
  SubscribeOptions,
} from '../../domain/eventStore.js';
import { WrongExpectedRevisionError } from '../../domain/eventStore.js';

/**
 * A tiny in-process EventStore for unit tests. Positions are zero-padded sequence numbers (opaque
 * to callers like the real adapters' positions). Not a contract-complete adapter: no persistence.
 */
export class MemoryEventStore implements EventStore {
  private readonly log: RecordedEvent[] = [];
  private readonly streams = new Map<string, RecordedEvent[]>();
  private waiters: Array<() => void> = [];

  constructor(private readonly clock: () => Date = () => new Date()) {}

  async append(streamId: string, events: EventData[], options: { expectedRevision?: ExpectedRevision } = {}): Promise<AppendResult> {
    const stream = this.streams.get(streamId) ?? [];
    const current = stream.length === 0 ? 'no_stream' : BigInt(stream.length - 1);
    const expected = options.expectedRevision ?? 'any';
    if (expected === 'no_stream' && current !== 'no_stream') throw new WrongExpectedRevisionError(streamId, expected, current);
    if (expected === 'stream_exists' && current === 'no_stream') throw new WrongExpectedRevisionError(streamId, expected, current);
    if (typeof expected === 'bigint' && current !== expected) throw new WrongExpectedRevisionError(streamId, expected, current);
    const createdAt = this.clock();
    for (const e of events) {
      if (stream.some((s) => s.id === e.id)) continue;
      const recorded: RecordedEvent = {
        id: e.id,
        type: e.type,
        version: e.version,
        data: structuredClone(e.data),
        metadata: { ...(e.metadata ?? {}) },
        streamId,
        revision: BigInt(stream.length),
        position: String(this.log.length + 1).padStart(12, '0'),
        createdAt,
      };
      stream.push(recorded);
      this.log.push(recorded);
    }
    this.streams.set(streamId, stream);
    const last = stream[stream.length - 1];
    const waiters = this.waiters;
    this.waiters = [];
    for (const w of waiters) w();
    return { nextExpectedRevision: last.revision, position: last.position };
  }

  async headPosition(options: { types?: readonly string[] } = {}): Promise<string | null> {
    const log = options.types ? this.log.filter((e) => options.types!.includes(e.type)) : this.log;
    return log.at(-1)?.position ?? null;
  }

  isPosition(value: string): boolean {
    return /^\d{12}$/.test(value);
  }

  comparePositions(a: string, b: string): number {
    return a < b ? -1 : a > b ? 1 : 0;
  }

  async readStream(streamId: string, options: ReadStreamOptions = {}): Promise<RecordedEvent[]> {
    const stream = this.streams.get(streamId) ?? [];
    const from = Number(options.fromRevision ?? 0n);
    return stream.slice(from, options.maxCount === undefined ? undefined : from + options.maxCount);
  }

  async readAll(options: ReadAllOptions): Promise<RecordedEvent[]> {
    const start = options.after == null ? 0 : Number(options.after);
    return this.log.slice(start, start + options.maxCount);
  }

  async *subscribeToAll(options: SubscribeOptions): AsyncIterable<LogBatch> {
    let after = options.after ?? null;
    const batchSize = options.batchSize ?? 500;
    const types = options.types ? new Set(options.types) : null;
    while (!options.signal.aborted) {
      const batch = await this.readAll({ after, maxCount: batchSize });
      if (batch.length > 0) {
        after = batch[batch.length - 1].position;
        yield { events: types ? batch.filter((e) => types.has(e.type)) : batch, position: after, more: batch.length === batchSize };
        continue;
      }
      await new Promise<void>((resolve) => {
        const done = () => {
          options.signal.removeEventListener('abort', done);
          resolve();
        };
        this.waiters.push(done);
        options.signal.addEventListener('abort', done);
      });
    }
  }

  async deleteStreams(streamIds: string[]): Promise<void> {
    for (const id of streamIds) this.streams.delete(id);
  }

  async ping(): Promise<void> {}
  async close(): Promise<void> {}

  /** Test helper: number of events in the global log. */
  get size(): number {
    return this.log.length;
  }
}
