import { randomUUID } from 'node:crypto';
import { rootCertificates } from 'node:tls';
import { DelayedError, Worker, type Job } from 'bullmq';
import type { EventData, EventStore, RecordedEvent } from '../domain/eventStore';
import { EventStoreUnavailableError, WrongExpectedRevisionError, streamName } from '../domain/eventStore';
import { toEventData, type DomainEvent, type MessageAccepted } from '../domain/events';
import { bounceAddress, type ReturnPathSettings } from '../smtp/inbound/returnPath';
import { uuidV5 } from '../domain/ids';
import { ATTEMPT_DEADLINE_MAX_MS, acceptedContentBytes, fold, inFlightStaleAt, planDelivery, recordAttempt, startDelivery, type MessageEvent, type MessageState } from '../domain/message/message';
import { WaitingByteBudget } from '../infra/byteBudget';
import type { KeyStore } from '../infra/keys/keyStore';
import type { Logger } from '../infra/logger';
import type { LogLimiter } from '../infra/logLimiter';
import type { Metrics } from '../infra/metrics';
import { bullConnection } from '../infra/redis';
import type { DirectoryCache } from '../commands/directoryCache';
import { SmtpConnectionPool } from './delivery/connectionPool';
import { cachingResolver, type DnsResolver } from './delivery/dns';
import { MtaStsPolicies, type MtaStsEvent, type MtaStsSource } from './delivery/mtaSts';
import { signMessage } from './delivery/dkim';
import { buildMime } from './delivery/mime';
import { nextAttemptDelay } from './delivery/retrySchedule';
import { deliverMessage, type DeliveryTimeouts, type RecipientResult } from './delivery/smtpClient';
import { DELIVERY_QUEUE, type DeliveryJob } from './queue';
import type { SuppressionSource } from './delivery/suppressions';
import { SUPPRESSED_FAILURE_REASON, blockSuppressionAddress, suppressedNotice } from '../domain/motorBlock/suppressions';
import type { BlockSuppressionRecord } from '../projections/blockSuppressions/queries';

/**
 * One delivery round for one message: fold its stream, take the recipients that are due, record
 * DeliveryStarted, build and DKIM-sign the MIME message, deliver per recipient domain, and record
 * each domain's outcomes as soon as that domain is done. The round stops talking to MX hosts at its
 * deadline (settings.attemptDeadlineMs), well before its attempt could be taken as stale.
 *
 * One round at a time: every event id of a round is derived from a round id drawn when the round
 * starts, so the DeliveryStarted of two rounds that read the same revision differ, and the second
 * append fails with WrongExpectedRevisionError; that round does nothing (its job waits and looks
 * again). A retry of the round's own append (same ids, same place) stays harmless. The outcomes
 * are appended only for recipients whose attempt in flight is this round's.
 */

