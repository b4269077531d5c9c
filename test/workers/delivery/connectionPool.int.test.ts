import { createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { expect } from 'chai';
import { startDnsServer, type TestDnsServer } from '../../support/dnsServer.js';
import { startSmtpSink, type SmtpSink } from '../../support/smtpSink.js';
import { SmtpConnectionPool } from '../../../workers/delivery/connectionPool.js';
import { cachingResolver, createResolver, type DnsResolver } from '../../../workers/delivery/dns.js';
import { deliverMessage } from '../../../workers/delivery/smtpClient.js';

const timeouts = { connectMs: 2000, greetingMs: 2000, socketMs: 5000 };
const HOSTNAME = 'out.motor.test';
const raw = (n: number) => Buffer.from(`From: a@sender.test\r\nTo: x@rcpt.test\r\nSubject: m${n}\r\nMessage-ID: <m${n}@sender.test>\r\n\r\nbody ${n}\r\n`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * A minimal SMTP server on a raw socket, for what smtp-server cannot be told to do: close a
 * session after some idle time, or answer MAIL FROM on a session's second transaction with 421.
 */
async function scriptedServer(opts: { idleCloseMs?: number; mail421OnSecond?: boolean; dataReplyDelayMs?: number }) {
  let connections = 0;
  let mostAtOnce = 0;
  let active = 0;
  const messages: string[] = [];
  const sockets = new Set<Socket>();
  const server: Server = createServer((socket) => {
    connections++;
    sockets.add(socket);
    // Sessions open at once, counted until QUIT (the client's count ends with the 221, before the TCP close).
    let counted = true;
    active++;
    mostAtOnce = Math.max(mostAtOnce, active);
    const uncount = () => {
      if (counted) active--;
      counted = false;
    };
    socket.on('close', uncount);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => undefined);
    let buf = '';
    let inData = false;
    let data = '';
    let transactions = 0;
    let idle: NodeJS.Timeout | null = null;
    const arm = () => {
      if (idle) clearTimeout(idle);
      if (opts.idleCloseMs) idle = setTimeout(() => { socket.write('421 4.4.2 idle timeout\r\n'); socket.end(); }, opts.idleCloseMs);
    };
    const reply = (s: string) => socket.write(`${s}\r\n`);
    reply('220 scripted ESMTP');
    arm();
    socket.on('data', (chunk) => {
      arm();
      buf += chunk.toString('latin1');
      let i: number;
      while ((i = buf.indexOf('\r\n')) !== -1) {
        const line = buf.slice(0, i);
        buf = buf.slice(i + 2);
        if (inData) {
          if (line === '.') {
            inData = false;
            messages.push(data);
            data = '';
            if (opts.dataReplyDelayMs) setTimeout(() => reply('250 2.0.0 queued'), opts.dataReplyDelayMs);
            else reply('250 2.0.0 queued');
          } else data += `${line}\r\n`;
          continue;
        }
        const cmd = line.slice(0, 4).toUpperCase();
        if (cmd === 'EHLO') reply('250-scripted\r\n250 PIPELINING');
        else if (cmd === 'MAIL') {
          transactions++;
          if (opts.mail421OnSecond && transactions === 2) {
            reply('421 4.4.2 session expired');
            socket.end();
            return;
          }
          reply('250 2.1.0 ok');
        } else if (cmd === 'RCPT') reply(line.includes('bad@') ? '550 5.1.1 no such user' : '250 2.1.5 ok');
        else if (cmd === 'DATA') { inData = true; reply('354 go ahead'); }
        else if (cmd === 'RSET') reply('250 2.0.0 reset');
        else if (cmd === 'QUIT') { uncount(); reply('221 bye'); socket.end(); }
        else reply('502 5.5.2 not implemented');
      }
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return {
    port: (server.address() as AddressInfo).port,
    messages,
    get connections() { return connections; },
    /** Most sessions open at once (until their QUIT). */
    get mostAtOnce() { return mostAtOnce; },
    close: () => new Promise<void>((r) => { for (const s of sockets) s.destroy(); server.close(() => r()); }),
  };
}

describe('SMTP connection cache (loopback DNS + SMTP sink)', function () {
  this.timeout(20_000);
  let dns: TestDnsServer;
  let resolver: DnsResolver;
  let pool: SmtpConnectionPool;
  const cleanups: Array<() => Promise<void>> = [];

  before(async () => {
    dns = await startDnsServer({
      'rcpt.test': { MX: [{ exchange: 'mx.rcpt.test', priority: 10 }] },
      'mx.rcpt.test': { A: ['127.0.0.1'] },
    });
    resolver = createResolver([dns.address], { timeoutMs: 5000, tries: 1 });
  });
  after(() => dns.close());
  beforeEach(() => { pool = new SmtpConnectionPool({ maxMessages: 100, idleMs: 5000 }); });
  afterEach(async () => {
    await pool.close();
    for (const c of cleanups.splice(0)) await c();
  });
  const sink = async (...a: Parameters<typeof startSmtpSink>): Promise<SmtpSink> => {
    const s = await startSmtpSink(...a);
    cleanups.push(() => s.close());
    return s;
  };
  const send = (port: number, n: number, recipients: string[], p: SmtpConnectionPool | null = pool) =>
    deliverMessage({ raw: raw(n), envelopeFrom: 'bounces@sender.test', recipients, resolver, mxPort: port, allowPrivateAddresses: true, hostname: HOSTNAME, timeouts, pool: p ?? undefined });

  it('two messages to one MX go over one connection (STARTTLS once), one after the other and at once', async () => {
    const s = await sink();
    const [a] = await send(s.port, 1, ['one@rcpt.test']);
    const [b] = await send(s.port, 2, ['two@rcpt.test']);
    expect([a.outcome, b.outcome]).to.deep.equal(['delivered', 'delivered']);
    expect(s.connections).to.equal(1);
    expect(s.messages.map((m) => m.secure)).to.deep.equal([true, true]);
    expect(s.messages[1].raw.toString()).to.include('Subject: m2');
    // Three at once need three sessions; afterwards all three are parked and reused.
    await Promise.all([3, 4, 5].map((n) => send(s.port, n, [`r${n}@rcpt.test`])));
    expect(s.connections).to.equal(3);
    await Promise.all([6, 7, 8].map((n) => send(s.port, n, [`r${n}@rcpt.test`])));
    expect(s.connections).to.equal(3);
    expect(pool.idleCount()).to.equal(3);
    expect(s.messages).to.have.length(8);
  });

  it('without a pool every message opens its own connection (as before)', async () => {
    const s = await sink();
    await send(s.port, 1, ['one@rcpt.test'], null);
    await send(s.port, 2, ['two@rcpt.test'], null);
    expect(s.connections).to.equal(2);
  });

  it('keeps per-recipient replies right on a reused connection, and reuses it after a refusal (RSET)', async () => {
    const s = await sink({
      rcpt: (r) => (r.startsWith('bad') ? { code: 550, message: '5.1.1 No such user' } : r.startsWith('grey') ? { code: 450, message: '4.2.0 Greylisted' } : 250),
    });
    const first = await send(s.port, 1, ['ok1@rcpt.test', 'bad1@rcpt.test']);
    expect(first.map((r) => [r.recipient, r.outcome, r.smtpCode])).to.deep.equal([['ok1@rcpt.test', 'delivered', '250'], ['bad1@rcpt.test', 'bounced', '550']]);
    const second = await send(s.port, 2, ['grey2@rcpt.test', 'ok2@rcpt.test', 'bad2@rcpt.test']);
    expect(second.map((r) => [r.recipient, r.outcome, r.smtpCode])).to.deep.equal([
      ['grey2@rcpt.test', 'deferred', '450'], ['ok2@rcpt.test', 'delivered', '250'], ['bad2@rcpt.test', 'bounced', '550'],
    ]);
    expect(second[0].enhancedCode).to.equal('4.2.0');
    expect(second[2].enhancedCode).to.equal('5.1.1');
    // Every recipient refused: the transaction ends without DATA; RSET, then the session serves the next one.
    const third = await send(s.port, 3, ['bad3@rcpt.test']);
    expect(third[0]).to.include({ outcome: 'bounced', smtpCode: '550' });
    await sleep(100);
    const fourth = await send(s.port, 4, ['ok4@rcpt.test']);
    expect(fourth[0].outcome).to.equal('delivered');
    expect(s.connections).to.equal(1);
    expect(s.messages.map((m) => m.envelope.rcptTo)).to.deep.equal([['ok1@rcpt.test'], ['ok2@rcpt.test'], ['ok4@rcpt.test']]);
  });

  it('a connection the server closes while idle is dropped from the pool; the next message opens a new one', async () => {
    const srv = await scriptedServer({ idleCloseMs: 150 });
    cleanups.push(() => srv.close());
    expect((await send(srv.port, 1, ['one@rcpt.test']))[0].outcome).to.equal('delivered');
    expect(pool.idleCount()).to.equal(1);
    await sleep(400);
    expect(pool.idleCount()).to.equal(0);
    expect((await send(srv.port, 2, ['two@rcpt.test']))[0].outcome).to.equal('delivered');
    expect(srv.connections).to.equal(2);
    expect(srv.messages).to.have.length(2);
  });

  it('a parked session that answers MAIL FROM with 421 is discarded and the message goes out on a fresh one', async () => {
    const srv = await scriptedServer({ mail421OnSecond: true });
    cleanups.push(() => srv.close());
    expect((await send(srv.port, 1, ['one@rcpt.test']))[0].outcome).to.equal('delivered');
    const [r] = await send(srv.port, 2, ['two@rcpt.test']);
    expect(r).to.include({ outcome: 'delivered', smtpCode: '250' });
    expect(srv.connections).to.equal(2);
    expect(srv.messages).to.have.length(2);
  });

  it('a parked session killed without a word is retried on a fresh connection', async () => {
    const srv = await scriptedServer({});
    cleanups.push(() => srv.close());
    expect((await send(srv.port, 1, ['one@rcpt.test']))[0].outcome).to.equal('delivered');
    // Make the pool believe the session is alive although its socket is gone: the race the retry covers.
    const parked = (pool as unknown as { idle: Map<string, Array<{ conn: { _socket: Socket } }>> }).idle;
    const [pc] = [...parked.values()][0];
    pc.conn._socket.removeAllListeners('close');
    pc.conn._socket.removeAllListeners('end');
    pc.conn._socket.destroy();
    const [r] = await send(srv.port, 2, ['two@rcpt.test']);
    expect(r.outcome).to.equal('delivered');
    expect(srv.connections).to.equal(2);
  });

  describe('connections open at once to one address (maxPerAddress)', () => {
    const address = (port: number) => `127.0.0.1:${port}`;

    it('never opens more than maxPerAddress: the others wait and take the sessions handed back, first come first served', async () => {
      const srv = await scriptedServer({ dataReplyDelayMs: 80 });
      cleanups.push(() => srv.close());
      let waits = 0;
      const capped = new SmtpConnectionPool({ maxPerAddress: 2, onWait: () => waits++ });
      cleanups.push(() => capped.close());
      const sends = [1, 2, 3, 4, 5, 6, 7].map((n) => send(srv.port, n, [`r${n}@rcpt.test`], capped));
      await sleep(40);
      expect(capped.addressLoad(address(srv.port))).to.deep.equal({ open: 2, waiting: 5 });
      expect(waits).to.equal(5);
      const results = await Promise.all(sends);
      expect(results.map(([r]) => r.outcome)).to.deep.equal(Array(7).fill('delivered'));
      expect(srv.mostAtOnce).to.equal(2);
      expect(srv.connections).to.equal(2);
      // Two sessions in parallel: each pair arrives in either order, but the waiters are served in turn.
      const order = srv.messages.map((m) => /Subject: (m\d+)/.exec(m)![1]);
      expect([order.slice(0, 2).sort(), order.slice(2, 4).sort(), order.slice(4, 6).sort(), order[6]]).to.deep.equal([['m1', 'm2'], ['m3', 'm4'], ['m5', 'm6'], 'm7']);
      expect(capped.addressLoad(address(srv.port))).to.deep.equal({ open: 2, waiting: 0 });
      await capped.close();
      await sleep(50);
      expect(capped.addressLoad(address(srv.port))).to.deep.equal({ open: 0, waiting: 0 });
    });

    it('a session whose deadline passes while it waits gives up its place in line and is deferred; the others go on', async () => {
      const srv = await scriptedServer({ dataReplyDelayMs: 300 });
      cleanups.push(() => srv.close());
      const capped = new SmtpConnectionPool({ maxPerAddress: 1 });
      cleanups.push(() => capped.close());
      const first = send(srv.port, 1, ['one@rcpt.test'], capped);
      await sleep(30);
      const deadline = new AbortController();
      const waiting = deliverMessage({
        raw: raw(2), envelopeFrom: 'bounces@sender.test', recipients: ['two@rcpt.test'], resolver, mxPort: srv.port, allowPrivateAddresses: true,
        hostname: HOSTNAME, timeouts, pool: capped, signal: deadline.signal,
      });
      const third = send(srv.port, 3, ['three@rcpt.test'], capped);
      await sleep(30);
      expect(capped.addressLoad(address(srv.port)).waiting).to.equal(2);
      deadline.abort();
      const [gaveUp] = await waiting;
      expect(gaveUp).to.include({ outcome: 'deferred', smtpCode: null });
      expect(gaveUp.detail).to.match(/Attempt deadline exceeded/);
      expect(capped.addressLoad(address(srv.port)).waiting).to.equal(1);
      expect((await first)[0].outcome).to.equal('delivered');
      expect((await third)[0].outcome).to.equal('delivered');
      expect(srv.messages.map((m) => /Subject: (m\d+)/.exec(m)![1])).to.deep.equal(['m1', 'm3']);
    });

    it('a session that waits longer than connecting and greeting may take gives up: the recipient is deferred, the address named', async () => {
      const srv = await scriptedServer({ dataReplyDelayMs: 1500 });
      cleanups.push(() => srv.close());
      const capped = new SmtpConnectionPool({ maxPerAddress: 1 });
      cleanups.push(() => capped.close());
      const quick = { connectMs: 200, greetingMs: 300, socketMs: 5000 };
      const as = (n: number) => deliverMessage({
        raw: raw(n), envelopeFrom: 'bounces@sender.test', recipients: [`r${n}@rcpt.test`], resolver, mxPort: srv.port, allowPrivateAddresses: true, hostname: HOSTNAME, timeouts: quick, pool: capped,
      });
      const first = as(1);
      await sleep(50);
      const started = Date.now();
      const [gaveUp] = await as(2);
      expect(Date.now() - started).to.be.within(450, 1200);
      expect(gaveUp).to.include({ outcome: 'deferred', smtpCode: null });
      expect(gaveUp.detail).to.equal(`All 1 connections allowed to ${address(srv.port)} stayed busy for 500 ms`);
      expect(capped.addressLoad(address(srv.port)).waiting).to.equal(0);
      expect((await first)[0].outcome).to.equal('delivered');
      expect(srv.messages).to.have.length(1);
    });

    it('a full address where no place comes free for maxQueueMs: the waiter gives up, and later sessions do not wait at all', async () => {
      const srv = await scriptedServer({ dataReplyDelayMs: 2000 });
      cleanups.push(() => srv.close());
      const reasons: string[] = [];
      const capped = new SmtpConnectionPool({ maxPerAddress: 1, maxQueueMs: 300, onGiveUp: (r) => reasons.push(r) });
      cleanups.push(() => capped.close());
      const first = send(srv.port, 1, ['one@rcpt.test'], capped);
      await sleep(50);
      let started = Date.now();
      const [waited] = await send(srv.port, 2, ['two@rcpt.test'], capped);
      // The place was taken about 50 ms before: 300 ms without one coming free ends the wait.
      expect(Date.now() - started).to.be.within(150, 900);
      expect(waited).to.include({ outcome: 'deferred', smtpCode: null });
      expect(waited.detail).to.match(new RegExp(`^All 1 connections allowed to ${address(srv.port)} are busy and none came free for \\d+ ms$`));
      started = Date.now();
      const [refused] = await send(srv.port, 3, ['three@rcpt.test'], capped);
      expect(Date.now() - started).to.be.below(150);
      expect(refused.outcome).to.equal('deferred');
      expect(refused.detail).to.match(/none came free for \d+ ms$/);
      expect(reasons).to.deep.equal(['stalled', 'stalled']);
      expect(capped.addressLoad(address(srv.port))).to.deep.equal({ open: 1, waiting: 0 });
      expect((await first)[0].outcome).to.equal('delivered');
      expect(srv.messages).to.have.length(1);
    });

    it('joins the line only while the sessions ahead would be through within maxQueueMs at the pace places free up', async () => {
      const srv = await scriptedServer({ dataReplyDelayMs: 200 });
      cleanups.push(() => srv.close());
      const reasons: string[] = [];
      const capped = new SmtpConnectionPool({ maxPerAddress: 1, maxQueueMs: 1100, onGiveUp: (r) => reasons.push(r) });
      cleanups.push(() => capped.close());
      // Three at once: the pace is unknown, so two wait; their hand-offs measure it (about 200 ms).
      const warm = await Promise.all([1, 2, 3].map((n) => send(srv.port, n, [`r${n}@rcpt.test`], capped)));
      expect(warm.map(([r]) => r.outcome)).to.deep.equal(['delivered', 'delivered', 'delivered']);
      // Ten at once: one takes the parked session, about five fit in 1100 ms behind it, the rest give up at once.
      const started = Date.now();
      const burst = [4, 5, 6, 7, 8, 9, 10, 11, 12, 13].map(async (n) => {
        const [r] = await send(srv.port, n, [`r${n}@rcpt.test`], capped);
        return { ...r, ms: Date.now() - started };
      });
      const results = await Promise.all(burst);
      const refused = results.filter((r) => r.outcome === 'deferred');
      const delivered = results.filter((r) => r.outcome === 'delivered');
      expect(delivered.length).to.be.within(4, 7);
      expect(refused.length).to.equal(10 - delivered.length);
      for (const r of refused) {
        expect(r.ms).to.be.below(150);
        expect(r.detail).to.match(new RegExp(`^All 1 connections allowed to ${address(srv.port)} are busy and \\d+ sessions wait ahead: about \\d+ ms at the pace they free up, more than the 1100 ms allowed$`));
      }
      expect(reasons).to.deep.equal(Array(refused.length).fill('queue'));
      expect(srv.mostAtOnce).to.equal(1);
    });

    it('measures the pace while the address is full, and forgets it once a place comes free with room to spare', async () => {
      let now = 0;
      const reasons: string[] = [];
      const p = new SmtpConnectionPool({ maxPerAddress: 3, maxQueueMs: 1000, now: () => now, onGiveUp: (r) => reasons.push(r) });
      cleanups.push(() => p.close());
      const a = '192.0.2.1:25';
      const kinds: string[] = [];
      const ask = (name: string) => p.acquire(`k ${name}`, a).then((g) => { kinds.push(`${name}:${g?.kind}`); return g; });
      for (const n of ['A', 'B', 'C']) await ask(n);
      const d = ask('D'); // full, pace unknown: waits
      now = 900;
      p.vacate(a); // 900 ms after the address filled: the pace
      await d;
      const e = ask('E'); // one place every 900 ms, nobody ahead: within 1000 ms
      await ask('F'); // one ahead: about 1800 ms
      expect(reasons).to.deep.equal(['queue']);
      now = 950;
      p.vacate(a);
      await e;
      now = 960;
      p.vacate(a); // still measured (the address was full): the pace is now about 590 ms
      now = 970;
      p.vacate(a); // freed with a place already free: the congestion is over, the pace forgotten
      expect(p.addressLoad(a)).to.deep.equal({ open: 1, waiting: 0 });
      await ask('G');
      await ask('H');
      // Pace unknown again: both wait (at about 590 ms a place, J would have been refused).
      const waiting = [ask('I'), ask('J')];
      await sleep(20);
      expect(p.addressLoad(a)).to.deep.equal({ open: 3, waiting: 2 });
      expect(reasons).to.deep.equal(['queue']);
      now = 1100;
      p.vacate(a);
      p.vacate(a);
      await Promise.all(waiting);
      expect(kinds).to.deep.equal(['A:open', 'B:open', 'C:open', 'D:open', 'F:busy', 'E:open', 'G:open', 'H:open', 'I:open', 'J:open']);
    });

    it('a connection that cannot be opened gives its place back', async () => {
      const srv = await scriptedServer({});
      const port = srv.port;
      await srv.close(); // nothing listens there now: connections are refused
      const capped = new SmtpConnectionPool({ maxPerAddress: 1 });
      cleanups.push(() => capped.close());
      for (const n of [1, 2, 3]) {
        const [r] = await send(port, n, [`r${n}@rcpt.test`], capped);
        expect(r.outcome).to.equal('deferred');
        expect(r.detail).to.match(/ECONNREFUSED/);
      }
      expect(capped.addressLoad(address(port))).to.deep.equal({ open: 0, waiting: 0 });
    });

    it('a session parked for another destination at the full address is closed to make room', async () => {
      const srv = await scriptedServer({});
      cleanups.push(() => srv.close());
      const capped = new SmtpConnectionPool({ maxPerAddress: 1, idleMs: 60_000 });
      cleanups.push(() => capped.close());
      const as = (hostname: string, n: number) => deliverMessage({
        raw: raw(n), envelopeFrom: 'bounces@sender.test', recipients: [`r${n}@rcpt.test`], resolver, mxPort: srv.port, allowPrivateAddresses: true, hostname, timeouts, pool: capped,
      });
      expect((await as('one.motor.test', 1))[0].outcome).to.equal('delivered');
      expect(capped.idleCount()).to.equal(1);
      // Another EHLO name is another destination: without room it would wait out the 60 s idle time.
      const started = Date.now();
      expect((await as('two.motor.test', 2))[0].outcome).to.equal('delivered');
      expect(Date.now() - started).to.be.below(2000);
      expect(srv.connections).to.equal(2);
      expect(srv.mostAtOnce).to.equal(1);
    });
  });

  it('closes a connection after maxMessages and on close()', async () => {
    const s = await sink({ starttls: false });
    const small = new SmtpConnectionPool({ maxMessages: 2, idleMs: 5000 });
    for (let n = 1; n <= 5; n++) expect((await send(s.port, n, [`r${n}@rcpt.test`], small))[0].outcome).to.equal('delivered');
    expect(s.connections).to.equal(3);
    expect(small.idleCount()).to.equal(1);
    await small.close();
    expect(small.idleCount()).to.equal(0);
    // After close() a finished session is closed instead of parked.
    await send(s.port, 6, ['r6@rcpt.test'], small);
    expect(small.idleCount()).to.equal(0);
  });
});

describe('cachingResolver', function () {
  this.timeout(10_000);
  let dns: TestDnsServer;
  before(async () => {
    dns = await startDnsServer({
      'rcpt.test': { MX: [{ exchange: 'mx.rcpt.test', priority: 10 }] },
      'mx.rcpt.test': { A: ['127.0.0.1'] },
      'flaky.test': { MX: [{ exchange: 'mx.rcpt.test', priority: 10 }] },
      '_mta-sts.rcpt.test': { TXT: ['v=STSv1; id=one;'] },
    });
  });
  after(() => dns.close());
  const count = (name: string, type: string) => dns.queries.filter((q) => q.name === name && q.type === type).length;

  it('answers MX and A from the cache, shares concurrent lookups, keeps NXDOMAIN briefly and never SERVFAIL', async () => {
    let now = 1_000_000;
    const r = cachingResolver(createResolver([dns.address], { timeoutMs: 300, tries: 1 }), { maxTtlMs: 60_000, negativeTtlMs: 5_000, now: () => now });
    await Promise.all([r.resolveMx('rcpt.test'), r.resolveMx('rcpt.test')]);
    expect(await r.resolveMx('RCPT.test')).to.deep.equal([{ exchange: 'mx.rcpt.test', priority: 10 }]);
    expect(count('rcpt.test', 'MX')).to.equal(1);
    expect(await r.resolve4('mx.rcpt.test')).to.deep.equal(['127.0.0.1']);
    await r.resolve4('mx.rcpt.test');
    expect(count('mx.rcpt.test', 'A')).to.equal(1);
    now += 61_000; // past the 60 s cap (and the record's 60 s TTL)
    await r.resolveMx('rcpt.test');
    expect(count('rcpt.test', 'MX')).to.equal(2);

    await r.resolveMx('nope.test').catch(() => undefined);
    await r.resolveMx('nope.test').catch(() => undefined);
    expect(count('nope.test', 'MX')).to.equal(1);
    now += 6_000;
    await r.resolveMx('nope.test').catch(() => undefined);
    expect(count('nope.test', 'MX')).to.equal(2);

    dns.setFailure('flaky.test', 'servfail');
    await r.resolveMx('flaky.test').catch(() => undefined);
    await r.resolveMx('flaky.test').catch(() => undefined);
    expect(count('flaky.test', 'MX')).to.be.at.least(2);
  });

  it('answers TXT from the cache for 60 s, shares concurrent lookups, keeps a missing TXT 60 s where a missing MX is kept 5 s', async () => {
    let now = 1_000_000;
    const r = cachingResolver(createResolver([dns.address], { timeoutMs: 300, tries: 1 }), { now: () => now });
    const [a, b] = await Promise.all([r.resolveTxt('_mta-sts.rcpt.test'), r.resolveTxt('_mta-sts.rcpt.test')]);
    expect(a).to.deep.equal([['v=STSv1; id=one;']]);
    expect(b).to.deep.equal(a);
    now += 59_000;
    expect(await r.resolveTxt('_MTA-STS.rcpt.test')).to.deep.equal([['v=STSv1; id=one;']]);
    expect(count('_mta-sts.rcpt.test', 'TXT')).to.equal(1);
    now += 2_000;
    await r.resolveTxt('_mta-sts.rcpt.test');
    expect(count('_mta-sts.rcpt.test', 'TXT')).to.equal(2);

    // NXDOMAIN (no such name) and NODATA (mx.rcpt.test has an A record only), beside an NXDOMAIN MX.
    const kinds = async () => Promise.all([
      r.resolveTxt('_mta-sts.gone.test').then(() => 'answered', (e) => e.kind),
      r.resolveTxt('mx.rcpt.test').then(() => 'answered', (e) => e.kind),
      r.resolveMx('gone.test').then(() => 'answered', (e) => e.kind),
    ]);
    const asked = () => [count('_mta-sts.gone.test', 'TXT'), count('mx.rcpt.test', 'TXT'), count('gone.test', 'MX')];
    expect(await kinds()).to.deep.equal(['nxdomain', 'nodata', 'nxdomain']);
    expect(await kinds()).to.deep.equal(['nxdomain', 'nodata', 'nxdomain']);
    expect(asked()).to.deep.equal([1, 1, 1]);
    now += 6_000;
    await kinds();
    expect(asked()).to.deep.equal([1, 1, 2]);
    now += 55_000;
    expect(await kinds()).to.deep.equal(['nxdomain', 'nodata', 'nxdomain']);
    expect(asked()).to.deep.equal([2, 2, 3]);
  });

  it('keeps a missing TXT for txtNegativeTtlMs when given, and never keeps a TXT SERVFAIL', async () => {
    let now = 1_000_000;
    const r = cachingResolver(createResolver([dns.address], { timeoutMs: 300, tries: 1 }), { txtNegativeTtlMs: 10_000, now: () => now });
    await r.resolveTxt('_mta-sts.short.test').catch(() => undefined);
    now += 9_000;
    await r.resolveTxt('_mta-sts.short.test').catch(() => undefined);
    expect(count('_mta-sts.short.test', 'TXT')).to.equal(1);
    now += 2_000;
    await r.resolveTxt('_mta-sts.short.test').catch(() => undefined);
    expect(count('_mta-sts.short.test', 'TXT')).to.equal(2);

    dns.setFailure('_mta-sts.flaky.test', 'servfail');
    const first = await r.resolveTxt('_mta-sts.flaky.test').then(() => 'answered', (e) => e.kind);
    expect(first).to.equal('temporary');
    const asked = count('_mta-sts.flaky.test', 'TXT');
    dns.setFailure('_mta-sts.flaky.test', null);
    dns.setRecords('_mta-sts.flaky.test', { TXT: ['v=STSv1; id=back;'] });
    // The failure was not kept: the next lookup asks again and gets the record.
    expect(await r.resolveTxt('_mta-sts.flaky.test')).to.deep.equal([['v=STSv1; id=back;']]);
    expect(count('_mta-sts.flaky.test', 'TXT')).to.equal(asked + 1);
  });
});
