import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import type { BootstrapResult } from '../../commands/admin/bootstrap';
import { streamName } from '../../domain/eventStore';
import { toEventData, type MessageAccepted, type MotorBlockDeleted } from '../../domain/events';
import { newId } from '../../domain/ids';
import { findApiKeyByPrefix, getBlock } from '../../projections/directory/queries';
import { createBlockKey, createBlockKeyAsOperator, resetSmtpPassword, revokeBlockKey, rotateBlockKey } from '../../commands/auth/credentials';
import { parseApiKey } from '../../domain/credentials/apiKeys';
import { isDomainError } from '../../domain/errors';
import { DirectoryCache } from '../../commands/directoryCache';
import { authDepsOf, authenticate } from '../../smtp/auth';
import { findHistoryStreams, processBlockDeletion } from '../../workers/blockDeletion';
import { directoryProjection } from '../../projections/directory/projection';
import { messagesProjection } from '../../projections/messages/projection';
import { analyticsProjection } from '../../projections/analytics/projection';
import { ProjectionRunner, migrateProjection, type Projection } from '../../projections/runner';
import { eventually, holdProjection, startTestMotor, type TestMotor } from '../support/motor';
import { MESSAGES_SCHEMA } from '../../projections/messages/queries';
import { deleteBlock } from '../../commands/blocks/accountBlocks';
import { blockSuppressionIdOf } from '../../domain/motorBlock/suppressions';
import { senderDomainOf } from '../read-api/publicApi';
import { addBlockKey, call, sendFrom, tokenFor } from './support';

/**
 * Deleting a Motor Block over real HTTP, the BullMQ job and how the log forgets (docs/BLOCKS.md):
 * with deleteHistory true the block's messages are gone from the API, the read models and the
 * event store, another block on the same domain keeps its messages, a replay from zero gives the
 * same read models; the deletion status stays readable by its account only.
 */
