import type { AddressInfo } from 'node:net';
import type { Redis } from 'ioredis';
import type { SMTPServerOptions, SMTPServerSession } from 'smtp-server';
import { isDomainError } from '../domain/errors';
import type { Clock } from '../domain/ids';
import type { SendDeps } from '../commands/send/sendMessage';
import type { DirectoryCache } from '../commands/directoryCache';
import type { Logger } from '../infra/logger';
import type { LogLimiter } from '../infra/logLimiter';
import { within } from '../infra/within';
import { authDepsOf, authenticate, type SmtpUser } from './auth';
import { normalizeAddress, type AuthLimiter } from './authLimiter';
import { ceilingReply, formatReply, INSUFFICIENT_STORAGE, reply, replyFor, smtpError, type SmtpReply } from './replies';
import type { RecipientCeiling } from '../commands/quota/sendQuota';
import { AddressSlots, KnownClients, NOT_IMPLEMENTED, SubmissionServer, type AddressCounter, type DeadlinePolicy, type ErrorPolicy } from './server';
import { checkEnvelopeRecipient, checkEnvelopeSender, envelopeAddress, recordRefusal, recordRefusalsSummarized, submitMessage } from './submission';
import type { RefusalEventBudget } from './refusalBudget';
import { declaredSize, receiveMessage, type DataBudget } from './dataBudget';
import { isValidAddress } from '../domain/message/sendRules';
import type { TLSSocket } from 'node:tls';
import type { PeerCertificate } from './auth';
import { peerCertificateOf } from './mtls';
import type { Metrics } from '../infra/metrics';
import { unavailableCode } from '../infra/unavailable';

/**
 * The SMTP submission listeners: STARTTLS on `port` (SPEC 2587; AUTH only after STARTTLS) and
 * implicit TLS on `securePort` (2465). The hooks run in a fixed order, each with a verdict:
 * connect (per-address connection cap) → AUTH (smtp/auth.ts, slowed down by smtp/authLimiter.ts)
 * → MAIL FROM (parameters of extensions not offered, ASCII, block and sender-domain rules; the
 * transaction's recipient ceiling) → RCPT TO (ASCII, syntax; count capped by the library and by
 * the ceiling, RCPT TO commands by smtp/server.ts; sandbox and Free-plan recipient rules) → DATA
 * (size capped by the library, the bytes held by the process's data budget, then
 * smtp/submission.ts). Across them, the session's error limits and deadlines (smtp/server.ts), the
 * bound on the refusal events all sessions together append (smtp/refusalBudget.ts) and on the
 * message bytes all sessions of the process hold (smtp/dataBudget.ts).
 */

export interface SmtpDeps {
  send: SendDeps;
  directory: DirectoryCache;
  redis: Redis;
  logger: Logger;
  clock: Clock;
  /** Key settings of OAuth access tokens (docs/OAUTH.md); without them OAuth 2.0 blocks cannot log in. */
  oauth?: { tokenSecret: string; tokenIssuer: string; publicBaseUrl: string };
  /** The failed-AUTH counters (Redis), shared with the API's test-email check (scripts/runtime.ts). */
  authLimiter: AuthLimiter;
  /** Refusal events recorded per block and per client address (Redis), shared with the test-email check. */
  refusals: RefusalEventBudget;
  /** The process's cap on the log lines a client can multiply (SMTP_LOG_*), shared with `refusals`. */
  logLines: LogLimiter;
  /** `motor_sends_accepted_total` / `motor_sends_refused_total` with `source="smtp"`: a message (MAIL FROM or DATA) accepted or refused; `motor_smtp_buffer_refusals_total`. */
  metrics?: Pick<Metrics, 'sendsAccepted' | 'sendsRefused' | 'smtpBufferRefusals'>;
  /** The process's budget of message bytes held while they arrive (SMTP_MAX_BUFFERED_BYTES), shared with the inbound listener. */
  dataBudget: DataBudget;
  /** EVENTSTORE_URL: names a refusal for the database away `database_unavailable` when the store is elsewhere (unavailableCode). */
  eventstoreUrl?: string | null;
}

