import { expect } from 'chai';
import nodemailer from 'nodemailer';
import { streamName } from '../../domain/eventStore';
import { toEventData } from '../../domain/events';
import { newId } from '../../domain/ids';
import { dashboardUser } from '../oauth/support';
import { eventually, getJson } from '../support/motor';
import { RawClient, startSmtpHarness, type SmtpHarness } from './harness';

/**
 * Failed SMTP logins visible to the block's owner: refused AUTH over real SMTP sockets →
 * SmtpAuthFailed → the smtpauth projection → GET /api/motor-blocks/{id}/smtp-auth-failures
 * (dashboard) and GET /api/public/v1/motor-blocks/{id}/smtp-auth-failures (logs.read).
 */
describe('SMTP failed logins for the block owner (e2e)', function () {
  this.timeout(90_000);
  let h: SmtpHarness;
  let a: Awaited<ReturnType<SmtpHarness['newBlock']>>;
  let b: Awaited<ReturnType<SmtpHarness['newBlock']>>;
  let owner: { token: string };
  let stranger: { token: string };
  const dash = (blockId: string, q = '') => `${h.motor.baseUrl}/api/motor-blocks/${blockId}/smtp-auth-failures${q}`;
  const pub = (blockId: string, q = '') => `${h.motor.baseUrl}/api/public/v1/motor-blocks/${blockId}/smtp-auth-failures${q}`;
  const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

  const failLogin = async (user: string, pass: string, method: 'PLAIN' | 'LOGIN') => {
    const t = nodemailer.createTransport({
      host: '127.0.0.1', port: h.securePort, secure: true, auth: { user, pass, method },
      tls: { ca: [h.ca], servername: 'localhost' }, connectionTimeout: 10_000, greetingTimeout: 10_000, socketTimeout: 20_000,
    });
    try {
      await t.verify();
      throw new Error('login accepted');
    } catch (err) {
      expect((err as { responseCode?: number }).responseCode).to.equal(535);
    } finally {
      t.close();
    }
  };

  before(async () => {
    h = await startSmtpHarness();
    a = await h.newBlock();
    b = await h.newBlock();
    owner = await dashboardUser(h.motor, a.accountId);
    stranger = await dashboardUser(h.motor, b.accountId);

    await failLogin(a.smtpUsername, 'wrong-1', 'PLAIN');
    await failLogin(a.smtpUsername, 'wrong-2', 'LOGIN');
    // PLAIN with an authorization identity of somebody else, on a raw socket.
    const raw = await RawClient.connect(h.securePort, true, h.ca);
    expect(await raw.reply()).to.match(/^220 /);
    await raw.command('EHLO raw.test');
    const r = await raw.command(`AUTH PLAIN ${Buffer.from(`someone-else\0${a.smtpUsername}\0${a.smtpPassword}`).toString('base64')}`);
    expect(r).to.match(/^535 /);
    raw.end();
    await failLogin(b.smtpUsername, 'wrong-b', 'PLAIN');
    await failLogin('mb_nobody_at_all', 'whatever', 'PLAIN');
  });
  after(async () => {
    await h?.close();
  });

  it('the owner sees the block\'s failed logins, newest first, with username, mechanism, address and reason', async () => {
    const page = await eventually(async () => {
      const r = await getJson(dash(a.motorBlockId), bearer(owner.token));
      return r.status === 200 && r.body.data.items.length >= 3 ? r.body.data : null;
    }, 20_000);
    expect(page.items).to.have.length(3);
    expect(page.items.map((i: { reason: string }) => i.reason)).to.deep.equal(['authzid_mismatch', 'bad_password', 'bad_password']);
    expect(page.items.map((i: { mechanism: string }) => i.mechanism)).to.deep.equal(['PLAIN', 'LOGIN', 'PLAIN']);
    for (const i of page.items) {
      expect(i).to.include({ username: a.smtpUsername, remoteAddress: '127.0.0.1', clientCertificateFingerprint256: null });
      expect(Date.parse(i.at)).to.be.closeTo(Date.now(), 120_000);
      expect(JSON.stringify(i)).not.to.include('wrong-');
    }
    const times = page.items.map((i: { at: string }) => Date.parse(i.at));
    expect([...times].sort((x, y) => y - x)).to.deep.equal(times);
    expect(page.nextCursor).to.equal(null);
  });

  it('another account gets 404; the other block\'s failures are only its own; unknown usernames belong to nobody', async () => {
    expect((await getJson(dash(a.motorBlockId), bearer(stranger.token))).status).to.equal(404);
    expect((await getJson(dash(a.motorBlockId))).status).to.equal(401);
    const theirs = await eventually(async () => {
      const r = await getJson(dash(b.motorBlockId), bearer(stranger.token));
      return r.status === 200 && r.body.data.items.length >= 1 ? r.body.data : null;
    }, 20_000);
    expect(theirs.items.map((i: { username: string }) => i.username)).to.deep.equal([b.smtpUsername]);
    const mine = await getJson(dash(a.motorBlockId), bearer(owner.token));
    expect(mine.body.data.items.map((i: { username: string }) => i.username)).not.to.include('mb_nobody_at_all');
  });

  it('pages with limit and cursor without overlap; from/to inside the retention window; bad input is a 400', async () => {
    const first = await getJson(dash(a.motorBlockId, '?limit=2'), bearer(owner.token));
    expect(first.status).to.equal(200);
    expect(first.body.data.items).to.have.length(2);
    expect(first.body.data.nextCursor).to.be.a('string');
    const second = await getJson(dash(a.motorBlockId, `?limit=2&cursor=${encodeURIComponent(first.body.data.nextCursor)}`), bearer(owner.token));
    expect(second.body.data.items).to.have.length(1);
    expect(second.body.data.nextCursor).to.equal(null);
    const ids = [...first.body.data.items, ...second.body.data.items].map((i: { id: string }) => i.id);
    expect(new Set(ids).size).to.equal(3);

    const future = new Date(Date.now() + 3_600_000).toISOString();
    expect((await getJson(dash(a.motorBlockId, `?from=${future}`), bearer(owner.token))).body.data.items).to.have.length(0);
    const past = new Date(Date.now() - 3_600_000).toISOString();
    expect((await getJson(dash(a.motorBlockId, `?to=${past}`), bearer(owner.token))).body.data.items).to.have.length(0);
    const old = await getJson(dash(a.motorBlockId, '?from=2001-01-01T00:00:00Z'), bearer(owner.token));
    expect([old.status, old.body.code]).to.deep.equal([400, 'outside_retention_window']);
    const badCursor = await getJson(dash(a.motorBlockId, '?cursor=nonsense'), bearer(owner.token));
    expect([badCursor.status, badCursor.body.code]).to.deep.equal([400, 'invalid_cursor']);
    const badLimit = await getJson(dash(a.motorBlockId, '?limit=0'), bearer(owner.token));
    expect([badLimit.status, badLimit.body.code]).to.deep.equal([400, 'invalid_query']);
  });

  it('public API: a logs.read token of the block sees the same items; other scope 403, other block 403, no token 401', async () => {
    const token = await h.motor.token(a, ['logs.read']);
    const r = await getJson(pub(a.motorBlockId), bearer(token));
    expect(r.status, JSON.stringify(r.body)).to.equal(200);
    const viaDashboard = await getJson(dash(a.motorBlockId), bearer(owner.token));
    expect(r.body.data.items).to.deep.equal(viaDashboard.body.data.items);

    const noScope = await getJson(pub(a.motorBlockId), bearer(await h.motor.token(a, ['analytics.read'])));
    expect(noScope.status).to.equal(403);
    const otherBlock = await getJson(pub(a.motorBlockId), bearer(await h.motor.token(b, ['logs.read'])));
    expect([otherBlock.status, otherBlock.body.code]).to.deep.equal([403, 'motor_block_forbidden']);
    expect((await getJson(pub(a.motorBlockId))).status).to.equal(401);
    // A dashboard JWT is not a public bearer token.
    expect((await getJson(pub(a.motorBlockId), bearer(owner.token))).status).to.equal(401);
  });

  it('a deleted block\'s failures go with its history (tombstone MotorBlockDeleted, historyDeleted)', async () => {
    const store = h.motor.rt.store;
    const before = await getJson(dash(b.motorBlockId), bearer(stranger.token));
    expect(before.body.data.items.length).to.be.greaterThan(0);
    // What the deletion job does: remove the block's SMTP streams, then append the tombstone.
    await store.deleteStreams([streamName('smtpAuth', b.motorBlockId)]);
    await store.append(streamName('motorBlock', b.motorBlockId), [toEventData(newId(), {
      type: 'MotorBlockDeleted',
      data: {
        motorBlockId: b.motorBlockId, accountId: b.accountId, jobId: newId(), historyDeleted: true,
        messagesDeleted: 0, streamsDeleted: 1, eventsDeleted: before.body.data.items.length, deletedAt: new Date().toISOString(),
      },
    })], { expectedRevision: 'any' });
    await eventually(async () => {
      const r = await h.motor.rt.db.withSchema('rm_smtpauth').table('failures').where({ motor_block_id: b.motorBlockId }).count<{ count: string }[]>('* as count');
      return Number(r[0].count) === 0;
    }, 20_000);
    // Block A's rows are untouched.
    expect((await getJson(dash(a.motorBlockId), bearer(owner.token))).body.data.items).to.have.length(3);
  });
});
