import type net from 'node:net';
import type tls from 'node:tls';
import { SMTPServer, type SMTPServerOptions } from 'smtp-server';
import { SMTPConnection, type SMTPConnectionOptions } from 'smtp-server/lib/smtp-connection.js';
import { normalizeAddress } from './authLimiter';
import { deadlineReply, STARTS_WITH_ENHANCED, type Deadline } from './replies';

/**
 * smtp-server with five connection-level adjustments, made on each connection as it is created
 * (no fork, no prototype patch: other smtp-server instances in the process, such as the test MX,
 * are untouched). Written against smtp-server 3.21.6 (pinned); test/smtp covers each one.
 *
 * 1. The greeting delay. smtp-server waits a fixed 100 ms before the 220 greeting to catch
 *    clients that talk first (a pregreet test, as Postfix's postscreen does on port 25). It caps
 *    a client that opens a connection per message at ~10 messages/s per connection. On a
 *    submission port every client must AUTH over TLS anyway, so the test is defence in depth:
 *    here it stays for addresses Motor does not know, and is skipped for an address that
 *    authenticated successfully in the last `knownClientTtlMs` (KnownClients). The library's own
 *    timer still runs and is ignored; a client that talks before the greeting still gets
 *    "421 You talk too soon".
 * 2. AUTH is neither advertised nor accepted before TLS (Postfix smtpd_tls_auth_only): EHLO hides
 *    it on a cleartext session; the library already refuses the command with 538 5.7.0.
 * 3. Reply texts that carry their own enhanced status code (`4.7.1 Rate limit ...`, from
 *    smtp/replies.ts) are sent as they are; the library would otherwise prepend its generic code
 *    for the reply number (451 → 4.3.0). And LHLO, LMTP's greeting, is an unknown command here:
 *    its `500` gets its enhanced code like any other's (the library leaves it out, as for EHLO).
 * 4. The session's error limits (Postfix's smtpd_soft_error_limit, smtpd_hard_error_limit and
 *    smtpd_error_sleep_time, smtpd_junk_command_limit and smtpd_recipient_overshoot_limit;
 *    ErrorPolicy below).
 * 5. The session's deadlines: the message from its 354 to its final dot, and the session as a
 *    whole (DeadlinePolicy below).
 */

/**
 * Addresses that authenticated recently (bounded; oldest dropped first). Kept in memory; with
 * several listener processes (SMTP_PROCESSES) each one tells the others through the cluster's
 * primary (scripts/roleProcesses.ts): `remember` is a login seen here and is passed on, `learn` is
 * one passed on by a sibling.
 */
export class KnownClients {
  private readonly seen = new Map<string, number>();
  private readonly listeners: ((address: string) => void)[] = [];

  constructor(private readonly ttlMs = 10 * 60_000, private readonly max = 100_000, private readonly now: () => number = Date.now) {}

  remember(address: string): void {
    this.learn(address);
    for (const l of this.listeners) l(address);
  }

  learn(address: string): void {
    this.seen.delete(address);
    this.seen.set(address, this.now() + this.ttlMs);
    if (this.seen.size > this.max) this.seen.delete(this.seen.keys().next().value as string);
  }

  /** Called with each address this process sees log in (not with learned ones). */
  onRemember(listener: (address: string) => void): void {
    this.listeners.push(listener);
  }

  clear(): void {
    this.seen.clear();
  }

  knows(address: string): boolean {
    const until = this.seen.get(address);
    if (until === undefined) return false;
    if (until < this.now()) {
      this.seen.delete(address);
      return false;
    }
    return true;
  }
}

export interface GreetingPolicy {
  /** Pregreet wait for clients Motor does not know (ms); 0 turns the test off. */
  unknownClientDelayMs: number;
  known: KnownClients;
}