export interface SmtpSettings {
  hostname: string;
  host: string;
  /** STARTTLS port (0 = any free port). */
  port: number;
  /** Implicit TLS port (0 = any free port). */
  securePort: number;
  /** `clientCa` (SMTP_CLIENT_CA): ask clients for a certificate and check it against these CAs (mTLS blocks, smtp/mtls.ts). */
  tls: { key: Buffer; cert: Buffer; clientCa?: Buffer | null };
  maxMessageBytes: number;
  maxRecipients: number;
  /** Idle time allowed while the server waits for the client (ms); every byte received starts it again. */
  idleTimeoutMs?: number;
  /** Longest a session may last (ms), however busy; a message in progress is let finish first (smtp/server.ts). */
  sessionTimeoutMs?: number;
  /** Longest a message may take from its 354 to its final dot (ms). Not `dataTimeoutMs`, the DATA hook's deadline after the dot. */
  dataTransferTimeoutMs?: number;
  /** Longest command line (bytes); Postfix's line_length_limit default. */
  maxCommandLength?: number;
  maxClients?: number;
  maxConnectionsPerAddress?: number;
  /**
   * Who counts the connections per address: this process (the default), or, in a child of
   * SMTP_PROCESSES, the primary, so that the cap holds for the address across every process.
   */
  addressCounter?: AddressCounter;
  /** Pregreet wait for addresses that have not authenticated recently (smtp/server.ts). */
  unknownClientDelayMs?: number;
  knownClientTtlMs?: number;
  /** Failed AUTH commands in one session before it is closed. */
  maxAuthFailuresPerSession?: number;
  /** Errors of a session (Postfix's smtpd_soft_error_limit / smtpd_hard_error_limit / smtpd_error_sleep_time; smtp/server.ts). */
  softErrorLimit?: number;
  hardErrorLimit?: number;
  errorSleepMs?: number;
  /** HELO, EHLO, NOOP, RSET, VRFY and HELP of a session before each one more is an error (Postfix's smtpd_junk_command_limit). */
  junkCommandLimit?: number;
  /**
   * RCPT TO commands a transaction may send beyond `maxRecipients` (repeated addresses and refused
   * ones count) before each one more is refused 452 4.5.3 unrun and is an error (Postfix's
   * smtpd_recipient_overshoot_limit).
   */
  recipientOvershootLimit?: number;
  /** How long close() lets sessions in flight finish (ms). */
  closeTimeoutMs?: number;
  /** Deadlines of the AUTH, MAIL FROM and RCPT TO hooks, and of the DATA hook once the message is in (ms). */
  hookTimeoutMs?: number;
  dataTimeoutMs?: number;
}

export interface SmtpListeners {
  port: number;
  securePort: number;
  /** Listener processes (SMTP_PROCESSES; 1 = this process). */
  processes: number;
  /** The recently authenticated addresses of this process's listeners; null when they run in other processes. */
  known: KnownClients | null;
  /**
   * Sessions of which this process's listeners hold anything: their state (AUTH failures, client
   * certificate, recipient ceiling) or their deadline timers; null when they run in other processes.
   */
  sessionsHeld(): number | null;
  close(): Promise<void>;
}

type Callback = (err?: Error | null) => void;

/**
 * What the listener keeps of one session, from onConnect to onClose, in one object: a hook whose
 * verdict comes after the client hung up writes to that object, which the listener no longer
 * holds. (Maps by session id, written again by such late verdicts after onClose had cleared them,
 * kept an entry for every session that hung up during its AUTH or MAIL FROM, for good.)
 */
interface SessionState {
  /** Failed AUTH commands of the session. */
  authFailures: number;
  /** The TLS session's client certificate (mTLS), from onSecure. */
  peerCertificate: PeerCertificate | null;
  /** The transaction's smallest send quota ceiling, from MAIL FROM (each MAIL FROM replaces it). */
  ceiling: RecipientCeiling | null;
}

