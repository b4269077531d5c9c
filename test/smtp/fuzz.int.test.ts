import { connect as netConnect, type Socket } from 'node:net';
import { connect as tlsConnect, type TLSSocket } from 'node:tls';
import { domainToASCII } from 'node:url';
import { expect } from 'chai';
import fc from 'fast-check';
import type { MessageAccepted } from '../../domain/events';
import { authorize, dashboardUser, exchange, newClient, oauthBlock } from '../oauth/support';
import { startSmtpHarness, type SmtpHarness } from './harness';

/**
 * Property-based tests of the SMTP submission listener over real sockets (fast-check): random
 * sessions, one to three at a time, against one listener, each a sequence of commands the way a
 * broken, hostile or merely unusual client sends them (garbage, pipelined bursts, STARTTLS in the
 * middle, AUTH exchanges cut short, messages with bare LF, NUL, 8-bit, long lines, unstuffed dots,
 * oversize, disconnects mid-DATA). A model of the server's parser reads the bytes each session
 * sent the way the listener reads them (one reply per command line, a message up to the first
 * CRLF.CRLF) and follows the replies, so it knows which transaction each 250 after DATA belongs
 * to. Properties, per run:
 *
 * - every line the listener sends is `\d{3}[ -]text` ended by CRLF, the code 2xx to 5xx, one code
 *   per multi-line reply; after EHLO, every 2xx/4xx/5xx reply but EHLO's and HELO's carries an
 *   enhanced status code of its class (RFC 2034, ENHANCEDSTATUSCODES is advertised);
 * - each command line gets its reply within REPLY_MS, or the connection is closed; after a 221
 *   or 421 the listener closes the connection;
 * - the listener never accepts what it must not (AUTH with wrong credentials, MAIL before AUTH or
 *   inside a transaction, RCPT outside one or past SMTP_MAX_RECIPIENTS, DATA without recipients,
 *   a 2xx to a command it does not have) and never answers 451 4.3.0 (an exception escaped);
 * - every 250 after DATA is exactly one MessageAccepted, of the session's credential, whose
 *   recipients are exactly the RCPTs that transaction had accepted (none of an earlier or aborted
 *   transaction, none of another session) and whose message is that transaction's. No
 *   MessageAccepted exists without such a 250, except for a message whose CRLF.CRLF the client
 *   sent but whose reply it never read (it hung up, reset or half-closed first): the listener may
 *   have committed it and lost the reply with the connection (RFC 1047; docs/SMTP.md). A message
 *   whose end the client never sent is never accepted;
 * - no uncaught exception or unhandled rejection in the process, no log line at level error;
 * - once every client of a run has hung up, the listener holds no session's state
 *   (`sessionsHeld()`) and the process's data budget no message byte (smtp/dataBudget.ts):
 *   nothing of one session outlives it, to be found by another or to pile up;
 * - afterwards a well-behaved client on a fresh address authenticates and gets a message
 *   accepted (250).
 *
 * Bounded: a fixed seed (printed) and FUZZ_RUNS runs, about a minute; FUZZ_SEED and FUZZ_RUNS
 * override both. On failure fast-check shrinks the run (for at most SHRINK_LIMIT_MS; FUZZ_SHRINK=0
 * not at all) and prints the counterexample, seed and path. FUZZ_VERBOSE=1 prints what got which reply.
 */

const SEED = process.env.FUZZ_SEED ? Number(process.env.FUZZ_SEED) : 5321;
const RUNS = process.env.FUZZ_RUNS ? Number(process.env.FUZZ_RUNS) : 100;
const MAX_BYTES = 32 * 1024;
const MAX_RCPTS = 4;
/**
 * Block O's burst ceiling (recipients a minute): under SMTP_MAX_RECIPIENTS, so its transactions
 * meet the quota's recipient cap at RCPT TO (452 4.5.3) and, soon, the quota itself (451 4.7.1).
 * Block A's ceilings are out of reach: the well-behaved client is A.
 */
const O_BURST = 3;
/** The listener's command line limit (smtp/listener.ts maxCommandLength). */
const MAX_LINE = 2048;
/**
 * How long shrinking may go on after the first failure: each attempt re-runs sessions against the
 * live listener (about a second), and a run of three long sessions has thousands of smaller ones.
 */
const SHRINK_LIMIT_MS = 2 * 60_000;
/** "Within a few seconds". */
const REPLY_MS = 5000;

// ---------------------------------------------------------------- what a session sends (printable specs)

type Cred = 'A' | 'O' | 'authzidSelf' | 'wrongPassword' | 'unknownUser' | 'oauthPassword' | 'authzidOther' | 'controlChar' | 'empty' | 'hugePassword' | 'hugeLine' | 'malformed';

/** `username`: any text in place of the credential's username (a stranger's, with the credential's password). */
interface AuthSpec { mech: 'PLAIN' | 'LOGIN' | 'XOAUTH2' | 'CRAM-MD5' | 'BOGUS'; cred: Cred; style: 'initial' | 'twoStep' | 'cancelFirst' | 'cancelLast'; trailingEmptyLine: boolean; username?: string }
type Addr = 'sender' | 'senderUpper' | 'otherDomain' | 'null' | 'unicodeLocal' | 'idnDomain' | 'long' | 'noAt' | 'twoAt' | { text: string };
type Rcpt = 'fresh' | 'idn' | 'sourceRoute' | 'unicodeLocal' | 'postmaster' | 'empty' | 'twoAt' | 'long' | { repeat: number; upper: boolean } | { text: string };
type Form = 'brackets' | 'noBrackets' | 'spaceAfterColon' | 'noColon' | 'lowercase';

interface BodySpec {
  head: 'valid' | 'none' | 'noFrom' | 'foreignFrom' | 'twoFrom' | 'groupFrom' | 'badHeader';
  /** Random values for From (then maybe not the block's), Subject, and fields of their own. */
  from?: string;
  subject?: string;
  fields?: [string, string][];
  mime: 'plain' | 'multipart' | 'utf8';
  lines: string[];
  eol: 'crlf' | 'lf' | 'cr' | 'mixed';
  mutation: 'none' | 'nul' | 'latin1' | 'longLine' | 'dotLines' | 'startsWithDot' | 'noFinalEol' | 'earlyTerminator' | 'oversize' | 'empty';
}

type Cmd =
  /** LHLO: LMTP's EHLO, which a client configured for LMTP sends. */
  | { c: 'EHLO' | 'HELO' | 'LHLO'; host: string }
  /** What the client sends after the 220: a TLS handshake, or garbage. */
  | { c: 'STARTTLS'; handshake: 'tls' | 'garbage' }
  | { c: 'AUTH'; auth: AuthSpec }
  | { c: 'MAIL'; addr: Addr; params: string[]; form: Form }
  | { c: 'RCPT'; addr: Rcpt; params: string[]; form: Form }
  | { c: 'DATA' }
  | { c: 'BODY'; body: BodySpec }
  /** A message that stops before its end (no CRLF.CRLF). */
  | { c: 'PARTIAL'; body: BodySpec; keep: number }
  | { c: 'line'; text: string; eol: '\r\n' | '\n' }
  | { c: 'bytes'; bytes: number[] }
  | { c: 'long'; length: number; eol: '\r\n' | '' };

/**
 * Parts written one at a time (each once the replies to the one before are in), or in one write
 * (`pipelined`). One at a time, a `careful` client gives the transaction up when MAIL is refused,
 * and sends no message after a DATA that got no 354.
 */
interface Action { parts: Cmd[]; pipelined: boolean; careful?: boolean }

interface SessionSpec {
  port: 'starttls' | 'implicit';
  /** Reuse the address of the previous session (maybe known: then greeted without the pregreet wait). */
  sameAddress: boolean;
  /** Bytes sent before the greeting. */
  early: string | null;
  /** EHLO, STARTTLS (on 2587), EHLO, then AUTH as A or O: as far as `prelude` says. */
  prelude: 'none' | 'ehlo' | 'tls' | AuthSpec;
  /** After a `tls` prelude: AUTH attempts, before the actions. */
  logins: AuthSpec[];
  actions: Action[];
  ending: 'quit' | 'destroy' | 'reset' | 'halfClose' | 'cutAfterDot' | 'abortMidData';
}

// ---------------------------------------------------------------- arbitraries

const text = (max: number) => fc.string({ unit: 'binary', maxLength: max });
const asciiText = (max: number) => fc.string({ unit: 'binary-ascii', maxLength: max });
const printable = (max: number) => fc.string({ unit: 'grapheme-ascii', maxLength: max });