/**
 * How many errors a session may make, as Postfix counts them: every 4xx and 5xx reply is one,
 * except 421 (the session ends with it anyway) and 452 (too many recipients: RFC 5321
 * §4.5.3.1.10 has the client send the rest in another transaction, which is no error of its; or
 * 4.3.1, the process short of memory for messages, smtp/dataBudget.ts: the server's doing).
 * A message accepted (250 after DATA) forgives the errors before it, as Postfix does.
 *
 * Commands that answer 2xx without moving a transaction on (JUNK_COMMANDS) would let a client hold
 * the session, and one of its address's connection slots, for ever without an error: past
 * `junkLimit` of them each one counts as an error, whatever its reply, as Postfix's
 * smtpd_junk_command_limit does. The same message accepted resets their count.
 *
 * So would a transaction that repeats one `RCPT TO` (each one 250, and a directory lookup):
 * past `rcptLimit` RCPT TO commands in a transaction each one more is refused unrun, a 452 that
 * is an error, as Postfix counts the recipients it refuses past smtpd_recipient_overshoot_limit.
 * Stricter than Postfix, by choice: Postfix counts only accepted recipients, and its overshoot
 * only once smtpd_recipient_limit is reached; here every RCPT TO command counts (accepted,
 * repeated or refused), since a repeated address is no new recipient and only a count of commands
 * bounds it.
 */
export interface ErrorPolicy {
  /** From this many errors on, every command waits `sleepMs` before it is answered. */
  softLimit: number;
  /** At this many errors the session is told `421 4.7.0 <host> Error: too many errors` and closed. */
  hardLimit: number;
  sleepMs: number;
  /** HELO, EHLO, NOOP, RSET, VRFY and HELP allowed before each one more is an error. */
  junkLimit: number;
  /**
   * RCPT TO commands of one transaction, repeated addresses and refused ones included, before
   * each one more is answered `452 4.5.3` without being run (no RCPT hook, no directory lookup)
   * and counted as an error (after Postfix's smtpd_recipient_limit + smtpd_recipient_overshoot_limit,
   * which count accepted recipients only).
   */
  rcptLimit: number;
  /** Told of each session closed at the hard limit (for the log). */
  onLimit?(connection: SMTPConnection): void;
}

/**
 * How long a session, and the message of each DATA, may take in all. smtp-server's idle timeout
 * (`socketTimeout`) starts again with every byte the client sends, so without these a client that
 * trickles a byte every few seconds, into a message or into commands, holds the session and one
 * of its address's connection slots for as long as it likes. Past either deadline the session is
 * told `421 4.4.2` and closed.
 *
 * The session deadline does not cut a message in progress (from its 354 to the reply after its
 * final dot): the message's own deadline governs its transfer, the DATA hook's its commit, and the
 * 421 follows the reply. Cutting it between the dot and the reply would have the client retry a
 * message that may be committed, and so delivered twice. A command whose hook is still deciding
 * (AUTH, MAIL FROM, RCPT TO) is cut like an idle session: its verdict changes nothing the client
 * relies on.
 */
export interface DeadlinePolicy {
  /** From the connection on (ms). */
  sessionMs: number;
  /** From the 354 to the final dot (ms). */
  dataMs: number;
  /** Told of each session cut at one of them (for the log). */
  onExpired?(connection: SMTPConnection, deadline: Deadline): void;
}

type Handler = (this: SMTPConnection, command: Buffer, callback: () => void) => void;

/**
 * Postfix's junk commands that smtp-server has (HELO, EHLO, NOOP, RSET, VRFY; it has no ETRN), and
 * HELP, which it answers 214 where Postfix does not have it at all (and refuses it, an error each).
 * HELO and EHLO count as in Postfix: each one is answered 250, is never an error and starts a new
 * transaction (so a new RCPT TO count), so uncounted an EHLO loop would hold the session for ever
 * and `MAIL FROM, RCPT TO × rcptLimit, EHLO` would repeat its directory lookups without end. A
 * STARTTLS client's two EHLOs are 2 of the limit. Not sendmail's WIZ, SHELL and KILL: the listener
 * disables them (NOT_IMPLEMENTED), so they are unknown commands.
 */