describe('Motor Block deletion (int)', function () {
  this.timeout(120_000);
  let motor: TestMotor;
  let a: BootstrapResult;
  let manage: string;

  before(async () => {
    motor = await startTestMotor();
    a = await motor.bootstrap();
    manage = await motor.token(a, ['config.manage']);
  });
  after(async () => { await motor?.close(); });

  const create = async (name: string) => {
    const r = await call(motor, 'POST', '/account/motor-blocks', manage, { name, domainId: a.domainId }, { 'Idempotency-Key': randomUUID() });
    expect(r.status).to.equal(201);
    return r.body.data.id as string;
  };
  const completed = (jobId: string, token = manage) => eventually(async () => {
    const r = await call(motor, 'GET', `/account/motor-block-deletions/${jobId}`, token);
    return r.body.data?.status === 'completed' ? r.body.data : null;
  }, 30_000);

  describe('with history (deleteHistory true)', () => {
    let block2: string;
    let key2: string;
    let logs1: string;
    let logs2: string;
    const sent1: string[] = [];
    const sent2: string[] = [];
    let jobId: string;
    let exportJob: string;
    let testDelivery: string;
    let extras: string;
    let hookId: string;
    let manage2: string;
    let liftStream: string;

    before(async () => {
      block2 = await create('To be deleted');
      manage2 = await tokenFor(motor, a, block2, ['config.manage']);
      key2 = await addBlockKey(motor, a.accountId, block2);
      logs1 = await tokenFor(motor, a, a.motorBlockId, ['logs.read']);
      logs2 = await tokenFor(motor, a, block2, ['logs.read']);
      const domain = senderDomainOf(a);
      for (let i = 0; i < 2; i++) {
        const r1 = await sendFrom(motor, domain, a.apiKey);
        const r2 = await sendFrom(motor, domain, key2);
        expect([r1.status, r2.status]).to.deep.equal([200, 200]);
        sent1.push(r1.body.data.id);
        sent2.push(r2.body.data.id);
      }
      // An export job and a webhook delivery of block2: history too.
      extras = await tokenFor(motor, a, block2, ['analytics.read', 'webhooks.manage']);
      const ex = await call(motor, 'POST', `/motor-blocks/${block2}/exports`, extras, {});
      expect(ex.status, JSON.stringify(ex.body)).to.equal(202);
      exportJob = ex.body.data.jobId;
      const hook = await call(motor, 'POST', `/motor-blocks/${block2}/webhooks`, extras, { url: 'https://hooks.example.test/motor' });
      hookId = hook.body.data.id;
      const test = await call(motor, 'POST', `/motor-blocks/${block2}/webhooks/${hookId}/test`, extras, {});
      expect(test.status).to.equal(202);
      testDelivery = test.body.data.deliveryId;
      // A lift from its suppression list (as DELETE .../suppressions/{address} appends it): it names a recipient.
      liftStream = streamName('blockSuppression', blockSuppressionIdOf(block2, 'gone@example.test'));
      await motor.rt.store.append(liftStream, [toEventData(newId(), {
        type: 'BlockSuppressionLifted', data: { motorBlockId: block2, address: 'gone@example.test', liftedAt: new Date().toISOString() },
      }, { actor: 'test' })], { expectedRevision: 'any' });
      // Both blocks' messages are in the read models before the deletion.
      await eventually(async () => {
        const rs = await Promise.all([...sent2.map((id) => call(motor, 'GET', `/messages/${id}`, logs2)), call(motor, 'GET', `/motor-blocks/${block2}/logs`, logs2)]);
        return rs.slice(0, 2).every((r) => r.status === 200) && rs[2].body.data.items.length === 2;
      });
    });

    it('deleteHistory false while the block has sent mail → 409 motor_block_history_present', async () => {
      await call(motor, 'POST', `/account/motor-blocks/${block2}/deactivate`, manage, { confirm: true });
      const r = await call(motor, 'DELETE', `/account/motor-blocks/${block2}`, manage, { confirm: true, deleteHistory: false });
      expect([r.status, r.body.code]).to.deep.equal([409, 'motor_block_history_present']);
      expect(r.body.nextAction).to.be.a('string');
    });

    it('deleteHistory true → 202 with jobId; a repeated DELETE answers with the same job; the job completes', async () => {
      const r = await call(motor, 'DELETE', `/account/motor-blocks/${block2}`, manage, { confirm: true, deleteHistory: true });
      expect(r.status).to.equal(202);
      jobId = r.body.data.jobId;
      expect(jobId).to.match(/^[0-9a-f-]{36}$/);
      const again = await call(motor, 'DELETE', `/account/motor-blocks/${block2}`, manage, { confirm: true, deleteHistory: true });
      if (again.status === 202) expect(again.body.data.jobId).to.equal(jobId);
      else expect(again.status).to.equal(404); // the job already finished: the block is gone
      const status = await completed(jobId);
      expect(status).to.include({ jobId, motorBlockId: block2, deleteHistory: true, status: 'completed' });
      expect(status.counts.messagesDeleted).to.equal(2);
      expect(status.counts.eventsDeleted).to.be.greaterThan(1);
      expect(status.completedAt).to.be.a('string');
    });

    it('the block\'s history is gone: message GET 404, logs empty, events not in the store', async () => {
      await eventually(async () => (await call(motor, 'GET', `/motor-blocks/${block2}/logs`, logs2)).body.data?.items.length === 0);
      for (const id of sent2) {
        expect((await call(motor, 'GET', `/messages/${id}`, logs2)).status).to.equal(404);
        expect(await motor.rt.store.readStream(streamName('message', id))).to.deep.equal([]);
      }
      // The analytics projector applies the tombstone on its own schedule (it runs beside the messages one).
      const analyticsRows = () => motor.rt.db.withSchema('rm_analytics').table('recipient_stats').where({ motor_block_id: block2 });
      await eventually(async () => (await analyticsRows()).length === 0);
      expect(await analyticsRows()).to.deep.equal([]);
      expect(await motor.rt.store.readStream(streamName('export', exportJob))).to.deep.equal([]);
      expect(await motor.rt.store.readStream(streamName('webhookDelivery', testDelivery))).to.deep.equal([]);
      expect(await motor.rt.store.readStream(liftStream), 'the suppression list\'s lifts').to.deep.equal([]);
      await eventually(async () => (await motor.rt.db.withSchema('rm_exports').table('jobs').where({ motor_block_id: block2 })).length === 0);
      await eventually(async () => (await motor.rt.db.withSchema('rm_webhooks').table('deliveries').where({ motor_block_id: block2 })).length === 0);
      // The tombstone stays on the block's stream.
      const blockStream = await motor.rt.store.readStream(streamName('motorBlock', block2));
      expect(blockStream.map((e) => e.type)).to.include('MotorBlockDeleted');
    });

    it('a token minted before the deletion: export, webhook and suppression-lift writes are 404 motor_block_not_found, and no stream of the block\'s history comes back', async () => {
      const refused = await writesWith(motor, block2, hookId, extras);
      expect(refused).to.deep.equal(Array(refused.length).fill([404, 'motor_block_not_found']));
      const lift = await call(motor, 'DELETE', `/motor-blocks/${block2}/suppressions/gone@example.test`, manage2);
      expect([lift.status, lift.body.code]).to.deep.equal([404, 'motor_block_not_found']);
      expect((await findHistoryStreams(motor.rt.store, block2)).streams).to.deep.equal([]);
      expect(await webhooksCreatedFor(motor, block2)).to.equal(1);
    });

    it('another block on the same domain keeps its messages', async () => {
      for (const id of sent1) {
        const r = await call(motor, 'GET', `/messages/${id}`, logs1);
        expect(r.status).to.equal(200);
        expect((await motor.rt.store.readStream(streamName('message', id))).length).to.be.greaterThan(0);
      }
      const logs = await call(motor, 'GET', `/motor-blocks/${a.motorBlockId}/logs`, logs1);
      expect(logs.body.data.items.map((m: { id: string }) => m.id)).to.include.members(sent1);
    });

    it('the deleted block is gone: not listed, not authorized, its API key and SMTP login stop working, routes 404', async () => {
      const list = await call(motor, 'GET', '/account/motor-blocks', manage);
      expect(list.body.data.map((x: { id: string }) => x.id)).to.not.include(block2);
      expect((await call(motor, 'GET', `/account/authorization/motor-blocks/${block2}`, manage)).status).to.equal(403);
      const send = await sendFrom(motor, senderDomainOf(a), key2);
      expect(send.status).to.equal(401);
      const row = await getBlock(motor.rt.db, block2);
      expect(row).to.include({ status: 'deleted', smtpPasswordHash: null });
      const react = await call(motor, 'POST', `/account/motor-blocks/${block2}/reactivate`, manage);
      expect([react.status, react.body.code]).to.deep.equal([404, 'motor_block_not_found']);
    });

    it('the deletion status stays readable by the account, and is 404 for another account', async () => {
      const r = await call(motor, 'GET', `/account/motor-block-deletions/${jobId}`, await motor.token(a, ['config.read']));
      expect([r.status, r.body.data.status]).to.deep.equal([200, 'completed']);
      const stranger = await motor.bootstrap();
      const theirs = await call(motor, 'GET', `/account/motor-block-deletions/${jobId}`, await motor.token(stranger, ['config.read']));
      expect([theirs.status, theirs.body.code]).to.deep.equal([404, 'motor_block_deletion_not_found']);
      expect((await call(motor, 'GET', `/account/motor-block-deletions/${newId()}`, manage)).status).to.equal(404);
      expect((await call(motor, 'GET', '/account/motor-block-deletions/nope', manage)).status).to.equal(400);
    });

    it('a replay from zero gives the same read models (the streams are gone, the tombstone stays)', async () => {
      const replay = async (p: Projection) => {
        const schema = `rm_${p.name}_replay_${randomUUID().slice(0, 6)}`;
        await migrateProjection(motor.rt.db, p, schema);
        const runner = new ProjectionRunner(motor.rt.db, motor.rt.store, p, { schema });
        while ((await runner.catchUp()) > 0) { /* until the end of the log */ }
        return schema;
      };
      const messages = await replay(messagesProjection);
      const ids = async (schema: string) => (await motor.rt.db.withSchema(schema).table('messages').select('id', 'motor_block_id')).map((r: { id: string }) => r.id).sort();
      expect(await ids(messages)).to.deep.equal(await ids('rm_messages'));
      expect(await ids(messages)).to.include.members(sent1);
      const analytics = await replay(analyticsProjection);
      const stats = async (schema: string) => (await motor.rt.db.withSchema(schema).table('block_hourly').where({ motor_block_id: block2 })).length;
      expect([await stats(analytics), await stats('rm_analytics')]).to.deep.equal([0, 0]);
      const directory = await replay(directoryProjection);
      const row = await motor.rt.db.withSchema(directory).table('motor_blocks').where({ id: block2 }).first();
      expect(row.status).to.equal('deleted');
      const job = await motor.rt.db.withSchema(directory).table('motor_block_deletions').where({ job_id: jobId }).first();
      expect(job.status).to.equal('completed');
    });
  });

  describe('without history (deleteHistory false)', () => {
    it('an account\'s only block, never used: 202, completed, and the list is then empty', async () => {
      const c = await motor.bootstrap();
      const t = await motor.token(c, ['config.manage']);
      await call(motor, 'POST', `/account/motor-blocks/${c.motorBlockId}/deactivate`, t, { confirm: true });
      const r = await call(motor, 'DELETE', `/account/motor-blocks/${c.motorBlockId}`, t, { confirm: true, deleteHistory: false });
      expect(r.status).to.equal(202);
      const status = await completed(r.body.data.jobId, t);
      expect(status).to.include({ deleteHistory: false, status: 'completed' });
      const list = await call(motor, 'GET', '/account/motor-blocks', t);
      expect([list.status, list.body.data]).to.deep.equal([200, []]);
    });
  });
});

