import { expect } from 'chai';
import { currentGrant, decideOnGrant, GrantCache } from '../../commands/oauth/grantCache';
import { streamName } from '../../domain/eventStore';
import { toEventData, type DomainEvent } from '../../domain/events';
import { newId } from '../../domain/ids';
import { foldGrant, GRANT_TYPES, type GrantEvent } from '../../domain/oauth/grant';
import { eventsOf } from '../../commands/decideOnStream';
import { MemoryEventStore } from '../support/memoryEventStore';

const T = '2026-01-01T00:00:00.000Z';
const H = (i: number) => i.toString(16).padStart(64, '0');

/** A grant's first three events, then `rotations` refresh rotations. */
function grantEvents(grantId: string, rotations: number): DomainEvent[] {
  const events: DomainEvent[] = [
    { type: 'OAuthConsentRequested', data: {
      grantId, clientId: newId(), accountId: newId(), userId: newId(), sessionId: newId(), redirectUri: 'https://a.test/cb', scope: 'email.send', state: null,
      motorBlockId: null, formTokenHash: H(1), expiresAt: T, requestedAt: T,
    } },
    { type: 'OAuthCodeIssued', data: { grantId, motorBlockId: null, codeHash: H(2), expiresAt: T, issuedAt: T } },
    { type: 'OAuthTokenIssued', data: { grantId, tokenId: 'token-0', refreshTokenHash: H(100), accessExpiresAt: T, refreshExpiresAt: T, issuedAt: T } },
  ];
  for (let i = 1; i <= rotations; i++) {
    events.push({ type: 'OAuthRefreshRotated', data: { grantId, tokenId: `token-${i}`, previousHash: H(99 + i), refreshTokenHash: H(100 + i), accessExpiresAt: T, refreshExpiresAt: T, at: T } });
  }
  return events;
}

/** A memory store that counts the events its stream reads hand back. */
class CountingStore extends MemoryEventStore {
  read = 0;
  override async readStream(...args: Parameters<MemoryEventStore['readStream']>) {
    const events = await super.readStream(...args);
    this.read += events.length;
    return events;
  }
}

async function seeded(store: MemoryEventStore, rotations: number): Promise<string> {
  const grantId = newId();
  await store.append(streamName('oauthGrant', grantId), grantEvents(grantId, rotations).map((e) => toEventData(newId(), e)));
  return grantId;
}

const wholeFold = async (store: MemoryEventStore, grantId: string) => foldGrant(eventsOf<GrantEvent>(await store.readStream(streamName('oauthGrant', grantId)), GRANT_TYPES));

describe('GrantCache (unit)', () => {
  it('answers the fold of the whole stream; reads only the events after the revision it kept; a grant without a stream is not kept', async () => {
    const store = new CountingStore();
    const cache = new GrantCache();
    const grantId = await seeded(store, 20);
    expect(await cache.current(store, grantId)).to.deep.equal(await wholeFold(store, grantId));
    store.read = 0;
    await cache.current(store, grantId);
    expect(store.read).to.equal(0);
    await store.append(streamName('oauthGrant', grantId), [toEventData(newId(), { type: 'OAuthGrantRevoked', data: { grantId, reason: 'user_revoked', at: T } })]);
    const after = await cache.current(store, grantId);
    expect(store.read).to.equal(1);
    expect(after.revoked).to.equal(true);
    expect(after).to.deep.equal(await wholeFold(store, grantId));
    expect((await cache.current(store, newId())).exists).to.equal(false);
    expect(cache.size.grants).to.equal(1);
  });

  it('checks of one grant at once: each answers at least what it read, and the state kept is the furthest read', async () => {
    const store = new MemoryEventStore();
    const cache = new GrantCache();
    const grantId = await seeded(store, 5);
    await cache.current(store, grantId);
    const stream = streamName('oauthGrant', grantId);
    const more = grantEvents(grantId, 8).slice(-3);
    await store.append(stream, more.map((e) => toEventData(newId(), e)));
    const states = await Promise.all([cache.current(store, grantId), cache.current(store, grantId), cache.current(store, grantId)]);
    for (const s of states) expect(s.tokenIds).to.have.length(9);
    const whole = await wholeFold(store, grantId);
    expect(await cache.current(store, grantId)).to.deep.equal(whole);
  });

  it('keeps at most its weight, dropping the grants checked least recently; one grant heavier than all of it is not kept', async () => {
    const store = new MemoryEventStore();
    // A plain grant weighs 10 + its one token id; 100 rotations add 200.
    const cache = new GrantCache(50);
    const [a, b, c, heavy] = [await seeded(store, 0), await seeded(store, 0), await seeded(store, 0), await seeded(store, 100)];
    for (const g of [a, b, c]) await cache.current(store, g);
    expect(cache.size).to.deep.equal({ grants: 3, weight: 33 });
    await cache.current(store, a);
    await cache.current(store, await seeded(store, 0));
    await cache.current(store, await seeded(store, 0));
    expect(cache.size.grants).to.equal(4);
    expect(cache.size.weight).to.be.at.most(50);
    const counting = new CountingStore();
    const heavyThere = await seeded(counting, 100);
    await cache.current(counting, heavyThere);
    counting.read = 0;
    await cache.current(counting, heavyThere);
    expect(counting.read, 'not kept: read whole again').to.equal(103);
    expect((await cache.current(store, heavy)).tokenIds).to.have.length(101);
  });

  it('decideOnGrant: decides on the state kept, reading only what follows it; keeps what it appended at its revisions; reads a grant kept revoked before deciding', async () => {
    const store = new CountingStore();
    const grantId = await seeded(store, 20);
    const stream = streamName('oauthGrant', grantId);
    const rotation = (i: number): GrantEvent => ({ type: 'OAuthRefreshRotated', data: { grantId, tokenId: `mine-${i}`, previousHash: H(120 + i), refreshTokenHash: H(121 + i), accessExpiresAt: T, refreshExpiresAt: T, at: T } });
    await currentGrant(store, grantId);
    store.read = 0;
    const first = await decideOnGrant(store, grantId, 'test', (s) => ({ events: [rotation(0), rotation(1)], result: s.tokenIds.length }));
    expect([first.result, store.read]).to.deep.equal([21, 0]);
    expect(first.state).to.deep.equal(await wholeFold(store, grantId));
    store.read = 0;
    expect(await currentGrant(store, grantId)).to.deep.equal(first.state);
    expect(store.read, 'its own two events are not read back').to.equal(0);

    await store.append(stream, [toEventData(newId(), rotation(2))]);
    const nothing = await decideOnGrant(store, grantId, 'test', (s) => ({ events: [], result: s.tokenIds.length }));
    expect([nothing.result, store.read]).to.deep.equal([24, 1]);

    await decideOnGrant(store, grantId, 'test', () => ({ events: [{ type: 'OAuthGrantRevoked', data: { grantId, reason: 'user_revoked', at: T } }], result: null }));
    // Appended behind the revocation (no decision of Motor's does): a check answers the revoked
    // state kept without reading; a decision reads it, and appends after it.
    await store.append(stream, [toEventData(newId(), rotation(3))]);
    store.read = 0;
    expect((await currentGrant(store, grantId)).revoked).to.equal(true);
    expect(store.read).to.equal(0);
    await decideOnGrant(store, grantId, 'test', (s) => ({ events: s.revoked ? [rotation(4)] : [], result: null }));
    expect(store.read).to.equal(1);
    const all = await store.readStream(stream);
    expect(all.map((e) => (e.data as { tokenId?: string }).tokenId).slice(-2)).to.deep.equal(['mine-3', 'mine-4']);
  });
});