const hostArb: fc.Arbitrary<string> = fc.oneof(
  { weight: 6, arbitrary: fc.constantFrom('client.test', '[127.0.0.1]', 'localhost', 'CLIENT.TEST', 'a') },
  { weight: 1, arbitrary: fc.constantFrom('', 'two words', 'x'.repeat(301), 'bücher.example', '[IPv6:::1]', 'host\u0001ctl') },
  { weight: 1, arbitrary: printable(20) },
  { weight: 1, arbitrary: text(20) },
);

/**
 * Whom an AUTH exchange logs in as if the listener is right to accept it; null: it must be refused.
 * The authorization identity exists in PLAIN only (LOGIN sends A's username and password whatever
 * `cred` says of it); XOAUTH2 takes only an access token.
 */
function identityOf(a: AuthSpec): 'A' | 'O' | null {
  if (a.username !== undefined || a.style === 'cancelFirst' || a.style === 'cancelLast') return null;
  switch (a.mech) {
    case 'PLAIN': return a.cred === 'O' ? 'O' : a.cred === 'A' || a.cred === 'authzidSelf' ? 'A' : null;
    case 'LOGIN': return a.cred === 'O' ? 'O' : a.cred === 'A' || a.cred === 'authzidSelf' || a.cred === 'authzidOther' ? 'A' : null;
    case 'XOAUTH2': return a.cred === 'O' ? 'O' : null;
    default: return null;
  }
}

const authArb: fc.Arbitrary<AuthSpec> = fc.record({
  mech: fc.oneof({ weight: 8, arbitrary: fc.constantFrom('PLAIN' as const, 'LOGIN' as const, 'XOAUTH2' as const) }, { weight: 1, arbitrary: fc.constantFrom('CRAM-MD5' as const, 'BOGUS' as const) }),
  cred: fc.oneof(
    { weight: 4, arbitrary: fc.constantFrom<Cred>('A', 'O') },
    { weight: 4, arbitrary: fc.constantFrom<Cred>('wrongPassword', 'unknownUser', 'oauthPassword', 'authzidOther', 'authzidSelf', 'malformed') },
    { weight: 1, arbitrary: fc.constantFrom<Cred>('controlChar', 'empty', 'hugePassword', 'hugeLine') },
  ),
  style: fc.constantFrom('initial' as const, 'twoStep' as const, 'cancelFirst' as const, 'cancelLast' as const),
  trailingEmptyLine: fc.boolean(),
  username: fc.oneof(
    { weight: 5, arbitrary: fc.constant(undefined) },
    { weight: 2, arbitrary: fc.string({ unit: 'grapheme', minLength: 60, maxLength: 140 }) },
    { weight: 1, arbitrary: text(40) },
  ),
}, { requiredKeys: ['mech', 'cred', 'style', 'trailingEmptyLine'] });

const formArb: fc.Arbitrary<Form> = fc.oneof({ weight: 10, arbitrary: fc.constant('brackets' as const) }, { weight: 1, arbitrary: fc.constantFrom('noBrackets' as const, 'spaceAfterColon' as const, 'noColon' as const, 'lowercase' as const) });

const mailParamArb = fc.constantFrom(
  'SIZE=1000', `SIZE=${MAX_BYTES + 1}`, 'SIZE=0', 'SIZE=abc', 'SIZE=99999999999999999999999', 'SIZE', 'BODY=8BITMIME', 'BODY=7BIT', 'BODY=BINARYMIME',
  'SMTPUTF8', 'SMTPUTF8=yes', 'REQUIRETLS', 'AUTH=<>', 'RET=HDRS', 'RET=BOGUS', 'ENVID=abc', 'ENVID=a+0D+0Ab', 'X-UNKNOWN=1', '=x', 'SIZE=1 SIZE=2',
);
const rcptParamArb = fc.constantFrom('NOTIFY=SUCCESS,FAILURE', 'NOTIFY=NEVER,SUCCESS', 'NOTIFY=BOGUS', 'ORCPT=rfc822;x@rcpt.test', 'ORCPT=bad', 'X-UNKNOWN=1');

const mailArb: fc.Arbitrary<Cmd> = fc.record({
  c: fc.constant('MAIL' as const),
  addr: fc.oneof(
    { weight: 12, arbitrary: fc.constant<Addr>('sender') },
    { weight: 3, arbitrary: fc.constantFrom<Addr>('senderUpper', 'otherDomain', 'null', 'unicodeLocal', 'idnDomain', 'long', 'noAt', 'twoAt') },
    { weight: 1, arbitrary: text(30).map((t): Addr => ({ text: t })) },
  ),
  params: fc.oneof({ weight: 4, arbitrary: fc.constant<string[]>([]) }, { weight: 1, arbitrary: fc.array<string>(mailParamArb, { maxLength: 3 }) }),
  form: formArb,
});

const rcptArb: fc.Arbitrary<Cmd> = fc.record({
  c: fc.constant('RCPT' as const),
  addr: fc.oneof(
    { weight: 12, arbitrary: fc.constant<Rcpt>('fresh') },
    { weight: 3, arbitrary: fc.record({ repeat: fc.nat(10), upper: fc.boolean() }) },
    { weight: 2, arbitrary: fc.constantFrom<Rcpt>('idn', 'sourceRoute', 'unicodeLocal', 'postmaster', 'empty', 'twoAt', 'long') },
    { weight: 1, arbitrary: text(30).map((t): Rcpt => ({ text: t })) },
  ),
  params: fc.oneof({ weight: 6, arbitrary: fc.constant<string[]>([]) }, { weight: 1, arbitrary: fc.array<string>(rcptParamArb, { maxLength: 2 }) }),
  form: formArb,
});

const bodyLineArb = fc.oneof(
  { weight: 6, arbitrary: printable(60) },
  { weight: 2, arbitrary: fc.string({ unit: 'grapheme', maxLength: 30 }) },
  { weight: 2, arbitrary: fc.constantFrom('.', '..', '.hidden', '', ' folded', 'QUIT', 'RCPT TO:<smuggled@rcpt.test>', 'From: smuggled@other.test', '--b1') },
  { weight: 1, arbitrary: asciiText(40) },
);

const bodyArb: fc.Arbitrary<BodySpec> = fc.record({
  head: fc.oneof({ weight: 12, arbitrary: fc.constant('valid' as const) }, { weight: 3, arbitrary: fc.constantFrom('none' as const, 'noFrom' as const, 'foreignFrom' as const, 'twoFrom' as const, 'groupFrom' as const, 'badHeader' as const) }),
  from: fc.oneof(
    { weight: 4, arbitrary: fc.constant(undefined) },
    { weight: 1, arbitrary: fc.constantFrom('"=?utf-8?B?w6k=?=" <app@{d}>', '=?x-unknown?Q?a?= <app@{d}>', '<app@{d}> (comment (nested))', '"a\\"b" <app@{d}>', 'app@{d}, ', '<@route.test:app@{d}>', 'app@{D}', '"" <app@{d}>', 'app@[127.0.0.1]', 'üser@{d}') },
    { weight: 1, arbitrary: fc.tuple(fc.string({ unit: 'grapheme', maxLength: 90 }), fc.constantFrom(' <app@{d}>', '')).map(([t, a]) => `${t}${a}`) },
    { weight: 1, arbitrary: text(60) },
  ),
  subject: fc.oneof(
    { weight: 3, arbitrary: fc.constant(undefined) },
    { weight: 2, arbitrary: fc.string({ unit: 'grapheme', maxLength: 120 }) },
    { weight: 1, arbitrary: fc.tuple(fc.constantFrom('utf-8', 'UTF-16LE', 'iso-8859-1', 'x-unknown', 'utf-7', 'gb2312'), fc.constantFrom('B', 'Q', 'X'), asciiText(30)).map(([c, e, t]) => `=?${c}?${e}?${e === 'B' ? Buffer.from(t, 'latin1').toString('base64') : t}?=`) },
    { weight: 1, arbitrary: text(80) },
  ),
  fields: fc.array(fc.tuple(fc.oneof(fc.constantFrom('X-Fuzz', 'Bcc', 'Received', 'DKIM-Signature', 'Date', 'Message-ID', 'To', 'Cc', 'Sender', 'Content-Type', 'ARC-Seal', 'X-Service-Id'), fc.stringMatching(/^[!-9;-~]{1,20}$/)), text(60)), { maxLength: 3 }),
  mime: fc.constantFrom('plain' as const, 'multipart' as const, 'utf8' as const),
  lines: fc.array(bodyLineArb, { maxLength: 8 }),
  eol: fc.oneof({ weight: 6, arbitrary: fc.constant('crlf' as const) }, { weight: 1, arbitrary: fc.constantFrom('lf' as const, 'cr' as const, 'mixed' as const) }),
  mutation: fc.oneof(
    { weight: 12, arbitrary: fc.constant('none' as const) },
    { weight: 4, arbitrary: fc.constantFrom('nul' as const, 'latin1' as const, 'longLine' as const, 'dotLines' as const, 'startsWithDot' as const, 'noFinalEol' as const, 'earlyTerminator' as const, 'oversize' as const, 'empty' as const) },
  ),
}, { requiredKeys: ['head', 'mime', 'lines', 'eol', 'mutation'] });