export interface DeliveryDeps {
  store: EventStore;
  directory: DirectoryCache;
  keys: KeyStore;
  resolver: DnsResolver;
  logger: Logger;
  metrics: Metrics;
  settings: {
    mxPort: number;
    /** Connect to non-public MX addresses (MX_ALLOW_PRIVATE_ADDRESSES). */
    allowPrivateAddresses: boolean;
    relayUrl: string | null;
    hostname: string;
    lifetimeSeconds: number;
    timeouts?: DeliveryTimeouts;
    /**
     * How long a round may talk to MX hosts, from its DeliveryStarted (DELIVERY_ATTEMPT_DEADLINE_SECONDS;
     * default and most ATTEMPT_DEADLINE_MAX_MS, inside the in-flight window).
     */
    attemptDeadlineMs?: number;
    /** Retry delays by attempt (seconds); null = the documented schedule with jitter. */
    retrySchedule?: number[] | null;
    /** SMTP connections open at once to one server address, in the pool startDeliveryWorker makes (default 20). */
    maxConnectionsPerAddress?: number;
    /** That pool's maxQueueMs, in seconds (DELIVERY_MAX_ADDRESS_WAIT_SECONDS, default 10). */
    maxAddressWaitSeconds?: number;
    /** The `memory` budget startDeliveryWorker makes, in bytes (default 256 MiB). */
    maxBufferedBytes?: number;
    /** Deliveries to relays with self-signed certificates (tests). */
    relayTls?: { rejectUnauthorized: boolean };
    /**
     * MTA-STS (RFC 8461) in direct delivery: policies fetched from the policy hosts' HTTPS `port`
     * (MTA_STS_PORT) and honoured. Unset or null: no policy is looked up (MTA_STS=off).
     */
    mtaSts?: { port: number } | null;
    /** DELIVERY_TLS_CA_FILE's PEM text, trusted besides the default store for MX and policy host certificates. */
    tlsCa?: string | null;
    /**
     * BOUNCE_DOMAIN and its key: the envelope sender becomes the message's bounce address
     * (smtp/inbound/returnPath.ts), one per message, so its recipients of one domain still share one
     * transaction. Unset: the sender's own address (or an SMTP submission's MAIL FROM).
     */
    returnPath?: ReturnPathSettings | null;
  };
  /** Open SMTP sessions reused between messages; none = one connection per message. */
  pool?: SmtpConnectionPool;
  /** MTA-STS policies (startDeliveryWorker makes them from settings.mtaSts, createMtaStsPolicies); none: not honoured. */
  mtaSts?: MtaStsSource;
  /**
   * Caps lines a tenant can multiply by where it sends (the MTA-STS warnings, one per delivery to a
   * domain with a broken policy or MX), per recipient domain (SMTP_LOG_*). None: every line written.
   */
  logLines?: LogLimiter;
  /**
   * The content bytes of the messages being delivered (DELIVERY_MAX_BUFFERED_BYTES): a round
   * waits for room before it starts. None: no bound beyond the worker's concurrency.
   */
  memory?: WaitingByteBudget;
  /**
   * The block's suppression list (docs/DELIVERY.md "Suppressions"): a suppressed recipient is
   * recorded `failed` without an attempt. None: every recipient is attempted.
   */
  suppressions?: SuppressionSource;
  now?: () => Date;
  /** Source of retry jitter, in [0, 1) like Math.random; injectable for tests. */
  random?: () => number;
}

/** DELIVERY_MAX_BUFFERED_BYTES's default: 25 messages of the largest size SMTP takes (10 MiB) at once. */
export const DEFAULT_MAX_BUFFERED_BYTES = 256 * 1024 * 1024;

/** Recipients whose retry is due within this margin are taken now (a delayed job may fire a little early). */
const DUE_MARGIN_MS = 5000;

/** Tries of one outcome append when the store is unavailable or another append came first. */
const OUTCOME_APPEND_TRIES = 6;

const recipientKey = (recipient: string): string => recipient.toLowerCase();

/** A round's event: unique to (type, message, recipient, attempt) and to the round. */
const eventId = (e: DomainEvent, messageId: string, attempt: number, roundId: string): string =>
  uuidV5(`${e.type}:${messageId}:${'recipient' in e.data ? recipientKey(String(e.data.recipient)) : ''}:${attempt}:${roundId}`);

function lastRevision(events: RecordedEvent[]): bigint {
  return events[events.length - 1].revision;
}

/** The MAIL FROM of a message's deliveries: its bounce address with BOUNCE_DOMAIN, else the sender's. */
export const envelopeSender = (accepted: MessageAccepted, returnPath: ReturnPathSettings | null): string =>
  returnPath ? bounceAddress(accepted.messageId, returnPath) : accepted.envelopeFrom ?? accepted.from;

export type RoundResult =
  | { kind: 'no_message' | 'done' | 'attempted' }
  /** Nothing due now, and no attempt in flight: the retry jobs queued for the deferrals come back then. */
  | { kind: 'not_due' }
  /** Run again at `at`: an attempt in flight goes stale then, or another round was just started. */
  | { kind: 'wait'; at: Date };

