import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import { addManualSuppressionsBatch } from '../../commands/comms/suppressions';
import { suppressionIdOf } from '../../domain/comms/suppressions';
import { streamName } from '../../domain/eventStore';
import { toEventData } from '../../domain/events';
import { newId } from '../../domain/ids';
import { commSuppressionsProjection, SUPPRESSIONS_SCHEMA } from '../../projections/commSuppressions/projection';
import { ProjectionRunner } from '../../projections/runner';
import { startTestMotor, type TestMotor } from '../support/motor';
import { as, commGet, commPost, commUrl, tenant, type Tenant } from './support';

/**
 * Review of the suppressions import (docs/COMMUNICATIONS.md "Importing suppressions"): odd bodies
 * (prototype keys, huge strings, non-string notes, 1,000 duplicates or invalid items) answer 200
 * with the right counts; every `id` answered is the one DELETE /suppressions/{id} takes; an `exists`
 * answer waits, as the single add's 200 does, until the read model shows the active add; the
 * contacts batch keeps its own rules for the same odd items.
 */
describe('communications: importing suppressions, review (int)', function () {
  this.timeout(120_000);
  let motor: TestMotor;
  let a: Tenant;
  type Item = { index: number; email: string | null; status: string; id?: string; error?: { code: string; message: string; field?: string } };

  const batch = (body: unknown, who: Tenant = a) => commPost(motor, '/suppressions/batch', body, as(who));
  const lift = (id: string, who: Tenant = a) => fetch(commUrl(motor, `/suppressions/${id}`), { method: 'DELETE', headers: as(who) });

  before(async () => {
    motor = await startTestMotor();
    a = await tenant(motor, 'review3-a@example.test');
  });
  after(async () => { await motor?.close(); });

  it('prototype keys, huge strings and non-string notes are item errors, never a 500; the call still creates the good items', async () => {
    const suppressions = JSON.parse(JSON.stringify([
      { email: 'good@proto.test' }, // 0 created
      { email: 'x@proto.test', constructor: 'x' }, // 1 invalid: unknown property
      { email: 'x@proto.test', toString: 'x' }, // 2 invalid: unknown property
      { email: 'constructor@proto.test' }, // 3 created
      { email: '__proto__@proto.test' }, // 4 created
      { email: 'n@proto.test', note: { a: { b: ['c'] } } }, // 5 invalid: note not a string
      { email: 'n@proto.test', note: ['x'] }, // 6 invalid
      { email: 'n@proto.test', note: true }, // 7 invalid
      { email: `${'h'.repeat(400_000)}@proto.test` }, // 8 invalid, email null (over 320 characters)
      { email: 'big@proto.test', note: 'n'.repeat(400_000) }, // 9 invalid: note too long
      { email: 'GOOD@proto.test' }, // 10 duplicate of 0
    ]).replace('{"email":"x@proto.test","constructor":"x"}', '{"email":"x@proto.test","__proto__":{"email":"evil@proto.test"}}')) as unknown[];
    const r = await batch({ suppressions });
    expect(r.status, JSON.stringify(r.body).slice(0, 400)).to.equal(200);
    const items = r.body.data.items as Item[];
    expect(items.map((i) => i.status)).to.deep.equal(['created', 'invalid', 'invalid', 'created', 'created', 'invalid', 'invalid', 'invalid', 'invalid', 'invalid', 'duplicate']);
    expect(items[1].error).to.deep.include({ code: 'validation_error', field: '__proto__' });
    expect(items[2].error).to.deep.include({ code: 'validation_error', field: 'toString' });
    expect(items[5].error).to.deep.include({ code: 'validation_error', field: 'note' });
    expect(items[8]).to.deep.include({ email: null, status: 'invalid' });
    expect(items[9].error).to.deep.include({ code: 'validation_error', field: 'note' });
    expect([r.body.data.created, r.body.data.existing, r.body.data.invalid, r.body.data.duplicates]).to.deep.equal([3, 0, 7, 1]);
    const rows = (await commGet(motor, '/suppressions?limit=500', as(a))).body.data.items as Array<{ email: string }>;
    expect(rows.map((x) => x.email).filter((e) => e.endsWith('@proto.test')).sort()).to.deep.equal(['__proto__@proto.test', 'constructor@proto.test', 'good@proto.test']);
  });

  it('1,000 copies of one address: one created, 999 duplicates; 1,000 invalid items: 200 with nothing written', async () => {
    const dup = await batch({ suppressions: Array.from({ length: 1000 }, (_, i) => ({ email: i % 2 ? 'Same@Dup.test' : ' same@dup.test ' })) });
    expect(dup.status).to.equal(200);
    expect([dup.body.data.created, dup.body.data.existing, dup.body.data.invalid, dup.body.data.duplicates]).to.deep.equal([1, 0, 0, 999]);
    expect(new Set((dup.body.data.items as Item[]).map((i) => i.id))).to.deep.equal(new Set([suppressionIdOf(a.accountId, 'same@dup.test')]));

    const bad = await batch({ suppressions: Array.from({ length: 1000 }, (_, i) => (i % 3 === 0 ? { email: 'nope' } : i % 3 === 1 ? null : { email: 'n@bad.test', note: 1 })) });
    expect(bad.status).to.equal(200);
    expect([bad.body.data.created, bad.body.data.existing, bad.body.data.invalid, bad.body.data.duplicates]).to.deep.equal([0, 0, 1000, 0]);
  });

  it('every id answered (created, exists, duplicate) is the one DELETE /suppressions/{id} lifts', async () => {
    expect((await commPost(motor, '/suppressions', { email: 'old@ids.test' }, as(a))).status).to.equal(201);
    const r = await batch({ suppressions: [{ email: ' New@IDS.test' }, { email: 'OLD@ids.test' }, { email: 'dup@ids.test' }, { email: 'DUP@ids.test' }] });
    expect(r.status).to.equal(200);
    const items = r.body.data.items as Item[];
    expect(items.map((i) => i.status)).to.deep.equal(['created', 'exists', 'created', 'duplicate']);
    for (const i of [items[0], items[1], items[3]]) {
      const del = await lift(i.id!);
      expect(del.status, `${i.email}: ${await del.clone().text()}`).to.equal(200);
      expect(((await del.json()) as { data: unknown }).data).to.deep.equal({ id: i.id, email: i.email, lifted: true });
    }
    const rows = (await commGet(motor, '/suppressions?limit=500', as(a))).body.data.items as Array<{ email: string }>;
    expect(rows.map((x) => x.email).filter((e) => e.endsWith('@ids.test'))).to.deep.equal([]);
  });

  it('the contacts batch answers the same odd items as before the shared planBatch (item errors, a 200)', async () => {
    const list = await commPost(motor, '/lists', { name: 'review3' }, as(a));
    expect(list.status).to.equal(201);
    const contacts = JSON.parse('[{"email":"p@c.test","__proto__":{"email":"evil@c.test"}},{"email":"q@c.test","fields":{"constructor":"x"}},{"email":"r@c.test","fields":{"__proto__":"x"}},7,{"email":"Q@c.test"}]') as unknown[];
    const r = await commPost(motor, `/lists/${list.body.data.id}/contacts/batch`, { contacts }, as(a));
    expect(r.status, JSON.stringify(r.body).slice(0, 400)).to.equal(200);
    expect((r.body.data.items as Item[]).map((i) => i.status)).to.deep.equal(['invalid', 'added', 'invalid', 'invalid', 'duplicate']);
    expect((r.body.data.items as Item[])[0].error).to.deep.include({ code: 'validation_error', field: '__proto__' });
    expect([r.body.data.added, r.body.data.existing, r.body.data.invalid, r.body.data.duplicates]).to.deep.equal([1, 0, 3, 1]);
  });

  it('lifts racing a batch of the same addresses: the read model ends as the stream decides (active iff the last event is an add)', async () => {
    const emails = Array.from({ length: 20 }, (_, i) => `lr${i}@liftrace.test`);
    const first = await batch({ suppressions: emails.map((email) => ({ email })) });
    expect(first.body.data.created).to.equal(20);
    const [again, ...lifts] = await Promise.all([
      batch({ suppressions: emails.map((email) => ({ email })) }),
      ...emails.map((email) => lift(suppressionIdOf(a.accountId, email))),
    ]);
    expect(again.status).to.equal(200);
    for (const l of lifts) expect(l.status).to.equal(200);
    for (const [k, email] of emails.entries()) {
      const types = (await motor.rt.store.readStream(`suppression-${suppressionIdOf(a.accountId, email)}`)).map((e) => e.type);
      const status = (again.body.data.items as Item[])[k].status;
      expect(types.filter((t) => t === 'SuppressionAdded').length, `${email}: ${types.join(',')}`).to.equal(status === 'created' ? 2 : 1);
      const row = ((await commGet(motor, `/suppressions?email=${encodeURIComponent(email)}`, as(a))).body.data.items as unknown[])[0];
      expect(row !== undefined, `${email}: ${types.join(',')} (${status})`).to.equal(types[types.length - 1] === 'SuppressionAdded');
    }
  });

  it('an `exists` answer waits, as the single add\'s 200 does, until the read model shows the active add (a retry after a call cut short)', async () => {
    // A motor without a projector; this test's own runner applies the suppressions when told to.
    const bare = await startTestMotor({ roles: ['api'] });
    try {
      const runner = new ProjectionRunner(bare.rt.db, bare.rt.store, commSuppressionsProjection);
      await runner.init();
      await runner.catchUp();
      const tenantId = randomUUID();
      const emails = ['one@retry.test', 'two@retry.test', 'three@retry.test'];
      // What a first call cut short leaves: its adds appended, not yet applied by the projector.
      const eventIds: string[] = [];
      for (const email of emails) {
        const id = suppressionIdOf(tenantId, email);
        const eventId = newId();
        eventIds.push(eventId);
        await bare.rt.store.append(streamName('suppression', id), [toEventData(eventId, {
          type: 'SuppressionAdded', data: { suppressionId: id, tenantId, email, note: null, addedAt: new Date().toISOString() },
        }, { actor: 'user:test' })], { expectedRevision: 'no_stream' });
      }
      const shown = async () => ((await bare.rt.db.withSchema(SUPPRESSIONS_SCHEMA).table('manual_adds').whereIn('event_id', eventIds).select('event_id')) as unknown[]).length;

      let shownAtAnswer = -1;
      const deps = { store: bare.rt.store, db: bare.rt.db, clock: bare.rt.clock, logger: bare.rt.logger, metrics: bare.rt.metrics };
      const call = addManualSuppressionsBatch(deps, tenantId, 'user:test', { suppressions: emails.map((email) => ({ email })) })
        .then(async (r) => { shownAtAnswer = await shown(); return r; });
      await new Promise((res) => setTimeout(res, 500));
      await runner.catchUp();
      const r = await call;
      expect(r.items.map((i) => i.status)).to.deep.equal(['exists', 'exists', 'exists']);
      expect(shownAtAnswer, 'the answer came once the read model showed every address answered').to.equal(3);
    } finally {
      await bare.close();
    }
  });
});