const simpleLineArb: fc.Arbitrary<Cmd> = fc.record({
  c: fc.constant('line' as const),
  text: fc.oneof(
    { weight: 8, arbitrary: fc.constantFrom('RSET', 'NOOP', 'NOOP hello', 'HELP', 'VRFY', 'VRFY postmaster', 'QUIT', 'DATA', 'rset', 'noop') },
    { weight: 3, arbitrary: fc.constantFrom('EXPN staff', 'ETRN x', 'TURN', 'BDAT 10 LAST', 'WIZ secret', 'SHELL', 'KILL', 'XCLIENT ADDR=10.0.0.1', 'XFORWARD ADDR=10.0.0.1', 'LHLO x', 'AUTH', 'AUTH PLAIN a b', 'MAIL', 'RCPT', 'MAIL FROM:<>', 'STARTTLS now', '', ' ', '\t') },
    { weight: 1, arbitrary: fc.constantFrom('GET / HTTP/1.1', 'POST /v1/send HTTP/1.0') },
    { weight: 2, arbitrary: fc.tuple(fc.stringMatching(/^[A-Za-z]{1,8}$/), printable(20)).map(([v, a]) => `${v} ${a}`) },
  ),
  eol: fc.oneof({ weight: 8, arbitrary: fc.constant('\r\n' as const) }, { weight: 1, arbitrary: fc.constant('\n' as const) }),
});

const cmdArb: fc.Arbitrary<Cmd> = fc.oneof(
  { weight: 3, arbitrary: fc.record({ c: fc.constantFrom('EHLO' as const, 'HELO' as const, 'LHLO' as const), host: hostArb }) },
  { weight: 1, arbitrary: fc.record({ c: fc.constant('STARTTLS' as const), handshake: fc.oneof({ weight: 6, arbitrary: fc.constant('tls' as const) }, { weight: 1, arbitrary: fc.constant('garbage' as const) }) }) },
  { weight: 3, arbitrary: fc.record({ c: fc.constant('AUTH' as const), auth: authArb }) },
  { weight: 4, arbitrary: mailArb },
  { weight: 5, arbitrary: rcptArb },
  { weight: 2, arbitrary: fc.record({ c: fc.constant('DATA' as const) }) },
  { weight: 1, arbitrary: fc.record({ c: fc.constant('BODY' as const), body: bodyArb }) },
  { weight: 5, arbitrary: simpleLineArb },
  { weight: 1, arbitrary: fc.record({ c: fc.constant('bytes' as const), bytes: fc.array(fc.nat(255), { maxLength: 120 }) }) },
  { weight: 1, arbitrary: fc.record({ c: fc.constant('long' as const), length: fc.constantFrom(MAX_LINE - 1, MAX_LINE, MAX_LINE + 1, 3000, 20_000), eol: fc.constantFrom('\r\n' as const, '' as const) }) },
);

/** MAIL, some RCPTs, DATA, a message: what gets a session to a 250 (or the refusal of one). */
const transactionArb: fc.Arbitrary<Action> = fc.record({
  mail: mailArb,
  rcpts: fc.array(rcptArb, { minLength: 1, maxLength: 6 }),
  extra: fc.oneof({ weight: 4, arbitrary: fc.constant(null) }, { weight: 1, arbitrary: cmdArb }),
  body: bodyArb,
  pipelined: fc.boolean(),
  careful: fc.oneof({ weight: 3, arbitrary: fc.constant(true) }, { weight: 1, arbitrary: fc.constant(false) }),
}).map(({ mail, rcpts, extra, body, pipelined, careful }) => ({
  parts: [mail, ...rcpts, ...(extra ? [extra] : []), { c: 'DATA' as const }, { c: 'BODY' as const, body }],
  pipelined,
  careful,
}));

const actionArb: fc.Arbitrary<Action> = fc.oneof(
  { weight: 5, arbitrary: transactionArb },
  { weight: 2, arbitrary: fc.array(authArb, { minLength: 1, maxLength: 3 }).map((as) => ({ parts: as.map((auth): Cmd => ({ c: 'AUTH', auth })), pipelined: false })) },
  { weight: 4, arbitrary: cmdArb.map((c) => ({ parts: [c], pipelined: false })) },
  { weight: 2, arbitrary: fc.array(cmdArb, { minLength: 2, maxLength: 8 }).map((parts) => ({ parts, pipelined: true })) },
);

const sessionArb: fc.Arbitrary<SessionSpec> = fc.record({
  port: fc.constantFrom('starttls' as const, 'implicit' as const),
  sameAddress: fc.boolean(),
  early: fc.oneof({ weight: 10, arbitrary: fc.constant(null) }, { weight: 1, arbitrary: fc.constantFrom('EHLO early.test\r\n', 'QUIT\r\n', 'EHL', '\r\n', '\u0016\u0003\u0001') }),
  prelude: fc.oneof(
    { weight: 8, arbitrary: fc.record({
      mech: fc.constantFrom('PLAIN' as const, 'LOGIN' as const, 'XOAUTH2' as const),
      cred: fc.constantFrom<Cred>('A', 'O', 'authzidSelf'),
      style: fc.constantFrom('initial' as const, 'twoStep' as const),
      trailingEmptyLine: fc.constant(false),
    }).map((a): AuthSpec => (a.mech === 'XOAUTH2' ? { ...a, cred: 'O' } : a)) },
    { weight: 6, arbitrary: fc.constant('tls' as const) },
    { weight: 1, arbitrary: fc.constantFrom('none' as const, 'ehlo' as const) },
  ),
  logins: fc.array(authArb, { maxLength: 3 }),
  actions: fc.array(actionArb, { maxLength: 6 }),
  ending: fc.oneof(
    { weight: 4, arbitrary: fc.constantFrom('quit' as const, 'destroy' as const) },
    { weight: 2, arbitrary: fc.constantFrom('reset' as const, 'halfClose' as const, 'cutAfterDot' as const, 'abortMidData' as const) },
  ),
});

const runArb = fc.array(sessionArb, { minLength: 1, maxLength: 3 });
const VERBOSE = process.env.FUZZ_VERBOSE === '1';

// ---------------------------------------------------------------- rendering specs into bytes

/** A part's bytes; the AUTH exchanges in it (offsets from its start); for STARTTLS, what follows its 220. */
interface Rendered { bytes: Buffer; logins: Login[]; handshake?: 'tls' | 'garbage' }
/** An AUTH exchange's bytes (offsets) and whom it may log in as (identityOf). */
interface Login { start: number; end: number; as: 'A' | 'O' | null; spec: string }

interface Credentials { A: { user: string; pass: string }; O: { user: string; token: string }; domain: string }

/** Turns specs into bytes, per session: fresh names (recipients, Message-IDs), the recipients used so far (for repeats). */
class Renderer {
  private n = 0;
  readonly recipients: string[] = [];

  constructor(private readonly creds: Credentials, readonly label: string) {}

  fresh(prefix: string): string {
    this.n += 1;
    return `${prefix}${this.label}.${this.n}`;
  }

  private address(a: Addr): string {
    const d = this.creds.domain;
    if (typeof a === 'object') return a.text;
    switch (a) {
      case 'sender': return `app@${d}`;
      case 'senderUpper': return `APP@${d.toUpperCase()}`;
      case 'otherDomain': return 'app@other.test';
      case 'null': return '';
      case 'unicodeLocal': return `appé@${d}`;
      case 'idnDomain': return 'app@bücher.test';
      case 'long': return `${'l'.repeat(300)}@${d}`;
      case 'noAt': return 'app';
      case 'twoAt': return `a@b@${d}`;
    }
  }

  private recipient(r: Rcpt): string {
    if (typeof r === 'object') {
      if ('text' in r) return r.text;
      if (this.recipients.length === 0) return this.recipient('fresh');
      const a = this.recipients[r.repeat % this.recipients.length];
      return r.upper ? a.toUpperCase() : a;
    }
    switch (r) {
      case 'fresh': {
        const a = `${this.fresh('f')}@rcpt.test`;
        this.recipients.push(a);
        return a;
      }
      case 'idn': return `${this.fresh('i')}@bücher.test`;
      case 'sourceRoute': return `@relay.test:${this.fresh('s')}@rcpt.test`;
      case 'unicodeLocal': return 'üser@rcpt.test';
      case 'postmaster': return 'postmaster';
      case 'empty': return '';
      case 'twoAt': return 'a@b@rcpt.test';
      case 'long': return `${'r'.repeat(300)}@rcpt.test`;
    }
  }