const JUNK_COMMANDS = ['HELO', 'EHLO', 'NOOP', 'RSET', 'VRFY', 'HELP'] as const;

/**
 * Commands smtp-server answers although no submission server has them: sendmail's WIZ ("wizard
 * mode", 200 for any password), SHELL and KILL (joke replies). Disabled (the `disabledCommands`
 * option), the library answers each `500 5.5.2 Error: command not recognized` and counts it
 * toward its 10 unrecognized commands, as any unknown command; the reply is an error here.
 */
export const NOT_IMPLEMENTED = ['WIZ', 'SHELL', 'KILL'];

/** Told of each connection smtp-server's `maxClients` turns away (for the log): the library writes nothing. */
export type OnTooManyClients = (remoteAddress: string) => void;

/**
 * Counts a listener's connections per client address: this process's own (AddressSlots), or, when
 * the listeners run in several processes (SMTP_PROCESSES), the primary's count of all of them
 * (scripts/roleWorker.ts), which answers asynchronously.
 */
export interface AddressCounter {
  /** Session `sessionId` connected from `address`; how many connections the address has open now, this one included. */
  take(sessionId: string, address: string): number | Promise<number>;
  release(sessionId: string): void;
}

/**
 * Open connections per client address, for a listener's per-address cap (`421 4.7.0` past it):
 * a session takes its slot at onConnect and gives it back at onClose; an address is forgotten with
 * its last connection. A session gives back only what it took, once (smtp-server may close a
 * session that never reached onConnect).
 */
export class AddressSlots implements AddressCounter {
  private readonly open = new Map<string, number>();
  /** The address each session holding a slot took it for. */
  private readonly holders = new Map<string, string>();

  /** Session `sessionId` connected from `address`; how many connections the address has open now, this one included. */
  take(sessionId: string, address: string): number {
    this.holders.set(sessionId, address);
    const n = (this.open.get(address) ?? 0) + 1;
    this.open.set(address, n);
    return n;
  }

  release(sessionId: string): void {
    const address = this.holders.get(sessionId);
    if (address === undefined) return;
    this.holders.delete(sessionId);
    const n = (this.open.get(address) ?? 1) - 1;
    if (n <= 0) this.open.delete(address);
    else this.open.set(address, n);
  }
}

export class SubmissionServer extends SMTPServer {
  private readonly timedConnections = new Set<SMTPConnection>();

  constructor(
    options: SMTPServerOptions, private readonly greeting: GreetingPolicy, private readonly errors: ErrorPolicy,
    private readonly deadlines: DeadlinePolicy, private readonly onTooManyClients: OnTooManyClients = () => {},
  ) {
    super(options);
  }

  /** Connections whose deadline timers run: each one from connect() until its socket has closed. */
  get timed(): ReadonlySet<SMTPConnection> {
    return this.timedConnections;
  }

  /** An implicit TLS socket is dropped here, before its handshake, when `maxClients` handshakes are pending. */
  override _acceptSocket(socket: net.Socket, handshake: boolean): (() => void) | false {
    // Read first: a dropped socket has no address left.
    const remoteAddress = normalizeAddress(socket.remoteAddress);
    const release = super._acceptSocket(socket, handshake);
    if (!release) this.onTooManyClients(remoteAddress);
    return release;
  }

