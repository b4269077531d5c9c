import { randomBytes } from 'node:crypto';
import { expect } from 'chai';
import { sendSystemMail, systemIds, type SystemMail, type SystemMailDeps } from '../../commands/auth/systemMail';
import { setBlockActive } from '../../commands/admin/bootstrap';
import { isDomainError } from '../../domain/errors';
import { getBlock } from '../../projections/directory/queries';
import { eventually, startTestMotor, type TestMotor } from '../support/motor';

/**
 * sendSystemMail's failures against a real store, directory and Redis quota: always 502
 * email_send_failed (what register and free recipients answer), with `temporary` saying whether a
 * later try can pass. SYSTEM_MAIL_FROM is on a domain of this run alone: the quota counters in
 * Redis are keyed by the system block's id, which the domain decides, and other runs share Redis.
 */
describe('system mail: failures say whether trying again can help (int)', function () {
  this.timeout(60_000);
  let motor: TestMotor;
  let deps: SystemMailDeps;
  let systemBlockId: string;
  const mail = (to: string): SystemMail => ({ to, subject: 'Test', text: 'Test', purpose: 'test', idempotencyKey: `test:${randomBytes(8).toString('hex')}` });
  /** The send's failure, which must be email_send_failed: its status and `temporary`. */
  const failureOf = async (m: SystemMail) => {
    const err = await sendSystemMail(deps, m, new Date()).then(() => null, (e: unknown) => e);
    if (!isDomainError(err)) throw new Error(`expected a DomainError, got ${String(err)}`);
    return { code: err.code, status: err.status, temporary: err.details?.temporary };
  };

  before(async () => {
    const from = `no-reply@sysmail-${randomBytes(4).toString('hex')}.test`;
    motor = await startTestMotor({ roles: ['projector'], env: { SYSTEM_MAIL_FROM: from } });
    deps = { store: motor.rt.store, db: motor.rt.db, keys: motor.rt.keys, quota: motor.rt.quota, config: motor.config };
    systemBlockId = systemIds(from).motorBlockId;
  });
  after(async () => { await motor?.close(); });

  it('a mail the pipeline accepts: its message id', async () => {
    expect(await sendSystemMail(deps, mail('someone@rcpt.test'), new Date())).to.match(/^[0-9a-f-]{36}$/);
  });

  it('a recipient that is not an address: permanent (the same mail is refused on every try)', async () => {
    expect(await failureOf(mail('not an address'))).to.deep.equal({ code: 'email_send_failed', status: 502, temporary: false });
  });

  it('the system block over its quota: temporary', async () => {
    // One mail went out above: a daily limit of 1 is spent.
    await motor.setLimits(systemBlockId, { burst: 1, hourly: 1, daily: 1 });
    expect(await failureOf(mail('someone@rcpt.test'))).to.deep.equal({ code: 'email_send_failed', status: 502, temporary: true });
  });

  it('the system block stopped by the operator: permanent, until someone reactivates it', async () => {
    await setBlockActive(motor.rt.store, systemBlockId, false, new Date());
    await eventually(async () => (await getBlock(motor.rt.db, systemBlockId))?.status === 'inactive');
    expect(await failureOf(mail('someone@rcpt.test'))).to.deep.equal({ code: 'email_send_failed', status: 502, temporary: false });
  });
});