/** Every write route of a block that creates one of its streams, with a bearer token of that block: [status, code] of each. */
async function writesWith(motor: TestMotor, motorBlockId: string, hookId: string, token: string): Promise<Array<[number, string]>> {
  const base = `/motor-blocks/${motorBlockId}`;
  const answers = [
    await call(motor, 'POST', `${base}/exports`, token, {}),
    await call(motor, 'POST', `${base}/webhooks`, token, { url: 'https://hooks.example.test/after' }),
    await call(motor, 'PUT', `${base}/webhooks/${hookId}`, token, { enabled: false }),
    await call(motor, 'POST', `${base}/webhooks/${hookId}/test`, token, {}),
    await call(motor, 'POST', `${base}/webhooks/${hookId}/rotate-secret`, token, {}),
    await call(motor, 'DELETE', `${base}/webhooks/${hookId}`, token),
  ];
  return answers.map((r) => [r.status, r.body.code]);
}

/** WebhookCreated events of a block in the whole log. */
async function webhooksCreatedFor(motor: TestMotor, motorBlockId: string): Promise<number> {
  let n = 0;
  for (let after: string | null = null; ;) {
    const page = await motor.rt.store.readAll({ after, maxCount: 1000 });
    n += page.filter((e) => e.type === 'WebhookCreated' && (e.data as { motorBlockId: string }).motorBlockId === motorBlockId).length;
    if (page.length < 1000) return n;
    after = page[page.length - 1].position;
  }
}

