import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import type { BootstrapResult } from '../../commands/admin/bootstrap';
import { generateApiKey } from '../../domain/credentials/apiKeys';
import { SCOPES } from '../../domain/credentials/scopes';
import { streamName } from '../../domain/eventStore';
import { toEventData, type DomainEvent } from '../../domain/events';
import { newId } from '../../domain/ids';
import { directoryProjection } from '../../projections/directory/projection';
import { findApiKeyByPrefix } from '../../projections/directory/queries';
import { ProjectionRunner } from '../../projections/runner';
import { catchUpUntil } from '../../scripts/runtime';
import { startTestMotor, type TestMotor } from '../support/motor';
import { PUBLIC, call } from './support';

/**
 * The plan limit and name uniqueness with the directory projector stopped (docs/BLOCKS.md "Plan
 * limit"): the API runs alone, so no write of these tests reaches the directory, and the
 * read-your-writes wait of every create gives up. Creates, renames and a sandbox conversion must
 * still count and compare against the blocks created a moment before: they decide on the event
 * streams, never on the directory.
 */
describe('account blocks with the directory projector stopped (int)', function () {
  this.timeout(120_000);
  let motor: TestMotor;

  // The projector role is not started: motor.bootstrap() catches the directory up once with a
  // runner of its own (the account key must authenticate), then nothing projects any more.
  before(async () => { motor = await startTestMotor({ roles: ['api'], env: { PLAN_DEFAULT_MAX_BLOCKS: '3' } }); });
  after(async () => { await motor?.close(); });

  async function account(scopes = ['config.manage']): Promise<{ b: BootstrapResult; token: string }> {
    const b = await motor.bootstrap();
    return { b, token: await motor.token(b, scopes) };
  }
  const create = (token: string, body: Record<string, unknown>) =>
    call(motor, 'POST', '/account/motor-blocks', token, body, { 'Idempotency-Key': randomUUID() });
  const accountEvents = async (accountId: string) => (await motor.rt.store.readStream(streamName('account', accountId))).map((e) => ({ type: e.type, data: e.data as Record<string, unknown> }));

  it('creates beyond maxBlocks in a row: the one past the limit is 409 motor_block_limit_reached', async () => {
    const { b, token } = await account();
    // maxBlocks 3 and bootstrap made one: two more fit, the third does not.
    expect((await create(token, { name: 'First', domainId: b.domainId })).status).to.equal(201);
    expect((await create(token, { name: 'Second', domainId: b.domainId })).status).to.equal(201);
    const third = await create(token, { name: 'Third', domainId: b.domainId });
    expect([third.status, third.body.code]).to.deep.equal([409, 'motor_block_limit_reached']);
    expect(third.body.limit).to.equal(3);
    // The refused create recorded nothing on the account's list of its blocks.
    expect((await accountEvents(b.accountId)).filter((e) => e.type === 'AccountBlockAdded')).to.have.length(3);
  });

  it('a name created a moment before is taken: the create answers 409 motor_block_name_conflict', async () => {
    const { b, token } = await account();
    expect((await create(token, { name: 'Orders', domainId: b.domainId })).status).to.equal(201);
    const again = await create(token, { name: 'ORDERS', domainId: b.domainId });
    expect([again.status, again.body.code]).to.deep.equal([409, 'motor_block_name_conflict']);
  });

  it('a rename to the name of a block created a moment before answers 409 motor_block_name_conflict', async () => {
    const { b, token } = await account();
    expect((await create(token, { name: 'Receipts', domainId: b.domainId })).status).to.equal(201);
    const rename = await call(motor, 'PATCH', `/account/motor-blocks/${b.motorBlockId}/name`, token, { name: 'receipts' });
    expect([rename.status, rename.body.code]).to.deep.equal([409, 'motor_block_name_conflict']);
  });

  it('a sandbox conversion counts the blocks created a moment before: 409 motor_block_limit_reached', async () => {
    const { b, token } = await account(['config.manage', 'sandbox.manage']);
    expect((await create(token, { name: 'One', domainId: b.domainId })).status).to.equal(201);
    expect((await create(token, { name: 'Two', domainId: b.domainId })).status).to.equal(201);
    const provision = await call(motor, 'POST', '/account/sandbox/provision', token, {});
    expect(provision.status).to.equal(201);
    const convert = await call(motor, 'POST', '/account/sandbox/convert', token, { domainId: b.domainId, name: 'Converted' });
    expect([convert.status, convert.body.code]).to.deep.equal([409, 'motor_block_limit_reached']);
  });

  it('a provision names the sandbox block after a block named so a moment before: "Sandbox <handle> (2)"', async () => {
    const { b, token } = await account(['config.manage', 'sandbox.manage']);
    const handle = `h${randomUUID().slice(0, 8)}`;
    expect((await create(token, { name: `Sandbox ${handle}`, domainId: b.domainId })).status).to.equal(201);
    const provision = await call(motor, 'POST', '/account/sandbox/provision', token, { handle });
    expect(provision.status).to.equal(201);
    // The status is read from the directory, which shows nothing yet: the block id is on the account's stream.
    const provisioned = (await accountEvents(b.accountId)).find((e) => e.type === 'SandboxProvisioned');
    const [first] = await motor.rt.store.readStream(streamName('motorBlock', provisioned!.data.motorBlockId as string));
    expect((first.data as { name: string }).name).to.equal(`Sandbox ${handle} (2)`);
  });

  /**
   * An account made by an earlier release: its stream has AccountCreated and nothing about its
   * blocks. Appended as that release's bootstrap did, then the directory caught up once.
   */
  async function olderAccount(): Promise<{ accountId: string; domainId: string; motorBlockId: string; token: string }> {
    const accountId = newId();
    const domainId = newId();
    const motorBlockId = newId();
    const keyId = newId();
    const key = generateApiKey('account');
    const at = new Date().toISOString();
    const append = (stream: string, events: DomainEvent[]) =>
      motor.rt.store.append(stream, events.map((e) => toEventData(newId(), e, { actor: 'cli' })), { expectedRevision: 'no_stream' });
    await append(streamName('account', accountId), [{ type: 'AccountCreated', data: { accountId, email: 'older@example.test', plan: motor.config.defaultPlan.name, createdAt: at } }]);
    await append(streamName('sendingDomain', domainId), [
      { type: 'DomainAdded', data: { domainId, accountId, name: `d${randomUUID().slice(0, 8)}.example.test`, dkimSelector: 'motor20261122', dkimAlgorithm: 'rsa-sha256', dkimPublicKey: 'v=DKIM1; k=rsa; p=MIIB', dkimKeyId: newId(), addedAt: at } },
      { type: 'DomainOwnershipVerified', data: { domainId, method: 'trusted', verifiedAt: at } },
      { type: 'DomainDnsChecked', data: { domainId, method: 'trusted', spfConfigured: true, dkimConfigured: true, dmarcConfigured: true, checkedAt: at } },
    ]);
    await append(streamName('motorBlock', motorBlockId), [{
      type: 'MotorBlockCreated',
      data: { motorBlockId, accountId, name: 'Older block', type: 'general_purpose', domainId, smtpUsername: `mb_${randomUUID().slice(0, 12)}`, authMethod: 'smtp_password', createdAt: at },
    }]);
    await append(streamName('apiKey', keyId), [{
      type: 'ApiKeyCreated', data: { keyId, kind: 'account', accountId, prefix: key.prefix, secretHash: key.secretHash, scopes: [...SCOPES], createdAt: at },
    }]);
    await catchUpUntil(runner, async () => (await findApiKeyByPrefix(motor.rt.db, key.prefix)) !== null);
    const token = await motor.token({ accountApiKey: key.key, motorBlockId } as BootstrapResult, ['config.manage']);
    return { accountId, domainId, motorBlockId, token };
  }
  let runner: ProjectionRunner;
  before(() => { runner = new ProjectionRunner(motor.rt.db, motor.rt.store, directoryProjection); });

  it('an account of an earlier release: its blocks are listed once the directory reaches the listing; until then 503 directory_unavailable', async () => {
    const older = await olderAccount();
    const res = await fetch(`${motor.baseUrl}${PUBLIC}/account/motor-blocks`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${older.token}`, 'Idempotency-Key': randomUUID() },
      body: JSON.stringify({ name: 'New one', domainId: older.domainId }),
    });
    const body = await res.json() as { code: string };
    expect([res.status, body.code]).to.deep.equal([503, 'directory_unavailable']);
    expect(res.headers.get('retry-after')).to.equal('5');
    // Nothing was decided: the marker is on the stream, no block was added.
    expect((await accountEvents(older.accountId)).map((e) => e.type)).to.deep.equal(['AccountCreated', 'AccountBlockListingStarted']);

    // The directory catches up (a projector runs for a moment): the next create lists the older
    // block and counts it, then decides on the streams as on any account.
    await runner.catchUp();
    expect((await create(older.token, { name: 'New one', domainId: older.domainId })).status).to.equal(201);
    const listed = (await accountEvents(older.accountId)).find((e) => e.type === 'AccountBlocksListed');
    expect(listed?.data.motorBlockIds).to.deep.equal([older.motorBlockId]);
    const taken = await create(older.token, { name: 'older BLOCK', domainId: older.domainId });
    expect([taken.status, taken.body.code]).to.deep.equal([409, 'motor_block_name_conflict']);
    expect((await create(older.token, { name: 'Another', domainId: older.domainId })).status).to.equal(201);
    const over = await create(older.token, { name: 'One too many', domainId: older.domainId });
    expect([over.status, over.body.code]).to.deep.equal([409, 'motor_block_limit_reached']);
  });
});