export async function deliverRound(deps: DeliveryDeps, messageId: string, opts: { contentHeld?: boolean } = {}): Promise<RoundResult> {
  const now = deps.now ?? (() => new Date());
  const stream = streamName('message', messageId);
  const recorded = await deps.store.readStream(stream);
  if (recorded.length === 0) return { kind: 'no_message' };
  const state: MessageState = fold(recorded.map((e) => ({ type: e.type, data: e.data }) as MessageEvent));
  if (state.status !== 'accepted') return { kind: 'no_message' };

  const plan = planDelivery(state, new Date(now().getTime() + DUE_MARGIN_MS));
  if (plan.kind === 'done') return { kind: 'done' };
  if (plan.kind === 'wait') {
    // Parking this job until a deferral's next attempt would fire it together with the enqueuer's
    // retry job for that deferral: only an attempt in flight (whose round may have died) needs it.
    const stale = inFlightStaleAt(state);
    return stale ? { kind: 'wait', at: stale } : { kind: 'not_due' };
  }
  const due = plan.recipients;
  // Asked before DeliveryStarted: a failed lookup throws with nothing appended, and the job is retried.
  const suppressed = deps.suppressions ? await deps.suppressions.among(state.accepted.motorBlockId, due) : NO_SUPPRESSIONS;
  // The content's bytes are held from here to the end of the round: building, signing and sending
  // take a few times the message's size. A job that carried the size waited before reading; one
  // without it (a message or deferral older than the field, a sweep) waits here, its message read.
  const release = deps.memory && !opts.contentHeld ? await deps.memory.hold(acceptedContentBytes(state.accepted)) : null;
  try {
    return await attemptRound(deps, messageId, recorded, state, due, suppressed);
  } finally {
    release?.();
  }
}

