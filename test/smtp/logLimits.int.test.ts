import { expect } from 'chai';
import { eventually } from '../support/motor';
import { rawTlsSession, startSmtpHarness, type SmtpHarness } from './harness';

interface LogLine { msg: string; remoteAddress?: string; reason?: string; session?: string; suppressed?: number; windowSeconds?: number }

/**
 * The SMTP log lines a client can multiply are capped (infra/logLimiter.ts, SMTP_LOG_*), over real
 * sockets: refused AUTHs in a loop from many connections write at most SMTP_LOG_LINE_LIMIT lines per
 * client address and window, then one line that counts the rest. 127.0.0.2 is a second client (the
 * listener is on 127.0.0.1; Linux routes the whole of 127/8 to loopback).
 */
describe('SMTP log line limits (int)', function () {
  this.timeout(60_000);
  let h: SmtpHarness;
  const lines: string[] = [];
  const WINDOW_SECONDS = 6;

  before(async () => {
    h = await startSmtpHarness({
      env: { SMTP_LOG_LINE_LIMIT: '5', SMTP_LOG_LINE_KIND_LIMIT: '100', SMTP_LOG_WINDOW_SECONDS: String(WINDOW_SECONDS) },
      logLines: lines,
    });
  });
  after(async () => {
    await h?.close();
  });

  const logged = (prefix: string): LogLine[] => lines.map((l) => JSON.parse(l) as LogLine).filter((l) => l.msg === prefix || l.msg.startsWith(`${prefix}: `));

  it('a flood of refused AUTHs from one address: 5 lines in full, then one line with the count of the rest; a second address is logged on its own', async () => {
    // 20 connections, 3 refused AUTHs each (the third closes the session): 60 from 127.0.0.1. Sent
    // in three waves of 20 at once, so the AUTH slowdown (from a 3rd failure of the address on)
    // hardly applies: the first wave takes its 20 slots before any failure is counted, and locks
    // the address; the waves after it are refused without a password check, at once.
    const started = Date.now();
    const sessions = await Promise.all(Array.from({ length: 20 }, () => rawTlsSession(h)));
    const replies: (string | null)[] = [];
    for (let wave = 0; wave < 3; wave++) {
      replies.push(...await Promise.all(sessions.map((c, i) => c.authPlain(`nobody-${i}-${wave}`, 'wrong'))));
    }
    for (const c of sessions) c.end();
    expect(replies).to.have.length(60);
    for (const r of replies) expect(r).to.match(/^(535 5\.7\.8|454 4\.7\.0|421 4\.7\.0) /);
    expect(Date.now() - started, 'the flood fits in one log window').to.be.below(WINDOW_SECONDS * 1000 - 1000);

    // While 127.0.0.1 is past its allowance, a second client's refusals are logged in full.
    const other = await rawTlsSession(h, '127.0.0.2');
    expect(await other.authPlain('someone-else', 'wrong')).to.match(/^535 5\.7\.8 /);
    expect(await other.authPlain('someone-else-2', 'wrong')).to.match(/^535 5\.7\.8 /);
    other.end();

    const full = logged('SMTP AUTH refused').filter((l) => l.suppressed === undefined);
    expect(full.filter((l) => l.remoteAddress === '127.0.0.1')).to.have.length(5);
    expect(full.filter((l) => l.remoteAddress === '127.0.0.2')).to.have.length(2);
    for (const l of full) expect(l.session).to.be.a('string').and.not.equal('');
    expect(full.filter((l) => l.remoteAddress === '127.0.0.1').map((l) => l.reason)).to.include('unknown_user');

    // At the end of 127.0.0.1's window, one line for the 55 left out; none for 127.0.0.2.
    const summaries = await eventually(async () => {
      const s = logged('SMTP AUTH refused').filter((l) => l.suppressed !== undefined);
      return s.length > 0 ? s : null;
    }, WINDOW_SECONDS * 1000 + 5000);
    expect(summaries).to.have.length(1);
    expect(summaries[0]).to.deep.include({
      remoteAddress: '127.0.0.1', suppressed: 55, windowSeconds: WINDOW_SECONDS,
      msg: `SMTP AUTH refused: 55 more suppressed in the last ${WINDOW_SECONDS}s`,
    });
  });
});
