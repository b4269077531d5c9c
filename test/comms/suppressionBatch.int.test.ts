import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import { addManualSuppressionsBatch } from '../../commands/comms/suppressions';
import { SUPPRESSION_BATCH_LIMITS, suppressionIdOf } from '../../domain/comms/suppressions';
import { suppressedAmong } from '../../projections/commSuppressions/queries';
import { accepted, bounced } from '../analytics/support';
import { eventually, startTestMotor, type TestMotor } from '../support/motor';
import { as, commGet, commPost, commUrl, storeFailingAfter, tenant, type Tenant } from './support';

/**
 * Importing suppressions (docs/COMMUNICATIONS.md "Importing suppressions"): POST /suppressions/batch
 * with an outcome per item (created, exists, invalid with the single add's own error, duplicate),
 * the body's shape and size, a retry that appends nothing, 1,000 addresses in one call listed by the
 * next GET and skipped by the campaign sender, single adds racing a batch (one SuppressionAdded per
 * address overall), a batch that fails midway, and the tenant rules.
 */
describe('communications: importing suppressions (int)', function () {
  this.timeout(180_000);
  let motor: TestMotor;
  let a: Tenant;
  let b: Tenant;
  type Item = { index: number; email: string | null; status: string; id?: string; error?: { code: string; message: string; field?: string } };

  const batch = (body: unknown, who: Tenant = a, headers = as(who)) => commPost(motor, '/suppressions/batch', body, headers);
  const add = (body: unknown, who: Tenant = a) => commPost(motor, '/suppressions', body, as(who));
  const idOf = (email: string, who: Tenant = a) => suppressionIdOf(who.accountId, email);
  const streamOf = async (email: string, who: Tenant = a) => (await motor.rt.store.readStream(`suppression-${idOf(email, who)}`)).map((e) => e.type);
  const rowOf = async (email: string, who: Tenant = a) =>
    ((await commGet(motor, `/suppressions?email=${encodeURIComponent(email)}`, as(who))).body.data.items as Array<Record<string, unknown>>)[0];
  /** Every suppression of `who` through the API (pages of 500), optionally of one reason. */
  const allRows = async (who: Tenant = a, reason?: string) => {
    const out: Array<{ id: string; email: string; reason: string; note: string | null }> = [];
    for (let cursor: string | null = null; ;) {
      const r = await commGet(motor, `/suppressions?limit=500${reason ? `&reason=${reason}` : ''}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`, as(who));
      expect(r.status, JSON.stringify(r.body)).to.equal(200);
      out.push(...r.body.data.items);
      cursor = r.body.data.next_cursor;
      if (cursor === null) return out;
    }
  };

  before(async () => {
    motor = await startTestMotor();
    a = await tenant(motor, 'supbatch-a@example.test');
    b = await tenant(motor, 'supbatch-b@example.test');
  });
  after(async () => { await motor?.close(); });

  it('a mixed batch: an outcome per item in order (created, exists, invalid with the single add\'s error, duplicate); the next GET shows the adds', async () => {
    expect((await add({ email: 'active@mixed.test', note: 'by phone' })).status).to.equal(201);
    const lifted = await add({ email: 'lifted@mixed.test' });
    const del = await fetch(commUrl(motor, `/suppressions/${lifted.body.data.id}`), { method: 'DELETE', headers: as(a) });
    expect(del.status).to.equal(200);
    // A hard bounce of an address: a manual add over it is created (reason becomes manual), as on the single route.
    const m = randomUUID();
    await motor.rt.store.append(`message-${m}`, [
      accepted(m, a.b.motorBlockId, ['bounced@mixed.test'], new Date(Date.now() - 60_000).toISOString(), a.accountId),
      bounced(m, 'bounced@mixed.test', new Date(Date.now() - 50_000).toISOString(), '550', '5.1.1', 'mx.mixed.test'),
    ], { expectedRevision: 'no_stream' });
    await eventually(async () => (await rowOf('bounced@mixed.test'))?.reason === 'hard_bounce');

    const invalidBodies: unknown[] = [
      { email: 'nope' }, {}, { email: 42 }, { email: '' }, { email: `${'x'.repeat(60)}@${'d'.repeat(250)}.test` },
      { email: 'n@mixed.test', note: 5 }, { email: 'n@mixed.test', note: 'line\nbreak' }, { email: 'n@mixed.test', note: 'n'.repeat(501) },
    ];
    const suppressions: unknown[] = [
      { email: '  New1@Mixed.TEST ', note: '  from the old provider ' }, // 0 created
      ...invalidBodies, // 1..8 invalid
      5, // 9 invalid: not an object
      { email: 'x@mixed.test', reason: 'complaint' }, // 10 invalid: unknown property
      { email: 'NEW1@mixed.test', note: 'again' }, // 11 duplicate of 0
      { email: 'Active@Mixed.test', note: 'another note' }, // 12 exists
      { email: 'lifted@mixed.test' }, // 13 created again after a lift
      { email: 'bounced@mixed.test', note: null }, // 14 created over a hard bounce
      { email: 'nope' }, // 15 invalid again: an invalid item makes no later one a duplicate
      { email: 'new2@mixed.test' }, // 16 created
      { email: ' new2@MIXED.test' }, // 17 duplicate of 16
    ];
    const r = await batch({ suppressions });
    expect(r.status, JSON.stringify(r.body).slice(0, 400)).to.equal(200);
    expect(r.body.success).to.equal(true);
    const d = r.body.data;
    expect({ created: d.created, existing: d.existing, invalid: d.invalid, duplicates: d.duplicates }).to.deep.equal({ created: 4, existing: 1, invalid: 11, duplicates: 2 });
    const summary = (d.items as Item[]).map((i) => [i.index, i.status, i.email, i.id ?? null, i.error?.field ?? null]);
    expect(summary).to.deep.equal([
      [0, 'created', 'new1@mixed.test', idOf('new1@mixed.test'), null],
      [1, 'invalid', 'nope', null, 'email'], [2, 'invalid', null, null, 'email'], [3, 'invalid', null, null, 'email'], [4, 'invalid', '', null, 'email'],
      [5, 'invalid', `${'x'.repeat(60)}@${'d'.repeat(250)}.test`, null, 'email'],
      [6, 'invalid', 'n@mixed.test', null, 'note'], [7, 'invalid', 'n@mixed.test', null, 'note'], [8, 'invalid', 'n@mixed.test', null, 'note'],
      [9, 'invalid', null, null, null], [10, 'invalid', 'x@mixed.test', null, 'reason'],
      [11, 'duplicate', 'new1@mixed.test', idOf('new1@mixed.test'), null],
      [12, 'exists', 'active@mixed.test', idOf('active@mixed.test'), null],
      [13, 'created', 'lifted@mixed.test', lifted.body.data.id, null],
      [14, 'created', 'bounced@mixed.test', idOf('bounced@mixed.test'), null],
      [15, 'invalid', 'nope', null, 'email'],
      [16, 'created', 'new2@mixed.test', idOf('new2@mixed.test'), null],
      [17, 'duplicate', 'new2@mixed.test', idOf('new2@mixed.test'), null],
    ]);
    // Each invalid item carries exactly what POST /suppressions answers for the same body.
    for (const [k, body] of invalidBodies.entries()) {
      const single = await add(body);
      expect(single.status, JSON.stringify(body)).to.equal(400);
      expect(d.items[k + 1].error, JSON.stringify(body)).to.deep.equal({ code: single.body.code, message: single.body.message, field: single.body.field });
    }
    expect([d.items[9].error.code, d.items[10].error.code]).to.deep.equal(['validation_error', 'validation_error']);

    // One SuppressionAdded per created item, as the single add writes it (actor in the metadata); nothing for the others.
    const events = await motor.rt.store.readStream(`suppression-${idOf('new1@mixed.test')}`);
    expect(events.map((e) => [e.type, e.data])).to.deep.equal([[
      'SuppressionAdded', { suppressionId: idOf('new1@mixed.test'), tenantId: a.accountId, email: 'new1@mixed.test', note: 'from the old provider', addedAt: (events[0].data as { addedAt: string }).addedAt },
    ]]);
    expect(events[0].metadata.actor).to.match(/^user:/);
    expect(await streamOf('active@mixed.test')).to.deep.equal(['SuppressionAdded']);
    expect(await streamOf('lifted@mixed.test')).to.deep.equal(['SuppressionAdded', 'SuppressionLifted', 'SuppressionAdded']);
    for (const e of ['nope', 'n@mixed.test', 'x@mixed.test']) expect(await streamOf(e), e).to.deep.equal([]);

    // Read-your-writes: the GET right after the answer shows each add.
    expect(await rowOf('new1@mixed.test')).to.deep.include({ id: idOf('new1@mixed.test'), reason: 'manual', count: 1, note: 'from the old provider' });
    expect(await rowOf('new2@mixed.test')).to.deep.include({ reason: 'manual', count: 1, note: null });
    expect(await rowOf('lifted@mixed.test')).to.deep.include({ reason: 'manual', count: 1 });
    expect(await rowOf('bounced@mixed.test')).to.deep.include({ reason: 'manual', count: 2, smtp_code: '550' });
    expect(await rowOf('active@mixed.test'), 'exists: the note is not changed').to.deep.include({ count: 1, note: 'by phone' });
  });

  it('the body: not {suppressions: array}, 0 or over 1,000 items → 400 validation_error (field suppressions); not an object or another property → 422; tenant rules; nothing written', async () => {
    const over = Array.from({ length: SUPPRESSION_BATCH_LIMITS.maxItems + 1 }, (_, i) => ({ email: `over${i}@shape.test` }));
    for (const body of [{}, { suppressions: null }, { suppressions: 'a@shape.test' }, { suppressions: { email: 'a@shape.test' } }, { suppressions: [] }, { suppressions: over }]) {
      const r = await batch(body);
      expect([r.status, r.body.success, r.body.code, r.body.field], JSON.stringify(body).slice(0, 80)).to.deep.equal([400, false, 'validation_error', 'suppressions']);
    }
    for (const body of [[{ email: 'a@shape.test' }], { suppressions: [{ email: 'a@shape.test' }], extra: 1 }]) {
      const r = await batch(body);
      expect([r.status, r.body.code], JSON.stringify(body)).to.deep.equal([422, 'validation_error']);
    }
    expect((await batch('"text"')).body.code).to.equal('invalid_json');
    // U+0000 or a lone surrogate anywhere: the strict JSON parser refuses the whole body, as on every route.
    for (const bad of [{ email: 'a\u0000@shape.test' }, { email: 'a@shape.test', note: 'x\ud800' }]) {
      const r = await batch({ suppressions: [{ email: 'ok@shape.test' }, bad] });
      expect([r.status, r.body.code], JSON.stringify(bad)).to.deep.equal([400, 'invalid_json']);
    }
    const body = { suppressions: [{ email: 'tenant@shape.test' }] };
    const none = await batch(body, a, as(a, null));
    expect([none.status, none.body.code]).to.deep.equal([400, 'tenant_required']);
    const other = await batch(body, a, as(a, b.accountId));
    expect([other.status, other.body.code]).to.deep.equal([403, 'tenant_forbidden']);
    expect((await batch(body, a, { 'x-tenant-id': a.accountId })).status).to.equal(401);
    expect((await batch(body, a, { 'x-tenant-id': a.accountId, authorization: 'Bearer not.a.jwt' })).status).to.equal(401);
    for (const e of ['a@shape.test', 'ok@shape.test', 'over0@shape.test', 'tenant@shape.test']) expect(await streamOf(e), e).to.deep.equal([]);

    // Hostile items: each an invalid outcome (never a 5xx), the valid one still created.
    const hostile = await batch({ suppressions: [
      { email: `${'x'.repeat(1 << 16)}@shape.test` }, { email: { $ne: 1 } }, { email: 'h@shape.test', note: { $ne: 1 } }, null, [], 'a@shape.test', { email: 'ok@shape.test' },
    ] });
    expect(hostile.status, JSON.stringify(hostile.body).slice(0, 300)).to.equal(200);
    expect(hostile.body.data.items.map((i: Item) => i.status)).to.deep.equal([...Array(6).fill('invalid'), 'created']);
    expect(hostile.body.data.items[0].email, 'an over-long address is not echoed').to.equal(null);
    const polluted = await batch('{"suppressions": [{"email": "p@shape.test", "__proto__": {"x": "1"}}]}');
    expect(polluted.status).to.be.within(200, 499);
    expect(Object.prototype).not.to.have.property('x');
  });

  it('1,000 new addresses in one call, fast; listed by GET ?reason=manual right after; the campaign sender skips them; the same call again appends nothing', async () => {
    const suppressions = Array.from({ length: SUPPRESSION_BATCH_LIMITS.maxItems }, (_, i) => ({ email: `User${i}@Thousand.test`, note: `imported ${i}` }));
    const t0 = Date.now();
    const r = await batch({ suppressions });
    const ms = Date.now() - t0;
    expect(r.status, JSON.stringify(r.body).slice(0, 300)).to.equal(200);
    expect([r.body.data.created, r.body.data.existing, r.body.data.invalid, r.body.data.duplicates]).to.deep.equal([1000, 0, 0, 0]);
    expect((r.body.data.items as Item[]).every((i, k) => i.index === k && i.status === 'created' && i.email === `user${k}@thousand.test` && i.id === idOf(i.email!))).to.equal(true);
    expect(ms, 'a 1,000-item import answers well inside the test timeout').to.be.below(30_000);

    const manual = (await allRows(a, 'manual')).filter((x) => x.email.endsWith('@thousand.test'));
    expect(manual).to.have.length(1000);
    expect(manual.find((x) => x.email === 'user123@thousand.test')).to.deep.include({ id: idOf('user123@thousand.test'), reason: 'manual', note: 'imported 123' });

    const emails = suppressions.map((s) => s.email);
    const skipped = await suppressedAmong(motor.rt.db, a.accountId, [...emails, 'not-imported@thousand.test']);
    expect(skipped.size).to.equal(1000);
    expect(skipped.has('user999@thousand.test')).to.equal(true);
    expect([...await suppressedAmong(motor.rt.db, b.accountId, emails)], 'not another tenant\'s').to.deep.equal([]);

    // A retry of the same call (after a timeout, say): every item exists, nothing appended.
    const again = await batch({ suppressions });
    expect([again.status, again.body.data.created, again.body.data.existing]).to.deep.equal([200, 0, 1000]);
    expect(again.body.data.items[7]).to.deep.equal({ index: 7, email: 'user7@thousand.test', status: 'exists', id: idOf('user7@thousand.test') });
    for (const k of [0, 7, 500, 999]) expect(await streamOf(`user${k}@thousand.test`)).to.deep.equal(['SuppressionAdded']);
    expect((await allRows(a, 'manual')).filter((x) => x.email.endsWith('@thousand.test'))).to.have.length(1000);
  });

  it('single adds racing a batch, and two overlapping batches: one SuppressionAdded per address overall, one active manual suppression', async () => {
    const emails = Array.from({ length: 200 }, (_, i) => `race${i}@concurrent.test`);
    const batchOne = batch({ suppressions: emails.slice(0, 150).map((email) => ({ email })) });
    const batchTwo = batch({ suppressions: emails.slice(100).map((email, i) => ({ email: i % 2 ? email.toUpperCase() : email })) });
    const singles = Promise.all(emails.filter((_, i) => i % 7 === 0).map((email) => add({ email: ` ${email.toUpperCase()}` })));
    const [r1, r2, rs] = await Promise.all([batchOne, batchTwo, singles]);
    for (const r of [r1, r2]) expect(r.status, JSON.stringify(r.body).slice(0, 300)).to.equal(200);
    const createdBy = new Map<string, number>();
    for (const r of [r1, r2]) {
      for (const i of r.body.data.items as Item[]) {
        expect(['created', 'exists'], JSON.stringify(i)).to.include(i.status);
        if (i.status === 'created') createdBy.set(i.email!, (createdBy.get(i.email!) ?? 0) + 1);
      }
    }
    for (const s of rs) {
      expect([200, 201]).to.include(s.status);
      if (s.status === 201) createdBy.set(s.body.data.email, (createdBy.get(s.body.data.email) ?? 0) + 1);
    }
    expect(createdBy.size).to.equal(200);
    expect([...createdBy.values()].every((n) => n === 1)).to.equal(true);
    for (const email of emails) expect(await streamOf(email), email).to.deep.equal(['SuppressionAdded']);
    const rows = (await allRows(a, 'manual')).filter((x) => x.email.endsWith('@concurrent.test'));
    expect(rows).to.have.length(200);
  });

  it('a batch that fails midway keeps what it appended; the same call again answers those exists and creates the rest', async () => {
    // The event store goes away after 30 appends (as a crash of this process would leave them).
    const failing = storeFailingAfter(motor.rt.store, 30);
    const suppressions = Array.from({ length: 80 }, (_, i) => ({ email: `crash${i}@midway.test` }));
    const deps = { store: failing, db: motor.rt.db, clock: motor.rt.clock, logger: motor.rt.logger, metrics: motor.rt.metrics };
    const err = await addManualSuppressionsBatch(deps, a.accountId, 'user:test', { suppressions }).then(() => null, (e: unknown) => e);
    expect((err as Error)?.message).to.equal('event store gone');
    const written = (await Promise.all(suppressions.map(async (s) => (await streamOf(s.email)).length))).filter((n) => n > 0);
    expect(written, 'the 30 appends that succeeded are kept, each one event').to.deep.equal(Array(30).fill(1));

    const retry = await batch({ suppressions });
    expect([retry.status, retry.body.data.created, retry.body.data.existing]).to.deep.equal([200, 50, 30]);
    expect((await allRows(a, 'manual')).filter((x) => x.email.endsWith('@midway.test'))).to.have.length(80);
  });

  it('another tenant is unaffected: it sees none of the imports, and its own import of the same address is its own', async () => {
    expect(await allRows(b)).to.deep.equal([]);
    const r = await batch({ suppressions: [{ email: 'new1@mixed.test' }, { email: 'user1@thousand.test' }] }, b);
    expect(r.status).to.equal(200);
    expect((r.body.data.items as Item[]).map((i) => [i.status, i.id])).to.deep.equal([
      ['created', idOf('new1@mixed.test', b)], ['created', idOf('user1@thousand.test', b)],
    ]);
    expect(idOf('new1@mixed.test', b)).not.to.equal(idOf('new1@mixed.test'));
    expect((await allRows(b)).map((x) => x.email).sort()).to.deep.equal(['new1@mixed.test', 'user1@thousand.test']);
    expect(await rowOf('new1@mixed.test'), 'a\'s row unchanged').to.deep.include({ count: 1, note: 'from the old provider' });
  });
});