  override connect(socket: net.Socket | tls.TLSSocket, socketOptions?: SMTPConnectionOptions | null): void {
    // As SMTPServer.connect does, then the adjustments before init().
    const connection = new SMTPConnection(this, socket, socketOptions);
    this.connections.add(connection);
    // init() answers 421 "Too many connected clients" on this very test, at once (no needsUpgrade here).
    if (this.options.maxClients && this.connections.size > this.options.maxClients) this.onTooManyClients(normalizeAddress(socket.remoteAddress));
    connection.on('error', (err: Error) => this._onError(err));
    connection.on('connect', (data) => this._onClientConnect(data));
    adjustReplies(connection);
    hideAuthBeforeTls(connection);
    limitErrors(connection, this.errors);
    limitTime(connection, this.deadlines, this.timedConnections);

    const delayMs = this.greeting.known.knows(normalizeAddress(socket.remoteAddress)) ? 0 : this.greeting.unknownClientDelayMs;
    const ready = connection.connectionReady.bind(connection);
    let greeted = false;
    // init() arms the library's fixed 100 ms timer, which calls connectionReady(): make that a no-op
    // and greet on our own schedule.
    connection.connectionReady = () => {};
    connection.init();
    const greet = () => {
      if (greeted || connection._closing || connection._closed) return;
      greeted = true;
      ready();
    };
    if (delayMs === 0) greet();
    else setTimeout(greet, delayMs).unref();
  }
}

/**
 * RFC 2034 exempts only the greeting and the replies to HELO and EHLO from carrying an enhanced
 * status code. smtp-server also leaves it out of any reply whose context is the command name
 * `LHLO`, which on a listener that is not LMTP is the `500` to an unknown command.
 */
function adjustReplies(connection: SMTPConnection): void {
  const send = connection.send.bind(connection);
  connection.send = (code, data, context) =>
    send(code, data, typeof data === 'string' && STARTS_WITH_ENHANCED.test(data) ? false : context === 'LHLO' ? undefined : context);
}

function hideAuthBeforeTls(connection: SMTPConnection): void {
  const c = connection as unknown as { handler_EHLO: Handler };
  const ehlo = c.handler_EHLO;
  c.handler_EHLO = function (this: SMTPConnection, command, callback) {
    if (this.secure) return ehlo.call(this, command, callback);
    const saved = this.session.disabledCommands;
    // The EHLO reply is built synchronously, so the session-level switch covers exactly this reply.
    this.session.disabledCommands = [...(saved ?? this._server.options.disabledCommands), 'AUTH'];
    try {
      ehlo.call(this, command, callback);
    } finally {
      this.session.disabledCommands = saved;
    }
  };
}

/**
 * Counts the session's errors on the replies it is sent. The 421 follows the reply that reaches
 * the hard limit at once (as Postfix's smtpd does before it reads another command); whatever the
 * client pipelined behind that command is not read. Past the soft limit each command is handed
 * on after a timer, not a sleep: the other sessions of the process go on meanwhile.
 *
 * A junk command is counted where the library dispatches it to its handler, so a line that only
 * looks like one (an AUTH continuation, a disabled command) is not. Its handler replies at once,
 * so its reply is the one the `countsAsError` flag marks; a junk command that is refused anyway
 * (VRFY without an address) is one error, not two as in Postfix.
 *
 * RCPT TO commands are counted in the same place, per transaction: per `session.envelope`, which
 * the library replaces whenever a transaction ends (RSET, HELO/EHLO, STARTTLS, the end of DATA).
 * An RCPT TO outside a transaction is not counted; the library answers it 503, an error.
 */
