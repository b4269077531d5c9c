import { createHash } from 'node:crypto';
import type { Redis } from 'ioredis';

/**
 * The request path's Redis work (request limiter, send quota) sent together: every operation asked
 * for during one turn of the event loop goes out as ONE script call when the loop reaches its check
 * phase (setImmediate), after it has handled all the sockets that were ready.
 *
 * Why one script and not a pipeline of commands: under load a turn carries about eight requests'
 * operations, and each Redis command costs the client the same fixed work whatever it carries (its
 * command object, promise, encoding, reply parsing): about 5 µs of the event loop per command
 * against about 0.3 µs per extra operation in a shared one (docs/PERFORMANCE.md, 2026-11-28).
 * Sending the turn's operations in one write was the earlier step: a write to a loopback socket
 * costs tens of microseconds, and ioredis's own auto-pipelining flushes on process.nextTick, after
 * each socket's callback. Nothing waits longer than before: the batch leaves at the end of the turn
 * in which its first operation was asked for.
 *
 * An operation is a Lua function of its keys and arguments (`define`) returning an array of
 * integers. The script runs the batch's operations in the order they were asked for, each as
 * atomically as a script of its own would (Redis runs one script at a time), and each under `pcall`:
 * one that fails (a key of the wrong type) fails only its own caller, as a command of its own would.
 * If the script cannot be run (Redis down, no offline queue), every operation of it fails.
 *
 * An operation's declared keys are passed as the script's KEYS; an operation may also build key
 * names from its arguments (the send quota does: fewer, shorter arguments). The keys of one batch
 * are of different blocks and credentials, so the script is not for Redis Cluster, as the send
 * quota's script never was (its keys are of a block, an account and a domain).
 */

export interface BatchOperation {
  /** Keys and arguments each call passes (checked). */
  keys: number;
  args: number;
  /** The body of `function (K, A) ... end`: K the keys, A the arguments; returns a Lua array of integers. */
  lua: string;
}

interface Entry { op: number; keys: readonly string[]; args: readonly (string | number)[]; resolve: (v: number[]) => void; reject: (e: Error) => void }

/** Operations in one script call at most: one call then holds Redis for well under a millisecond. */
export const MAX_OPERATIONS_PER_CALL = 256;

type ScriptCommand = (numberOfKeys: number, keysAndArgs: (string | number)[]) => Promise<(number | string)[]>;

export class RedisBatch {
  private readonly operations: { name: string; op: BatchOperation }[] = [];
  private script: ScriptCommand | null = null;
  private pending: Entry[] = [];
  private scheduled = false;
  /** Script calls made and the operations they carried (tests, diagnostics). */
  readonly stats = { calls: 0, operations: 0 };

  constructor(private readonly redis: Redis) {}

  /**
   * Adds an operation the batch can run (idempotent for the same name and definition). Operations
   * defined after the first call start a new script: the script is the list of the operations.
   */
  define(name: string, op: BatchOperation): void {
    const known = this.operations.find((o) => o.name === name);
    if (known) {
      if (known.op.lua !== op.lua || known.op.keys !== op.keys || known.op.args !== op.args) throw new Error(`Batch operation ${name} is defined twice, differently`);
      return;
    }
    this.operations.push({ name, op });
    this.script = null;
  }

  /** Runs operation `name` in the next script call; resolves with its array of integers. */
  run(name: string, keys: readonly string[], args: readonly (string | number)[]): Promise<number[]> {
    const index = this.operations.findIndex((o) => o.name === name);
    if (index < 0) return Promise.reject(new Error(`Unknown batch operation ${name}`));
    const { op } = this.operations[index];
    if (keys.length !== op.keys || args.length !== op.args) {
      return Promise.reject(new Error(`Batch operation ${name} takes ${op.keys} keys and ${op.args} arguments, got ${keys.length} and ${args.length}`));
    }
    return new Promise<number[]>((resolve, reject) => {
      this.pending.push({ op: index + 1, keys, args, resolve, reject });
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
    for (let from = 0; from < batch.length; from += MAX_OPERATIONS_PER_CALL) this.send(batch.slice(from, from + MAX_OPERATIONS_PER_CALL));
  }

  private send(batch: Entry[]): void {
    this.stats.calls++;
    this.stats.operations += batch.length;
    let reply: Promise<(number | string)[]>;
    try {
      const keysAndArgs: (string | number)[] = [];
      for (const e of batch) for (const k of e.keys) keysAndArgs.push(k);
      const numberOfKeys = keysAndArgs.length;
      for (const e of batch) {
        keysAndArgs.push(e.op);
        for (const a of e.args) keysAndArgs.push(a);
      }
      reply = this.command()(numberOfKeys, keysAndArgs);
    } catch (err) {
      for (const e of batch) e.reject(err as Error);
      return;
    }
    reply.then((out) => {
      let at = 0;
      for (const e of batch) {
        const length = Number(out[at]);
        if (length === -1) {
          e.reject(new Error(String(out[at + 1])));
          at += 2;
        } else if (Number.isInteger(length) && length >= 0 && at + length < out.length) {
          e.resolve(out.slice(at + 1, at + 1 + length) as number[]);
          at += 1 + length;
        } else {
          e.reject(new Error('Malformed batch reply'));
          at = out.length;
        }
      }
    }, (err: Error) => {
      for (const e of batch) e.reject(err);
    });
  }

  /** The ioredis command of the current script (EVALSHA, EVAL when Redis does not have it). */
  private command(): ScriptCommand {
    if (this.script) return this.script;
    const lua = batchScript(this.operations.map((o) => o.op));
    // One command name per script text: a redefined batch never runs an older script under a new name.
    const name = `motorBatch_${createHash('sha1').update(lua).digest('hex').slice(0, 12)}`;
    const commands = this.redis as unknown as Record<string, ScriptCommand | undefined>;
    if (typeof commands[name] !== 'function') this.redis.defineCommand(name, { lua });
    const fn = commands[name]!;
    this.script = (numberOfKeys, keysAndArgs) => fn.call(this.redis, numberOfKeys, keysAndArgs);
    return this.script;
  }
}

/**
 * KEYS: every operation's keys, in order. ARGV: per operation its number (1-based, in definition
 * order) then its arguments. Returns per operation the length of its array then the array, or -1
 * then the error's message.
 */
export function batchScript(ops: BatchOperation[]): string {
  const fns = ops.map((op, i) => `ops[${i + 1}] = {${op.keys}, ${op.args}, function (K, A)\n${op.lua}\nend}`).join('\n');
  return `
local ops = {}
${fns}
local out = {}
local k, p, n = 0, 1, #ARGV
while p <= n do
  local op = ops[tonumber(ARGV[p])]
  local K, A = {}, {}
  for i = 1, op[1] do K[i] = KEYS[k + i] end
  for i = 1, op[2] do A[i] = ARGV[p + i] end
  k = k + op[1]
  p = p + 1 + op[2]
  local ok, r = pcall(op[3], K, A)
  if ok then
    out[#out + 1] = #r
    for i = 1, #r do out[#out + 1] = r[i] end
  else
    out[#out + 1] = -1
    if type(r) == 'table' then r = r.err or 'error' end
    out[#out + 1] = tostring(r)
  end
end
return out
`;
}
