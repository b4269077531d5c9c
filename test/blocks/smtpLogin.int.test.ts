import { expect } from 'chai';
import { streamName } from '../../domain/eventStore';
import { eventually } from '../support/motor';
import { RawClient, startSmtpHarness, transport, type SmtpHarness } from '../smtp/harness';
import { call } from './support';

/**
 * A deleted block's SMTP login fails on the real submission listener, and nothing the listener
 * does afterwards brings back a stream of the block's history (docs/BLOCKS.md "Deletion").
 */
describe('deleted Motor Block: SMTP login (int)', function () {
  this.timeout(90_000);
  let h: SmtpHarness;
  before(async () => { h = await startSmtpHarness(); });
  after(async () => { await h?.close(); });

  const deleteWithHistory = async (b: Awaited<ReturnType<SmtpHarness['newBlock']>>) => {
    const t = await h.motor.token(b, ['config.manage']);
    await call(h.motor, 'POST', `/account/motor-blocks/${b.motorBlockId}/deactivate`, t, { confirm: true });
    const del = await call(h.motor, 'DELETE', `/account/motor-blocks/${b.motorBlockId}`, t, { confirm: true, deleteHistory: true });
    expect(del.status).to.equal(202);
    await eventually(async () => (await call(h.motor, 'GET', `/account/motor-block-deletions/${del.body.data.jobId}`, t)).body.data?.status === 'completed', 30_000);
  };
  const loginFails = async (user: string, pass: string) => {
    const t = transport(h, { user, pass });
    try {
      await t.verify();
      return null;
    } catch (e) {
      return (e as { responseCode?: number }).responseCode;
    } finally {
      t.close();
    }
  };

  it('AUTH works before the deletion and fails with 535 after it', async () => {
    const b = await h.newBlock();
    const smtp = () => transport(h, { user: b.smtpUsername, pass: b.smtpPassword });
    expect(await smtp().verify()).to.equal(true);
    await deleteWithHistory(b);
    expect(await loginFails(b.smtpUsername, b.smtpPassword)).to.equal(535);
  });

  it('a wrong password for a deleted block\'s username: 535, counted against the address, filed under smtpAuth-unknown; no smtpAuth-<block> stream comes back', async () => {
    const b = await h.newBlock();
    await deleteWithHistory(b);
    const ipFailures = () => h.motor.rt.smtpAuthLimiter.addressFailures('127.0.0.1');
    const before = await ipFailures();
    expect(await loginFails(b.smtpUsername, 'not-the-password')).to.equal(535);
    expect(await ipFailures()).to.equal(before + 1);
    expect(await h.motor.rt.store.readStream(streamName('smtpAuth', b.motorBlockId))).to.deep.equal([]);
    const unknown = await h.motor.rt.store.readStream(streamName('smtpAuth', 'unknown'));
    const filed = unknown.find((e) => (e.data as { username: string }).username === b.smtpUsername);
    expect(filed?.data).to.include({ motorBlockId: null, reason: 'unknown_user', remoteAddress: '127.0.0.1' });
  });

  it('a session that logged in before the deletion is refused at MAIL FROM after it, and records nothing on smtpSubmission-<block>', async () => {
    const b = await h.newBlock();
    const raw = await RawClient.connect(h.securePort, true, h.ca);
    try {
      expect(await raw.reply()).to.match(/^220 /);
      await raw.command('EHLO raw.test');
      expect(await raw.command(`AUTH PLAIN ${Buffer.from(`\0${b.smtpUsername}\0${b.smtpPassword}`).toString('base64')}`)).to.match(/^235 /);
      await deleteWithHistory(b);
      expect(await raw.command(`MAIL FROM:<app@${b.domain}>`)).to.match(/^5\d\d /);
    } finally {
      raw.end();
    }
    // The refusal is recorded (or not) after the reply: give it the time an append takes.
    await new Promise((r) => setTimeout(r, 500));
    expect(await h.motor.rt.store.readStream(streamName('smtpSubmission', b.motorBlockId))).to.deep.equal([]);
  });
});
