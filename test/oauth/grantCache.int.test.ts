import { randomBytes } from 'node:crypto';
import { expect } from 'chai';
import type { BootstrapResult } from '../../commands/admin/bootstrap';
import { accessTokenSettings, signAccessToken } from '../../commands/oauth/accessTokens';
import { activeAgentToken, signAgentToken } from '../../commands/oauth/agentTokens';
import { activeAccessToken } from '../../commands/oauth/authorization';
import { streamName, type EventStore } from '../../domain/eventStore';
import { toEventData, type DomainEvent } from '../../domain/events';
import { newId } from '../../domain/ids';
import type { AgentScope } from '../../domain/oauth/agent';
import { OAUTH_RULES } from '../../domain/oauth/grant';
import { PostgresEventStore } from '../../infra/eventstore/postgres/postgresEventStore';
import { MCP_ENV, rpc } from '../mcp/support';
import { grantAgentAccess } from '../support/agentGrant';
import { startTestMotor, type TestMotor } from '../support/motor';

const FULL = '/v1/service/mcp';
const SCOPES: AgentScope[] = ['read:analytics'];
const listTools = { jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} };
const hash = () => randomBytes(32).toString('hex');

/** The events of `n` refresh rotations of a grant, appended by `store` after `revision`; the token ids they issued. */
async function rotate(store: EventStore, grantId: string, n: number): Promise<string[]> {
  const stream = streamName('oauthGrant', grantId);
  const tokenIds: string[] = [];
  const events: DomainEvent[] = [];
  const now = new Date();
  let previous = hash();
  for (let i = 0; i < n; i++) {
    const next = hash();
    const tokenId = newId();
    tokenIds.push(tokenId);
    events.push({ type: 'OAuthRefreshRotated', data: {
      grantId, tokenId, previousHash: previous, refreshTokenHash: next, accessExpiresAt: new Date(now.getTime() + 3_600_000).toISOString(),
      refreshExpiresAt: new Date(now.getTime() + OAUTH_RULES.refreshTtlMs).toISOString(), at: now.toISOString(),
    } });
    previous = next;
  }
  for (let i = 0; i < events.length; i += 500) {
    await store.append(stream, events.slice(i, i + 500).map((e) => toEventData(newId(), e)), { expectedRevision: 'stream_exists' });
  }
  return tokenIds;
}

const revoke = (store: EventStore, grantId: string) => store.append(streamName('oauthGrant', grantId), [toEventData(newId(), {
  type: 'OAuthGrantRevoked', data: { grantId, reason: 'user_revoked', at: new Date().toISOString(), by: `user:${newId()}` },
})], { expectedRevision: 'stream_exists' });

/** A store that counts the events its stream reads hand back: what a check had to read and fold. */
function counting(store: EventStore): { store: EventStore; read: () => number } {
  let read = 0;
  const wrapper = {
    async readStream(...args: Parameters<EventStore['readStream']>) {
      const events = await store.readStream(...args);
      read += events.length;
      return events;
    },
  };
  return { store: wrapper as unknown as EventStore, read: () => read };
}

/**
 * The grant checks of agent and SMTP tokens read a grant through a per-process cache of its folded
 * state (commands/oauth/grantCache.ts). A check must cost the same on a grant with thousands of
 * refresh rotations as on a fresh one, and must still see at once what another process appended:
 * a revocation, a token issued by a rotation. "Another process" is a second event store on the
 * same database, with a cache of its own.
 */