  private static path(verb: string, address: string, params: string[], form: Form): string {
    const p = params.length ? ` ${params.join(' ')}` : '';
    switch (form) {
      case 'brackets': return `${verb}:<${address}>${p}`;
      case 'noBrackets': return `${verb}:${address}${p}`;
      case 'spaceAfterColon': return `${verb}: <${address}>${p}`;
      case 'noColon': return `${verb} <${address}>${p}`;
      case 'lowercase': return `${verb.toLowerCase()}:<${address}>${p}`;
    }
  }

  /** The lines of an AUTH exchange. */
  private auth(a: AuthSpec): string[] {
    const { A, O } = this.creds;
    const b64 = (s: string | Buffer) => Buffer.from(s).toString('base64');
    let user = A.user;
    let pass = A.pass;
    let authzid = '';
    switch (a.cred) {
      case 'A': break;
      case 'O': user = O.user; pass = O.token; break;
      case 'authzidSelf': authzid = A.user; break;
      case 'wrongPassword': pass = `${A.pass.slice(0, -2)}xx`; break;
      case 'unknownUser': user = this.fresh('nobody'); break;
      case 'oauthPassword': user = O.user; break;
      case 'authzidOther': authzid = O.user; break;
      case 'controlChar': user = `${A.user}\u0007`; break;
      case 'empty': user = ''; pass = ''; break;
      case 'hugePassword': pass = 'p'.repeat(1400); break;
      case 'hugeLine': pass = 'p'.repeat(3000); break;
      case 'malformed': break;
    }
    if (a.username !== undefined) user = a.username;
    const malformed = a.cred === 'malformed';
    const plain = malformed ? '!!!not base64===' : b64(`${authzid}\0${user}\0${pass}`);
    const xoauth = malformed ? 'dXNlcj0=' : b64(`user=${user}\u0001auth=Bearer ${pass}\u0001\u0001`);
    let steps: string[];
    switch (a.mech) {
      case 'PLAIN': steps = a.style === 'initial' ? [`AUTH PLAIN ${plain}`] : ['AUTH PLAIN', plain]; break;
      case 'LOGIN': steps = a.style === 'initial' ? [`AUTH LOGIN ${malformed ? plain : b64(user)}`, b64(pass)] : ['AUTH LOGIN', malformed ? plain : b64(user), b64(pass)]; break;
      case 'XOAUTH2': steps = a.style === 'initial' ? [`AUTH XOAUTH2 ${xoauth}`] : ['AUTH XOAUTH2', xoauth]; break;
      case 'CRAM-MD5': steps = ['AUTH CRAM-MD5', b64(`${user} 0123456789abcdef`)]; break;
      case 'BOGUS': steps = [`AUTH BOGUS ${plain}`]; break;
    }
    if (a.style === 'cancelFirst' && steps.length > 1) steps = [steps[0], '*'];
    if (a.style === 'cancelLast' && steps.length > 1) steps[steps.length - 1] = '*';
    // A client answers XOAUTH2's error challenge with an empty line.
    if (a.trailingEmptyLine) steps.push('');
    return steps;
  }

  /** A message and its end: dot-stuffed, then CRLF.CRLF (as the mutation asks: maybe not stuffed, maybe not ended). */
  body(b: BodySpec, keep?: number): Buffer {
    const d = this.creds.domain;
    const messageId = `${this.fresh('fz')}@fuzz.test`;
    if (b.mutation === 'empty') return Buffer.from('.\r\n');
    const from = b.from !== undefined ? b.from.replaceAll('{d}', d).replaceAll('{D}', d.toUpperCase()) : `App <app@${d}>`;
    const headers: string[] = [];
    if (b.head !== 'none') headers.push(`Message-ID: <${messageId}>`);
    switch (b.head) {
      case 'valid': headers.push(`From: ${from}`); break;
      case 'none': case 'noFrom': break;
      case 'foreignFrom': headers.push('From: someone@other.test'); break;
      case 'twoFrom': headers.push(`From: ${from}`, `From: other@${d}`); break;
      case 'groupFrom': headers.push(`From: team: a@${d}, b@${d};`); break;
      case 'badHeader': headers.push('NoColonHere', `From: ${from}`); break;
    }
    if (b.head !== 'none') {
      headers.push('To: someone@rcpt.test', `Subject: ${b.subject !== undefined ? `${b.subject} ` : ''}fuzz ${b.mime === 'utf8' ? 'ünïcödé ' : ''}${messageId}`, 'MIME-Version: 1.0');
      for (const [name, value] of b.fields ?? []) headers.push(`${name}: ${value}`);
    }
    let lines = [...b.lines];
    if (b.mime === 'multipart') {
      headers.push('Content-Type: multipart/alternative; boundary="b1"');
      lines = ['--b1', 'Content-Type: text/plain; charset=utf-8', '', ...lines, '--b1', 'Content-Type: text/html; charset=utf-8', '', '<p>hi</p>', '--b1--'];
    } else if (b.head !== 'none') {
      headers.push('Content-Type: text/plain; charset=utf-8');
    }
    if (b.mutation === 'longLine') lines.push('w'.repeat(999 + (lines.length * 97) % 3000));
    if (b.mutation === 'dotLines') lines.push('.', '..', '.x', '...');
    if (b.mutation === 'nul') lines.push('a\u0000b');
    if (b.mutation === 'oversize') for (let i = 0; i * 78 < MAX_BYTES + 2000; i++) lines.push('o'.repeat(76));
    const all = b.head === 'none' ? lines : [...headers, '', ...lines];
    if (b.mutation === 'startsWithDot') all.unshift('.starts-with-a-dot');
    const eol = (i: number) => ({ crlf: '\r\n', lf: '\n', cr: '\r', mixed: ['\r\n', '\n', '\r'][i % 3] }[b.eol]);
    let message = all.map((l, i) => `${l}${i === all.length - 1 && b.mutation === 'noFinalEol' ? '' : eol(i)}`).join('');
    // Dot-stuffing at the start and after every LF: the listener unstuffs after CRLF only, but a
    // line that reads "." after a bare LF must not become CRLF.CRLF with what follows either.
    message = message.replace(/(^|\n)\./g, '$1..');
    let bytes = Buffer.from(message, 'utf8');
    if (b.mutation === 'latin1') bytes = Buffer.concat([bytes, Buffer.from('caf\xe9\r\n', 'latin1')]);
    if (b.mutation === 'earlyTerminator') {
      const cut = Math.floor(bytes.length / 2);
      bytes = Buffer.concat([bytes.subarray(0, cut), Buffer.from('\r\n.\r\n'), bytes.subarray(cut)]);
    }
    if (keep !== undefined) return bytes.subarray(0, Math.min(bytes.length, keep));
    const end = bytes.subarray(-2).toString('latin1') === '\r\n' ? '.\r\n' : '\r\n.\r\n';
    return Buffer.concat([bytes, Buffer.from(end)]);
  }

  /** The bytes of one part. */
  render(c: Cmd): Rendered {
    const lines = (ls: string[], eol = '\r\n') => Buffer.from(ls.map((l) => `${l}${eol}`).join(''), 'utf8');
    switch (c.c) {
      case 'EHLO': case 'HELO': case 'LHLO': return { bytes: lines([`${c.c} ${c.host}`]), logins: [] };
      case 'STARTTLS': return { bytes: lines(['STARTTLS']), logins: [], handshake: c.handshake };
      case 'AUTH': {
        const bytes = lines(this.auth(c.auth));
        return { bytes, logins: [{ start: 0, end: bytes.length, as: identityOf(c.auth), spec: `${c.auth.mech} ${c.auth.cred} ${c.auth.style}` }] };
      }
      case 'MAIL': return { bytes: lines([Renderer.path('MAIL FROM', this.address(c.addr), c.params, c.form)]), logins: [] };
      case 'RCPT': return { bytes: lines([Renderer.path('RCPT TO', this.recipient(c.addr), c.params, c.form)]), logins: [] };
      case 'DATA': return { bytes: lines(['DATA']), logins: [] };
      case 'BODY': return { bytes: this.body(c.body), logins: [] };
      case 'PARTIAL': return { bytes: this.body(c.body, c.keep), logins: [] };
      case 'line': return { bytes: lines([c.text], c.eol), logins: [] };
      case 'bytes': return { bytes: Buffer.from(c.bytes), logins: [] };
      case 'long': return { bytes: Buffer.from(`NOOP ${'x'.repeat(c.length - 5)}${c.eol}`), logins: [] };
    }
  }
}

// ---------------------------------------------------------------- the client: strict reply reader

interface Reply { code: number; lines: string[] }

/** Whether a client TLS handshake completes; its errors are swallowed (a failed handshake is an answer here). */
function handshake(tls: TLSSocket): Promise<boolean> {
  tls.on('error', () => {});
  return new Promise<boolean>((resolve) => {
    tls.once('secureConnect', () => resolve(true));
    tls.once('error', () => resolve(false));
    tls.once('close', () => resolve(false));
  });
}

