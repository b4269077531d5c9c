import { expect } from 'chai';
import type { BootstrapResult } from '../../commands/admin/bootstrap';
import { RETENTION_GRACE_MS } from '../../read-api/http/retention';
import { eventually, startTestMotor, type TestMotor } from '../support/motor';
import { appendOutcome, getPublic, sendMail } from './publicApi';

/**
 * GET /api/public/v1/motor-blocks/{id}/logs against a real Motor (API + projectors, no delivery:
 * outcomes come from delivery events appended to the store, as a worker would).
 */
describe('GET /motor-blocks/{id}/logs (int)', function () {
  this.timeout(60_000);
  let motor: TestMotor;
  let a: BootstrapResult;
  let other: BootstrapResult;
  let token: string;
  let piiToken: string;
  const seq: Array<{ id: string; timestamp: string; to: string }> = [];
  let multiId: string;
  let quotedId: string;
  const bulk: string[] = [];
  const otherIds: string[] = [];
  const TOTAL = 10 + 1 + 1 + 30;

  const logs = (params: Record<string, string | number | boolean> = {}, t: string = token, block = a.motorBlockId) =>
    getPublic(motor, `/motor-blocks/${block}/logs?${new URLSearchParams(Object.entries(params).map(([k, v]): [string, string] => [k, String(v)]))}`, t);
  const ids = (r: { body: { data: { items: Array<{ id: string }> } } }) => r.body.data.items.map((i) => i.id);
  const sorted = (xs: string[]) => [...xs].sort();

  before(async () => {
    // A retention other than the default, so the window is seen to come from the plan.
    motor = await startTestMotor({ roles: ['api', 'projector'], env: { PLAN_DEFAULT_RETENTION_DAYS: '7' } });
    a = await motor.bootstrap();
    other = await motor.bootstrap();
    for (let i = 0; i < 10; i++) {
      const to = `u${i}@${i % 2 ? 'beta' : 'alpha'}.test`;
      const d = await sendMail(motor, a, { to, metadata: { batch: 'seq', n: String(i), parity: i % 2 ? 'odd' : 'even' } });
      seq.push({ id: d.id, timestamp: d.timestamp, to });
      await new Promise((r) => setTimeout(r, 5));
    }
    multiId = (await sendMail(motor, a, { to: ['Multi@Alpha.TEST', 'other@delta.test'], metadata: { batch: 'multi' } })).id;
    quotedId = (await sendMail(motor, a, { to: 'q@epsilon.test', metadata: { batch: 'quoted', note: 'two words' } })).id;
    bulk.push(...(await Promise.all(Array.from({ length: 30 }, () => sendMail(motor, a, { to: 'bulk@gamma.test', metadata: { batch: 'bulk' } })))).map((d) => d.id));
    for (let i = 0; i < 3; i++) otherIds.push((await sendMail(motor, other, { to: 'u0@alpha.test', metadata: { batch: 'seq' } })).id);

    const outcomes = ['delivered', 'bounced', 'deferred', 'processed', 'failed', 'complained'] as const;
    for (const [i, o] of outcomes.entries()) await appendOutcome(motor, seq[i].id, seq[i].to, o);
    await appendOutcome(motor, multiId, 'Multi@alpha.test', 'delivered');

    token = await motor.token(a, ['logs.read']);
    piiToken = await motor.token(a, ['logs.read', 'logs.pii']);
    await eventually(async () => {
      const all = await logs({ limit: 1000 });
      const complained = await logs({ status: 'complained' });
      return all.status === 200 && all.body.data.items.length === TOTAL && complained.body.data.items.length === 1;
    }, 20_000);
  });
  after(async () => { await motor?.close(); });

  it('lists the block\'s messages newest first, masked, with the default limit and no cursor at the end', async () => {
    const r = await logs();
    expect(r.status).to.equal(200);
    expect(r.body.success).to.equal(true);
    expect(r.body.data).to.include({ limit: 100, nextCursor: null, pii_masked: true });
    expect(r.body.data.items).to.have.length(TOTAL);
    const queued = r.body.data.items.map((i: { queuedAt: string }) => Date.parse(i.queuedAt));
    for (let i = 1; i < queued.length; i++) expect(queued[i]).to.be.at.most(queued[i - 1]);
    expect(ids(r)).to.not.include.members(otherIds);
    const s0 = r.body.data.items.find((i: { id: string }) => i.id === seq[0].id);
    expect(s0.recipient).to.equal('u***@a***.test');
    expect(s0.metadata).to.deep.equal({ batch: 'seq', n: '0', parity: 'even' });
    expect(s0.currentOutcome).to.equal('delivered');
    expect(JSON.stringify(r.body)).to.not.match(/u\d@(alpha|beta)\.test/);
  });

  describe('from / to', () => {
    it('bounds queuedAt inclusively on both ends', async () => {
      const r = await logs({ from: seq[2].timestamp, to: seq[6].timestamp });
      expect(r.status).to.equal(200);
      expect(sorted(ids(r))).to.deep.equal(sorted(seq.slice(2, 7).map((s) => s.id)));
      expect(sorted(ids(await logs({ to: seq[3].timestamp })))).to.deep.equal(sorted(seq.slice(0, 4).map((s) => s.id)));
      expect(ids(await logs({ from: seq[9].timestamp }))).to.have.length(TOTAL - 9);
    });

    it('accepts any ISO 8601 offset for the same instant', async () => {
      const from = new Date(Date.parse(seq[2].timestamp));
      const plus2 = new Date(from.getTime() + 2 * 3600_000).toISOString().replace('Z', '+02:00');
      const to = seq[6].timestamp.replace('Z', '+00:00');
      const r = await logs({ from: plus2, to });
      expect(r.status).to.equal(200);
      expect(sorted(ids(r))).to.deep.equal(sorted(seq.slice(2, 7).map((s) => s.id)));
    });

    it('400 invalid_query for a from/to that is not ISO 8601, or from after to', async () => {
      for (const params of <Array<Record<string, string>>>[
        { from: 'yesterday' }, { to: 'Sun Nov 22 2026' }, { from: '2026-02-30T00:00:00Z' }, { from: '1700000000' }, { to: '2026-13-01' },
        { from: seq[6].timestamp, to: seq[2].timestamp },
      ]) {
        const r = await logs(params);
        expect(r.status, JSON.stringify(params)).to.equal(400);
        expect(r.body.code, JSON.stringify(params)).to.equal('invalid_query');
      }
    });

    it('400 outside_retention_window for a from (or to) older than the plan retention', async () => {
      const days = motor.config.defaultPlan.retentionDays;
      expect(days).to.equal(7);
      const tooOld = new Date(Date.now() - days * 86_400_000 - RETENTION_GRACE_MS - 3600_000).toISOString();
      for (const params of <Array<Record<string, string>>>[{ from: tooOld }, { from: tooOld, to: seq[0].timestamp }, { to: tooOld }]) {
        const r = await logs(params);
        expect(r.status, JSON.stringify(params)).to.equal(400);
        expect(r.body).to.include({ success: false, code: 'outside_retention_window', retentionDays: days });
        expect(r.body.oldestAllowed).to.be.a('string');
        expect(r.body.nextAction).to.be.a('string');
      }
      const inside = await logs({ from: new Date(Date.now() - days * 86_400_000 + 3600_000).toISOString() });
      expect(inside.status).to.equal(200);
      expect(inside.body.data.items).to.have.length(TOTAL);
      // Exactly "the last N days" computed by a client a moment ago is inside (clock-skew grace).
      const edge = await logs({ from: new Date(Date.now() - days * 86_400_000 - 1000).toISOString() });
      expect(edge.status).to.equal(200);
    });
  });

  describe('query filter language', () => {
    const cases: Array<[string, () => string[]]> = [
      ['recipient:u0@alpha.test', () => [seq[0].id]],
      ['recipient:u0@ALPHA.test', () => [seq[0].id]],
      ['recipient:other@delta.test', () => [multiId]],
      ['recipient:Multi@alpha.test', () => [multiId]],
      ['domain:alpha.test', () => [...[0, 2, 4, 6, 8].map((i) => seq[i].id), multiId]],
      ['domain:ALPHA.TEST', () => [...[0, 2, 4, 6, 8].map((i) => seq[i].id), multiId]],
      ['domain:@beta.test', () => [1, 3, 5, 7, 9].map((i) => seq[i].id)],
      ['domain:delta.test', () => [multiId]],
      ['status:delivered', () => [seq[0].id]],
      ['status:bounced', () => [seq[1].id]],
      ['status:deferred', () => [seq[2].id]],
      ['status:processed', () => [seq[3].id]],
      ['status:failed', () => [seq[4].id]],
      ['status:complained', () => [seq[5].id]],
      ['status:sent', () => [0, 1, 2, 3, 5].map((i) => seq[i].id)],
      ['metadata.batch:bulk', () => bulk],
      ['metadata.parity:odd', () => [1, 3, 5, 7, 9].map((i) => seq[i].id)],
      ['metadata.n:3', () => [seq[3].id]],
      ['metadata.note:"two words"', () => [quotedId]],
      ['metadata.batch:nothing', () => []],
      ['domain:alpha.test metadata.batch:seq', () => [0, 2, 4, 6, 8].map((i) => seq[i].id)],
      ['domain:beta.test status:sent', () => [1, 3, 5].map((i) => seq[i].id)],
      ['recipient:u1@beta.test status:bounced', () => [seq[1].id]],
      ['recipient:u1@beta.test status:delivered', () => []],
      ['metadata.batch:seq status:queued', () => [6, 7, 8, 9].map((i) => seq[i].id)],
      ['metadata.batch:seq   metadata.parity:even status:sent', () => [0, 2].map((i) => seq[i].id)],
      ['domain:alpha.test domain:delta.test', () => [multiId]],
    ];
    for (const [query, expected] of cases) {
      it(`query=${query}`, async () => {
        const r = await logs({ query });
        expect(r.status).to.equal(200);
        expect(sorted(ids(r))).to.deep.equal(sorted(expected()));
      });
    }

    it('400 invalid_query for free text, unknown keys, bad values and quotes', async () => {
      for (const query of ['hello', 'foo:bar', 'status:sending', 'recipient:notanemail', 'metadata.:x', 'recipient:', 'metadata.note:"open', 'domain:a@b.test']) {
        const r = await logs({ query });
        expect(r.status, query).to.equal(400);
        expect(r.body.code, query).to.equal('invalid_query');
      }
    });
  });

  describe('status and currentOutcome parameters', () => {
    const cases: Array<[Record<string, string>, () => string[]]> = [
      [{ status: 'delivered' }, () => [seq[0].id]],
      [{ status: 'DELIVERED' }, () => [seq[0].id]],
      [{ status: 'sent' }, () => [0, 1, 2, 3, 5].map((i) => seq[i].id)],
      [{ status: 'bounced,failed' }, () => [seq[1].id, seq[4].id]],
      [{ status: 'queued', query: 'metadata.batch:seq' }, () => [6, 7, 8, 9].map((i) => seq[i].id)],
      [{ currentOutcome: 'deferred' }, () => [seq[2].id]],
      [{ currentOutcome: 'sent' }, () => [0, 1, 2, 3, 5].map((i) => seq[i].id)],
      [{ currentOutcome: 'complained,processed' }, () => [seq[5].id, seq[3].id]],
      [{ status: 'sent', query: 'status:delivered' }, () => [seq[0].id]],
      [{ status: 'queued', query: 'status:delivered' }, () => []],
      [{ status: 'delivered', currentOutcome: 'delivered' }, () => [seq[0].id]],
    ];
    for (const [params, expected] of cases) {
      it(JSON.stringify(params), async () => {
        const r = await logs(params);
        expect(r.status).to.equal(200);
        expect(sorted(ids(r))).to.deep.equal(sorted(expected()));
      });
    }

    it('400 invalid_query for an unknown status, or status and currentOutcome that disagree', async () => {
      for (const params of <Array<Record<string, string>>>[
        { status: 'sending' }, { currentOutcome: 'opened' }, { status: 'delivered,nope' }, { status: 'delivered', currentOutcome: 'bounced' },
      ]) {
        const r = await logs(params);
        expect(r.status, JSON.stringify(params)).to.equal(400);
        expect(r.body.code).to.equal('invalid_query');
      }
    });
  });

  describe('limit and cursor', () => {
    it('limit 1..1000 is honoured and echoed', async () => {
      const one = await logs({ limit: 1 });
      expect(one.status).to.equal(200);
      expect(one.body.data.items).to.have.length(1);
      expect(one.body.data.limit).to.equal(1);
      expect(one.body.data.nextCursor).to.be.a('string');
      const max = await logs({ limit: 1000 });
      expect(max.status).to.equal(200);
      expect(max.body.data.limit).to.equal(1000);
      expect(max.body.data.items).to.have.length(TOTAL);
      expect(max.body.data.nextCursor).to.equal(null);
      const exact = await logs({ limit: TOTAL });
      expect(exact.body.data.items).to.have.length(TOTAL);
      expect(exact.body.data.nextCursor).to.equal(null);
    });

    it('400 invalid_query for a limit not written in decimal digits (1e1, +1, 1.0 were read as 10 and 1); leading zeros are still digits', async () => {
      for (const limit of ['1e1', '1E1', '1e0', '+1', '1.0', '10.', ' 1', '0x10']) {
        const r = await logs({ limit });
        expect([r.status, r.body.code], `limit=${limit}`).to.deep.equal([400, 'invalid_query']);
      }
      const padded = await logs({ limit: '010' });
      expect([padded.status, padded.body.data?.limit]).to.deep.equal([200, 10]);
    });

    it('400 for a limit outside 1..1000 or not an integer', async () => {
      for (const limit of ['0', '1001', '-1', '1.5', 'abc', '']) {
        const r = await logs({ limit });
        expect(r.status, `limit=${limit}`).to.equal(400);
        expect(r.body.code, `limit=${limit}`).to.equal('invalid_query');
      }
    });

    async function walk(params: Record<string, string | number>): Promise<{ pages: string[][]; queuedAt: number[] }> {
      const pages: string[][] = [];
      const queuedAt: number[] = [];
      let cursor: string | null = null;
      for (let guard = 0; guard < 100; guard++) {
        const r = await logs({ ...params, ...(cursor ? { cursor } : {}) });
        expect(r.status).to.equal(200);
        pages.push(ids(r));
        queuedAt.push(...r.body.data.items.map((i: { queuedAt: string }) => Date.parse(i.queuedAt)));
        cursor = r.body.data.nextCursor;
        if (!cursor) return { pages, queuedAt };
      }
      throw new Error('pagination did not end');
    }

    it('walks every page with no duplicates and no gaps', async () => {
      const all = ids(await logs({ limit: 1000 }));
      for (const limit of [1, 7, 10, TOTAL - 1]) {
        const { pages, queuedAt } = await walk({ limit });
        const flat = pages.flat();
        expect(flat, `limit=${limit}`).to.deep.equal(all);
        expect(new Set(flat).size).to.equal(TOTAL);
        expect(pages.slice(0, -1).every((p) => p.length === limit)).to.equal(true);
        for (let i = 1; i < queuedAt.length; i++) expect(queuedAt[i]).to.be.at.most(queuedAt[i - 1]);
      }
    });

    it('paginates a filtered result whose messages share timestamps', async () => {
      const { pages } = await walk({ limit: 4, query: 'metadata.batch:bulk' });
      expect(sorted(pages.flat())).to.deep.equal(sorted(bulk));
      const sent = await walk({ limit: 2, status: 'sent' });
      expect(sorted(sent.pages.flat())).to.deep.equal(sorted([0, 1, 2, 3, 5].map((i) => seq[i].id)));
    });

    it('400 invalid_cursor for a cursor this endpoint did not issue', async () => {
      const b64 = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');
      for (const cursor of ['garbage!!', b64(['x', 'y']), b64({ a: 1 }), b64(['2026-01-01T00:00:00Z', 'not-a-uuid']), b64([1, 2]), 'eyJ']) {
        const r = await logs({ cursor });
        expect(r.status, cursor).to.equal(400);
        expect(r.body.code, cursor).to.equal('invalid_cursor');
      }
    });
  });

  describe('PII and access', () => {
    it('includePII=true needs logs.pii (403), and unmasks with it', async () => {
      const denied = await logs({ includePII: true });
      expect(denied.status).to.equal(403);
      expect(denied.body.code).to.equal('insufficient_scope');
      const shown = await logs({ includePII: true, query: 'recipient:u0@alpha.test' }, piiToken);
      expect(shown.status).to.equal(200);
      expect(shown.body.data.pii_masked).to.equal(false);
      expect(shown.body.data.items[0].recipient).to.equal('u0@alpha.test');
      const masked = await logs({ query: 'recipient:u0@alpha.test' }, piiToken);
      expect(masked.body.data.pii_masked).to.equal(true);
      expect(masked.body.data.items[0].recipient).to.not.equal('u0@alpha.test');
      const explicitFalse = await logs({ includePII: false });
      expect(explicitFalse.status).to.equal(200);
      expect(explicitFalse.body.data.pii_masked).to.equal(true);
    });

    it('403 for another block\'s logs, 400 for a block id that is not a uuid', async () => {
      const r = await logs({}, token, other.motorBlockId);
      expect(r.status).to.equal(403);
      expect(r.body.code).to.equal('motor_block_forbidden');
      const bad = await logs({}, token, 'not-a-uuid');
      expect(bad.status).to.equal(400);
      const otherToken = await motor.token(other, ['logs.read']);
      const own = await logs({ limit: 1000 }, otherToken, other.motorBlockId);
      expect(sorted(ids(own))).to.deep.equal(sorted(otherIds));
    });
  });
});
