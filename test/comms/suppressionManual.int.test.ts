import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import type { EventData, RecordedEvent } from '../../domain/eventStore';
import { toEventData } from '../../domain/events';
import { MANUAL_SUPPRESSION_LIMITS, suppressionIdOf } from '../../domain/comms/suppressions';
import { commSuppressionsProjection, SUPPRESSIONS_SCHEMA } from '../../projections/commSuppressions/projection';
import { suppressedAmong } from '../../projections/commSuppressions/queries';
import { migrateProjection } from '../../projections/runner';
import { bounced, complained } from '../analytics/support';
import { eventually, startTestMotor, type TestMotor } from '../support/motor';
import { appendMessage, as, commGet, commPost, liftAs, minutesAgo, suppressionRowOf, tenant, type Tenant } from './support';

/**
 * POST /comm-api/api/suppressions (docs/COMMUNICATIONS.md "Suppressions"): the tenant suppresses
 * an address by hand (reason `manual`), once (a repeat is 200 and appends nothing, concurrent adds
 * too); precedence complaint > unsubscribed > manual > hard_bounce; the tenant can lift it and add
 * it again; another tenant sees none of it; the campaign sender's suppressedAmong skips it; the
 * read model rebuilt from the log gives the same rows.
 */
describe('communications: manual suppressions (int)', function () {
  this.timeout(120_000);
  let motor: TestMotor;
  let a: Tenant;
  let b: Tenant;
  type Row = {
    id: string; email: string; reason: string; count: number; first_at: string; last_at: string;
    last_message_id: string | null; last_motor_block_id: string | null; smtp_code: string | null; enhanced_code: string | null; note: string | null;
  };

  const add = (t: Tenant, body: unknown) => commPost(motor, '/suppressions', body, as(t));
  const rowOf = (t: Tenant, email: string) => suppressionRowOf(motor, t, email);
  const lift = (t: Tenant, id: string) => liftAs(motor, t, id);
  const streamOf = async (t: Tenant, email: string) => (await motor.rt.store.readStream(`suppression-${suppressionIdOf(t.accountId, email)}`)).map((e) => e.type);
  const send = (t: Tenant, to: string, acceptedAt: string, outcomes: (m: string) => EventData[]) => appendMessage(motor, t, to, acceptedAt, outcomes);
  const unsubscribe = async (t: Tenant, email: string, at: string) => {
    const contactId = randomUUID();
    await motor.rt.store.append(`contact-${contactId}`, [toEventData(randomUUID(), {
      type: 'ContactUnsubscribed', data: { contactId, tenantId: t.accountId, listId: randomUUID(), email, via: 'page', unsubscribedAt: at },
    })], { expectedRevision: 'any' });
  };
  const ago = minutesAgo;

  before(async () => {
    motor = await startTestMotor();
    a = await tenant(motor, 'manual-a@example.test');
    b = await tenant(motor, 'manual-b@example.test');
  });
  after(async () => { await motor?.close(); });

  it('creates a manual suppression (201, the record), shown by the next GET; the actor is recorded', async () => {
    const r = await add(a, { email: '  Phone@Example.TEST ', note: '  asked by phone  ' });
    expect(r.status).to.equal(201);
    const id = suppressionIdOf(a.accountId, 'phone@example.test');
    expect(r.body.success).to.equal(true);
    expect(r.body.data).to.deep.include({
      id, email: 'phone@example.test', reason: 'manual', count: 1, last_message_id: null, last_motor_block_id: null, smtp_code: null, enhanced_code: null, note: 'asked by phone',
    });
    expect(r.body.data.first_at).to.equal(r.body.data.last_at);
    expect(await rowOf(a, 'PHONE@example.test'), 'read-your-writes').to.deep.equal(r.body.data);
    const events = await motor.rt.store.readStream(`suppression-${id}`);
    expect(events.map((e) => [e.type, e.data])).to.deep.equal([[
      'SuppressionAdded', { suppressionId: id, tenantId: a.accountId, email: 'phone@example.test', note: 'asked by phone', addedAt: r.body.data.first_at },
    ]]);
    expect(events[0].metadata.actor).to.match(/^user:/);
    // A note is optional; empty or null is none.
    for (const [email, note] of [['nonote1@example.test', undefined], ['nonote2@example.test', null], ['nonote3@example.test', '   ']] as const) {
      const x = await add(a, note === undefined ? { email } : { email, note });
      expect([x.status, x.body.data.note], email).to.deep.equal([201, null]);
    }
  });

  it('a repeat while it is active is 200 with the record and appends nothing (whatever its note or case)', async () => {
    const first = await rowOf(a, 'phone@example.test');
    for (const body of [{ email: 'phone@example.test' }, { email: 'PHONE@EXAMPLE.TEST', note: 'another note' }]) {
      const r = await add(a, body);
      expect([r.status, r.body.data], JSON.stringify(body)).to.deep.equal([200, first]);
    }
    expect(await streamOf(a, 'phone@example.test')).to.deep.equal(['SuppressionAdded']);
  });

  it('validation: 400 validation_error with the field, 422 for a non-object or an unknown property; nothing stored', async () => {
    const cases: Array<[unknown, string]> = [
      [{}, 'email'], [{ email: null }, 'email'], [{ email: 42 }, 'email'], [{ email: 'nope' }, 'email'], [{ email: '' }, 'email'],
      [{ email: 'two words@example.test' }, 'email'], [{ email: `${'x'.repeat(60)}@${'d'.repeat(250)}.test` }, 'email'],
      [{ email: `${'x'.repeat(1 << 16)}@example.test` }, 'email'], [{ email: 'a\u0007@example.test' }, 'email'],
      [{ email: 'v@example.test', note: 5 }, 'note'], [{ email: 'v@example.test', note: ['x'] }, 'note'],
      [{ email: 'v@example.test', note: 'n'.repeat(MANUAL_SUPPRESSION_LIMITS.noteMax + 1) }, 'note'],
      [{ email: 'v@example.test', note: 'line\nbreak' }, 'note'], [{ email: 'v@example.test', note: 'bell\u0007' }, 'note'],
    ];
    for (const [body, field] of cases) {
      const r = await add(a, body);
      expect([r.status, r.body.code, r.body.field], JSON.stringify(body).slice(0, 80)).to.deep.equal([400, 'validation_error', field]);
    }
    for (const body of [[], [{ email: 'v@example.test' }], { email: 'v@example.test', reason: 'complaint' }]) {
      const r = await add(a, body);
      expect([r.status, r.body.code], JSON.stringify(body)).to.deep.equal([422, 'validation_error']);
    }
    for (const body of ['"v@example.test"', '42']) {
      const r = await add(a, body);
      expect([r.status, r.body.code], `${body} (the strict JSON parser)`).to.deep.equal([400, 'invalid_json']);
    }
    // Refused earlier (the strict JSON parser, the validator): a 4xx with a code all the same, never a 5xx.
    for (const body of ['null', '{"email": "v@example.test", "__proto__": {"x": 1}}', '{"email": {"$ne": 1}}', { email: 'a\u0000@example.test' }, { email: 'v@example.test', note: 'x\ud800' }]) {
      const r = await add(a, body);
      expect(r.status, JSON.stringify(body)).to.be.within(400, 499);
      expect(r.body.code, JSON.stringify(body)).to.be.a('string');
    }
    // The limits themselves are allowed (counted in characters, not bytes).
    expect((await add(a, { email: 'edge@example.test', note: 'é'.repeat(MANUAL_SUPPRESSION_LIMITS.noteMax) })).status).to.equal(201);
    expect(await rowOf(a, 'v@example.test')).to.equal(undefined);
    expect(await streamOf(a, 'v@example.test')).to.deep.equal([]);
    const noTenant = await commPost(motor, '/suppressions', { email: 'v@example.test' }, as(a, null));
    expect([noTenant.status, noTenant.body.code]).to.deep.equal([400, 'tenant_required']);
    const otherTenant = await commPost(motor, '/suppressions', { email: 'v@example.test' }, as(a, b.accountId));
    expect([otherTenant.status, otherTenant.body.code]).to.deep.equal([403, 'tenant_forbidden']);
  });

  it('precedence: complaint > unsubscribed > manual > hard_bounce; count and times include the manual add, the message and codes stay the bounce\'s', async () => {
    const bouncedAt = ago(59);
    const m = await send(a, 'bounced@prec.test', ago(60), (x) => [bounced(x, 'bounced@prec.test', bouncedAt, '550', '5.1.1', 'mx.prec.test')]);
    await eventually(async () => rowOf(a, 'bounced@prec.test'));
    const r = await add(a, { email: 'bounced@prec.test', note: 'role address' });
    expect(r.status, 'a manual add over a bounce creates one').to.equal(201);
    expect(r.body.data).to.deep.include({
      reason: 'manual', count: 2, first_at: bouncedAt, last_message_id: m, last_motor_block_id: a.b.motorBlockId, smtp_code: '550', enhanced_code: '5.1.1', note: 'role address',
    });
    expect(Date.parse(r.body.data.last_at), 'last_at: the manual add').to.be.above(Date.parse(bouncedAt) + 50 * 60_000);

    expect((await add(a, { email: 'complained@prec.test' })).status).to.equal(201);
    await send(a, 'complained@prec.test', ago(1), (x) => [complained(x, 'complained@prec.test', new Date(Date.now() + 1000).toISOString())]);
    const c = await eventually(async () => ((await rowOf(a, 'complained@prec.test'))?.reason === 'complaint' ? rowOf(a, 'complained@prec.test') : undefined));
    expect(c).to.deep.include({ reason: 'complaint', count: 2 });

    await unsubscribe(a, 'unsub@prec.test', ago(5));
    await eventually(async () => rowOf(a, 'unsub@prec.test'));
    const u = await add(a, { email: 'unsub@prec.test', note: 'also asked by phone' });
    expect([u.status, u.body.data.reason, u.body.data.count, u.body.data.note, u.body.data.last_message_id]).to.deep.equal([201, 'unsubscribed', 2, 'also asked by phone', null]);
  });

  it('reason=manual lists exactly the rows whose reason is manual', async () => {
    const r = await commGet(motor, '/suppressions?reason=manual&limit=500', as(a));
    expect(r.status).to.equal(200);
    const emails = (r.body.data.items as Row[]).map((x) => x.email).sort();
    expect(emails).to.deep.equal(['bounced@prec.test', 'edge@example.test', 'nonote1@example.test', 'nonote2@example.test', 'nonote3@example.test', 'phone@example.test']);
    expect((r.body.data.items as Row[]).every((x) => x.reason === 'manual')).to.equal(true);
    const hard = (await commGet(motor, '/suppressions?reason=hard_bounce', as(a))).body.data.items as Row[];
    expect(hard.map((x) => x.email)).not.to.include('bounced@prec.test');
  });

  it('suppressedAmong (the campaign sender) skips a manual suppression', async () => {
    const got = await suppressedAmong(motor.rt.db, a.accountId, ['PHONE@example.test', 'fresh@example.test', 'Bounced@Prec.test']);
    expect([...got].sort()).to.deep.equal(['bounced@prec.test', 'phone@example.test']);
    expect([...await suppressedAmong(motor.rt.db, b.accountId, ['phone@example.test'])], 'not another tenant\'s').to.deep.equal([]);
  });

  it('a lift drops the manual add (and the bounces up to it); a manual add after it suppresses again; complaints and unsubscribes stay not liftable', async () => {
    const id = suppressionIdOf(a.accountId, 'phone@example.test');
    expect(await lift(a, id)).to.deep.equal({ status: 200, body: { success: true, data: { id, email: 'phone@example.test', lifted: true } } });
    expect(await rowOf(a, 'phone@example.test')).to.equal(undefined);
    expect([...await suppressedAmong(motor.rt.db, a.accountId, ['phone@example.test'])]).to.deep.equal([]);
    expect((await lift(a, id)).body.code, 'lifted already').to.equal('suppression_not_found');

    const again = await add(a, { email: 'phone@example.test', note: 'asked again' });
    expect([again.status, again.body.data.id, again.body.data.reason, again.body.data.count, again.body.data.note]).to.deep.equal([201, id, 'manual', 1, 'asked again']);
    expect(await streamOf(a, 'phone@example.test')).to.deep.equal(['SuppressionAdded', 'SuppressionLifted', 'SuppressionAdded']);
    expect((await add(a, { email: 'phone@example.test' })).status, 'active again: a repeat is 200').to.equal(200);

    const mixed = suppressionIdOf(a.accountId, 'bounced@prec.test');
    expect((await lift(a, mixed)).status).to.equal(200);
    expect(await rowOf(a, 'bounced@prec.test'), 'the bounce before the lift goes with the manual add').to.equal(undefined);

    for (const [email, reason] of [['complained@prec.test', 'complaint'], ['unsub@prec.test', 'unsubscribed']]) {
      const r = await lift(a, suppressionIdOf(a.accountId, email));
      expect([r.status, r.body.code, (r.body.details ?? r.body).reason], email).to.deep.equal([409, 'suppression_not_liftable', reason]);
      expect(await rowOf(a, email), email).to.deep.include({ reason, count: 2 });
    }
  });

  it('another tenant cannot see or lift it, and its own add of the address is its own', async () => {
    const id = suppressionIdOf(a.accountId, 'phone@example.test');
    expect(await rowOf(b, 'phone@example.test')).to.equal(undefined);
    expect(((await commGet(motor, '/suppressions?reason=manual', as(b))).body.data.items as Row[])).to.deep.equal([]);
    const r = await lift(b, id);
    expect([r.status, r.body.code]).to.deep.equal([404, 'suppression_not_found']);
    expect(await rowOf(a, 'phone@example.test')).to.deep.include({ id, reason: 'manual' });

    const own = await add(b, { email: 'phone@example.test' });
    expect([own.status, own.body.data.id, own.body.data.count]).to.deep.equal([201, suppressionIdOf(b.accountId, 'phone@example.test'), 1]);
    expect(own.body.data.id).not.to.equal(id);
  });

  it('concurrent adds of one address make one active suppression: one 201, the rest 200, one event', async () => {
    const results = await Promise.all(Array.from({ length: 12 }, (_, i) => add(a, { email: i % 2 === 0 ? 'race@example.test' : 'RACE@example.test', note: `try ${i}` })));
    const statuses = results.map((r) => r.status).sort();
    expect(statuses).to.deep.equal([200, 200, 200, 200, 200, 200, 200, 200, 200, 200, 200, 201]);
    expect(await streamOf(a, 'race@example.test')).to.deep.equal(['SuppressionAdded']);
    const row = await rowOf(a, 'race@example.test');
    expect(row).to.deep.include({ reason: 'manual', count: 1 });
    expect(results.every((r) => r.body.data.id === row!.id)).to.equal(true);
  });

  it('the read model orders a lift and the adds around it by stream revision, not by clock (all in one millisecond)', async () => {
    const schema = 'rm_commsuppressions_manualtest_clock';
    const email = 'same-ms@example.test';
    const id = suppressionIdOf(a.accountId, email);
    const at = new Date().toISOString();
    const ev = (type: 'SuppressionAdded' | 'SuppressionLifted', revision: number) => ({
      id: randomUUID(), streamId: `suppression-${id}`, type, version: 1, revision: BigInt(revision), position: '0', createdAt: new Date(), metadata: {},
      data: type === 'SuppressionAdded' ? { suppressionId: id, tenantId: a.accountId, email, note: `add ${revision}`, addedAt: at } : { suppressionId: id, tenantId: a.accountId, email, liftedAt: at },
    }) as unknown as RecordedEvent;
    const [added, lifted, addedAgain] = [ev('SuppressionAdded', 0), ev('SuppressionLifted', 1), ev('SuppressionAdded', 2)];
    await migrateProjection(motor.rt.db, commSuppressionsProjection, schema);
    try {
      const row = async () => (await motor.rt.db.withSchema(schema).table('suppressions').where({ id }).first('reason', 'count', 'note')) as unknown;
      for (const batch of [[added, lifted], [addedAgain], [addedAgain, lifted, added]]) {
        await motor.rt.db.transaction((trx) => commSuppressionsProjection.applyBatch(trx, schema, batch));
      }
      expect(await row()).to.deep.equal({ reason: 'manual', count: 1, note: 'add 2' });
    } finally {
      await motor.rt.db.raw(`drop schema if exists "${schema}" cascade`);
    }
  });

  it('the read model rebuilt from the log (twice, in part again, or one event at a time) gives the live rows', async () => {
    const log: RecordedEvent[] = [];
    for (let after: string | null = null; ;) {
      const page = await motor.rt.store.readAll({ after, maxCount: 1000 });
      if (page.length === 0) break;
      log.push(...page.filter((e) => commSuppressionsProjection.handles.includes(e.type)));
      after = page[page.length - 1].position;
    }
    expect(log.filter((e) => e.type === 'SuppressionAdded').length).to.be.greaterThan(5);
    expect(log.some((e) => e.type === 'SuppressionLifted')).to.equal(true);
    const snapshot = async (schema: string) =>
      (await motor.rt.db.raw(`select id, account_id, email, reason, count, first_at, last_at, last_message_id, last_motor_block_id, smtp_code, enhanced_code, note
        from "${schema}"."suppressions" order by account_id, email`)).rows;
    const live = await snapshot(SUPPRESSIONS_SCHEMA);
    const half = Math.floor(log.length / 2);
    const runs: Array<[string, RecordedEvent[][]]> = [
      ['rm_commsuppressions_manualtest', [log, log, log.slice(half - 3, half + 5)]],
      ['rm_commsuppressions_manualtest_single', log.map((e) => [e])],
      // A re-delivery of the first half after the whole: the lift must still come after the add it lifted.
      ['rm_commsuppressions_manualtest_part', [log.slice(0, half), log, log.slice(0, half)]],
    ];
    for (const [schema, batches] of runs) {
      await migrateProjection(motor.rt.db, commSuppressionsProjection, schema);
      try {
        for (const batch of batches) await motor.rt.db.transaction((trx) => commSuppressionsProjection.applyBatch(trx, schema, batch));
        expect(await snapshot(schema), schema).to.deep.equal(live);
      } finally {
        await motor.rt.db.raw(`drop schema if exists "${schema}" cascade`);
      }
    }
  });
});