class Wire {
  socket: Socket | TLSSocket;
  private buf = '';
  private partial: string[] = [];
  readonly replies: Reply[] = [];
  closed = false;
  /** The client hung up itself (what it had not read yet is not the listener's fault). */
  private leaving = false;
  private waiters: (() => void)[] = [];

  private constructor(socket: Socket | TLSSocket, private readonly violation: (v: string) => void) {
    this.socket = socket;
    this.attach(socket);
  }

  static async open(port: number, secure: boolean, ca: Buffer, localAddress: string, violation: (v: string) => void): Promise<Wire | null> {
    const raw = netConnect({ host: '127.0.0.1', port, localAddress });
    raw.on('error', () => {});
    await new Promise<void>((resolve, reject) => { raw.once('connect', resolve); raw.once('error', reject); });
    if (!secure) return new Wire(raw, violation);
    const tls = tlsConnect({ socket: raw, ca: [ca], servername: 'localhost' });
    if (await handshake(tls)) return new Wire(tls, violation);
    violation('the implicit TLS handshake failed');
    tls.destroy();
    return null;
  }

  private attach(socket: Socket | TLSSocket): void {
    socket.setEncoding('latin1');
    socket.on('data', (d: string) => {
      this.buf += d;
      this.parse();
      this.wake();
    });
    socket.on('close', () => {
      this.closed = true;
      if (!this.leaving && (this.buf.length > 0 || this.partial.length > 0)) this.violation(`connection closed inside a reply: ${JSON.stringify(this.buf.slice(0, 200))}`);
      this.wake();
    });
    socket.on('error', () => {});
  }

  private parse(): void {
    for (;;) {
      const i = this.buf.indexOf('\n');
      if (i === -1) {
        if (this.buf.length > 4096) this.violation(`reply line longer than 4096 octets: ${JSON.stringify(this.buf.slice(0, 100))}…`);
        return;
      }
      const raw = this.buf.slice(0, i + 1);
      this.buf = this.buf.slice(i + 1);
      if (!raw.endsWith('\r\n')) this.violation(`reply line not ended by CRLF: ${JSON.stringify(raw)}`);
      const line = raw.replace(/\r?\n$/, '');
      const m = /^([2-5]\d\d)([ -])(.*)$/s.exec(line);
      if (!m) {
        this.violation(`malformed reply line: ${JSON.stringify(line)}`);
        continue;
      }
      if (this.partial.length > 0 && this.partial[0].slice(0, 3) !== m[1]) this.violation(`multi-line reply changes its code: ${JSON.stringify([...this.partial, line])}`);
      this.partial.push(line);
      if (m[2] === ' ') {
        this.replies.push({ code: Number(m[1]), lines: this.partial });
        this.partial = [];
      }
    }
  }

  private wake(): void {
    const w = this.waiters;
    this.waiters = [];
    for (const f of w) f();
  }

  /** The next reply; null once the connection closed without one; 'timeout' after `ms`. */
  async next(ms = REPLY_MS): Promise<Reply | null | 'timeout'> {
    const deadline = Date.now() + ms;
    for (;;) {
      const r = this.replies.shift();
      if (r) return r;
      if (this.closed) return null;
      const left = deadline - Date.now();
      if (left <= 0) return 'timeout';
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, left);
        this.waiters.push(() => { clearTimeout(t); resolve(); });
      });
    }
  }

  async closedWithin(ms: number): Promise<boolean> {
    const deadline = Date.now() + ms;
    while (!this.closed && Date.now() < deadline) {
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, Math.max(1, deadline - Date.now()));
        this.waiters.push(() => { clearTimeout(t); resolve(); });
      });
    }
    return this.closed;
  }

  /** Bytes after the last complete reply (the listener must send nothing in cleartext after its 220 to STARTTLS). */
  leftover(): string {
    return this.buf + this.partial.join('');
  }

  write(b: Buffer): void {
    if (!this.closed && !this.socket.destroyed) this.socket.write(b);
  }

  async startTls(ca: Buffer, garbage: boolean): Promise<boolean> {
    const raw = this.socket as Socket;
    raw.removeAllListeners('data');
    raw.removeAllListeners('close');
    raw.on('close', () => { this.closed = true; this.wake(); });
    if (garbage) {
      this.leaving = true;
      raw.write('this is not a TLS ClientHello\r\nQUIT\r\n');
      return false;
    }
    const tls = tlsConnect({ socket: raw, ca: [ca], servername: 'localhost' });
    if (!(await handshake(tls))) {
      this.closed = true;
      tls.destroy();
      return false;
    }
    this.socket = tls;
    this.attach(tls);
    return true;
  }

  end(): void { this.socket.end(); }
  destroy(): void {
    this.leaving = true;
    this.socket.destroy();
  }
  reset(): void {
    this.leaving = true;
    const s = this.socket as Socket;
    if (typeof s.resetAndDestroy === 'function' && !(s as TLSSocket).encrypted) s.resetAndDestroy();
    else s.destroy();
  }
}

// ---------------------------------------------------------------- the model of the listener's parser

interface Transaction { rcpts: Map<string, string> }
/** A 250 after DATA, as the client saw it. */
interface Ack { queuedId: string; motorBlock: 'A' | 'O'; rcpts: string[]; messageIds: string[]; where: string }
type Mode = 'greeting' | 'command' | 'authCont' | 'data' | 'upgrade' | 'closed';

const FZ_ID = /fz[\w.]+?@fuzz\.test/g;
const idsIn = (b: Buffer): string[] => [...new Set(b.toString('latin1').match(FZ_ID) ?? [])];
/** An envelope address as Motor keeps it: the domain in A-labels; compared case-insensitively. */
const canonical = (a: string): string => {
  const at = a.lastIndexOf('@');
  return `${a.slice(0, at)}@${domainToASCII(a.slice(at + 1)) || a.slice(at + 1)}`.toLowerCase();
};

/**
 * Reads the bytes the client sent as the listener reads them, unit by unit (a command line, an AUTH
 * continuation line, a message up to its CRLF.CRLF), and takes one reply per unit. Knows whether
 * the session is authenticated and as whom, and the transaction's accepted recipients.
 */
class Session {
  mode: Mode = 'greeting';
  private pending = Buffer.alloc(0);
  /** Offset in everything written of `pending[0]`. */
  private consumed = 0;
  private written = 0;
  private logins: Login[] = [];
  private handshakes: { at: number; how: 'tls' | 'garbage' }[] = [];
  private user: 'A' | 'O' | null = null;
  private txn: Transaction | null = null;
  private ehlo = false;
  private eof = false;
  private upgradeAt = -1;
  hung = false;
  readonly acks: Ack[] = [];
  /** Messages whose end was sent and whose reply was not read (or not sent: the connection went first). */
  readonly maybe: string[] = [];
  readonly codes: number[] = [];
  /** What each reply answered (FUZZ_VERBOSE). */
  readonly answered: string[] = [];
  readonly closes: string[] = [];

  constructor(readonly wire: Wire, private readonly violation: (v: string) => void, readonly where: string, private secure: boolean) {}

  /** Closed (by either side) or stuck: nothing more to send. */
  over(): boolean { return this.mode === 'closed' || this.hung; }

  /** Writes the parts in one write (pipelined when there are several). */
  write(...parts: Rendered[]): void {
    for (const part of parts) {
      for (const l of part.logins) this.logins.push({ ...l, start: this.written + l.start, end: this.written + l.end });
      if (part.handshake) this.handshakes.push({ at: this.written, how: part.handshake });
      this.written += part.bytes.length;
    }
    const bytes = Buffer.concat(parts.map((p) => p.bytes));
    this.pending = Buffer.concat([this.pending, bytes]);
    this.wire.write(bytes);
  }

  halfClose(): void {
    this.eof = true;
    this.wire.end();
  }

  private take(n: number): Buffer {
    const unit = this.pending.subarray(0, n);
    this.pending = this.pending.subarray(n);
    this.consumed += n;
    return unit;
  }

  /** The next unit the listener answers, if the bytes hold a whole one: its length and kind. */
  private nextUnit(): { length: number; kind: 'line' | 'overlong' | 'message' } | null {
    const p = this.pending;
    if (this.mode === 'data') {
      if (p.length >= 3 && p.subarray(0, 3).toString('latin1') === '.\r\n') return { length: 3, kind: 'message' };
      const end = p.indexOf('\r\n.\r\n');
      return end === -1 ? null : { length: end + 5, kind: 'message' };
    }
    const lf = p.indexOf('\n');
    if (lf === -1) {
      if (p.length > MAX_LINE) return { length: p.length, kind: 'overlong' };
      // A half-closed client's last line, unended: the listener's parser runs it when its input ends.
      if (this.eof && p.length > 0) return { length: p.length, kind: 'line' };
      return null;
    }
    const lineLength = lf > 0 && p[lf - 1] === 0x0d ? lf - 1 : lf;
    return { length: lf + 1, kind: lineLength > MAX_LINE ? 'overlong' : 'line' };
  }

