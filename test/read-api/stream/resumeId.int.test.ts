import { expect } from 'chai';
import type { BootstrapResult } from '../../../commands/admin/bootstrap';
import { eventually, startTestMotor, type TestMotor } from '../../support/motor';
import { openSseStream } from '../../support/sse';

/**
 * Which id a stream resumes after (docs/EVENTS.md "Resuming"): the `Last-Event-ID` header, else
 * `?lastEventId=`, an empty one of either counting as absent; an id past the end of the event log
 * (another deployment's, or of the log before a rebuild) is refused at connect time instead of
 * waiting, without a word, for the log to reach it.
 */
describe('event stream: the resume id (int)', function () {
  this.timeout(60_000);
  let motor: TestMotor;
  let block: BootstrapResult;
  let token: string;

  before(async () => {
    motor = await startTestMotor({ roles: ['api'] });
    block = await motor.bootstrap();
    token = await motor.token(block, ['logs.read']);
  });
  after(async () => { await motor?.close(); });

  const streamUrl = (query = '') => `${motor.baseUrl}/api/public/v1/motor-blocks/${block.motorBlockId}/events/stream${query}`;
  const head = async () => {
    const h = await motor.rt.store.headPosition();
    expect(h, 'the bootstrap appended events').to.be.a('string');
    const [tx, position] = h!.split(':').map(BigInt);
    return { id: h!, tx, position };
  };
  /** The answer's status and code, or the `ready` event of a stream that opened (then closed). */
  const connect = async (query: string, headers: Record<string, string>) => {
    const s = await openSseStream(streamUrl(query), { authorization: `Bearer ${token}`, ...headers });
    if (s.res.status !== 200) return { status: s.res.status, code: ((await s.res.json()) as { code?: string }).code };
    const ready = await eventually(async () => s.events.find((e) => e.event === 'ready'), 5000);
    s.close();
    return { status: 200, resumedAfter: ready.data.resumedAfter as string | undefined };
  };

  it('an id past the end of the log: 400 invalid_last_event_id at once, from the header or ?lastEventId=', async () => {
    const h = await head();
    const uuid = '0194c3d2-7b1e-7000-8000-000000000000';
    const beyond = [
      `${h.tx}:${h.position + 1n}`, // the next position of the head's transaction
      `${h.tx + 1_000_000_000n}:1`, // a transaction this cluster has not reached (a busier deployment's)
      '18446744073709551615:9223372036854775807', // the largest position the columns hold
      `${h.tx + 1_000_000_000n}:1/${uuid}/0`, // with a recipient index: its position decides
    ];
    for (const id of beyond) {
      const started = Date.now();
      expect(await connect('', { 'last-event-id': id }), id).to.deep.equal({ status: 400, code: 'invalid_last_event_id' });
      expect(await connect(`?lastEventId=${encodeURIComponent(id)}`, {}), `?lastEventId=${id}`).to.deep.equal({ status: 400, code: 'invalid_last_event_id' });
      expect(Date.now() - started, 'answered, not left waiting for the log').to.be.below(5000);
    }
    expect((await head()).id, 'nothing appended meanwhile: the first id was past the head when checked').to.equal(h.id);
  });

  it('the head itself and an id before it resume as before', async () => {
    const h = await head();
    for (const id of [h.id, `${h.tx}:${h.position - 1n}`, '0:0']) {
      expect(await connect('', { 'last-event-id': id }), id).to.deep.equal({ status: 200, resumedAfter: id });
    }
  });

  it('an empty Last-Event-ID header counts as absent: ?lastEventId= is used', async () => {
    const { id } = await head();
    expect(await connect(`?lastEventId=${encodeURIComponent(id)}`, { 'last-event-id': '' })).to.deep.equal({ status: 200, resumedAfter: id });
    // Both empty: a new stream, not a resume.
    expect(await connect('?lastEventId=', { 'last-event-id': '' })).to.deep.equal({ status: 200, resumedAfter: undefined });
    // A header with an id still wins over the query.
    expect(await connect('?lastEventId=nope', { 'last-event-id': id })).to.deep.equal({ status: 200, resumedAfter: id });
  });
});
