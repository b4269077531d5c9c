import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import { WrongExpectedRevisionError, type EventStore, type RecordedEvent } from '../../domain/eventStore';
import { fail } from '../../domain/errors';
import { toEventData, type DomainEvent } from '../../domain/events';
import { PostgresEventStore } from '../../infra/eventstore/postgres/postgresEventStore';
import { conflictAfterRetries, decideOnRead, decideOnStream, eventsOf, retryPauseMs } from '../../commands/decideOnStream';
import { createTestDatabase } from '../support/db';

const TENANT = '11111111-1111-4111-8111-111111111111';
const listCreated = (listId: string, name: string): DomainEvent<'ContactListCreated'> =>
  ({ type: 'ContactListCreated', data: { listId, tenantId: TENANT, name, description: null, createdAt: new Date().toISOString() } });
const exhausted = conflictAfterRetries('list_conflict', 'The lists');
const names = (recorded: readonly RecordedEvent[]) => eventsOf<DomainEvent<'ContactListCreated'>>(recorded, ['ContactListCreated']).map((e) => e.data.name);

/** Wraps a store so that, before the first `times` appends to `streamId`, another writer appends first. */
function racedBy(store: EventStore, streamId: string, times: number): EventStore {
  let raced = 0;
  return new Proxy(store, {
    get(target, prop, receiver) {
      if (prop !== 'append') return Reflect.get(target, prop, receiver);
      return async (id: string, ...rest: unknown[]) => {
        if (id === streamId && raced < times) {
          raced++;
          await target.append(id, [toEventData(randomUUID(), listCreated(`other-${raced}`, `Other ${raced}`))], { expectedRevision: 'any' });
        }
        return (target.append as (...a: unknown[]) => Promise<unknown>)(id, ...rest);
      };
    },
  });
}

