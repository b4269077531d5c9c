import { expect } from 'chai';
import { CONTACTS_SCHEMA } from '../../projections/contacts/projection';
import { SUPPRESSIONS_SCHEMA } from '../../projections/commSuppressions/projection';
import { WEBHOOKS_SCHEMA } from '../../projections/webhooks/projection';
import type { BootstrapResult } from '../../commands/admin/bootstrap';
import { eventually, getJson, holdProjection, postJson, startTestMotor, type TestMotor } from '../support/motor';
import { as, commGet, commPost, tenant, type Tenant } from '../comms/support';

/**
 * Read-your-writes waits that give up (docs/OPERATIONS.md "Read-your-writes timeouts"): a write
 * whose read model does not show it before the wait's deadline still answers as usual, and the
 * give-up is a warning in the log (which wait, how long, what it waited for) and one more on
 * `motor_read_your_writes_timeouts_total{projection, wait}`; a wait that is answered in time does
 * neither. A projection is held back by holding, from another session, the advisory lock its
 * projector takes for every batch (projections/runner.ts): its projector then waits on it and
 * applies nothing until the lock is released, while the others go on.
 */
describe('read-your-writes waits that give up (int)', function () {
  this.timeout(90_000);
  let motor: TestMotor;
  let block: BootstrapResult;
  let manage: string;
  let t: Tenant;
  const lines: string[] = [];

  before(async () => {
    motor = await startTestMotor({ logLines: lines });
    block = await motor.bootstrap();
    manage = await motor.token(block, ['webhooks.manage']);
    t = await tenant(motor, 'ryw@example.test');
  });
  after(async () => { await motor?.close(); });

  /** The counter's value for `wait` as /metrics serves it (0 when it has no sample yet). */
  async function counted(wait: string): Promise<number> {
    const text = (await getJson(`${motor.baseUrl}/metrics`)).body as string;
    const line = text.split('\n').find((l) => l.startsWith('motor_read_your_writes_timeouts_total{') && l.includes(`wait="${wait}"`));
    return line === undefined ? 0 : Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  /** Its labels on that line. */
  async function labelsOf(wait: string): Promise<string> {
    const text = (await getJson(`${motor.baseUrl}/metrics`)).body as string;
    const line = text.split('\n').find((l) => l.startsWith('motor_read_your_writes_timeouts_total{') && l.includes(`wait="${wait}"`));
    return line!.slice(line!.indexOf('{'), line!.indexOf('}') + 1);
  }

  interface Warning { level: number; msg: string; wait: string; projection: string; waitedMs: number; timeoutMs: number; position: { table: string; rows: number; notShown: number; pending: Array<{ id: string; revision: string | null }> } }
  /** The give-up warnings logged from line `from` on, of `wait`. */
  const warnings = (from: number, wait: string): Warning[] => lines.slice(from)
    .map((l) => JSON.parse(l) as Warning)
    .filter((l) => l.msg === 'read-your-writes wait gave up' && l.wait === wait);

  const createWebhook = () => postJson(`${motor.baseUrl}/api/public/v1/motor-blocks/${block.motorBlockId}/webhooks`, { url: 'https://hooks.example.com/motor' }, { authorization: `Bearer ${manage}` });

  it('a wait answered in time logs no warning and counts nothing', async () => {
    const before = await counted('webhook.create');
    const from = lines.length;
    const r = await createWebhook();
    expect(r.status, JSON.stringify(r.body)).to.equal(201);
    expect(warnings(from, 'webhook.create')).to.deep.equal([]);
    expect(lines.slice(from).filter((l) => l.includes('read-your-writes'))).to.deep.equal([]);
    expect(await counted('webhook.create')).to.equal(before);
  });

  it('a row wait that gives up: the usual 201, a warning naming the wait, its time and the revision, and the counter', async () => {
    const before = await counted('webhook.create');
    const from = lines.length;
    const release = await holdProjection(motor, WEBHOOKS_SCHEMA);
    let r: Awaited<ReturnType<typeof createWebhook>>;
    const started = Date.now();
    try {
      r = await createWebhook();
    } finally {
      await release();
    }
    // The answer is unchanged: the write is committed, the route answers what it wrote.
    expect(r.status, JSON.stringify(r.body)).to.equal(201);
    expect(r.body.data.url).to.equal('https://hooks.example.com/motor');
    // pollUntil stops before a pause that would end past the deadline: a little under 3 s.
    expect(Date.now() - started).to.be.at.least(2500);

    const [w, ...more] = warnings(from, 'webhook.create');
    expect(more).to.deep.equal([]);
    expect(w.level).to.equal(40); // pino's warn
    expect(w.projection).to.equal('webhooks');
    expect(w.timeoutMs).to.equal(3000);
    expect(w.waitedMs).to.be.at.least(2500).and.below(10_000);
    expect(w.position).to.deep.equal({ table: 'endpoints', rows: 1, notShown: 1, pending: [{ id: r.body.data.id, revision: '0' }] });

    expect(await counted('webhook.create')).to.equal(before + 1);
    expect(await labelsOf('webhook.create')).to.equal('{projection="webhooks",wait="webhook.create"}');
    // Released, the projector gets there: the write was there all along.
    await eventually(async () => (await getJson(`${motor.baseUrl}/api/public/v1/motor-blocks/${block.motorBlockId}/webhooks`, { authorization: `Bearer ${manage}` }))
      .body.data.some((x: { id: string }) => x.id === r.body.data.id));
  });

  it('a wait on rows without a revision (a manual suppression) that gives up: the usual 201, warned and counted', async () => {
    const before = await counted('suppression.add');
    const from = lines.length;
    const release = await holdProjection(motor, SUPPRESSIONS_SCHEMA);
    let r: Awaited<ReturnType<typeof commPost>>;
    try {
      r = await commPost(motor, '/suppressions', { email: 'held@example.test' }, as(t));
    } finally {
      await release();
    }
    expect(r.status, JSON.stringify(r.body)).to.equal(201);
    expect(r.body.data).to.include({ email: 'held@example.test', reason: 'manual', count: 1 });

    const [w, ...more] = warnings(from, 'suppression.add');
    expect(more).to.deep.equal([]);
    expect(w.projection).to.equal('commsuppressions');
    expect(w.waitedMs).to.be.at.least(2500);
    expect(w.position.table).to.equal('manual_adds');
    expect(w.position).to.include({ rows: 1, notShown: 1 });
    expect(w.position.pending[0].revision).to.equal(null);
    expect(await counted('suppression.add')).to.equal(before + 1);
  });

  it('the contacts batch: one wait for every row, 10 s, gives up with the rows not shown; a batch in time counts nothing', async () => {
    const list = await commPost(motor, '/lists', { name: 'Held' }, as(t));
    expect(list.status, JSON.stringify(list.body)).to.equal(201);
    const listId = list.body.data.id as string;
    const batch = (emails: string[]) => commPost(motor, `/lists/${listId}/contacts/batch`, { contacts: emails.map((email) => ({ email })) }, as(t));

    const inTime = await batch(['a1@example.test', 'a2@example.test']);
    expect(inTime.status, JSON.stringify(inTime.body)).to.equal(200);
    expect(await counted('contact.add_batch')).to.equal(0);

    const from = lines.length;
    const release = await holdProjection(motor, CONTACTS_SCHEMA);
    let r: Awaited<ReturnType<typeof batch>>;
    try {
      r = await batch(['b1@example.test', 'b2@example.test', 'b3@example.test']);
    } finally {
      await release();
    }
    expect(r.status, JSON.stringify(r.body)).to.equal(200);
    expect(r.body.data.added).to.equal(3);

    const [w, ...more] = warnings(from, 'contact.add_batch');
    expect(more).to.deep.equal([]);
    expect(w.projection).to.equal('contacts');
    expect(w.timeoutMs).to.equal(10_000);
    expect(w.waitedMs).to.be.at.least(9500);
    expect(w.position).to.include({ table: 'contacts', rows: 3, notShown: 3 });
    expect(w.position.pending.map((p) => p.id).sort()).to.deep.equal(r.body.data.items.map((i: { contact_id: string }) => i.contact_id).sort());
    expect(await counted('contact.add_batch')).to.equal(1);
    await eventually(async () => (await commGet(motor, `/lists/${listId}/contacts?limit=10`, as(t))).body.data.items.length === 5);
  });
});
