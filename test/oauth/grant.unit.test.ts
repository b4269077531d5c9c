import { createHash } from 'node:crypto';
import { expect } from 'chai';
import { isDomainError } from '../../domain/errors';
import {
  decideApprove, decideDeny, decideRedeemCode, decideRefresh, evolveGrant, foldGrant, initialGrantState, isAcceptableRedirectUri, OAUTH_RULES, parseScope,
  type GrantEvent, type GrantState,
} from '../../domain/oauth/grant';

const T0 = new Date('2026-01-01T00:00:00Z');
const at = (ms: number) => new Date(T0.getTime() + ms);
const G = '11111111-1111-4111-8111-111111111111';
const C = '22222222-2222-4222-8222-222222222222';
const U = '33333333-3333-4333-8333-333333333333';
const B = '44444444-4444-4444-8444-444444444444';
const H = (s: string) => Buffer.from(s.padEnd(32, '0')).toString('hex');
const REDIRECT = 'https://app.test/cb';

const codeOf = (f: () => unknown) => { try { f(); } catch (e) { return isDomainError(e) ? e.code : String(e); } return null; };

describe('OAuth grant aggregate (unit)', () => {
  const requested: GrantEvent = { type: 'OAuthConsentRequested', data: {
    grantId: G, clientId: C, accountId: B, userId: U, sessionId: G, redirectUri: REDIRECT, scope: 'email.send', state: 's', motorBlockId: null,
    formTokenHash: H('form'), expiresAt: at(OAUTH_RULES.consentTtlMs).toISOString(), requestedAt: T0.toISOString(),
  } };
  const approved = (): GrantEvent[] => [requested, ...decideApprove(foldGrant([requested]), { formTokenHash: H('form'), userId: U, motorBlockId: B, codeHash: H('code'), now: at(1000) })];
  const redeem = (events: GrantEvent[], o: Partial<Parameters<typeof decideRedeemCode>[1]> = {}) =>
    decideRedeemCode(foldGrant(events), { clientId: C, codeHash: H('code'), redirectUri: REDIRECT, tokenId: G, refreshTokenHash: H('rt1'), now: at(2000), ...o });

  it('approve spends the form token: a second approval, a late one, another user or a wrong token are invalid_request', () => {
    const events = approved();
    expect(events.map((e) => e.type)).to.deep.equal(['OAuthConsentRequested', 'OAuthCodeIssued']);
    expect(codeOf(() => decideApprove(foldGrant(events), { formTokenHash: H('form'), userId: U, motorBlockId: B, codeHash: H('c2'), now: at(2000) }))).to.equal('invalid_request');
    const fresh = foldGrant([requested]);
    expect(codeOf(() => decideApprove(fresh, { formTokenHash: H('form'), userId: U, motorBlockId: B, codeHash: H('c'), now: at(OAUTH_RULES.consentTtlMs + 1) }))).to.equal('invalid_request');
    expect(codeOf(() => decideApprove(fresh, { formTokenHash: H('form'), userId: C, motorBlockId: B, codeHash: H('c'), now: at(1) }))).to.equal('invalid_request');
    expect(codeOf(() => decideApprove(fresh, { formTokenHash: H('other'), userId: U, motorBlockId: B, codeHash: H('c'), now: at(1) }))).to.equal('invalid_request');
    expect(decideDeny(fresh, { formTokenHash: H('form'), userId: U, now: at(1) }).map((e) => e.type)).to.deep.equal(['OAuthConsentDenied']);
  });

  it('the code lives 60 s', () => {
    expect(redeem(approved(), { now: at(1000 + OAUTH_RULES.codeTtlMs) }).error).to.equal(undefined);
    expect(redeem(approved(), { now: at(1000 + OAUTH_RULES.codeTtlMs + 1) }).error?.code).to.equal('invalid_grant');
  });

  it('code reuse revokes the grant; a wrong redirect_uri or client is invalid_grant without spending the code', () => {
    expect(redeem(approved(), { redirectUri: 'https://app.test/other' }).error?.code).to.equal('invalid_grant');
    expect(redeem(approved(), { clientId: G }).error?.code).to.equal('invalid_grant');
    const issued = [...approved(), ...redeem(approved()).events];
    expect(issued.map((e) => e.type)).to.include('OAuthTokenIssued');
    const again = redeem(issued);
    expect(again.error?.code).to.equal('invalid_grant');
    expect(again.events.map((e) => e.type)).to.deep.equal(['OAuthGrantRevoked']);
    expect(foldGrant([...issued, ...again.events]).revoked).to.equal(true);
  });

  it('PKCE: a recorded challenge needs its S256 verifier; a verifier without a recorded challenge is a downgrade; neither spends the code', () => {
    const verifier = 'v'.repeat(43);
    const challenge = createHash('sha256').update(verifier).digest('base64url');
    const withChallenge: GrantEvent = { ...requested, data: { ...requested.data, codeChallenge: challenge } } as GrantEvent;
    const pkceApproved = (): GrantEvent[] => [withChallenge, ...decideApprove(foldGrant([withChallenge]), { formTokenHash: H('form'), userId: U, motorBlockId: B, codeHash: H('code'), now: at(1000) })];
    for (const codeVerifier of [undefined, 'w'.repeat(43), challenge]) {
      const d = redeem(pkceApproved(), { codeVerifier });
      expect([d.error?.code, d.events.length], String(codeVerifier)).to.deep.equal(['invalid_grant', 0]);
    }
    expect(redeem(pkceApproved(), { codeVerifier: verifier }).error).to.equal(undefined);
    const downgrade = redeem(approved(), { codeVerifier: verifier });
    expect([downgrade.error?.code, downgrade.events.length]).to.deep.equal(['invalid_grant', 0]);
    expect(redeem(approved()).error).to.equal(undefined);
  });

  it('refresh rotates; a spent token revokes the family; after that nothing refreshes', () => {
    let events = [...approved(), ...redeem(approved()).events];
    const r1 = decideRefresh(foldGrant(events), { clientId: C, refreshTokenHash: H('rt1'), newRefreshTokenHash: H('rt2'), tokenId: C, now: at(3000) });
    expect(r1.events.map((e) => e.type)).to.deep.equal(['OAuthRefreshRotated']);
    events = [...events, ...r1.events];
    const reuse = decideRefresh(foldGrant(events), { clientId: C, refreshTokenHash: H('rt1'), newRefreshTokenHash: H('rt3'), tokenId: U, now: at(4000) });
    expect(reuse.error?.code).to.equal('invalid_grant');
    expect(reuse.events.map((e) => e.type)).to.deep.equal(['OAuthGrantRevoked']);
    events = [...events, ...reuse.events];
    expect(decideRefresh(foldGrant(events), { clientId: C, refreshTokenHash: H('rt2'), newRefreshTokenHash: H('rt4'), tokenId: U, now: at(5000) }).error?.code).to.equal('invalid_grant');
    const expired = [...approved(), ...redeem(approved()).events];
    expect(decideRefresh(foldGrant(expired), { clientId: C, refreshTokenHash: H('rt1'), newRefreshTokenHash: H('x'), tokenId: U, now: at(2000 + OAUTH_RULES.refreshTtlMs + 1) }).error?.code).to.equal('invalid_grant');
  });

  /** The hash of the grant's i-th refresh token: the first is redeem's rt1. */
  const RT = (i: number) => (i === 1 ? H('rt1') : H(`rt-${i}-`));
  /** A grant whose first refresh token (rt1) was rotated `n` times, one hash after another, as decideRefresh records it. */
  const rotated = (n: number): GrantEvent[] => {
    const events = [...approved(), ...redeem(approved()).events];
    for (let i = 1; i <= n; i++) {
      events.push({ type: 'OAuthRefreshRotated', data: {
        grantId: G, tokenId: `token-${i}`, previousHash: RT(i), refreshTokenHash: RT(i + 1), accessExpiresAt: at(3_600_000).toISOString(),
        refreshExpiresAt: at(OAUTH_RULES.refreshTtlMs).toISOString(), at: at(3000 + i).toISOString(),
      } });
    }
    return events;
  };

  it('a fold carried on from an earlier state is the fold of the whole stream, event by event alike, and leaves the earlier state as it was', () => {
    const events = [...rotated(50), { type: 'OAuthGrantRevoked', data: { grantId: G, reason: 'user_revoked', at: at(9000).toISOString() } } as GrantEvent];
    const whole = foldGrant(events);
    expect(whole.tokenIds).to.have.length(51);
    expect(whole.spentRefreshHashes).to.deep.equal(Array.from({ length: 50 }, (_, i) => RT(i + 1)));
    expect(events.reduce(evolveGrant, initialGrantState())).to.deep.equal(whole);
    for (const cut of [0, 1, 3, 4, 30, events.length - 1, events.length]) {
      const earlier = foldGrant(events.slice(0, cut));
      const copy: GrantState = structuredClone(earlier);
      expect(foldGrant(events.slice(cut), earlier), `cut at ${cut}`).to.deep.equal(whole);
      expect(earlier, `cut at ${cut}: the earlier state unchanged`).to.deep.equal(copy);
    }
  });

  it("after 2,000 rotations: every token id is the grant's, the current refresh token rotates, and any spent one still revokes the family", () => {
    const events = rotated(2000);
    const s = foldGrant(events);
    expect(s.tokenIds).to.include(G).and.to.include('token-1').and.to.include('token-2000');
    const again = (hash: string) => decideRefresh(s, { clientId: C, refreshTokenHash: hash, newRefreshTokenHash: H('next'), tokenId: U, now: at(10_000) });
    expect(again(RT(2001)).events.map((e) => e.type)).to.deep.equal(['OAuthRefreshRotated']);
    for (const spent of [RT(1), RT(1000), RT(2000)]) {
      const d = again(spent);
      expect([d.error?.code, d.events.map((e) => e.type)], spent).to.deep.equal(['invalid_grant', ['OAuthGrantRevoked']]);
    }
  });

  it('scopes and redirect URIs', () => {
    expect(parseScope(undefined)).to.equal('email.send');
    expect(parseScope('email.send email.send')).to.equal('email.send');
    expect(parseScope('logs.read')).to.equal(null);
    expect(isAcceptableRedirectUri('https://a.test/cb?x=1')).to.equal(true);
    expect(isAcceptableRedirectUri('http://localhost:8080/cb')).to.equal(true);
    for (const bad of ['http://a.test/cb', 'https://a.test/cb#f', 'javascript:alert(1)', 'https://u:p@a.test/', '/relative']) expect(isAcceptableRedirectUri(bad), bad).to.equal(false);
  });
});