const userOf = (session: SMTPServerSession): SmtpUser | null => (session.user as SmtpUser | undefined) ?? null;
const addressOf = (session: SMTPServerSession): string => normalizeAddress(session.remoteAddress);
const asError = (r: SmtpReply) => smtpError(r);

/**
 * MAIL FROM parameters of extensions Motor does not offer and whose request it could not honour:
 * SMTPUTF8 (a UTF-8 envelope and header, RFC 6531) and REQUIRETLS (TLS on every hop, RFC 8689).
 * smtp-server accepts them even when EHLO hides them; RFC 5321 section 4.1.1.11 answers 555.
 */
const NOT_OFFERED = ['SMTPUTF8', 'REQUIRETLS'];
const notOffered = (args: object | false): string | undefined => (args ? Object.keys(args).find((k) => NOT_OFFERED.includes(k)) : undefined);
const NON_ASCII = 'Non-ASCII addresses are not permitted: SMTPUTF8 is not offered';
/** An envelope address the hooks accepted, in its ASCII form (internationalized domains in A-labels). */
const ascii = (a: string): string => {
  const e = envelopeAddress(a);
  return e.ok ? e.address : a;
};

/**
 * Every hook has a deadline (a hung store or Redis must not hold sessions forever). A DATA that
 * times out may still commit later; the client then retries and the message can arrive twice, the
 * duplicate RFC 1047 accepts over a lost one.
 */
const hookWithin = <T>(ms: number, p: Promise<T>): Promise<T> => within(ms, p, () => new Error(`hook timed out after ${ms} ms`));

