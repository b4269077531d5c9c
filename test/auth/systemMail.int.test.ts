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

describe('system mail: a 502 answered over HTTP is in the operator\'s log (int)', function () {
  this.timeout(60_000);
  let motor: TestMotor;
  const lines: string[] = [];
  const from = `no-reply@sysmail-${randomBytes(4).toString('hex')}.test`;
  const register = (email: string) => fetch(`${motor.baseUrl}/api/auth/register`, {
    method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ email }),
  });

  // The anonymous request limit is per client address and kept in Redis, which the whole suite
  // shares: lifted, so that other suites' sign-ups within the minute do not make this one a 429.
  before(async () => { motor = await startTestMotor({ env: { SYSTEM_MAIL_FROM: from, ANONYMOUS_REQUEST_LIMIT: '100000' }, logLines: lines }); });
  after(async () => { await motor?.close(); });

  it('register with the system block stopped: 502 email_send_failed, and a warning naming the cause', async () => {
    // The first sign-up makes the system block; the operator then stops it. On first use the block
    // may not be in the directory yet (a temporary 502, docs/AUTH.md "System mail"): signed up again.
    await eventually(async () => (await register(`first-${randomBytes(4).toString('hex')}@rcpt.test`)).status === 200, 20_000, 200);
    const systemBlockId = systemIds(from).motorBlockId;
    await setBlockActive(motor.rt.store, systemBlockId, false, new Date());
    await eventually(async () => (await getBlock(motor.rt.db, systemBlockId))?.status === 'inactive');
    const before = lines.length;
    const r = await register(`second-${randomBytes(4).toString('hex')}@rcpt.test`);
    expect(r.status).to.equal(502);
    expect(((await r.json()) as { code: string }).code).to.equal('email_send_failed');
    const logged = lines.slice(before).map((l) => JSON.parse(l) as { level: number; msg: string; code?: string; reason?: string })
      .filter((l) => l.msg.startsWith('answered 502'));
    expect(logged).to.have.length(1);
    expect(logged[0]).to.include({ level: 40, code: 'email_send_failed' });
    expect(logged[0].reason).to.include('motor_block_inactive');
  });
});
