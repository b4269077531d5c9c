import type { Redis } from 'ioredis';
import type { Logger } from '../infra/logger';
import type { LogLimiter } from '../infra/logLimiter';

/**
 * Bounds the events SMTP refusals append, across sessions and listener processes (Redis).
 *
 * Every refusal an SMTP client provokes used to be one event (SmtpSubmissionRefused,
 * SmtpAuthFailed): a client that keeps sending commands it knows will be refused turns each one
 * into a write to the event store, which keeps it for good. The session's error limit
 * (smtp/server.ts) closes one session; this bounds what many sessions together can write.
 *
 * Per scope (a Motor Block for submission refusals, a client address for AUTH failures) and fixed
 * window of `windowSeconds` from the scope's first refusal, the first `limit` refusals are recorded
 * as before, one event each, so the start of a burst reads as it always did. Past that, refusals
 * are still answered and logged (the log has limits of its own: infra/logLimiter.ts), but only
 * counted. The first refusal counted in a window
 * arranges one summary at the window's end: the caller's `summarise(count)` appends one event with
 * the number counted. The counter and the tally are Redis keys changed by one script, so however
 * many processes answer the scope's sessions, exactly one of them summarises each window.
 *
 * The tally is taken (read and cleared) by the summary, not per window: counts a summary could not
 * take (its process died before the window ended) are taken by the scope's next one, so the
 * summaries add up to every refusal counted. When Redis cannot be asked, refusals are recorded
 * (fail open, as the send quota and the AUTH limiter): the per-session limit still holds.
 */

export interface RefusalEventSettings {
  /** Refusals recorded one by one per scope and window. */
  limit: number;
  windowSeconds: number;
}

/** How long an untaken tally is kept for the scope's next summary. */
const TALLY_TTL_MS = 24 * 3600 * 1000;

/*
 * ADMIT: KEYS counter, tally; ARGV windowMs, limit, tallyTtlMs.
 * Answers {verdict, ms left in the window}: 0 record, 1 the window's first counted refusal, 2 counted.
 */
const ADMIT = `
local n = redis.call('INCR', KEYS[1])
if n == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
local left = redis.call('PTTL', KEYS[1])
if left < 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
  left = tonumber(ARGV[1])
end
if n <= tonumber(ARGV[2]) then return {0, left} end
redis.call('INCR', KEYS[2])
redis.call('PEXPIRE', KEYS[2], ARGV[3])
if n == tonumber(ARGV[2]) + 1 then return {1, left} end
return {2, left}
`;

/* TAKE: KEYS tally. The count, cleared. */
const TAKE = `
local n = tonumber(redis.call('GET', KEYS[1])) or 0
redis.call('DEL', KEYS[1])
return n
`;

interface BudgetCommands {
  motorSmtpRefusalAdmit(counter: string, tally: string, windowMs: number, limit: number, tallyTtlMs: number): Promise<[number, number]>;
  motorSmtpRefusalTake(tally: string): Promise<number>;
}

type Line = (fields: Record<string, unknown>) => void;

export class RefusalEventBudget {
  private readonly commands: BudgetCommands;
  /** Summaries waiting for the end of their window. */
  private readonly pending = new Set<{ timer: NodeJS.Timeout; run: () => Promise<void> }>();
  // One line per scope and window each, but a client that varies its address opens a scope per
  // address: with `lines` (the process's SMTP log limiter) they are capped as the listener's are.
  private readonly overLimit: Line;
  private readonly summarised: Line;
  private readonly notSummarised: Line;

  constructor(
    redis: Redis,
    readonly settings: RefusalEventSettings,
    logger: Logger,
    private readonly prefix = 'motor:smtp:refusals',
    lines?: LogLimiter,
  ) {
    redis.defineCommand('motorSmtpRefusalAdmit', { numberOfKeys: 2, lua: ADMIT });
    redis.defineCommand('motorSmtpRefusalTake', { numberOfKeys: 1, lua: TAKE });
    this.commands = redis as unknown as BudgetCommands;
    const line = (level: 'info' | 'warn', msg: string): Line => (lines ? lines.kind(logger, level, msg, 'scope') : (fields) => logger[level](fields, msg));
    this.overLimit = line('warn', 'SMTP refusals over the event limit: answered and counted, not recorded one by one, until the window ends');
    this.summarised = line('info', 'SMTP refusals counted, not recorded one by one: summarised');
    this.notSummarised = line('warn', 'could not summarise the SMTP refusals counted');
  }

  /**
   * Whether this refusal of `scope` is to be recorded as its own event. When it is the window's
   * first one past the limit, `summarise` is called at the window's end with the refusals counted
   * (at least this one); it appends the summary and may throw (logged).
   */
  async admit(scope: string, summarise: (counted: number) => Promise<void>): Promise<boolean> {
    let verdict: number;
    let left: number;
    try {
      [verdict, left] = (await this.commands.motorSmtpRefusalAdmit(
        `${this.prefix}:${scope}`, `${this.prefix}:${scope}:tally`, this.settings.windowSeconds * 1000, this.settings.limit, TALLY_TTL_MS,
      )).map(Number) as [number, number];
    } catch {
      return true;
    }
    if (verdict === 0) return true;
    if (verdict === 1) {
      this.overLimit({ scope, limit: this.settings.limit, windowSeconds: this.settings.windowSeconds });
      this.schedule(scope, left, summarise);
    }
    return false;
  }

  /** Summaries still waiting for their window, now (the process is stopping). */
  async flush(): Promise<void> {
    await Promise.all([...this.pending].map((p) => p.run()));
  }

  private schedule(scope: string, ms: number, summarise: (counted: number) => Promise<void>): void {
    let running: Promise<void> | null = null;
    const take = async () => {
      try {
        const counted = Number(await this.commands.motorSmtpRefusalTake(`${this.prefix}:${scope}:tally`));
        // Zero when an earlier window's late summary took this one's count too.
        if (counted === 0) return;
        await summarise(counted);
        this.summarised({ scope, counted });
      } catch (err) {
        this.notSummarised({ err, scope });
      }
    };
    const entry = {
      timer: setTimeout(() => { void entry.run(); }, ms),
      run: (): Promise<void> => {
        if (!running) {
          clearTimeout(entry.timer);
          running = take().finally(() => this.pending.delete(entry));
        }
        return running;
      },
    };
    entry.timer.unref();
    this.pending.add(entry);
  }
}