describe('Grant checks through the per-process grant cache (int)', function () {
  this.timeout(60_000);
  let motor: TestMotor;
  let b: BootstrapResult;
  let other: PostgresEventStore;

  before(async () => {
    motor = await startTestMotor({ roles: ['api'], env: MCP_ENV });
    b = await motor.bootstrap();
    other = new PostgresEventStore(motor.rt.databaseUrl);
    await other.init();
  });
  after(async () => {
    await other?.close();
    await motor?.close();
  });

  const grant = () => grantAgentAccess(motor, { accountId: b.accountId, path: FULL, scopes: SCOPES });
  const agentToken = (g: { grantId: string; resource: string; userId: string }, tokenId: string) => signAgentToken({ keys: motor.rt.keys, config: motor.config }, {
    tokenId, grantId: g.grantId, clientId: 'https://agent.example.test/client.json', userId: g.userId, accountId: b.accountId, resource: g.resource, scopes: SCOPES,
  }, new Date(), OAUTH_RULES.accessTtlSeconds).then((t) => t.token);

  it('a grant with 2,000 rotations: its tokens, first to last, are accepted and an id it never issued refused, and after the first check no check reads its stream again', async () => {
    const g = await grant();
    const tokenIds = await rotate(other, g.grantId, 2000);
    const c = counting(motor.rt.store);
    const check = (token: string) => activeAgentToken({ store: c.store, keys: motor.rt.keys, config: motor.config }, token, g.resource, new Date());

    const last = await check(await agentToken(g, tokenIds[1999]));
    expect(last.ok).to.equal(true);
    expect(c.read(), 'the first check folds the whole stream').to.equal(2003);
    for (const token of [g.accessToken, await agentToken(g, tokenIds[0]), await agentToken(g, tokenIds[1000]), await agentToken(g, tokenIds[1999])]) {
      expect((await check(token)).ok).to.equal(true);
    }
    expect(await check(await agentToken(g, newId()))).to.deep.equal({ ok: false, reason: 'revoked' });
    expect(c.read(), 'later checks read only what was appended since: nothing').to.equal(2003);

    await rotate(other, g.grantId, 1);
    expect((await check(g.accessToken)).ok).to.equal(true);
    expect(c.read(), 'one rotation later: one event read').to.equal(2004);
  });

  it('a revocation appended by another process is refused on the very next request through a warm cache (MCP and a direct check alike)', async () => {
    const g = await grant();
    await rotate(other, g.grantId, 50);
    const check = () => activeAgentToken({ store: motor.rt.store, keys: motor.rt.keys, config: motor.config }, g.accessToken, g.resource, new Date());
    for (let i = 0; i < 3; i++) {
      expect((await rpc(motor, FULL, listTools, g.accessToken)).status).to.equal(200);
      expect((await check()).ok).to.equal(true);
    }
    await revoke(other, g.grantId);
    const r = await rpc(motor, FULL, listTools, g.accessToken);
    expect(r.status).to.equal(401);
    expect(r.body).to.deep.equal({ error: 'invalid_token', error_description: 'The connection of this access token was revoked' });
    expect(await check()).to.deep.equal({ ok: false, reason: 'revoked' });
  });

  it('a token issued by a rotation in another process after the cache was warmed is accepted at once', async () => {
    const g = await grant();
    expect((await rpc(motor, FULL, listTools, g.accessToken)).status).to.equal(200);
    const [tokenId] = await rotate(other, g.grantId, 1);
    const fresh = await agentToken(g, tokenId);
    expect((await rpc(motor, FULL, listTools, fresh)).status).to.equal(200);
    // And one the grant has not issued yet is refused, then accepted once a rotation issues it.
    const nextId = newId();
    const next = await agentToken(g, nextId);
    expect((await rpc(motor, FULL, listTools, next)).status).to.equal(401);
    await other.append(streamName('oauthGrant', g.grantId), [toEventData(newId(), { type: 'OAuthRefreshRotated', data: {
      grantId: g.grantId, tokenId: nextId, previousHash: hash(), refreshTokenHash: hash(), accessExpiresAt: new Date(Date.now() + 3_600_000).toISOString(),
      refreshExpiresAt: new Date(Date.now() + OAUTH_RULES.refreshTtlMs).toISOString(), at: new Date().toISOString(),
    } })], { expectedRevision: 'stream_exists' });
    expect((await rpc(motor, FULL, listTools, next)).status).to.equal(200);
  });

  it('SMTP access tokens: the same check, a revocation elsewhere refused at once through a warm cache', async () => {
    const grantId = newId();
    const tokenId = newId();
    const userId = newId();
    const clientId = newId();
    const now = new Date();
    const iso = (ms: number) => new Date(now.getTime() + ms).toISOString();
    const events: DomainEvent[] = [
      { type: 'OAuthConsentRequested', data: {
        grantId, clientId, accountId: b.accountId, userId, sessionId: newId(), redirectUri: 'https://app.example.test/cb', scope: 'email.send', state: null,
        motorBlockId: b.motorBlockId, formTokenHash: hash(), expiresAt: iso(OAUTH_RULES.consentTtlMs), requestedAt: now.toISOString(),
      } },
      { type: 'OAuthCodeIssued', data: { grantId, motorBlockId: b.motorBlockId, codeHash: hash(), expiresAt: iso(OAUTH_RULES.codeTtlMs), issuedAt: now.toISOString() } },
      { type: 'OAuthTokenIssued', data: { grantId, tokenId, refreshTokenHash: hash(), accessExpiresAt: iso(3_600_000), refreshExpiresAt: iso(OAUTH_RULES.refreshTtlMs), issuedAt: now.toISOString() } },
    ];
    await other.append(streamName('oauthGrant', grantId), events.map((e) => toEventData(newId(), e)), { expectedRevision: 'no_stream' });
    const [rotated] = await rotate(other, grantId, 100).then((ids) => ids.slice(-1));
    const sign = (id: string) => signAccessToken(accessTokenSettings(motor.config), {
      tokenId: id, grantId, clientId, userId, accountId: b.accountId, motorBlockId: b.motorBlockId, scope: 'email.send',
    }, new Date(), 3600).token;
    const check = (id: string) => activeAccessToken({ store: motor.rt.store, config: motor.config }, sign(id), new Date());
    expect((await check(tokenId)).ok).to.equal(true);
    expect((await check(rotated)).ok).to.equal(true);
    expect(await check(newId())).to.deep.equal({ ok: false, reason: 'revoked' });
    await revoke(other, grantId);
    expect(await check(rotated)).to.deep.equal({ ok: false, reason: 'revoked' });
  });
});