/** The loop every aggregate's commands share (commands/decideOnStream.ts): decide, append at the revision read, decide again on a conflict. */
describe('decideOnStream (int)', () => {
  let db: { url: string; drop: () => Promise<void> };
  let store: PostgresEventStore;
  let n = 0;
  const freshStream = () => `contactLists-${TENANT}-${++n}-${Date.now()}`;

  before(async () => {
    db = await createTestDatabase('decide');
    store = new PostgresEventStore(db.url, { poolSize: 3 });
    await store.init();
  });
  after(async () => {
    await store?.close();
    await db?.drop();
  });

  it('appends what was decided at the revision read, with the actor, and says where the stream is', async () => {
    const s = freshStream();
    const first = await decideOnStream(store, s, { actor: 'tester', attempts: 3, exhausted }, () => [listCreated('l1', 'A')]);
    expect([first.appended.length, first.written.length, first.revision, first.recorded.length]).to.deep.equal([1, 1, 0n, 0]);
    const second = await decideOnStream(store, s, { actor: 'tester', attempts: 3, exhausted }, (recorded) => (names(recorded).includes('B') ? [] : [listCreated('l2', 'B')]));
    expect([second.revision, second.recorded.length]).to.deep.equal([1n, 1]);
    const stored = await store.readStream(s);
    expect(stored.map((e) => [e.id, e.metadata?.actor])).to.deep.equal([[first.written[0].id, 'tester'], [second.written[0].id, 'tester']]);
  });

  it('nothing decided: nothing appended, the revision is the stream\'s last (null with no stream)', async () => {
    const s = freshStream();
    expect((await decideOnStream(store, s, { actor: 't', attempts: 1, exhausted }, () => [])).revision).to.equal(null);
    await decideOnStream(store, s, { actor: 't', attempts: 1, exhausted }, () => [listCreated('l1', 'A')]);
    const none = await decideOnStream(store, s, { actor: 't', attempts: 1, exhausted }, () => []);
    expect([none.appended, none.written, none.revision]).to.deep.equal([[], [], 0n]);
    expect(await store.readStream(s)).to.have.length(1);
  });

  it('a writer in between: the decision is taken again on the stream with its event', async () => {
    const s = freshStream();
    const seen: string[][] = [];
    const d = await decideOnStream(racedBy(store, s, 2), s, { actor: 't', attempts: 3, exhausted }, (recorded) => {
      seen.push(names(recorded));
      return [listCreated(`mine-${seen.length}`, `Mine after ${recorded.length}`)];
    });
    expect(seen).to.deep.equal([[], ['Other 1'], ['Other 1', 'Other 2']]);
    expect(names(await store.readStream(s))).to.deep.equal(['Other 1', 'Other 2', 'Mine after 2']);
    expect(d.revision).to.equal(2n);
  });

  it('decideOnRead, the read left to the caller: each try reads again and appends at the revision that read answers; a revision short of the stream is refused', async () => {
    const s = freshStream();
    await decideOnStream(store, s, { actor: 't', attempts: 1, exhausted }, () => [listCreated('l0', 'Zero')]);
    // A caller that keeps what it read: each read fetches only the events after it.
    let kept: RecordedEvent[] = [];
    const fromRevisions: (bigint | null)[] = [];
    const read = async () => {
      const after = kept.length === 0 ? null : kept[kept.length - 1].revision;
      fromRevisions.push(after);
      kept = [...kept, ...await store.readStream(s, after === null ? undefined : { fromRevision: after + 1n })];
      return { read: kept, revision: kept.length === 0 ? null : kept[kept.length - 1].revision };
    };
    const d = await decideOnRead(racedBy(store, s, 2), s, { actor: 't', attempts: 3, exhausted }, read, (recorded) => [listCreated('mine', `Mine after ${names(recorded).join(',')}`)]);
    expect(fromRevisions).to.deep.equal([null, 0n, 1n]);
    expect([d.revision, names(d.read)]).to.deep.equal([3n, ['Zero', 'Other 1', 'Other 2']]);
    expect(names(await store.readStream(s))).to.deep.equal(['Zero', 'Other 1', 'Other 2', 'Mine after Zero,Other 1,Other 2']);
    // A read that answers a revision short of the stream's never appends: every try is refused.
    const stale = await decideOnRead(store, s, { actor: 't', attempts: 2, exhausted }, async () => ({ read: null, revision: 2n }), () => [listCreated('stale', 'Stale')]).catch((e) => e);
    expect(stale.code).to.equal('list_conflict');
    expect(names(await store.readStream(s))).to.not.include('Stale');
  });

  it('every try lost: `exhausted` is thrown (a 409 <what>_conflict, never the store\'s conflict), nothing of its own appended', async () => {
    const s = freshStream();
    const conflict = () => fail('list_conflict', 409, 'changed too often');
    const err = await decideOnStream(racedBy(store, s, 3), s, { actor: 't', attempts: 3, exhausted: conflict }, () => [listCreated('x', 'Mine')]).catch((e) => e);
    expect([err.code, err.status]).to.deep.equal(['list_conflict', 409]);
    const usual = await decideOnStream(racedBy(store, s, 2), s, { actor: 't', attempts: 2, exhausted }, () => [listCreated('y', 'Mine')]).catch((e) => e);
    expect(usual).to.not.be.instanceOf(WrongExpectedRevisionError);
    expect([usual.code, usual.status, usual.message, usual.nextAction])
      .to.deep.equal(['list_conflict', 409, 'The lists changed too often while this request was handled', 'Retry the request']);
    expect(names(await store.readStream(s))).to.not.include('Mine');
  });

  it('pauses at random between tries, longer after each lost try, at most 200 ms', () => {
    const max = (attempt: number) => Math.max(...Array.from({ length: 2000 }, () => retryPauseMs(attempt)));
    expect(max(1)).to.be.within(5, 10);
    expect(max(3)).to.be.within(20, 40);
    expect(max(10)).to.be.within(100, 200);
    expect(Math.min(...Array.from({ length: 2000 }, () => retryPauseMs(4)))).to.be.below(10);
  });

  it('a refusal from decide and any other append error go to the caller at once, untried again', async () => {
    const s = freshStream();
    let calls = 0;
    const refused = await decideOnStream(store, s, { actor: 't', attempts: 5, exhausted }, () => { calls++; throw fail('list_name_taken', 409, 'taken'); }).catch((e) => e);
    expect([refused.code, calls]).to.deep.equal(['list_name_taken', 1]);
    const broken = new Proxy(store, { get: (t, p, r) => (p === 'append' ? async () => { throw new Error('disk on fire'); } : Reflect.get(t, p, r)) });
    calls = 0;
    const err = await decideOnStream(broken, s, { actor: 't', attempts: 5, exhausted }, () => { calls++; return [listCreated('z', 'Z')]; }).catch((e) => e);
    expect([err.message, calls]).to.deep.equal(['disk on fire', 1]);
  });
});