  /** Takes the replies to every whole unit sent so far (stops at STARTTLS's 220 and when the connection closes). */
  async drain(): Promise<void> {
    for (;;) {
      if (this.mode === 'closed' || this.mode === 'upgrade' || this.hung) return;
      const unit = this.mode === 'greeting' ? { length: 0, kind: 'greeting' as const } : this.nextUnit();
      if (!unit) return;
      const r = await this.wire.next();
      if (r === 'timeout') {
        this.hung = true;
        this.violation(`no reply within ${REPLY_MS} ms to ${this.describe(unit.length)} (mode ${this.mode}) and the connection is open`);
        return;
      }
      if (r === null) {
        this.mode = 'closed';
        return;
      }
      this.codes.push(r.code);
      const start = this.consumed;
      const bytes = this.take(unit.length);
      this.apply(unit.kind, bytes, start, r);
    }
  }

  private describe(n: number): string {
    const s = this.pending.subarray(0, Math.min(n || 80, 80)).toString('latin1');
    return JSON.stringify(s);
  }

  private apply(kind: 'greeting' | 'line' | 'overlong' | 'message', unit: Buffer, start: number, r: Reply): void {
    const text = unit.toString('latin1').replace(/\r?\n$/, '');
    const what = kind === 'message' ? `the end of a message (${unit.length} bytes)` : JSON.stringify(text.slice(0, 120));
    const first = r.lines[0];
    this.answered.push(`${kind === 'message' ? '<message>' : text.split(' ')[0].slice(0, 12)} → ${first.replace(/[0-9a-f-]{36}|\d+\.\d+\.\d+\.\d+/g, '…').slice(0, 70)}`);
    if (r.code === 451 && /^451[ -]4\.3\.0/.test(first)) this.violation(`internal error ${first} to ${what}`);
    if (r.code === 421) {
      this.closes.push(first);
      this.mode = 'closed';
      if (kind === 'message') this.txn = null;
      return;
    }
    if (kind === 'greeting') {
      if (r.code !== 220) this.violation(`greeting ${first}`);
      this.mode = 'command';
      return;
    }
    if (kind === 'overlong') {
      this.violation(`an over-long command line (${unit.length} bytes) answered ${first}, not 421`);
      this.mode = 'closed';
      return;
    }
    const verb = kind === 'line' ? unit.toString('utf8').replace(/\r?\n$/, '').split(' ')[0].toUpperCase() : '';
    this.checkEnhanced(kind === 'line' && this.mode === 'command' ? verb : '', r, what);

    if (kind === 'message') {
      this.mode = 'command';
      const txn = this.txn;
      this.txn = null;
      if (r.code === 250) {
        const queued = /queued as ([0-9a-f-]{36})/.exec(first);
        if (!txn || !this.user) this.violation(`250 to the end of a message outside a transaction: ${first}`);
        else if (!queued) this.violation(`250 to the end of a message without a queue id: ${first}`);
        else this.acks.push({ queuedId: queued[1], motorBlock: this.user, rcpts: [...txn.rcpts.values()], messageIds: idsIn(unit), where: this.where });
      } else if (r.code < 400) {
        this.violation(`${first} to the end of a message`);
      }
      return;
    }

    if (this.mode === 'authCont') {
      if (r.code === 334) return;
      this.mode = 'command';
      if (r.code === 235) this.authenticated235(start, what);
      return;
    }

    switch (verb) {
      case 'EHLO': case 'HELO':
        if (r.code === 250) {
          this.txn = null;
          this.ehlo = verb === 'EHLO';
          const offered = r.lines.join('\n');
          if (verb === 'EHLO' && !this.secure && /AUTH/.test(offered)) this.violation(`AUTH offered before TLS: ${offered}`);
          if (verb === 'EHLO' && !offered.includes(`SIZE ${MAX_BYTES}`)) this.violation(`EHLO does not advertise SIZE ${MAX_BYTES}`);
        }
        return;
      case 'STARTTLS':
        if (r.code === 220) {
          this.upgradeAt = start;
          if (this.secure) this.violation('220 to STARTTLS inside TLS');
          if (this.wire.leftover() !== '' || this.wire.replies.length > 0) this.violation(`the listener sent more in cleartext after its 220 to STARTTLS: ${JSON.stringify(this.wire.leftover())}`);
          this.mode = 'upgrade';
          // What the client pipelined behind STARTTLS is discarded by the listener (docs/SMTP.md).
          this.take(this.pending.length);
        } else if (r.code < 400) {
          this.violation(`${first} to STARTTLS`);
        }
        return;
      case 'AUTH':
        if (r.code === 334) this.mode = 'authCont';
        else if (r.code === 235) this.authenticated235(start, what);
        else if (r.code < 400) this.violation(`${first} to AUTH`);
        return;
      case 'MAIL':
        if (r.code === 250) {
          if (!this.user) this.violation(`MAIL accepted without AUTH: ${what}`);
          if (this.txn) this.violation(`MAIL accepted inside a transaction: ${what}`);
          this.txn = { rcpts: new Map() };
        } else if (r.code < 400) this.violation(`${first} to MAIL`);
        return;
      case 'RCPT':
        if (r.code === 250) {
          if (!this.txn) {
            this.violation(`RCPT accepted outside a transaction: ${what}`);
            return;
          }
          const address = text.slice(text.indexOf(':') + 1).trim().split(/\s+/)[0].slice(1, -1).replace(/^@[^\s,:@]+(?:,@[^\s,:@]+)*:/, '');
          const utf8 = Buffer.from(address, 'latin1').toString('utf8');
          this.txn.rcpts.set(canonical(utf8), utf8);
          if (this.txn.rcpts.size > MAX_RCPTS) this.violation(`RCPT accepted past SMTP_MAX_RECIPIENTS (${MAX_RCPTS}): ${what}`);
          if (this.user === 'O' && this.txn.rcpts.size > O_BURST) this.violation(`RCPT accepted past the block's burst ceiling (${O_BURST}): ${what}`);
        } else if (r.code < 400) this.violation(`${first} to RCPT`);
        return;
      case 'DATA':
        if (r.code === 354) {
          if (!this.txn || this.txn.rcpts.size === 0) this.violation('354 to DATA without a transaction with recipients');
          this.mode = 'data';
        } else if (r.code < 400) this.violation(`${first} to DATA`);
        return;
      case 'RSET':
        if (r.code === 250) this.txn = null;
        return;
      case 'QUIT':
        if (r.code === 221) {
          this.closes.push(first);
          this.mode = 'closed';
        }
        return;
      case 'NOOP': case 'HELP': case 'VRFY':
        return;
      default:
        if (r.code < 400) this.violation(`${first} to ${what}, a command the listener does not have`);
    }
  }

  private authenticated235(start: number, what: string): void {
    const login = this.logins.find((l) => start >= l.start && start < l.end);
    if (!login?.as) {
      this.violation(`235 to ${what}: ${login ? `AUTH ${login.spec}, which must be refused` : 'no AUTH exchange'}`);
      return;
    }
    this.user = login.as;
  }

  /** RFC 2034: once EHLO offered ENHANCEDSTATUSCODES, every 2xx, 4xx and 5xx reply but EHLO's and HELO's carries one, of its class. */
  private checkEnhanced(verb: string, r: Reply, what: string): void {
    if (!this.ehlo || r.code < 200 || (r.code >= 300 && r.code < 400) || verb === 'EHLO' || verb === 'HELO') return;
    for (const line of r.lines) {
      const m = /^\d{3}[ -](\d)\.\d{1,3}\.\d{1,3}(?: |$)/.exec(line);
      if (!m || m[1] !== String(r.code)[0]) {
        this.violation(`reply without an enhanced status code of its class to ${what}: ${JSON.stringify(line)}`);
        return;
      }
    }
  }

  /** After the TLS handshake (STARTTLS): a new session in all but the connection (RFC 3207 §4.2). */
  upgraded(): void {
    this.mode = 'command';
    this.user = null;
    this.txn = null;
    this.ehlo = false;
    this.secure = true;
  }

  /** What the client does after the 220 to STARTTLS: the handshake, or garbage. */
  handshakeFor(): 'tls' | 'garbage' {
    return this.handshakes.find((x) => x.at === this.upgradeAt)?.how ?? 'tls';
  }

