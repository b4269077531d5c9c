import { randomBytes } from 'node:crypto';
import { expect } from 'chai';
import type { DashboardUser } from '../../commands/oauth/authorization';
import { opaque, redeemGrant } from '../../commands/oauth/authorization';
import { revokeConnection } from '../../commands/oauth/agentAuthorization';
import { currentGrant, grantStream } from '../../commands/oauth/grantCache';
import { eventsOf } from '../../commands/decideOnStream';
import type { EventStore } from '../../domain/eventStore';
import { isDomainError } from '../../domain/errors';
import { toEventData, type DomainEvent } from '../../domain/events';
import { newId } from '../../domain/ids';
import { foldGrant, GRANT_TYPES, OAUTH_RULES, type GrantEvent } from '../../domain/oauth/grant';
import { PostgresEventStore } from '../../infra/eventstore/postgres/postgresEventStore';
import { createTestDatabase } from '../support/db';

const hash = () => randomBytes(32).toString('hex');

/**
 * A store seen through a Proxy (a store's own state stays the target's: its methods run on it):
 * counts its stream reads and the events they hand back, and runs `beforeAppend` before an append.
 * A Proxy is another object, so it has a grant cache of its own: another process.
 */
function observed(store: EventStore, beforeAppend?: (streamId: string) => Promise<void>) {
  const seen = { reads: 0, events: 0 };
  const proxy = new Proxy(store, {
    get(target, prop) {
      if (prop === 'readStream') {
        return async (...args: Parameters<EventStore['readStream']>) => {
          const events = await target.readStream(...args);
          seen.reads++;
          seen.events += events.length;
          return events;
        };
      }
      if (prop === 'append' && beforeAppend) {
        return async (...args: Parameters<EventStore['append']>) => {
          await beforeAppend(args[0]);
          return target.append(...args);
        };
      }
      const value = Reflect.get(target, prop, target);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
  return { store: proxy, seen };
}

/**
 * The decisions on a grant (a refresh token rotated, a code redeemed, the grant revoked) start
 * from the state this process keeps of it (commands/oauth/grantCache.ts `decideOnGrant`) and read
 * only the events after it, and still append under the revision of the last event read: a
 * decision taken on a state another process has moved past is refused and taken again on its
 * events. "Another process" is another event store object on the same database, with a cache of
 * its own.
 */
describe('Grant decisions from the per-process grant cache (int)', function () {
  this.timeout(60_000);
  let db: { url: string; drop: () => Promise<void> };
  let one: PostgresEventStore;
  let two: PostgresEventStore;
  const clientId = newId();
  const accountId = newId();
  const user: DashboardUser = { userId: newId(), accountId, sessionId: newId() };

  before(async () => {
    db = await createTestDatabase('grantdecide');
    one = new PostgresEventStore(db.url);
    await one.init();
    two = new PostgresEventStore(db.url);
    await two.init();
  });
  after(async () => {
    await one?.close();
    await two?.close();
    await db?.drop();
  });

  /**
   * An SMTP client's grant with its first token issued, then `rotations` refresh rotations,
   * appended as another process would (no cache of the two sees them); the refresh token the last one issued.
   */
  async function grant(rotations: number): Promise<{ grantId: string; refreshToken: string }> {
    const grantId = newId();
    const now = new Date();
    const iso = (ms: number) => new Date(now.getTime() + ms).toISOString();
    const token = opaque('ort', grantId);
    const hashes = [...Array.from({ length: rotations }, hash), token.hash];
    const events: DomainEvent[] = [
      { type: 'OAuthConsentRequested', data: {
        grantId, clientId, accountId, userId: user.userId, sessionId: user.sessionId, redirectUri: 'https://app.example.test/cb', scope: 'email.send', state: null,
        motorBlockId: newId(), formTokenHash: hash(), expiresAt: iso(OAUTH_RULES.consentTtlMs), requestedAt: now.toISOString(),
      } },
      { type: 'OAuthCodeIssued', data: { grantId, motorBlockId: newId(), codeHash: hash(), expiresAt: iso(OAUTH_RULES.codeTtlMs), issuedAt: now.toISOString() } },
      { type: 'OAuthTokenIssued', data: { grantId, tokenId: newId(), refreshTokenHash: hashes[0], accessExpiresAt: iso(3_600_000), refreshExpiresAt: iso(OAUTH_RULES.refreshTtlMs), issuedAt: now.toISOString() } },
    ];
    for (let i = 1; i < hashes.length; i++) {
      events.push({ type: 'OAuthRefreshRotated', data: {
        grantId, tokenId: newId(), previousHash: hashes[i - 1], refreshTokenHash: hashes[i], accessExpiresAt: iso(3_600_000),
        refreshExpiresAt: iso(OAUTH_RULES.refreshTtlMs), at: now.toISOString(),
      } });
    }
    for (let i = 0; i < events.length; i += 500) {
      await one.append(grantStream(grantId), events.slice(i, i + 500).map((e) => toEventData(newId(), e)), { expectedRevision: i === 0 ? 'no_stream' : BigInt(i - 1) });
    }
    return { grantId, refreshToken: token.value };
  }

  const refresh = (store: EventStore, refreshToken: string) => redeemGrant(store, { grant_type: 'refresh_token', refresh_token: refreshToken }, clientId, new Date());
  const stream = (grantId: string) => one.readStream(grantStream(grantId));
  const wholeFold = async (grantId: string) => foldGrant(eventsOf<GrantEvent>(await stream(grantId), GRANT_TYPES));
  const refused = async (p: Promise<unknown>): Promise<string> => {
    try {
      await p;
    } catch (e) {
      if (isDomainError(e)) return e.code;
      throw e;
    }
    throw new Error('expected a refusal');
  };

  it('a refresh after 2,000 rotations: the first one folds the stream, the next ones read only the events they have not folded (none, or another process\'s one rotation)', async () => {
    const g = await grant(2000);
    const a = observed(one);
    let r = await refresh(a.store, g.refreshToken);
    expect(a.seen, 'the first decision of this process folds the whole stream, once').to.deep.equal({ reads: 1, events: 2003 });
    for (let i = 0; i < 10; i++) r = await refresh(a.store, r.refresh.value);
    expect(a.seen, 'its own rotations are folded in as it appends them: nothing read again').to.deep.equal({ reads: 11, events: 2003 });

    const b = await refresh(observed(two).store, r.refresh.value);
    const after = await refresh(a.store, b.refresh.value);
    expect(a.seen, 'another process rotated once: that one event is read').to.deep.equal({ reads: 12, events: 2004 });
    expect(after.state, 'the state decided on and answered is the fold of the whole stream').to.deep.equal(await wholeFold(g.grantId));
    expect(after.state.tokenIds).to.have.length(2001 + 12 + 1);
    expect(await currentGrant(a.store, g.grantId)).to.deep.equal(after.state);
    expect(a.seen, 'and the revision kept with it is the last appended: a check reads nothing').to.deep.equal({ reads: 13, events: 2004 });
  });

  it('two processes rotate the same refresh token: one wins; the other, refused at the revision it read, reads the winner\'s rotation, finds its token spent and revokes the grant (invalid_grant)', async () => {
    const g = await grant(100);
    const a = observed(one);
    let winner: Promise<Awaited<ReturnType<typeof redeemGrant>>> | null = null;
    // B has read and decided; before its append lands, A rotates the same token to the end.
    const b = observed(two, async () => {
      winner ??= refresh(a.store, g.refreshToken);
      await winner.catch(() => undefined);
    });
    await currentGrant(a.store, g.grantId);
    await currentGrant(b.store, g.grantId);
    const warm = { ...b.seen };

    expect(await refused(refresh(b.store, g.refreshToken))).to.equal('invalid_grant');
    const won = await winner!;
    expect(won.state.revoked).to.equal(false);
    expect({ reads: b.seen.reads - warm.reads, events: b.seen.events - warm.events }, 'B: its first read (nothing new), then the winner\'s one event').to.deep.equal({ reads: 2, events: 1 });
    const tail = (await stream(g.grantId)).slice(-3);
    expect(tail.map((e) => e.type)).to.deep.equal(['OAuthRefreshRotated', 'OAuthRefreshRotated', 'OAuthGrantRevoked']);
    expect(tail[1].metadata.actor).to.equal(`oauthClient:${clientId}`);
    expect((tail[2].data as { reason: string }).reason).to.equal('refresh_token_reuse');

    // The family is dead for both processes, the winner's new refresh token included.
    expect(await refused(refresh(a.store, won.refresh.value))).to.equal('invalid_grant');
    expect(await refused(refresh(b.store, won.refresh.value))).to.equal('invalid_grant');
    for (const s of [a.store, b.store]) expect(await currentGrant(s, g.grantId)).to.deep.equal(await wholeFold(g.grantId));
  });

  it('three refreshes of one token at once, two in one process: exactly one wins, the others are invalid_grant, one reuse revocation, every cache the fold of the whole stream', async () => {
    const g = await grant(30);
    const a = observed(one).store;
    const b = observed(two).store;
    await Promise.all([currentGrant(a, g.grantId), currentGrant(b, g.grantId)]);
    const before = (await stream(g.grantId)).length;
    const outcomes = await Promise.allSettled([refresh(a, g.refreshToken), refresh(a, g.refreshToken), refresh(b, g.refreshToken)]);
    expect(outcomes.filter((o) => o.status === 'fulfilled')).to.have.length(1);
    for (const o of outcomes) if (o.status === 'rejected') expect(isDomainError(o.reason) && o.reason.code).to.equal('invalid_grant');
    const added = (await stream(g.grantId)).slice(before);
    expect(added.map((e) => e.type)).to.deep.equal(['OAuthRefreshRotated', 'OAuthGrantRevoked']);
    expect((added[1].data as { reason: string }).reason).to.equal('refresh_token_reuse');
    const whole = await wholeFold(g.grantId);
    for (const s of [a, b]) expect(await currentGrant(s, g.grantId)).to.deep.equal(whole);
  });

  it('a revocation by another process refuses the next refresh through a warm cache, which reads just that event; the grant stays revoked', async () => {
    const g = await grant(50);
    const a = observed(one);
    const r = await refresh(a.store, g.refreshToken);
    await revokeConnection(observed(two).store, user, g.grantId, new Date());
    const read = a.seen.events;
    expect(await refused(refresh(a.store, r.refresh.value))).to.equal('invalid_grant');
    expect(a.seen.events - read).to.equal(1);
    expect(await refused(refresh(a.store, r.refresh.value))).to.equal('invalid_grant');
    const state = await currentGrant(a.store, g.grantId);
    expect([state.revoked, state.revokedReason]).to.deep.equal([true, 'user_revoked']);
    expect(state).to.deep.equal(await wholeFold(g.grantId));
    // Revoking it again, from this process: nothing appended.
    const length = (await stream(g.grantId)).length;
    await revokeConnection(a.store, user, g.grantId, new Date());
    expect(await stream(g.grantId)).to.have.length(length);
  });
});