function limitErrors(connection: SMTPConnection, policy: ErrorPolicy): void {
  let errors = 0;
  let junk = 0;
  let countsAsError = false;
  let transaction: object | null = null;
  let rcpts = 0;
  const handlers = connection as unknown as Record<`handler_${(typeof JUNK_COMMANDS)[number]}`, Handler>;
  for (const name of JUNK_COMMANDS) {
    const handler = handlers[`handler_${name}`];
    handlers[`handler_${name}`] = function (this: SMTPConnection, command, callback) {
      junk += 1;
      countsAsError = junk > policy.junkLimit;
      try {
        handler.call(this, command, callback);
      } finally {
        countsAsError = false;
      }
    };
  }
  const rcpt = connection as unknown as { handler_RCPT: Handler };
  const rcptHandler = rcpt.handler_RCPT;
  rcpt.handler_RCPT = function (this: SMTPConnection, command, callback) {
    const envelope = this.session.envelope;
    if (envelope.mailFrom) {
      if (envelope !== transaction) {
        transaction = envelope;
        rcpts = 0;
      }
      rcpts += 1;
      if (rcpts > policy.rcptLimit) {
        countsAsError = true;
        this.send(452, `4.5.3 Too many recipients: more than ${policy.rcptLimit} RCPT TO commands in this transaction; send the rest in another transaction`);
        return callback();
      }
    }
    rcptHandler.call(this, command, callback);
  };
  const send = connection.send.bind(connection);
  connection.send = (code, data, context) => {
    send(code, data, context);
    if (code === 250 && context === 'DATA_OK') {
      errors = 0;
      junk = 0;
    }
    const error = countsAsError || (code >= 400 && code !== 421 && code !== 452);
    countsAsError = false;
    if (!error) return;
    errors += 1;
    if (errors >= policy.hardLimit && !connection._closing) {
      policy.onLimit?.(connection);
      send(421, `4.7.0 ${connection.name} Error: too many errors`);
    }
  };
  const onCommand = connection._onCommand.bind(connection);
  connection._onCommand = (command, callback) => {
    if (errors < policy.softLimit || policy.sleepMs <= 0) return onCommand(command, callback);
    setTimeout(() => {
      if (!connection._closing && !connection._closed) onCommand(command, callback);
    }, policy.sleepMs).unref();
  };
}

/**
 * Arms the session's deadline at once and the message's at each 354; both are cleared when the
 * connection's socket closes, however it closes, and the connection leaves `timed` with them.
 *
 * A message is in progress while the connection has its data stream: the library sets it just
 * before the 354 and drops it just before the reply to the final dot. The transfer is the part of
 * it where the parser is in data mode: past the dot the message is the DATA hook's, whose own
 * deadline (the listener's `dataTimeoutMs`) bounds it.
 */
function limitTime(connection: SMTPConnection, policy: DeadlinePolicy, timed: Set<SMTPConnection>): void {
  let sessionDue = false;
  let dataTimer: NodeJS.Timeout | undefined;
  const inMessage = () => Boolean(connection._dataStream);
  const cut = (deadline: Deadline) => {
    if (connection._closing || connection._closed) return;
    const stream = connection._dataStream;
    policy.onExpired?.(connection, deadline);
    const r = deadlineReply(deadline, connection.name, (deadline === 'data' ? policy.dataMs : policy.sessionMs) / 1000);
    // A 421 closes the connection (smtp-server's send), and with it the parser: nothing more of
    // the client is read.
    connection.send(r.code, `${r.enhanced} ${r.text}`);
    // So the message being received would never end. It ends now, in an error: the DATA hook
    // never sees its end, so nothing is submitted, and what it kept of it is let go now rather
    // than when the client closes its side.
    if (stream && !stream.destroyed) stream.destroy(Object.assign(new Error('DATA deadline exceeded'), { code: 'ETIMEDOUT' }));
  };

  const sessionTimer = setTimeout(() => {
    if (inMessage()) sessionDue = true;
    else cut('session');
  }, policy.sessionMs).unref();
  timed.add(connection);

  const data = connection.handler_DATA;
  connection.handler_DATA = function (this: SMTPConnection, command, callback) {
    data.call(this, command, callback);
    const stream = this._dataStream;
    const parser = this._parser;
    // Refused (no recipients yet): no 354, no message.
    if (!stream || !parser) return;
    clearTimeout(dataTimer);
    dataTimer = setTimeout(() => {
      if (this._dataStream === stream && parser._dataMode) cut('data');
    }, policy.dataMs).unref();
  };

  const send = connection.send.bind(connection);
  connection.send = (code, text, context) => {
    send(code, text, context);
    if (inMessage()) return;
    // The reply after the final dot (or any reply outside a message): the message is over.
    clearTimeout(dataTimer);
    if (sessionDue) cut('session');
  };

  const onClose = connection._onClose.bind(connection);
  connection._onClose = () => {
    clearTimeout(sessionTimer);
    clearTimeout(dataTimer);
    timed.delete(connection);
    onClose();
  };
}
