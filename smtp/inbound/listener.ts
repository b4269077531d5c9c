import type { AddressInfo } from 'node:net';
import type { SMTPServerOptions, SMTPServerSession } from 'smtp-server';
import type { EventStore } from '../../domain/eventStore';
import type { Clock } from '../../domain/ids';
import type { Logger } from '../../infra/logger';
import type { LogLimiter } from '../../infra/logLimiter';
import type { Metrics } from '../../infra/metrics';
import { within } from '../../infra/within';
import { normalizeAddress } from '../authLimiter';
import { INSUFFICIENT_STORAGE, reply, smtpError } from '../replies';
import { AddressSlots, KnownClients, NOT_IMPLEMENTED, SubmissionServer } from '../server';
import { declaredSize, receiveMessage, type DataBudget } from '../dataBudget';
import { recordReport } from './record';
import { readReport, type InboundReport } from './reports';
import { messageIdOfBounceAddress, type ReturnPathSettings } from './returnPath';

/**
 * The inbound listener (role `inbound`): where DSNs and feedback-loop reports for the bounce
 * addresses arrive (docs/DELIVERY.md "Asynchronous bounces and complaints"). An MX for
 * BOUNCE_DOMAIN, not a submission port: no AUTH, any MAIL FROM (DSNs use the null sender), and
 * RCPT TO only for a bounce address whose token verifies (`bounces+<token>@BOUNCE_DOMAIN`) or
 * `fbl@BOUNCE_DOMAIN`; everything else is `550 5.1.1`. One message per transaction (a second
 * recipient naming another message: 452, sent again in its own transaction). The 250 after DATA
 * comes once the report's events are committed, or once it is judged to need none; a store that
 * cannot be reached is 451, and the sender tries again later.
 */

export interface InboundDeps {
  store: EventStore;
  logger: Logger;
  metrics: Metrics;
  clock: Clock;
  logLines: LogLimiter;
  /** The process's budget of message bytes held while they arrive (SMTP_MAX_BUFFERED_BYTES), shared with the submission listeners. */
  dataBudget: DataBudget;
}

export interface InboundSettings {
  hostname: string;
  host: string;
  /** INBOUND_SMTP_PORT (0 here = any free port: tests). */
  port: number;
  returnPath: ReturnPathSettings;
  /** STARTTLS is offered with this certificate (the submission listeners'). */
  tls: { key: Buffer; cert: Buffer };
  maxMessageBytes: number;
  maxClients?: number;
  maxConnectionsPerAddress?: number;
  idleTimeoutMs?: number;
  /** Deadline of reading and recording one report (ms). */
  dataTimeoutMs?: number;
  /** Pregreet wait (smtp/server.ts); 0 turns it off. */
  greetingDelayMs?: number;
  /** The submission listeners' deadlines (SMTP_SESSION_TIMEOUT_SECONDS, SMTP_DATA_TIMEOUT_SECONDS, docs/SMTP.md "Deadlines"): a trickling sender holds no slot for ever here either. */
  sessionTimeoutMs?: number;
  dataTransferTimeoutMs?: number;
}

export interface InboundListener {
  port: number;
  close(): Promise<void>;
}

/** The fixed address feedback loops are registered with: the reported message is found through the token in its attached Return-Path. */
export const FEEDBACK_LOOP_LOCAL_PART = 'fbl';

type Target = { kind: 'message'; messageId: string } | { kind: 'fbl' };

const targetOf = (session: SMTPServerSession): Target | null => (session as SMTPServerSession & { motorTarget?: Target }).motorTarget ?? null;
const setTarget = (session: SMTPServerSession, t: Target | null) => { (session as SMTPServerSession & { motorTarget?: Target | null }).motorTarget = t; };