/** The round itself, once `due` is known: DeliveryStarted, the MIME message, the sessions, the outcomes. */
async function attemptRound(
  deps: DeliveryDeps, messageId: string, recorded: RecordedEvent[], startState: MessageState, due: string[], suppressed: ReadonlyMap<string, BlockSuppressionRecord>,
): Promise<RoundResult> {
  const now = deps.now ?? (() => new Date());
  const stream = streamName('message', messageId);
  let state = startState;
  const roundId = randomUUID();
  // The deadline counts from before DeliveryStarted is appended: the in-flight window starts there.
  const startedAt = performance.now();
  const metadata = { actor: 'worker', correlationId: roundId };
  const started = startDelivery(state, { recipients: due, now: now() });
  const startedIds = new Map(started.map((e) => [recipientKey(e.data.recipient), eventId(e, messageId, e.data.attempt, roundId)]));
  let revision: bigint;
  try {
    const r = await deps.store.append(stream, started.map((e) => toEventData(startedIds.get(recipientKey(e.data.recipient))!, e, metadata)), {
      expectedRevision: lastRevision(recorded),
    });
    revision = r.nextExpectedRevision;
  } catch (err) {
    // Something was appended since the read (another round started, most likely for the same
    // recipients): this round must not deliver. Look again shortly.
    if (err instanceof WrongExpectedRevisionError) return { kind: 'wait', at: new Date(now().getTime() + 2000) };
    throw err;
  }
  state = fold(started as MessageEvent[], state);
  if (state.status !== 'accepted') return { kind: 'no_message' };
  const accepted = state.accepted;
  const roundState = state;

  /**
   * Appends one batch of this round's outcome events after the previous one (the caller chains
   * them). When the append fails because another append came first (another round, for other
   * recipients) or the store was briefly away, the stream is read again: events for recipients
   * whose latest event is no longer this round's DeliveryStarted are dropped (already recorded by
   * an earlier try, or the attempt was taken over as stale), and the rest go at the new end.
   */
  const appendOutcomes = async (events: EventData[]): Promise<void> => {
    let pending = events;
    let reread = false;
    for (let tries = 1; ; tries++) {
      try {
        if (reread) {
          const current = await deps.store.readStream(stream);
          revision = lastRevision(current);
          const latest = new Map<string, string>();
          for (const e of current) {
            const r = (e.data as { recipient?: unknown } | null)?.recipient;
            if (typeof r === 'string') latest.set(recipientKey(r), e.id.toLowerCase());
          }
          const ours = (e: EventData) => {
            const key = recipientKey((e.data as { recipient: string }).recipient);
            return latest.get(key) === startedIds.get(key)!.toLowerCase();
          };
          const dropped = pending.filter((e) => !ours(e));
          if (dropped.some((e) => !current.some((c) => c.id.toLowerCase() === e.id.toLowerCase()))) {
            deps.logger.warn({ messageId, recipients: dropped.map((e) => (e.data as { recipient: string }).recipient) }, 'delivery outcome not recorded: the attempt was taken over by another round');
          }
          pending = pending.filter(ours);
          if (pending.length === 0) return;
        }
        const r = await deps.store.append(stream, pending, { expectedRevision: revision });
        revision = r.nextExpectedRevision;
        return;
      } catch (err) {
        const conflict = err instanceof WrongExpectedRevisionError;
        if (tries >= OUTCOME_APPEND_TRIES || !(conflict || err instanceof EventStoreUnavailableError)) throw err;
        reread = true;
        if (!conflict) await new Promise((r) => setTimeout(r, Math.min(250 * 2 ** tries, 5000)));
      }
    }
  };

  // One jitter per round: recipients deferred together share their next attempt, and so the one
  // retry job the enqueuer queues for them (jobIdFor). Jitter spreads messages.
  const jitter = (deps.random ?? Math.random)() * 2 - 1;
  let appended: Promise<void> = Promise.resolve();
  let appendError: { err: unknown } | null = null;
  /** Records one domain's results (the duplicate window is per domain): appends serialised, in order. */
  const record = (results: Array<RecipientResult & { reason?: string }>): void => {
    const outcomes = recordAttempt(roundState, {
      results: results.map((r) => ({
        recipient: r.recipient, outcome: r.outcome, smtpCode: r.smtpCode, enhancedCode: r.enhancedCode, mx: r.mx,
        smtpResponse: r.smtpResponse ?? r.detail,
        reason: r.outcome === 'failed' ? (r.reason ?? (r.detail ? String(r.detail) : 'permanent_failure')) : undefined,
      })),
      now: now(),
      lifetimeSeconds: deps.settings.lifetimeSeconds,
      retryDelaySeconds: (attempt) => {
        const schedule = deps.settings.retrySchedule;
        return schedule && schedule.length > 0 ? schedule[Math.min(attempt, schedule.length) - 1] : nextAttemptDelay(attempt, jitter);
      },
    });
    for (const o of outcomes) {
      deps.metrics.deliveries.inc({ outcome: o.type });
    }
    if (outcomes.length === 0) return;
    const events = outcomes.map((e) => toEventData(eventId(e, messageId, e.data.attempt, roundId), e, metadata));
    appended = appended.then(() => appendOutcomes(events)).catch((err) => {
      appendError ??= { err };
    });
  };

  // Suppressed recipients are settled first, without a connection; the others go as before.
  const toSend = suppressed.size === 0 ? due : due.filter((r) => !suppressed.has(suppressionKey(r)));
  if (toSend.length < due.length) {
    const skipped = due.filter((r) => suppressed.has(suppressionKey(r)));
    deps.metrics.deliverySuppressed.inc(skipped.length);
    record(skipped.map((recipient) => suppressedResult(recipient, suppressed.get(suppressionKey(recipient))!)));
  }
  if (toSend.length === 0) {
    await appended;
    if (appendError) throw (appendError as { err: unknown }).err;
    return { kind: 'attempted' };
  }
  const domain = await deps.directory.domain(accepted.domainId);
  const key = domain ? await deps.keys.get(domain.dkimKeyId) : null;
  const t0 = process.hrtime.bigint();
  // Past the deadline the sessions still open are closed and their recipients deferred, so the
  // round records its outcomes before another round may take those recipients as stale.
  const deadlineMs = Math.min(deps.settings.attemptDeadlineMs ?? ATTEMPT_DEADLINE_MAX_MS, ATTEMPT_DEADLINE_MAX_MS);
  const deadline = new AbortController();
  const deadlineTimer = setTimeout(() => {
    deps.logger.warn({ messageId, deadlineMs }, 'delivery attempt deadline exceeded: recipients without a verdict are deferred');
    deadline.abort();
  }, Math.max(0, deadlineMs - (performance.now() - startedAt)));
  try {
    if (!domain || !key) {
      record(toSend.map((recipient) => ({
        recipient, outcome: 'deferred' as const, smtpCode: null, enhancedCode: null, mx: null, detail: null,
        smtpResponse: `Sending domain or its DKIM key is not available (${accepted.domainId})`,
      })));
    } else {
      const raw = accepted.raw !== undefined
        ? Buffer.from(accepted.raw, 'utf8')
        : await buildMime({
            from: accepted.from, fromName: accepted.fromName, to: accepted.to, subject: accepted.subject, text: accepted.text,
            html: accepted.html, headers: accepted.headers, messageId: accepted.smtpMessageId, date: new Date(accepted.acceptedAt),
            hostname: deps.settings.hostname,
          });
      const signed = await signMessage(raw, { domain: domain.name, selector: domain.dkimSelector, privateKeyPem: key.privateKeyPem, algorithm: domain.dkimAlgorithm });
      await deliverMessage({
        raw: signed, envelopeFrom: envelopeSender(accepted, deps.settings.returnPath ?? null), recipients: toSend, resolver: deps.resolver, mxPort: deps.settings.mxPort,
        allowPrivateAddresses: deps.settings.allowPrivateAddresses,
        relayUrl: deps.settings.relayUrl, hostname: deps.settings.hostname, timeouts: deps.settings.timeouts, relayTls: deps.settings.relayTls,
        pool: deps.pool, onResults: record, signal: deadline.signal, mtaSts: deps.mtaSts,
      });
    }
  } finally {
    clearTimeout(deadlineTimer);
    // Whatever happened after DeliveryStarted, the outcomes already known are recorded first.
    await appended;
  }
  deps.metrics.deliveryDuration.observe(Number(process.hrtime.bigint() - t0) / 1e9);
  if (appendError) throw (appendError as { err: unknown }).err;
  return { kind: 'attempted' };
}