export async function startSmtpListeners(deps: SmtpDeps, settings: SmtpSettings): Promise<SmtpListeners> {
  const log = deps.logger.child({ component: 'smtp' });
  // The lines a client can multiply, one per refusal, failed AUTH, session or connection: capped per
  // client address (per block for a logged-in client's refusals) and per kind, the rest summed up
  // (infra/logLimiter.ts). The replies to junk, unknown or too long commands write no line at all.
  const capped = (level: 'debug' | 'info' | 'warn' | 'error', msg: string, key: 'remoteAddress' | 'motorBlockId') => deps.logLines.kind(log, level, msg, key);
  const logSubmissionFailed = capped('error', 'SMTP submission failed', 'motorBlockId');
  const logSubmissionRefused = capped('info', 'SMTP submission refused', 'motorBlockId');
  const logRefusalNotRecorded = capped('warn', 'could not record SmtpSubmissionRefused', 'motorBlockId');
  const logAuthRefused = capped('info', 'SMTP AUTH refused', 'remoteAddress');
  const logAuthFailed = capped('error', 'SMTP AUTH failed', 'remoteAddress');
  const logClosedForErrors = capped('info', 'SMTP session closed: too many errors', 'remoteAddress');
  const logClosedAtDeadline = {
    data: capped('info', 'SMTP session closed: message not received in time', 'remoteAddress'),
    session: capped('info', 'SMTP session closed: session lasted too long', 'remoteAddress'),
  };
  const logConnectionError = capped('debug', 'SMTP connection error', 'remoteAddress');
  // A client over its address's cap is the client's doing; the listener full is the operator's to see.
  const logAddressCap = capped('info', 'SMTP connection refused: too many connections from the address', 'remoteAddress');
  const logClientCap = capped('warn', 'SMTP connection refused: too many clients', 'remoteAddress');
  // The process is short of memory for messages, which the operator is to see (as a listener full).
  const logOverBudget = capped('warn', 'SMTP message refused: SMTP_MAX_BUFFERED_BYTES reached', 'remoteAddress');
  const limiter = deps.authLimiter;
  const authDeps = authDepsOf({ store: deps.send.store, directory: deps.directory, clock: deps.clock, oauth: deps.oauth }, limiter, deps.refusals);
  const known = new KnownClients(settings.knownClientTtlMs ?? 10 * 60_000);
  const perAddress = settings.addressCounter ?? new AddressSlots();
  // The state of each session that reached onConnect, by id (its address slot is in perAddress).
  const sessions = new Map<string, SessionState>();
  // A hook runs only after onConnect, so a session without state is one that closed meanwhile: a
  // state of its own, kept by no one, takes what the hook writes.
  const stateOf = (session: SMTPServerSession): SessionState => sessions.get(session.id) ?? { authFailures: 0, peerCertificate: null, ceiling: null };
  const maxPerAddress = settings.maxConnectionsPerAddress ?? 50;
  const maxClients = settings.maxClients ?? 1_000;
  const maxAuthFailures = settings.maxAuthFailuresPerSession ?? 3;
  const hookTimeout = settings.hookTimeoutMs ?? 15_000;
  const dataTimeout = settings.dataTimeoutMs ?? 60_000;
  const deadlines: DeadlinePolicy = {
    sessionMs: settings.sessionTimeoutMs ?? 1_800_000,
    dataMs: settings.dataTransferTimeoutMs ?? 600_000,
    onExpired: (c, deadline) => logClosedAtDeadline[deadline]({
      session: c.session.id, remoteAddress: addressOf(c.session), motorBlockId: userOf(c.session)?.motorBlockId,
      seconds: (deadline === 'data' ? deadlines.dataMs : deadlines.sessionMs) / 1000,
      ...(deadline === 'data' && c._parser ? { bytes: c._parser.dataBytes } : {}),
    }),
  };
  // AUTH may wait for a free attempt slot of its address, then sit out the slowdown (smtp/authLimiter.ts).
  const authWaitCap = limiter.settings.slotWaitMs + limiter.settings.maxDelayMs;

  const refuse = (command: 'MAIL' | 'RCPT' | 'DATA', session: SMTPServerSession, envelopeFrom: string, recipientCount: number, err: unknown, cb: (e: Error) => void) => {
    const r = replyFor(err, command);
    const user = userOf(session);
    if (!isDomainError(err)) logSubmissionFailed({ err, session: session.id, motorBlockId: user?.motorBlockId });
    else logSubmissionRefused({ session: session.id, code: err.code, reply: formatReply(r), motorBlockId: user?.motorBlockId });
    const code = isDomainError(err) ? err.code : 'internal_error';
    // A refused recipient leaves the message to the others: only MAIL FROM and DATA refuse a send.
    if (command !== 'RCPT') deps.metrics?.sendsRefused.inc({ source: 'smtp', code: isDomainError(err) ? code : unavailableCode(err, deps.eventstoreUrl) ?? code });
    if (user && isDomainError(err)) {
      const motorBlockId = user.motorBlockId;
      const at = deps.clock.now();
      // Past the block's refusal event limit the refusal is only counted; one event sums them up.
      const summarise = async (refusals: number) => {
        const { limit, windowSeconds } = deps.refusals.settings;
        await recordRefusalsSummarized(deps.send, { motorBlockId, refusals, from: at, to: deps.clock.now(), limit, windowSeconds });
      };
      deps.refusals.admit(`submission:${motorBlockId}`, summarise)
        .then((record) => record && recordRefusal(deps.send, {
          motorBlockId, code, reply: r, envelopeFrom, recipientCount, remoteAddress: addressOf(session), at,
        }))
        .catch((e) => logRefusalNotRecorded({ err: e, motorBlockId }));
    }
    cb(asError(r));
  };

  const hooks: Partial<SMTPServerOptions> = {
    onConnect(session, cb: Callback) {
      const a = addressOf(session);
      sessions.set(session.id, { authFailures: 0, peerCertificate: null, ceiling: null });
      const admit = (n: number) => {
        if (n > maxPerAddress) {
          logAddressCap({ session: session.id, remoteAddress: a, connections: n, limit: maxPerAddress });
          return cb(asError(reply(421, '4.7.0', 'Too many connections from your address')));
        }
        cb();
      };
      const n = perAddress.take(session.id, a);
      if (typeof n === 'number') admit(n);
      else void n.then(admit);
    },
    onSecure(socket, session, cb: Callback) {
      stateOf(session).peerCertificate = settings.tls.clientCa ? peerCertificateOf(socket as TLSSocket) : null;
      cb();
    },
    onClose(session) {
      sessions.delete(session.id);
      perAddress.release(session.id);
    },
    onAuth(auth, session, cb) {
      if (auth.method !== 'PLAIN' && auth.method !== 'LOGIN' && auth.method !== 'XOAUTH2') return cb(asError(reply(504, '5.5.4', 'Unrecognized authentication type')));
      const mechanism = auth.method;
      hookWithin(hookTimeout + authWaitCap, authenticate(
        authDeps,
        {
          mechanism, username: auth.username ?? '', password: (mechanism === 'XOAUTH2' ? auth.accessToken : auth.password) ?? '',
          authzid: auth.authzid, remoteAddress: addressOf(session), clientCertificate: stateOf(session).peerCertificate,
        },
      )).then((outcome) => {
        if (outcome.ok) {
          known.remember(addressOf(session));
          const user: SmtpUser = { motorBlockId: outcome.block.id, username: outcome.block.smtpUsername };
          return cb(null, { user });
        }
        const state = stateOf(session);
        state.authFailures += 1;
        const failures = state.authFailures;
        logAuthRefused({ session: session.id, reason: outcome.reason, remoteAddress: addressOf(session) });
        const r = failures >= maxAuthFailures ? reply(421, '4.7.0', `${outcome.reply.text}; too many failed authentications, closing`) : outcome.reply;
        // XOAUTH2 (as Gmail): a 334 with the error JSON, the client's empty line, then 535. The
        // lock-out and closing replies are sent as they are.
        if (mechanism === 'XOAUTH2' && r.code === 535) return cb(null, { data: { status: '401', schemes: 'bearer', scope: 'email.send' } } as never);
        if (mechanism === 'XOAUTH2') return cb(asError(r));
        cb(null, { message: `${r.enhanced} ${r.text}`, responseCode: r.code });
      }, (err) => {
        logAuthFailed({ err, session: session.id, remoteAddress: addressOf(session) });
        cb(asError(reply(454, '4.7.0', 'Temporary authentication failure')));
      });
    },
    onMailFrom(address, session, cb) {
      const user = userOf(session);
      // The library already requires AUTH for MAIL; this is the guard that never relays regardless.
      if (!user) return cb(asError(reply(530, '5.7.0', 'Authentication required')));
      const parameter = notOffered(address.args);
      if (parameter) return cb(asError(reply(555, '5.5.4', `MAIL FROM parameter ${parameter} not recognized: the extension is not offered`)));
      const sender = address.address === '' ? { ok: true as const, address: '' } : envelopeAddress(address.address);
      if (!sender.ok && sender.reason === 'non_ascii_local_part') return cb(asError(reply(553, '5.6.7', NON_ASCII)));
      // smtp-server's parser is lenient (`app@localhost` passes): the send rules' address syntax, as at RCPT TO.
      if (!sender.ok || (sender.address !== '' && !isValidAddress(sender.address))) return cb(asError(reply(553, '5.1.7', 'Bad sender address syntax')));
      // A declared size that does not fit now would be refused after its transfer: say so before it.
      const size = declaredSize(address.args);
      if (size !== null && !deps.dataBudget.fits(size)) {
        deps.metrics?.smtpBufferRefusals.inc({ listener: 'submission', stage: 'mail_from' });
        logOverBudget({ session: session.id, remoteAddress: addressOf(session), motorBlockId: user.motorBlockId, declaredSize: size, held: deps.dataBudget.held, limit: deps.dataBudget.limitBytes });
        return cb(asError(INSUFFICIENT_STORAGE));
      }
      const state = stateOf(session);
      state.ceiling = null;
      hookWithin(hookTimeout, checkEnvelopeSender(deps.send, user.motorBlockId, sender.address, deps.clock.now()))
        .then((ceiling) => {
          state.ceiling = ceiling;
          cb();
        }, (err) => refuse('MAIL', session, sender.address, 0, err, cb));
    },
    onRcptTo(address, session, cb) {
      const user = userOf(session);
      if (!user) return cb(asError(reply(530, '5.7.0', 'Authentication required')));
      const recipient = envelopeAddress(address.address);
      if (!recipient.ok && recipient.reason === 'non_ascii_local_part') return cb(asError(reply(553, '5.6.7', NON_ASCII)));
      if (!recipient.ok || !isValidAddress(recipient.address)) return cb(asError(reply(553, '5.1.3', 'Bad recipient address syntax')));
      // More recipients than the smallest quota ceiling would be refused at DATA in every window:
      // the client is told now to send the rest in another transaction. A repeated address
      // replaces its entry (as the library counts them), so it never counts twice.
      const ceiling = stateOf(session).ceiling;
      const rcpts = session.envelope.rcptTo;
      if (ceiling && rcpts.length >= ceiling.limit) {
        const key = address.address.toLowerCase();
        if (!rcpts.some((r) => r.address.toLowerCase() === key)) return cb(asError(ceilingReply(ceiling)));
      }
      // A recipient the block may not reach (sandbox allowlist, Free plan) is refused here, 550
      // 5.7.1, and recorded as at MAIL FROM (one recipient); the others of the transaction go on.
      const envelopeFrom = session.envelope.mailFrom ? ascii(session.envelope.mailFrom.address) : '';
      hookWithin(hookTimeout, checkEnvelopeRecipient(deps.send, user.motorBlockId, recipient.address))
        .then(() => cb(), (err) => refuse('RCPT', session, envelopeFrom, 1, err, cb));
    },
    onData(stream, session, cb) {
      // smtp-server resets session.envelope after this callback: copy it first, in the ASCII form
      // the MAIL FROM and RCPT TO hooks checked (internationalized domains in A-labels).
      const envelope = {
        mailFrom: session.envelope.mailFrom ? ascii(session.envelope.mailFrom.address) : '',
        rcptTo: session.envelope.rcptTo.map((r) => ascii(r.address)),
      };
      const user = userOf(session);
      // Held against the process's budget from the first byte until the message is answered or cut.
      const { buffer, answer } = receiveMessage(deps.dataBudget, stream, cb);
      stream.on('error', () => { /* the client went away; nothing to answer */ });
      stream.on('end', () => {
        // Unreachable without AUTH (MAIL FROM requires it), but never answer 250 for nothing.
        if (!user) return answer(asError(reply(530, '5.7.0', 'Authentication required')));
        if (stream.sizeExceeded) return answer(asError(reply(552, '5.3.4', `Message exceeds the maximum size of ${settings.maxMessageBytes} bytes`)));
        if (buffer.overBudget) {
          deps.metrics?.smtpBufferRefusals.inc({ listener: 'submission', stage: 'data' });
          logOverBudget({ session: session.id, remoteAddress: addressOf(session), motorBlockId: user.motorBlockId, bytes: stream.byteLength, held: deps.dataBudget.held, limit: deps.dataBudget.limitBytes });
          return answer(asError(INSUFFICIENT_STORAGE));
        }
        hookWithin(dataTimeout, submitMessage(deps.send, { motorBlockId: user.motorBlockId, envelope, data: buffer.data(), now: deps.clock.now() }))
          .then((s) => {
            log.debug({ session: session.id, messageId: s.messageId }, 'SMTP submission accepted');
            deps.metrics?.sendsAccepted.inc({ source: 'smtp' });
            answer(null, `OK: queued as ${s.messageId}`);
          }, (err) => refuse('DATA', session, envelope.mailFrom, envelope.rcptTo.length, err, answer));
      });
    },
  };

  const common: SMTPServerOptions = {
    name: settings.hostname,
    banner: 'Motor ESMTP submission',
    key: settings.tls.key,
    cert: settings.tls.cert,
    minVersion: 'TLSv1.2',
    // mTLS: ask for a client certificate, never require one (blocks without mTLS have none); the
    // verdict (socket.authorized) is judged at AUTH for mTLS blocks only (smtp/auth.ts).
    ...(settings.tls.clientCa ? { ca: settings.tls.clientCa, requestCert: true, rejectUnauthorized: false } : {}),
    authMethods: ['PLAIN', 'LOGIN', 'XOAUTH2'],
    size: settings.maxMessageBytes,
    rejectOversized: true,
    maxRecipients: settings.maxRecipients,
    maxCommandLength: settings.maxCommandLength ?? 2048,
    socketTimeout: settings.idleTimeoutMs ?? 300_000,
    closeTimeout: settings.closeTimeoutMs ?? 5_000,
    maxClients,
    disableReverseLookup: true,
    hideENHANCEDSTATUSCODES: false,
    hideSMTPUTF8: true,
    hideDSN: true,
    hideREQUIRETLS: true,
    disabledCommands: NOT_IMPLEMENTED,
    logger: false,
    ...hooks,
  };
  const greeting = { unknownClientDelayMs: settings.unknownClientDelayMs ?? 100, known };
  const errors: ErrorPolicy = {
    softLimit: settings.softErrorLimit ?? 10,
    hardLimit: settings.hardErrorLimit ?? 20,
    sleepMs: settings.errorSleepMs ?? 1000,
    junkLimit: settings.junkCommandLimit ?? 100,
    rcptLimit: settings.maxRecipients + (settings.recipientOvershootLimit ?? 1000),
    onLimit: (c) => logClosedForErrors({ session: c.session.id, remoteAddress: addressOf(c.session), motorBlockId: userOf(c.session)?.motorBlockId }),
  };
  const tooManyClients = (port: 'starttls' | 'implicit') => (remoteAddress: string) => logClientCap({ remoteAddress, port, limit: maxClients });
  const starttls = new SubmissionServer({ ...common, secure: false }, greeting, errors, deadlines, tooManyClients('starttls'));
  const implicit = new SubmissionServer({ ...common, secure: true }, greeting, errors, deadlines, tooManyClients('implicit'));
  // A connection's errors carry its address; a failed implicit TLS handshake has it in `meta`.
  const errorAddress = (err: Error & { remoteAddress?: string; meta?: { remoteAddress?: string } }) => normalizeAddress(err.remoteAddress ?? err.meta?.remoteAddress);
  for (const s of [starttls, implicit]) s.on('error', (err) => logConnectionError({ err: err.message, remoteAddress: errorAddress(err) }));

  const listen = (s: SubmissionServer, port: number) => new Promise<number>((resolve, reject) => {
    s.server.once('error', reject);
    s.listen(port, settings.host, () => {
      s.server.off('error', reject);
      resolve((s.server.address() as AddressInfo).port);
    });
  });
  const closeOne = (s: SubmissionServer) => new Promise<void>((resolve) => s.close(() => resolve()));
  let port: number;
  let securePort: number;
  try {
    port = await listen(starttls, settings.port);
    securePort = await listen(implicit, settings.securePort);
  } catch (err) {
    await Promise.all([closeOne(starttls), closeOne(implicit)]).catch(() => {});
    throw err;
  }
  log.info({ port, securePort }, 'SMTP submission listening');
  return {
    port, securePort, processes: 1, known,
    // A session's state is held from its onConnect to its onClose, its deadline timers from its
    // connection to its socket's close (smtp/server.ts): the spans differ at both ends, and a
    // connection turned away at maxClients has timers only. It counts while it has either.
    sessionsHeld: () => new Set([...sessions.keys(), ...[starttls, implicit].flatMap((s) => [...s.timed].map((c) => c.id))]).size,
    async close() {
      await Promise.all([closeOne(starttls), closeOne(implicit)]);
    },
  };
}
