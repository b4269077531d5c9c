import { expect } from 'chai';
import { createLogger } from '../../infra/logger.js';
import { LogLimiter, type LogLimitSettings } from '../../infra/logLimiter.js';

interface Line { level: number; msg: string; remoteAddress?: string; suppressed?: number; windowSeconds?: number; n?: number }

/** A limiter on a clock the test moves, writing to `lines`. */
function setUp(settings: LogLimitSettings, msg = 'SMTP AUTH refused') {
  let clock = 1_000_000;
  const lines: Line[] = [];
  const logger = createLogger('trace', {}, { write: (l: string) => { lines.push(JSON.parse(l) as Line); } });
  const limiter = new LogLimiter(settings, () => clock);
  const write = limiter.kind(logger, 'info', msg, 'remoteAddress');
  return {
    limiter, lines, write,
    advance(ms: number) {
      clock += ms;
      limiter.sweep();
    },
    full: () => lines.filter((l) => l.suppressed === undefined),
    summaries: () => lines.filter((l) => l.suppressed !== undefined),
  };
}

describe('LogLimiter (unit)', () => {
  it('writes the first perKey lines of a key in full, counts the rest, and sums them up in one line when the window ends', () => {
    const t = setUp({ perKey: 5, perKind: 1000, windowMs: 60_000 });
    for (let n = 1; n <= 500; n++) t.write({ remoteAddress: '203.0.113.9', n });
    expect(t.full().map((l) => l.n)).to.deep.equal([1, 2, 3, 4, 5]);
    expect(t.summaries()).to.deep.equal([]);

    t.advance(59_999);
    expect(t.summaries(), 'not before the window ends').to.deep.equal([]);
    t.advance(1);
    expect(t.summaries()).to.have.length(1);
    expect(t.summaries()[0]).to.include({
      level: 30, remoteAddress: '203.0.113.9', suppressed: 495, windowSeconds: 60, msg: 'SMTP AUTH refused: 495 more suppressed in the last 60s',
    });
    expect(t.limiter.keyCount, 'the key is let go with its window').to.equal(0);

    // A new window: written in full again.
    t.write({ remoteAddress: '203.0.113.9', n: 501 });
    expect(t.full().map((l) => l.n)).to.deep.equal([1, 2, 3, 4, 5, 501]);
  });

  it('limits each key on its own: a second address is written in full while the first is suppressed', () => {
    const t = setUp({ perKey: 3, perKind: 1000, windowMs: 10_000 });
    for (let n = 0; n < 50; n++) t.write({ remoteAddress: '198.51.100.1', n });
    t.advance(4000);
    for (let n = 100; n < 103; n++) t.write({ remoteAddress: '198.51.100.2', n });
    t.write({ remoteAddress: '198.51.100.2', n: 103 });
    expect(t.full().map((l) => `${l.remoteAddress} ${l.n}`)).to.deep.equal([
      '198.51.100.1 0', '198.51.100.1 1', '198.51.100.1 2', '198.51.100.2 100', '198.51.100.2 101', '198.51.100.2 102',
    ]);
    // Each key's window ends 10 s after its own first line.
    t.advance(6000);
    expect(t.summaries().map((l) => [l.remoteAddress, l.suppressed])).to.deep.equal([['198.51.100.1', 47]]);
    t.advance(4000);
    expect(t.summaries().map((l) => [l.remoteAddress, l.suppressed])).to.deep.equal([['198.51.100.1', 47], ['198.51.100.2', 1]]);
  });

  it('a key with nothing left out ends its window without a line', () => {
    const t = setUp({ perKey: 3, perKind: 1000, windowMs: 1000 });
    t.write({ remoteAddress: '192.0.2.1' });
    t.write({ remoteAddress: '192.0.2.1' });
    t.advance(1000);
    expect(t.lines).to.have.length(2);
    expect(t.limiter.keyCount).to.equal(0);
  });

  it('a client that varies its address: at most perKind lines of the kind per window plus one summary, and at most 2 × perKind keys held', () => {
    const t = setUp({ perKey: 2, perKind: 50, windowMs: 1000 });
    let written = 0;
    let mostKeys = 0;
    /** Lines written from one window's end to the next: the summary of the window that ended, then the new window's lines. */
    const perWindow: number[] = [];
    let mark = 0;
    const endWindow = () => {
      perWindow.push(t.lines.length - mark);
      mark = t.lines.length;
      t.advance(1000);
    };
    // 20,000 addresses, each used 3 times, 2,000 in each of 10 windows.
    for (let i = 0; i < 20_000; i++) {
      for (let r = 0; r < 3; r++) {
        t.write({ remoteAddress: `2001:db8::${i.toString(16)}` });
        written += 1;
      }
      mostKeys = Math.max(mostKeys, t.limiter.keyCount);
      if (i % 2000 === 1999) endWindow();
    }
    endWindow();
    endWindow();
    perWindow.push(t.lines.length - mark);
    expect(Math.max(...perWindow), 'lines per window').to.be.at.most(51);
    expect(mostKeys, 'keys held').to.be.at.most(100);
    expect(t.limiter.keyCount).to.equal(0);
    const suppressed = t.summaries().reduce((sum, l) => sum + l.suppressed!, 0);
    expect(t.full().length + suppressed, 'every line written or counted, once').to.equal(written);
    expect(t.summaries().find((l) => l.remoteAddress === undefined)!.msg).to.match(/^SMTP AUTH refused: \d+ more suppressed in the last 1s \(over 50 lines of this kind\)$/);
  });

  it('folds key summaries into the kind\'s when the kind has no line left for them', () => {
    const t = setUp({ perKey: 1, perKind: 3, windowMs: 1000 });
    for (const a of ['a', 'b', 'c']) for (let r = 0; r < 4; r++) t.write({ remoteAddress: a });
    for (const a of ['d', 'e']) t.write({ remoteAddress: a });
    expect(t.full().map((l) => l.remoteAddress)).to.deep.equal(['a', 'b', 'c']);
    t.advance(1000);
    // The kind's window ended first (2 lines of d and e counted), then the keys' windows: their
    // summaries open a new window of the kind, 3 lines.
    expect(t.summaries().map((l) => [l.remoteAddress ?? '*', l.suppressed])).to.deep.equal([['*', 2], ['a', 3], ['b', 3], ['c', 3]]);

    // A key's window that ends while the kind's current window has no line left.
    const u = setUp({ perKey: 1, perKind: 2, windowMs: 1000 });
    u.write({ remoteAddress: 'x' });
    u.advance(500);
    for (let r = 0; r < 4; r++) u.write({ remoteAddress: 'b' });
    u.advance(600);
    u.write({ remoteAddress: 'c' });
    u.write({ remoteAddress: 'd' });
    u.write({ remoteAddress: 'e' });
    u.advance(400);
    expect(u.summaries(), 'b\'s window ended: its 3 counted in the kind\'s window, which is full').to.deep.equal([]);
    u.advance(600);
    expect(u.summaries().map((l) => [l.remoteAddress ?? '*', l.suppressed])).to.deep.equal([['*', 4]]);
    expect(u.full().map((l) => l.remoteAddress)).to.deep.equal(['x', 'b', 'c', 'd']);
  });

  it('flush() writes what is due at once (the process is stopping)', () => {
    const t = setUp({ perKey: 1, perKind: 1000, windowMs: 60_000 });
    for (let r = 0; r < 4; r++) t.write({ remoteAddress: 'x' });
    t.limiter.flush();
    expect(t.summaries().map((l) => [l.remoteAddress, l.suppressed])).to.deep.equal([['x', 3]]);
    expect(t.limiter.keyCount).to.equal(0);
  });

  it('writes the summary when the window ends on its own timer, and holds the process with none', async () => {
    const lines: Line[] = [];
    const logger = createLogger('trace', {}, { write: (l: string) => { lines.push(JSON.parse(l) as Line); } });
    const limiter = new LogLimiter({ perKey: 1, perKind: 100, windowMs: 50 });
    const write = limiter.kind(logger, 'warn', 'SMTP connection error', 'remoteAddress');
    for (let r = 0; r < 10; r++) write({ remoteAddress: '192.0.2.7' });
    expect(lines).to.have.length(1);
    for (const until = Date.now() + 2000; lines.length < 2 && Date.now() < until;) await new Promise((r) => setTimeout(r, 10));
    expect(lines[1]).to.include({ level: 40, remoteAddress: '192.0.2.7', suppressed: 9 });
    expect(limiter.keyCount).to.equal(0);
  });

  it('the same message again is the same kind', () => {
    const t = setUp({ perKey: 2, perKind: 1000, windowMs: 1000 });
    const again = t.limiter.kind(createLogger('silent'), 'info', 'SMTP AUTH refused', 'remoteAddress');
    t.write({ remoteAddress: 'a' });
    again({ remoteAddress: 'a' });
    again({ remoteAddress: 'a' });
    expect(t.lines).to.have.length(2);
  });
});