const NO_SUPPRESSIONS: ReadonlyMap<string, BlockSuppressionRecord> = new Map();
/** The key of the suppression list: lower-cased and trimmed. */
const suppressionKey = blockSuppressionAddress;

/** A suppressed recipient's outcome: `failed`, no SMTP reply, the reason and how to lift it in the response text. */
const suppressedResult = (recipient: string, s: BlockSuppressionRecord): RecipientResult & { reason: string } => ({
  recipient, outcome: 'failed', smtpCode: null, enhancedCode: null, mx: null,
  smtpResponse: suppressedNotice(s.address, s.reason, new Date(s.suppressedAt)), detail: null, reason: SUPPRESSED_FAILURE_REASON,
});

/**
 * The worker's MTA-STS policy cache (settings.mtaSts; undefined when off), its lookups through the
 * deps' resolver (DNS_SERVERS), what it does logged and counted (motor_delivery_mta_sts_total).
 * The policies keep no TXT answers: startDeliveryWorker gives its cachingResolver, which does.
 */
export function createMtaStsPolicies(deps: Pick<DeliveryDeps, 'resolver' | 'logger' | 'metrics' | 'settings' | 'logLines'>): MtaStsPolicies | undefined {
  const settings = deps.settings.mtaSts;
  if (!settings) return undefined;
  const warning = (msg: string): ((fields: Record<string, unknown>) => void) =>
    deps.logLines ? deps.logLines.kind(deps.logger, 'warn', msg, 'domain') : (fields) => deps.logger.warn(fields, msg);
  const fetchFailed = warning('MTA-STS policy could not be fetched');
  const refused = warning('MTA-STS policy refused an MX host');
  const wouldFail = warning('MTA-STS policy in testing mode would have refused this delivery');
  const onEvent = (e: MtaStsEvent): void => {
    deps.metrics.deliveryMtaSts.inc({ result: e.kind });
    switch (e.kind) {
      case 'fetched':
        return deps.logger.info({ domain: e.domain, id: e.id, mode: e.mode }, 'MTA-STS policy fetched');
      case 'cached':
        return;
      case 'fetch_failed':
        return fetchFailed({ domain: e.domain, detail: e.detail, keptPolicy: e.kept });
      case 'enforced_refusal':
        return refused({ domain: e.domain, detail: e.detail });
      case 'testing_would_fail':
        return wouldFail({ domain: e.domain, detail: e.detail });
    }
  };
  return new MtaStsPolicies({
    resolver: deps.resolver, port: settings.port, allowPrivateAddresses: deps.settings.allowPrivateAddresses,
    ca: deps.settings.tlsCa ? [...rootCertificates, deps.settings.tlsCa] : undefined, onEvent,
  });
}

