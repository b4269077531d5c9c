import { expect } from 'chai';
import { eventually } from '../support/motor';
import { startSmtpHarness, transport, type SmtpHarness } from '../smtp/harness';
import { call } from './support';

/** A deleted block's SMTP login fails on the real submission listener (docs/BLOCKS.md). */
describe('deleted Motor Block: SMTP login (int)', function () {
  this.timeout(90_000);
  let h: SmtpHarness;
  before(async () => { h = await startSmtpHarness(); });
  after(async () => { await h?.close(); });

  it('AUTH works before the deletion and fails with 535 after it', async () => {
    const b = await h.newBlock();
    const smtp = () => transport(h, { user: b.smtpUsername, pass: b.smtpPassword });
    expect(await smtp().verify()).to.equal(true);
    const t = await h.motor.token(b, ['config.manage']);
    await call(h.motor, 'POST', `/account/motor-blocks/${b.motorBlockId}/deactivate`, t, { confirm: true });
    const del = await call(h.motor, 'DELETE', `/account/motor-blocks/${b.motorBlockId}`, t, { confirm: true, deleteHistory: true });
    expect(del.status).to.equal(202);
    await eventually(async () => (await call(h.motor, 'GET', `/account/motor-block-deletions/${del.body.data.jobId}`, t)).body.data?.status === 'completed', 30_000);
    let failure: { responseCode?: number } | null = null;
    try {
      await smtp().verify();
    } catch (e) {
      failure = e as { responseCode?: number };
    }
    expect(failure?.responseCode).to.equal(535);
  });
});