describe('Motor Block deletion while queued (int, no worker)', function () {
  this.timeout(60_000);
  let motor: TestMotor;
  before(async () => { motor = await startTestMotor({ roles: ['api', 'projector'] }); });
  after(async () => { await motor?.close(); });

  it('reactivate while a deletion is queued → 409 motor_block_delete_in_progress; the status reads queued', async () => {
    const a = await motor.bootstrap();
    const t = await motor.token(a, ['config.manage']);
    await call(motor, 'POST', `/account/motor-blocks/${a.motorBlockId}/deactivate`, t, { confirm: true });
    const del = await call(motor, 'DELETE', `/account/motor-blocks/${a.motorBlockId}`, t, { confirm: true, deleteHistory: true });
    expect(del.status).to.equal(202);
    const react = await call(motor, 'POST', `/account/motor-blocks/${a.motorBlockId}/reactivate`, t);
    expect([react.status, react.body.code]).to.deep.equal([409, 'motor_block_delete_in_progress']);
    const again = await call(motor, 'DELETE', `/account/motor-blocks/${a.motorBlockId}`, t, { confirm: true, deleteHistory: true });
    expect([again.status, again.body.data.jobId]).to.deep.equal([202, del.body.data.jobId]);
    const status = await call(motor, 'GET', `/account/motor-block-deletions/${del.body.data.jobId}`, t);
    expect([status.status, status.body.data.status]).to.deep.equal([200, 'queued']);
    const list = await call(motor, 'GET', '/account/motor-blocks', t);
    expect(list.body.data[0].status).to.equal('deletion_queued');
  });

  it('credentials of a block whose deletion is queued: a new block key (dashboard create and rotate, the CLI\'s key create) or SMTP password → 409 motor_block_delete_in_progress, nothing appended; a key can still be revoked', async () => {
    const a = await motor.bootstrap();
    const t = await motor.token(a, ['config.manage']);
    const key = await eventually(() => findApiKeyByPrefix(motor.rt.db, parseApiKey(a.apiKey)!.prefix));
    await call(motor, 'POST', `/account/motor-blocks/${a.motorBlockId}/deactivate`, t, { confirm: true });
    expect((await call(motor, 'DELETE', `/account/motor-blocks/${a.motorBlockId}`, t, { confirm: true, deleteHistory: true })).status).to.equal(202);
    const owner = { userId: 'owner', accountId: a.accountId };
    const now = new Date();
    const codeOf = (p: Promise<unknown>) => p.then(() => 'done', (err: unknown) => (isDomainError(err) ? err.code : String(err)));
    const logLength = async () => (await motor.rt.store.readAll({ maxCount: 1_000_000 })).length;
    const before = await logLength();
    expect(await codeOf(createBlockKey(motor.rt.store, owner, a.motorBlockId, {}, now))).to.equal('motor_block_delete_in_progress');
    expect(await codeOf(createBlockKeyAsOperator(motor.rt.store, a.motorBlockId, now))).to.equal('motor_block_delete_in_progress');
    expect(await codeOf(rotateBlockKey(motor.rt.store, owner, a.motorBlockId, key.id, now))).to.equal('motor_block_delete_in_progress');
    expect(await codeOf(resetSmtpPassword(motor.rt.store, owner, a.motorBlockId, now))).to.equal('motor_block_delete_in_progress');
    expect(await logLength(), 'nothing appended').to.equal(before);
    expect(await codeOf(revokeBlockKey(motor.rt.store, owner, a.motorBlockId, key.id, now))).to.equal('done');
  });

  it('after a failed deletion, a new DELETE with deleteHistory false is still refused while the block has history (409 motor_block_history_present)', async () => {
    const a = await motor.bootstrap();
    const t = await motor.token(a, ['config.manage']);
    const logs = await motor.token(a, ['logs.read']);
    const sent = await sendFrom(motor, senderDomainOf(a), a.apiKey);
    expect(sent.status).to.equal(200);
    await eventually(async () => (await call(motor, 'GET', `/messages/${sent.body.data.id}`, logs)).status === 200);
    await call(motor, 'POST', `/account/motor-blocks/${a.motorBlockId}/deactivate`, t, { confirm: true });
    const del = await call(motor, 'DELETE', `/account/motor-blocks/${a.motorBlockId}`, t, { confirm: true, deleteHistory: true });
    expect(del.status).to.equal(202);
    // The job gave up (as the worker records it after its last attempt): the history is still there.
    await motor.rt.store.append(streamName('motorBlock', a.motorBlockId), [toEventData(newId(), {
      type: 'MotorBlockDeletionFailed', data: { motorBlockId: a.motorBlockId, jobId: del.body.data.jobId, reason: 'test', at: new Date().toISOString() },
    }, { actor: 'test' })], { expectedRevision: 'any' });
    await eventually(async () => (await call(motor, 'GET', `/account/motor-block-deletions/${del.body.data.jobId}`, t)).body.data?.status === 'failed');
    const again = await call(motor, 'DELETE', `/account/motor-blocks/${a.motorBlockId}`, t, { confirm: true, deleteHistory: false });
    expect([again.status, again.body.code]).to.deep.equal([409, 'motor_block_history_present']);
  });

  it('deleteHistory false just after a send the messages read model has not shown yet: the DELETE waits for it and is refused (409 motor_block_history_present)', async () => {
    const a = await motor.bootstrap();
    const t = await motor.token(a, ['config.manage']);
    const release = await holdProjection(motor, MESSAGES_SCHEMA);
    try {
      const sent = await sendFrom(motor, senderDomainOf(a), a.apiKey);
      expect(sent.status).to.equal(200);
      await call(motor, 'POST', `/account/motor-blocks/${a.motorBlockId}/deactivate`, t, { confirm: true });
      const rows = await motor.rt.db.withSchema(MESSAGES_SCHEMA).table('messages').where({ motor_block_id: a.motorBlockId }).count<{ n: string }[]>({ n: '*' });
      expect(Number(rows[0].n), 'not projected while held').to.equal(0);
      const pending = call(motor, 'DELETE', `/account/motor-blocks/${a.motorBlockId}`, t, { confirm: true, deleteHistory: false });
      setTimeout(() => { void release(); }, 300);
      const del = await pending;
      expect([del.status, del.body.code]).to.deep.equal([409, 'motor_block_history_present']);
    } finally {
      await release();
    }
  });

  it('deleteHistory false while the messages read model stays behind the log: 503 history_unknown (retryAfterSeconds 5, the Retry-After of the HTTP answer), nothing appended', async () => {
    const a = await motor.bootstrap();
    const t = await motor.token(a, ['config.manage']);
    await call(motor, 'POST', `/account/motor-blocks/${a.motorBlockId}/deactivate`, t, { confirm: true });
    const release = await holdProjection(motor, MESSAGES_SCHEMA);
    try {
      // Something for the held projection to be behind on: a send of another block.
      const other = await motor.bootstrap();
      expect((await sendFrom(motor, senderDomainOf(other), other.apiKey)).status).to.equal(200);
      const revision = (await motor.rt.store.readStream(streamName('motorBlock', a.motorBlockId))).length;
      const gaveUp = async () => (await motor.rt.metrics.projectionHeadWaitTimeouts.get()).values.find((v) => v.labels.wait === 'block.delete_history' && v.labels.projection === 'messages')?.value ?? 0;
      const gaveUpBefore = await gaveUp();
      const deps = { store: motor.rt.store, db: motor.rt.db, logger: motor.rt.logger, metrics: motor.rt.metrics, clock: motor.rt.clock, config: motor.rt.config, historyWaitMs: 300 };
      const err = await deleteBlock(deps, { accountId: a.accountId, actor: 'test' }, a.motorBlockId, { confirm: true, deleteHistory: false })
        .then(() => null, (e: unknown) => e as { code: string; status: number; details: { retryAfterSeconds: number } });
      expect([err?.status, err?.code, err?.details.retryAfterSeconds]).to.deep.equal([503, 'history_unknown', 5]);
      expect((await motor.rt.store.readStream(streamName('motorBlock', a.motorBlockId))).length, 'nothing appended').to.equal(revision);
      expect(await gaveUp() - gaveUpBefore, 'motor_projection_head_wait_timeouts_total{messages, block.delete_history}').to.equal(1);
    } finally {
      await release();
    }
    // Caught up, the same DELETE is decided: this block never sent mail.
    const del = await call(motor, 'DELETE', `/account/motor-blocks/${a.motorBlockId}`, t, { confirm: true, deleteHistory: false });
    expect(del.status).to.equal(202);
  });

  it('a token minted before the deletion request: export, webhook and suppression-lift writes answer 409 motor_block_delete_in_progress and create nothing', async () => {
    const a = await motor.bootstrap();
    const t = await motor.token(a, ['config.manage']);
    const extras = await motor.token(a, ['analytics.read', 'webhooks.manage', 'webhooks.read']);
    const hook = await call(motor, 'POST', `/motor-blocks/${a.motorBlockId}/webhooks`, extras, { url: 'https://hooks.example.test/motor' });
    expect(hook.status).to.equal(201);
    await call(motor, 'POST', `/account/motor-blocks/${a.motorBlockId}/deactivate`, t, { confirm: true });
    const del = await call(motor, 'DELETE', `/account/motor-blocks/${a.motorBlockId}`, t, { confirm: true, deleteHistory: true });
    expect(del.status).to.equal(202);
    const refused = await writesWith(motor, a.motorBlockId, hook.body.data.id, extras);
    expect(refused).to.deep.equal(Array(refused.length).fill([409, 'motor_block_delete_in_progress']));
    const lift = await call(motor, 'DELETE', `/motor-blocks/${a.motorBlockId}/suppressions/someone@example.test`, t);
    expect([lift.status, lift.body.code]).to.deep.equal([409, 'motor_block_delete_in_progress']);
    expect((await findHistoryStreams(motor.rt.store, a.motorBlockId)).streams).to.deep.equal([]);
    expect(await webhooksCreatedFor(motor, a.motorBlockId)).to.equal(1);
    const listed = await call(motor, 'GET', `/motor-blocks/${a.motorBlockId}/webhooks`, extras);
    expect(listed.body.data.map((w: { id: string; enabled: boolean }) => [w.id, w.enabled])).to.deep.equal([[hook.body.data.id, true]]);
  });

  it('with history, the job starts only once no directory cache can still show the block active: a message appended meanwhile goes too', async () => {
    const b = await motor.bootstrap();
    const t = await motor.token(b, ['config.manage']);
    const sent = await sendFrom(motor, senderDomainOf(b), b.apiKey);
    expect(sent.status, JSON.stringify(sent.body)).to.equal(200);
    const [accepted] = await motor.rt.store.readStream(streamName('message', sent.body.data.id));
    await call(motor, 'POST', `/account/motor-blocks/${b.motorBlockId}/deactivate`, t, { confirm: true });
    const del = await call(motor, 'DELETE', `/account/motor-blocks/${b.motorBlockId}`, t, { confirm: true, deleteHistory: true });
    expect(del.status).to.equal(202);

    const started = Date.now();
    let settled = false;
    const job = processBlockDeletion(
      { store: motor.rt.store, db: motor.rt.db, clock: motor.rt.clock, logger: motor.rt.logger, followers: { names: [] }, directoryCacheTtlMs: 1500 },
      { motorBlockId: b.motorBlockId, jobId: del.body.data.jobId },
    ).finally(() => { settled = true; });
    await new Promise((r) => setTimeout(r, 700));
    expect(settled, 'the job waits out the cache TTL').to.equal(false);
    expect((await motor.rt.store.readStream(streamName('motorBlock', b.motorBlockId))).map((e) => e.type)).to.not.include('MotorBlockDeletionStarted');
    // A send that read its (2 s) cache before the deactivation appends its message now.
    const lateId = newId();
    await motor.rt.store.append(streamName('message', lateId), [toEventData(newId(), {
      type: 'MessageAccepted', data: { ...(accepted.data as MessageAccepted), messageId: lateId },
    }, { actor: 'test' })], { expectedRevision: 'no_stream' });

    expect(await job).to.equal('completed');
    expect(Date.now() - started).to.be.at.least(1500);
    const tombstone = (await motor.rt.store.readStream(streamName('motorBlock', b.motorBlockId))).find((e) => e.type === 'MotorBlockDeleted');
    expect((tombstone?.data as MotorBlockDeleted | undefined)?.messagesDeleted).to.equal(2);
    expect(await motor.rt.store.readStream(streamName('message', lateId))).to.deep.equal([]);
  });

  it('SMTP AUTH (the listener\'s and POST /v1/test-email\'s) of a block whose deletion is queued: 535 with any password, nothing filed under the block, also through a cache that still holds it', async () => {
    const b = await motor.bootstrap();
    const t = await motor.token(b, ['config.manage']);
    // A listener whose directory cache looked the username up before the request.
    const stale = authDepsOf({ store: motor.rt.store, directory: new DirectoryCache(motor.rt.db, 600_000), clock: motor.rt.clock }, motor.rt.smtpAuthLimiter);
    expect((await stale.blockBySmtpUsername(b.smtpUsername))?.status).to.equal('active');
    await call(motor, 'POST', `/account/motor-blocks/${b.motorBlockId}/deactivate`, t, { confirm: true });
    const del = await call(motor, 'DELETE', `/account/motor-blocks/${b.motorBlockId}`, t, { confirm: true, deleteHistory: true });
    expect(del.status).to.equal(202);
    await eventually(async () => (await getBlock(motor.rt.db, b.motorBlockId))?.status === 'deletion_queued');
    const attempt = (password: string, remoteAddress: string) => ({ mechanism: 'PLAIN' as const, username: b.smtpUsername, password, remoteAddress });
    for (const [password, address] of [[b.smtpPassword, '192.0.2.31'], ['wrong', '192.0.2.32']]) {
      const r = await motor.rt.http.smtpAuth(attempt(password, address));
      expect(r.ok ? 'accepted' : [r.reason, r.reply.code]).to.deep.equal(['unknown_user', 535]);
    }
    const cached = await authenticate(stale, attempt('wrong', '192.0.2.33'));
    expect(cached.ok ? 'accepted' : cached.reply.code).to.equal(535);
    expect(await motor.rt.store.readStream(streamName('smtpAuth', b.motorBlockId))).to.deep.equal([]);
    const filed = (await motor.rt.store.readStream(streamName('smtpAuth', 'unknown')))
      .map((e) => e.data as { username: string; motorBlockId: string | null; reason: string; remoteAddress: string })
      .filter((d) => d.username === b.smtpUsername);
    expect(filed.map((d) => [d.remoteAddress, d.motorBlockId, d.reason])).to.deep.equal([
      ['192.0.2.31', null, 'unknown_user'], ['192.0.2.32', null, 'unknown_user'], ['192.0.2.33', null, 'unknown_user'],
    ]);
  });
});