/**
 * The BullMQ worker. Unless the deps bring their own, it adds a connection cache (SMTP sessions
 * to a destination reused for up to 100 messages, 5 s idle); it always adds a DNS cache for the
 * MX/A/AAAA and `_mta-sts` TXT lookups, which the MTA-STS policies it makes share; `close()` closes
 * the cached connections after the jobs in hand are finished.
 */
export function startDeliveryWorker(inputDeps: DeliveryDeps, redisUrl: string, concurrency: number, prefix = 'motor', lockSeconds = 60): Worker<DeliveryJob> {
  const pool = inputDeps.pool ?? new SmtpConnectionPool({
    maxMessages: 100, idleMs: 5000, maxIdlePerDestination: Math.max(1, concurrency), maxPerAddress: inputDeps.settings.maxConnectionsPerAddress,
    maxQueueMs: inputDeps.settings.maxAddressWaitSeconds === undefined ? undefined : inputDeps.settings.maxAddressWaitSeconds * 1000,
    onWait: () => inputDeps.metrics.deliveryConnectionWaits.inc(),
    onGiveUp: (reason) => inputDeps.metrics.deliveryConnectionGiveUps.inc({ reason }),
  });
  const memory = inputDeps.memory ?? new WaitingByteBudget(
    inputDeps.settings.maxBufferedBytes ?? DEFAULT_MAX_BUFFERED_BYTES,
    (held) => inputDeps.metrics.deliveryBufferedBytes.set(held),
    () => inputDeps.metrics.deliveryBufferWaits.inc(),
  );
  const resolver = cachingResolver(inputDeps.resolver);
  const mtaSts = inputDeps.mtaSts ?? createMtaStsPolicies({ ...inputDeps, resolver });
  // BENCH_SMTP_POOL=0: benchmark knob (bench:deliver --engine-pool=off|both), one connection per message as before.
  const deps: DeliveryDeps = { ...inputDeps, memory, pool: process.env.BENCH_SMTP_POOL === '0' ? undefined : pool, resolver, mtaSts };
  const worker = new Worker<DeliveryJob>(
    DELIVERY_QUEUE,
    async (job: Job<DeliveryJob>, token?: string) => {
      // A job knows its message's size from the log (MessageAccepted for a first attempt,
      // DeliveryDeferred for a retry) or the messages read model (a sweeper's job): it waits for
      // room before reading the message, so waiting jobs hold nothing. A job without it learns the
      // size from the stream (deliverRound).
      const size = job.data.contentBytes;
      const release = size !== undefined ? await memory.hold(size) : null;
      let result: RoundResult;
      try {
        result = await deliverRound(deps, job.data.messageId, { contentHeld: release !== null });
      } finally {
        release?.();
      }
      if (result.kind === 'wait') {
        // In flight (its round may have died), or another round just started: park this job until
        // then instead of completing it.
        await job.moveToDelayed(result.at.getTime(), token);
        throw new DelayedError();
      }
      return result.kind;
    },
    {
      connection: bullConnection(redisUrl),
      prefix,
      concurrency,
      // A worker that dies mid-job leaves it stalled; it must come back, not fail. Its lock lapses
      // `lockSeconds` after the crash; the other workers look for such jobs four times as often.
      maxStalledCount: 50,
      lockDuration: lockSeconds * 1000,
      stalledInterval: Math.min(15_000, Math.max(1000, (lockSeconds * 1000) / 4)),
    },
  );
  worker.on('failed', (job, err) => deps.logger.warn({ err, messageId: job?.data.messageId, attemptsMade: job?.attemptsMade }, 'delivery job failed'));
  worker.on('error', (err) => deps.logger.error({ err }, 'delivery worker error'));
  const close = worker.close.bind(worker);
  worker.close = async (force?: boolean) => {
    try {
      await close(force);
    } finally {
      if (!inputDeps.pool) await pool.close();
    }
  };
  return worker;
}
