import { expect } from 'chai';
import { streamName } from '../../domain/eventStore';
import type { SmtpAuthFailed } from '../../domain/events';
import { RawClient, startSmtpHarness, type SmtpHarness } from './harness';

/**
 * The failed-AUTH lock (docs/SMTP.md "Repeated failures") against a burst: many connections from
 * one address send a wrong password at the same moment. Only as many passwords as the lock allows
 * (20) may be checked; the rest get the limiter's `454 4.7.0` without their password being looked
 * at, and the right password sent during the lock is refused the same way.
 */
describe('SMTP AUTH lock under concurrent attempts (e2e)', function () {
  this.timeout(120_000);
  const LOCK = 20;
  const BURST = 30;
  let h: SmtpHarness;
  let block: Awaited<ReturnType<SmtpHarness['newBlock']>>;
  before(async () => {
    // A Motor of its own: its AUTH counters (under its queue prefix) start at zero for 127.0.0.1.
    h = await startSmtpHarness();
    block = await h.newBlock();
  });
  after(async () => { await h?.close(); });

  const ready = async (): Promise<RawClient> => {
    const c = await RawClient.connect(h.securePort, true, h.ca);
    expect(await c.reply()).to.match(/^220 /);
    expect(await c.command('EHLO burst.test')).to.match(/^250/);
    return c;
  };
  const plain = (user: string, pass: string) => `AUTH PLAIN ${Buffer.from(`\0${user}\0${pass}`).toString('base64')}`;
  const failures = async () => (await h.motor.rt.store.readStream(streamName('smtpAuth', block.motorBlockId))).map((e) => (e.data as SmtpAuthFailed).reason);

  it(`${BURST} wrong passwords at once: at most ${LOCK} are checked, the rest get 454 4.7.0; then the right password is refused too`, async () => {
    const clients = await Promise.all(Array.from({ length: BURST }, ready));
    let replies: Array<string | null>;
    try {
      // Every session is greeted and EHLO'd first, so the AUTH commands leave together.
      replies = await Promise.all(clients.map((c, i) => c.command(plain(block.smtpUsername, `wrong-${i}`), 60_000)));
    } finally {
      for (const c of clients) c.end();
    }
    const codes = replies.map((r) => r?.slice(0, 9));
    const checked = codes.filter((c) => c === '535 5.7.8').length;
    const refused = codes.filter((c) => c === '454 4.7.0').length;
    expect(checked + refused, JSON.stringify(replies)).to.equal(BURST);
    expect(checked, 'passwords checked').to.equal(LOCK);
    expect(refused, 'refused by the limiter').to.equal(BURST - LOCK);

    // The event history says the same: 20 passwords judged, the rest refused unseen.
    const reasons = await failures();
    expect(reasons.filter((r) => r === 'bad_password')).to.have.length(LOCK);
    expect(reasons.filter((r) => r === 'locked_out')).to.have.length(BURST - LOCK);

    // The address is locked: the right password is not even checked.
    const c = await ready();
    try {
      expect(await c.command(plain(block.smtpUsername, block.smtpPassword), 30_000)).to.match(/^454 4\.7\.0 .*try again in \d+s/);
    } finally {
      c.end();
    }
    const after = await failures();
    expect(after.filter((r) => r === 'bad_password')).to.have.length(LOCK);
    expect(after.filter((r) => r === 'locked_out')).to.have.length(BURST - LOCK + 1);
  });
});