  /**
   * The session is over: messages whose CRLF.CRLF was sent but never answered may have been
   * accepted (the reply lost with the connection); a message whose end was not sent may not.
   */
  finish(): void {
    const rest = this.pending;
    const last = rest.lastIndexOf('\r\n.\r\n');
    if (last !== -1) this.maybe.push(...idsIn(rest.subarray(0, last)));
    // A reply no command asked for: only a 421 (the error limit's, after the last command's reply).
    for (const r of this.wire.replies.splice(0)) {
      if (r.code !== 421) this.violation(`reply to no command: ${r.lines.join(' | ')}`);
      else this.closes.push(r.lines[0]);
    }
  }
}

// ---------------------------------------------------------------- the test

describe('SMTP listener under random clients: fast-check over real sockets (int)', function () {
  this.timeout(SHRINK_LIMIT_MS + RUNS * 5000 + 120_000);
  let h: SmtpHarness;
  const logLines: string[] = [];
  const processErrors: string[] = [];
  let creds: Credentials;
  let blockIds: { A: string; O: string };
  const onUncaught = (err: Error) => { processErrors.push(`uncaught exception: ${err.stack ?? err}`); };
  const onRejection = (err: unknown) => { processErrors.push(`unhandled rejection: ${(err as Error)?.stack ?? String(err)}`); };

  before(async () => {
    process.on('uncaughtExceptionMonitor', onUncaught);
    process.on('unhandledRejection', onRejection);
    h = await startSmtpHarness({
      // A small SIZE and recipient limit, so random clients cross both; the error sleep shortened
      // (its timer still runs) so that sessions past the soft error limit do not take seconds.
      env: { SMTP_MAX_MESSAGE_BYTES: String(MAX_BYTES), SMTP_MAX_RECIPIENTS: String(MAX_RCPTS), SMTP_ERROR_SLEEP_MS: '20', ANONYMOUS_REQUEST_LIMIT: '100000' },
      logLines,
      // The production slowdown (up to 5 s per AUTH from a username's 3rd failure on) would make
      // every later login of the fuzzed credentials slow; its rules are kept, its waits shortened.
      authLimits: { baseDelayMs: 5, maxDelayMs: 40, slotWaitMs: 1000 },
    });
    const block = await h.newBlock();
    const oauth = await oauthBlock(h.motor, block, 'OAuth fuzz block');
    const client = await newClient(h.motor, block.accountId);
    const user = await dashboardUser(h.motor, block.accountId);
    const { code } = await authorize(h.motor, { client, dashboardToken: user.token, motorBlockId: oauth.motorBlockId });
    const token = await exchange(h.motor, client, code);
    expect(token.status, JSON.stringify(token.body)).to.equal(200);
    const big = { burst: 1_000_000, hourly: 1_000_000, daily: 1_000_000 };
    await h.motor.setLimits(block.motorBlockId, big);
    await h.motor.setLimits(oauth.motorBlockId, { ...big, burst: O_BURST });
    creds = { A: { user: block.smtpUsername, pass: block.smtpPassword }, O: { user: oauth.smtpUsername, token: token.body.access_token }, domain: block.domain };
    blockIds = { A: block.motorBlockId, O: oauth.motorBlockId };
  });
  after(async () => {
    process.off('uncaughtExceptionMonitor', onUncaught);
    process.off('unhandledRejection', onRejection);
    await h?.close();
  });

  // Fresh client addresses (127/8 is all loopback): each session is a stranger unless it reuses the one before.
  let nextAddress = 0;
  const freshAddress = () => {
    const n = nextAddress++;
    return `127.${Math.floor(n / 254 / 256) % 256}.${Math.floor(n / 254) % 256}.${(n % 254) + 1}`;
  };

  const acks = new Map<string, Ack>();
  const maybe = new Set<string>();
  const seen = new Map<string, MessageAccepted>();
  const stats = { runs: 0, sessions: 0, acks: 0, maybe: 0, codes: new Map<number, number>(), answered: new Map<string, number>(), closes: new Map<string, number>() };

  async function runSession(spec: SessionSpec, label: string, address: string, violation: (v: string) => void): Promise<Session | null> {
    const secure = spec.port === 'implicit';
    const wire = await Wire.open(secure ? h.securePort : h.port, secure, h.ca, address, violation);
    if (!wire) return null;
    const s = new Session(wire, violation, label, secure);
    const r = new Renderer(creds, label);
    if (spec.early !== null) s.write({ bytes: Buffer.from(spec.early, 'latin1'), logins: [] });
    const step = async (part: Cmd) => {
      s.write(r.render(part));
      await s.drain();
      await upgradeIfAsked();
    };
    const upgradeIfAsked = async () => {
      if (s.mode !== 'upgrade') return;
      const how = s.handshakeFor();
      if (!(await wire.startTls(h.ca, how === 'garbage'))) {
        if (!(await wire.closedWithin(REPLY_MS))) violation('the listener kept a connection whose TLS handshake failed');
        s.mode = 'closed';
        return;
      }
      s.upgraded();
      await s.drain();
    };

    await s.drain();
    if (spec.prelude !== 'none' && s.mode === 'command') {
      await step({ c: 'EHLO', host: 'client.test' });
      if (spec.prelude !== 'ehlo' && !secure) {
        await step({ c: 'STARTTLS', handshake: 'tls' });
        await step({ c: 'EHLO', host: 'client.test' });
      }
      if (typeof spec.prelude === 'object' && !s.over()) await step({ c: 'AUTH', auth: spec.prelude });
      if (spec.prelude === 'tls') for (const auth of spec.logins) if (!s.over()) await step({ c: 'AUTH', auth });
    }
    for (const action of spec.actions) {
      if (s.over()) break;
      if (action.pipelined) {
        s.write(...action.parts.map((p) => r.render(p)));
        await s.drain();
        await upgradeIfAsked();
      } else {
        for (const part of action.parts) {
          if (s.over()) break;
          if (part.c === 'BODY' && action.careful && s.mode !== 'data') continue;
          await step(part);
          if (part.c === 'MAIL' && action.careful && s.codes.at(-1) !== 250) break;
        }
      }
    }

    if (!s.over()) {
      switch (spec.ending) {
        case 'quit':
          await step({ c: 'line', text: 'QUIT', eol: '\r\n' });
          break;
        case 'destroy':
          wire.destroy();
          break;
        case 'reset':
          wire.reset();
          break;
        case 'halfClose':
          s.halfClose();
          await s.drain();
          break;
        case 'cutAfterDot': {
          // A whole transaction and its message, and gone before any reply.
          const body: BodySpec = { head: 'valid', mime: 'plain', lines: ['cut after the dot'], eol: 'crlf', mutation: 'none' };
          s.write(...([{ c: 'MAIL', addr: 'sender', params: [], form: 'brackets' }, { c: 'RCPT', addr: 'fresh', params: [], form: 'brackets' }, { c: 'DATA' }, { c: 'BODY', body }] as Cmd[]).map((p) => r.render(p)));
          wire.destroy();
          break;
        }
        case 'abortMidData': {
          for (const part of [{ c: 'MAIL', addr: 'sender', params: [], form: 'brackets' }, { c: 'RCPT', addr: 'fresh', params: [], form: 'brackets' }, { c: 'DATA' }] as Cmd[]) await step(part);
          if (s.mode === 'data') {
            const body: BodySpec = { head: 'valid', mime: 'plain', lines: ['aborted in the middle'], eol: 'crlf', mutation: 'none' };
            s.write(r.render({ c: 'PARTIAL', body, keep: 120 }));
            await new Promise((resolve) => setTimeout(resolve, 20));
          }
          wire.reset();
          break;
        }
      }
    }
    // Whatever closed it (a 421, a 221, the client), the connection must be gone within a few seconds.
    if (!s.hung && s.mode === 'closed' && !wire.closed && !(await wire.closedWithin(REPLY_MS))) violation(`the listener did not close the connection after ${s.closes.at(-1) ?? 'its last reply'}`);
    if (spec.ending === 'halfClose' && !s.hung && !(await wire.closedWithin(REPLY_MS))) violation('the listener kept a half-closed connection open');
    wire.destroy();
    s.finish();
    return s;
  }

  /** A client as it should be: fresh address, TLS, AUTH, one message; every reply as expected. */
  async function wellBehaved(label: string, violation: (v: string) => void): Promise<void> {
    const wire = await Wire.open(h.securePort, true, h.ca, freshAddress(), (v) => violation(`well-behaved client: ${v}`));
    if (!wire) return;
    const s = new Session(wire, violation, label, true);
    const r = new Renderer(creds, label);
    const body: BodySpec = { head: 'valid', mime: 'plain', lines: ['well behaved'], eol: 'crlf', mutation: 'none' };
    const steps: [Cmd, number][] = [
      [{ c: 'EHLO', host: 'client.test' }, 250],
      [{ c: 'AUTH', auth: { mech: 'PLAIN', cred: 'A', style: 'initial', trailingEmptyLine: false } }, 235],
      [{ c: 'MAIL', addr: 'sender', params: [], form: 'brackets' }, 250],
      [{ c: 'RCPT', addr: 'fresh', params: [], form: 'brackets' }, 250],
      [{ c: 'DATA' }, 354],
      [{ c: 'BODY', body }, 250],
      [{ c: 'line', text: 'QUIT', eol: '\r\n' }, 221],
    ];
    await s.drain();
    for (const [part, code] of steps) {
      s.write(r.render(part));
      await s.drain();
      if (s.codes.at(-1) !== code) {
        violation(`well-behaved client: ${part.c} answered ${s.codes.at(-1) ?? 'nothing'}, wanted ${code}`);
        break;
      }
    }
    wire.destroy();
    s.finish();
    for (const a of s.acks) acks.set(a.queuedId, a);
  }

  /**
   * The MessageAccepted of the two blocks not looked at yet, each checked against the 250s. Read
   * from the store's table: the global log (readAll) hands an event over only once every older
   * transaction of the PostgreSQL cluster has ended (docs/ARCHITECTURE.md), and the tests of other
   * suites share the cluster; a committed row is what a 250 promises.
   */
  async function checkEvents(violation: (v: string) => void): Promise<void> {
    const rows = (await h.motor.rt.db.raw(
      `select data - 'raw' as m, array(select distinct x[1] from regexp_matches(coalesce(data->>'raw', ''), ?, 'g') as x) as ids
         from events where type = 'MessageAccepted' and data->>'motorBlockId' in (?, ?) and not (data->>'messageId' = any(string_to_array(?, ',')))
         order by global_position`,
      [FZ_ID.source, blockIds.A, blockIds.O, [...seen.keys()].join(',')],
    )).rows as { m: MessageAccepted; ids: string[] }[];
    for (const { m, ids } of rows) {
      if (seen.has(m.messageId)) violation(`two MessageAccepted for ${m.messageId}`);
      seen.set(m.messageId, m);
      const ack = acks.get(m.messageId);
      if (!ack) {
        if (!ids.some((id) => maybe.has(id))) violation(`MessageAccepted ${m.messageId} (Message-ID ${m.smtpMessageId}, ${ids.join(', ') || 'no id of the test'}) without a 250 after DATA`);
        continue;
      }
      if (m.motorBlockId !== blockIds[ack.motorBlock]) violation(`${m.messageId}: accepted for block ${m.motorBlockId}, the session authenticated as ${ack.motorBlock}`);
      const got = m.to.map(canonical).sort();
      const want = ack.rcpts.map(canonical).sort();
      if (JSON.stringify(got) !== JSON.stringify(want)) violation(`${m.messageId} (${ack.where}): recipients ${JSON.stringify(m.to)}, the transaction accepted ${JSON.stringify(ack.rcpts)}`);
      const foreign = ids.filter((id) => !ack.messageIds.includes(id));
      if (foreign.length > 0) violation(`${m.messageId} (${ack.where}): the message holds ${foreign.join(', ')}, not sent in that transaction`);
    }
    // One message, one event: no Message-ID of the test accepted twice (under two ids, or one).
    const twice = (await h.motor.rt.db.raw(
      `select data->>'smtpMessageId' as id, count(*)::int as n from events where type = 'MessageAccepted' and data->>'motorBlockId' in (?, ?) group by 1 having count(*) > 1`,
      [blockIds.A, blockIds.O],
    )).rows as { id: string; n: number }[];
    for (const t of twice) violation(`Message-ID ${t.id} accepted ${t.n} times`);
  }

  /** Every 250 has its MessageAccepted: the 250 comes after the commit. */
  function checkAcks(violation: (v: string) => void): void {
    for (const [id, a] of acks) if (!seen.has(id)) violation(`250 ${id} (${a.where}) without a MessageAccepted`);
  }

  /** Every client of the run has hung up: the listener holds no session's state, and no message byte of the data budget, any more. */
  async function checkNothingHeld(violation: (v: string) => void): Promise<void> {
    const deadline = Date.now() + REPLY_MS;
    const budget = h.motor.rt.smtpDataBudget;
    while (((h.smtp.smtp!.sessionsHeld() ?? 0) > 0 || budget.held !== 0) && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
    const held = h.smtp.smtp!.sessionsHeld() ?? 0;
    if (held > 0) violation(`the listener still holds the state of ${held} session(s) ${REPLY_MS} ms after every client left`);
    if (budget.held !== 0) violation(`the data budget still counts ${budget.held} bytes ${REPLY_MS} ms after every client left (SMTP_MAX_BUFFERED_BYTES, smtp/dataBudget.ts)`);
  }

  function checkProcess(violation: (v: string) => void, fromLine: number): void {
    for (const e of processErrors.splice(0)) violation(e);
    for (const line of logLines.slice(fromLine)) {
      const l = JSON.parse(line) as { level: number; msg: string };
      if (l.level >= 50) violation(`log line at level ${l.level}: ${line.slice(0, 600)}`);
    }
  }

  it('answers every client sanely, accepts exactly what it acknowledges, keeps sessions apart and keeps serving', async () => {
    console.log(`      fuzz: seed ${SEED}, ${RUNS} runs (FUZZ_SEED, FUZZ_RUNS)`);
    const started = Date.now();
    let run = 0;
    let firstFailure: number | null = null;
    await fc.assert(
      fc.asyncProperty(runArb, async (sessions) => {
        // Shrinking past its time: every further candidate passes unrun, so fast-check stops and
        // reports the smallest failing run found (a real one: it failed when it ran).
        if (firstFailure !== null && Date.now() - firstFailure > SHRINK_LIMIT_MS) return;
        run += 1;
        stats.runs += 1;
        const violations: string[] = [];
        const violation = (v: string) => { violations.push(v); };
        const fromLine = logLines.length;
        let address = freshAddress();
        const addresses = sessions.map((s) => (s.sameAddress ? address : (address = freshAddress())));
        const done = await Promise.all(sessions.map((spec, i) => runSession(spec, `${run}.${i}`, addresses[i], (v) => violation(`session ${run}.${i}: ${v}`))));
        for (const s of done) {
          if (!s) continue;
          stats.sessions += 1;
          for (const a of s.acks) acks.set(a.queuedId, a);
          for (const id of s.maybe) maybe.add(id);
          stats.maybe += s.maybe.length;
          for (const c of s.codes) stats.codes.set(c, (stats.codes.get(c) ?? 0) + 1);
          for (const a of s.answered) stats.answered.set(a, (stats.answered.get(a) ?? 0) + 1);
          for (const c of s.closes) {
            const key = c.replace(/\d+\.\d+\.\d+\.\d+|\d+s\b/g, '…').slice(0, 80);
            stats.closes.set(key, (stats.closes.get(key) ?? 0) + 1);
          }
        }
        await wellBehaved(`${run}.probe`, (v) => violation(`run ${run}: ${v}`));
        // A message cut after its dot may still be committing: give it a moment before the log is read.
        if (done.some((s) => s && s.maybe.length > 0)) await new Promise((resolve) => setTimeout(resolve, 300));
        await checkEvents(violation);
        checkAcks(violation);
        checkProcess(violation, fromLine);
        await checkNothingHeld(violation);
        if (violations.length > 0) {
          firstFailure ??= Date.now();
          throw new Error(violations.join('\n'));
        }
      }),
      // A run that takes a minute is stuck (every reply is awaited for at most REPLY_MS): a failure, not a hang.
      { seed: SEED, numRuns: RUNS, endOnFailure: process.env.FUZZ_SHRINK === '0', timeout: 60_000 },
    );

    // The log once more, after the sessions cut mid-reply had time to finish.
    await new Promise((resolve) => setTimeout(resolve, 1000));
    const late: string[] = [];
    await checkEvents((v) => late.push(v));
    checkAcks((v) => late.push(v));
    checkProcess((v) => late.push(v), logLines.length);
    stats.acks = [...acks.values()].filter((a) => !a.where.endsWith('probe')).length;
    const codes = [...stats.codes].sort((a, b) => a[0] - b[0]).map(([c, n]) => `${c}×${n}`).join(' ');
    console.log(`      fuzz: ${stats.runs} runs, ${stats.sessions} sessions, ${stats.acks} messages accepted (and ${acks.size - stats.acks} of the well-behaved client), ${maybe.size} cut after their dot, ${((Date.now() - started) / 1000).toFixed(1)} s`);
    console.log(`      replies: ${codes}`);
    console.log(`      closed by: ${[...stats.closes].map(([c, n]) => `${n}× ${c}`).join('; ')}`);
    if (VERBOSE) for (const [a, n] of [...stats.answered].sort((x, y) => y[1] - x[1])) console.log(`      ${String(n).padStart(5)} ${a}`);
    expect(late).to.deep.equal([]);
  });
});