export async function startInboundListener(deps: InboundDeps, settings: InboundSettings): Promise<InboundListener> {
  const log = deps.logger.child({ component: 'inbound' });
  const capped = (level: 'debug' | 'info' | 'warn' | 'error', msg: string) => deps.logLines.kind(log, level, msg, 'remoteAddress');
  const logRefused = capped('info', 'inbound recipient refused');
  const logReport = capped('info', 'inbound report');
  const logFailed = capped('warn', 'inbound report not recorded');
  const logAddressCap = capped('info', 'inbound connection refused: too many connections from the address');
  const logConnectionError = capped('debug', 'inbound connection error');
  const logOverBudget = capped('warn', 'inbound message refused: SMTP_MAX_BUFFERED_BYTES reached');
  const fblAddress = `${FEEDBACK_LOOP_LOCAL_PART}@${settings.returnPath.domain}`;
  const perAddress = new AddressSlots();
  const maxPerAddress = settings.maxConnectionsPerAddress ?? 20;
  const dataTimeout = settings.dataTimeoutMs ?? 60_000;
  const addressOf = (session: SMTPServerSession) => normalizeAddress(session.remoteAddress);

  /** Which message a report is about: the RCPT's token, or for fbl@ the token of the reported message's Return-Path. */
  const messageOf = (target: Target, report: InboundReport): string | null => {
    if (target.kind === 'message') return target.messageId;
    if (report.kind !== 'arf') return null;
    for (const a of report.returnPaths) {
      const id = messageIdOfBounceAddress(a, settings.returnPath);
      if (id) return id;
    }
    return null;
  };

  const handle = async (target: Target, raw: Buffer): Promise<{ kind: string; result: string; messageId: string | null; notes?: unknown }> => {
    const report = await readReport(raw);
    const messageId = messageOf(target, report);
    if (report.kind === 'other') return { kind: 'other', result: 'ignored', messageId, notes: report.why };
    if (messageId === null) return { kind: report.kind, result: 'no_message', messageId };
    const outcome = await recordReport({ store: deps.store, now: () => deps.clock.now() }, messageId, report);
    return { kind: report.kind, result: outcome.result, messageId, notes: outcome.notes };
  };

  const hooks: Partial<SMTPServerOptions> = {
    onConnect(session, cb) {
      const a = addressOf(session);
      const n = perAddress.take(session.id, a);
      if (n > maxPerAddress) {
        logAddressCap({ session: session.id, remoteAddress: a, connections: n, limit: maxPerAddress });
        return cb(smtpError(reply(421, '4.7.0', 'Too many connections from your address')));
      }
      cb();
    },
    onClose(session) {
      perAddress.release(session.id);
    },
    onMailFrom(address, session, cb) {
      setTarget(session, null);
      const size = declaredSize(address.args);
      if (size !== null && !deps.dataBudget.fits(size)) {
        deps.metrics.smtpBufferRefusals.inc({ listener: 'inbound', stage: 'mail_from' });
        logOverBudget({ session: session.id, remoteAddress: addressOf(session), declaredSize: size, held: deps.dataBudget.held, limit: deps.dataBudget.limitBytes });
        return cb(smtpError(INSUFFICIENT_STORAGE));
      }
      cb();
    },
    onRcptTo(address, session, cb) {
      const addr = address.address;
      const messageId = messageIdOfBounceAddress(addr, settings.returnPath);
      const target: Target | null = messageId ? { kind: 'message', messageId } : addr.toLowerCase() === fblAddress ? { kind: 'fbl' } : null;
      if (!target) {
        deps.metrics.inboundReports.inc({ kind: 'none', result: 'refused_recipient' });
        logRefused({ session: session.id, remoteAddress: addressOf(session), recipient: addr.slice(0, 200) });
        return cb(smtpError(reply(550, '5.1.1', 'No such recipient')));
      }
      const current = targetOf(session);
      const same = current && (current.kind === 'fbl' ? target.kind === 'fbl' : target.kind === 'message' && target.messageId === current.messageId);
      // One report is about one message: another one goes in a transaction of its own.
      if (current && !same) return cb(smtpError(reply(452, '4.5.3', 'One bounce address per transaction; send the rest in another transaction')));
      setTarget(session, target);
      cb();
    },
    onData(stream, session, cb) {
      const target = targetOf(session);
      // Held against the process's budget (smtp/dataBudget.ts) until the report is answered or cut.
      const { buffer, answer } = receiveMessage(deps.dataBudget, stream, cb);
      stream.on('error', () => { /* the client went away */ });
      stream.on('end', () => {
        if (stream.sizeExceeded) return answer(smtpError(reply(552, '5.3.4', `Message exceeds the maximum size of ${settings.maxMessageBytes} bytes`)));
        if (!target) return answer(smtpError(reply(503, '5.5.1', 'No valid recipients')));
        if (buffer.overBudget) {
          deps.metrics.smtpBufferRefusals.inc({ listener: 'inbound', stage: 'data' });
          logOverBudget({ session: session.id, remoteAddress: addressOf(session), bytes: stream.byteLength, held: deps.dataBudget.held, limit: deps.dataBudget.limitBytes });
          return answer(smtpError(INSUFFICIENT_STORAGE));
        }
        within(dataTimeout, handle(target, buffer.data()), () => new Error(`report not recorded within ${dataTimeout} ms`)).then((r) => {
          deps.metrics.inboundReports.inc({ kind: r.kind, result: r.result });
          logReport({ session: session.id, remoteAddress: addressOf(session), kind: r.kind, result: r.result, messageId: r.messageId, notes: r.notes });
          answer(null, 'OK: report received');
        }, (err) => {
          // The store is away, or the report could not be read in time: the sender keeps it and tries again.
          deps.metrics.inboundReports.inc({ kind: 'unknown', result: 'temporary_failure' });
          logFailed({ err, session: session.id, remoteAddress: addressOf(session) });
          answer(smtpError(reply(451, '4.3.0', 'Temporary local problem, please try again later')));
        });
      });
    },
  };

  const server = new SubmissionServer(
    {
      name: settings.hostname,
      banner: 'Motor ESMTP bounces',
      key: settings.tls.key,
      cert: settings.tls.cert,
      minVersion: 'TLSv1.2',
      authOptional: true,
      disabledCommands: [...NOT_IMPLEMENTED, 'AUTH'],
      size: settings.maxMessageBytes,
      rejectOversized: true,
      maxRecipients: 50,
      maxCommandLength: 2048,
      socketTimeout: settings.idleTimeoutMs ?? 300_000,
      closeTimeout: 5_000,
      maxClients: settings.maxClients ?? 200,
      disableReverseLookup: true,
      hideENHANCEDSTATUSCODES: false,
      hideSMTPUTF8: true,
      hideDSN: true,
      hideREQUIRETLS: true,
      logger: false,
      ...hooks,
    },
    { unknownClientDelayMs: settings.greetingDelayMs ?? 100, known: new KnownClients() },
    { softLimit: 10, hardLimit: 20, sleepMs: 1000, junkLimit: 100, rcptLimit: 100 },
    {
      sessionMs: settings.sessionTimeoutMs ?? 1_800_000, dataMs: settings.dataTransferTimeoutMs ?? 600_000,
      onExpired: (c, deadline) => logConnectionError({ remoteAddress: addressOf(c.session), reason: deadline === 'data' ? 'message not received in time' : 'session lasted too long' }),
    },
    (remoteAddress) => logConnectionError({ remoteAddress, reason: 'too many clients' }),
  );
  server.on('error', (err: Error & { remoteAddress?: string }) => logConnectionError({ err: err.message, remoteAddress: normalizeAddress(err.remoteAddress) }));
  const port = await new Promise<number>((resolve, reject) => {
    server.server.once('error', reject);
    server.listen(settings.port, settings.host, () => {
      server.server.off('error', reject);
      resolve((server.server.address() as AddressInfo).port);
    });
  });
  log.info({ port, bounceDomain: settings.returnPath.domain }, 'inbound listener (bounces and complaints) listening');
  return {
    port,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
