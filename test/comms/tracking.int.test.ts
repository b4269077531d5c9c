import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import { streamName, type RecordedEvent } from '../../domain/eventStore';
import { toEventData, type MessageAccepted } from '../../domain/events';
import { TRANSPARENT_GIF, instrumentHtml, trackingSecret, trackingToken, type TrackingContext } from '../../domain/comms/tracking';
import { TRACKING_HITS_PER_MINUTE } from '../../commands/comms/tracking';
import type { BootstrapResult } from '../../commands/admin/bootstrap';
import { commTrackingProjection, TRACKING_SCHEMA } from '../../projections/commTracking/projection';
import { trackingTotals } from '../../projections/commTracking/queries';
import { migrateProjection } from '../../projections/runner';
import { createLogger } from '../../infra/logger';
import { RetentionSweeper } from '../../workers/retention';
import { findHistoryStreams } from '../../workers/blockDeletion';
import { oauthBlock } from '../oauth/support';
import { awayFromMinuteEdge, eventually, getJson, startTestMotor, type TestMotor } from '../support/motor';
import { as, commGet, tenant, type Tenant } from './support';

/** A campaign message to `to` as the campaign sender leaves it: its MessageAccepted (the tracked recipient is read from it). */
async function acceptMessage(motor: TestMotor, b: BootstrapResult, campaignId: string, messageId: string, to: string[], motorBlockId = b.motorBlockId): Promise<void> {
  const data: MessageAccepted = {
    messageId, motorBlockId, accountId: b.accountId, domainId: b.domainId, from: 'news@shop.example', fromName: null, to, subject: 'Sale',
    text: 'Sale', html: null, headers: {}, smtpMessageId: `${messageId}@shop.example`, idempotencyKey: null, source: 'http',
    metadata: { campaign_id: campaignId }, acceptedAt: new Date().toISOString(),
  };
  await motor.rt.store.append(streamName('message', messageId), [toEventData(randomUUID(), { type: 'MessageAccepted', data }, { actor: `campaign:${campaignId}` })], { expectedRevision: 'no_stream' });
}

type Item = { id: string; type: string; campaign_id: string; message_id: string; motor_block_id: string; email: string; url: string | null; user_agent: string | null; ip: string | null; occurred_at: string };

/**
 * Open and click tracking over real HTTP (docs/COMMUNICATIONS.md "Tracking"): the links
 * instrumentHtml writes are fetched like a mail client would; the hits become events, the
 * `commtracking` read model and GET /comm-api/api/tracking/events. Forged tokens record nothing
 * and never redirect; tenants see only their own; the reader is answered with the store down.
 */
describe('campaign open and click tracking (int)', function () {
  this.timeout(120_000);
  let motor: TestMotor;
  let a: Tenant;
  let b: Tenant;
  let secret: Buffer;
  const C1 = randomUUID();
  const C2 = randomUUID();
  const M1 = randomUUID();
  const ctxOf = (t: Tenant, campaignId: string, messageId: string, motorBlockId = t.b.motorBlockId): TrackingContext =>
    ({ tenantId: t.accountId, motorBlockId, campaignId, messageId });
  /** The tracked HTML of a campaign message to `recipient`, accepted first. */
  const mailTo = async (t: Tenant, campaignId: string, messageId: string, recipient: string, motorBlockId = t.b.motorBlockId): Promise<string> => {
    await acceptMessage(motor, t.b, campaignId, messageId, [recipient], motorBlockId);
    return instrumentHtml(html, motor.config.authPublicUrl, secret, ctxOf(t, campaignId, messageId, motorBlockId));
  };
  const pixelOf = (html: string) => /<img src="([^"]+\.gif)"/.exec(html)![1];
  const linkOf = (html: string) => /<a href="([^"]+)"/.exec(html)![1];
  const events = (who: Tenant, query = '') => commGet(motor, `/tracking/events${query}`, as(who));
  const streamLength = async (messageId: string) => (await motor.rt.store.readStream(`tracking-${messageId}`)).length;
  const html = '<html><body><p>Sale</p><a href="https://shop.example/p?a=1&amp;b=2">Buy</a></body></html>';
  const UA = { 'user-agent': 'MailReader/1.0 (test)' };
  let mail1: string;

  before(async () => {
    // No delivery workers: the messages below are accepted by hand and must not be delivered.
    motor = await startTestMotor({ roles: ['api', 'projector'] });
    a = await tenant(motor, 'trk-a@example.test');
    b = await tenant(motor, 'trk-b@example.test');
    secret = trackingSecret(motor.config.tokenSecret);
    mail1 = await mailTo(a, C1, M1, 'Reader@Example.test');
  });
  after(async () => { await motor?.close(); });

  /** The local URL of a link Motor wrote (the configured public base may name another host). */
  const local = (url: string) => `${motor.baseUrl}${new URL(url).pathname}`;

  it('the pixel: 200 image/gif, not cacheable; the open is listed with its fields', async () => {
    const res = await fetch(local(pixelOf(mail1)), { headers: UA });
    expect(res.status).to.equal(200);
    expect(res.headers.get('content-type')).to.equal('image/gif');
    expect(res.headers.get('cache-control')).to.equal('no-store, private');
    expect(Buffer.from(await res.arrayBuffer()).equals(TRANSPARENT_GIF)).to.equal(true);
    const page = await eventually(async () => {
      const r = await events(a);
      return r.status === 200 && r.body.data.items.length === 1 ? r.body : null;
    });
    expect(page.success).to.equal(true);
    const item = page.data.items[0] as Item;
    expect(item).to.deep.include({
      type: 'open', campaign_id: C1, message_id: M1, motor_block_id: a.b.motorBlockId, email: 'reader@example.test', url: null,
      user_agent: 'MailReader/1.0 (test)', ip: '127.0.0.0',
    });
    expect(Object.keys(item).sort()).to.deep.equal(['campaign_id', 'email', 'id', 'ip', 'message_id', 'motor_block_id', 'occurred_at', 'type', 'url', 'user_agent']);
    expect(Date.now() - Date.parse(item.occurred_at)).to.be.within(0, 60_000);
    expect(page.data.next_cursor).to.equal(null);
  });

  it('the click: 302 to exactly the signed URL (entities decoded), listed as a click', async () => {
    const res = await fetch(local(linkOf(mail1)), { redirect: 'manual', headers: UA });
    expect(res.status).to.equal(302);
    expect(res.headers.get('location')).to.equal('https://shop.example/p?a=1&b=2');
    const item = await eventually(async () => {
      const r = await events(a, '?type=click');
      return r.status === 200 && r.body.data.items.length === 1 ? r.body.data.items[0] as Item : null;
    });
    expect(item).to.deep.include({ type: 'click', campaign_id: C1, message_id: M1, email: 'reader@example.test', url: 'https://shop.example/p?a=1&b=2' });
    expect(await streamLength(M1)).to.equal(2);
  });

  it('a forged or tampered token: the click is 404 HTML and never a redirect, the pixel still a gif; nothing is recorded', async () => {
    const click = linkOf(mail1);
    const token = click.slice(click.lastIndexOf('/') + 1);
    const tampered = token.slice(0, 80) + (token[80] === 'A' ? 'B' : 'A') + token.slice(81);
    // A well-formed token for another destination, signed with a key that is not Motor's.
    const forged = trackingToken(trackingSecret('not-motors-secret-0123456789abcdef0123'), ctxOf(a, C1, M1), 'https://evil.example/');
    for (const t of [tampered, forged, 'x', `${token}A`]) {
      const res = await fetch(`${motor.baseUrl}/comm-api/t/c/${t}`, { redirect: 'manual' });
      expect(res.status, t).to.equal(404);
      expect(res.headers.get('location')).to.equal(null);
      expect(res.headers.get('content-type')).to.match(/^text\/html/);
      expect(await res.text()).to.include('Link not found');
      const gif = await fetch(`${motor.baseUrl}/comm-api/t/o/${t}.gif`);
      expect(gif.status).to.equal(200);
      expect(Buffer.from(await gif.arrayBuffer()).equals(TRANSPARENT_GIF)).to.equal(true);
    }
    // An open token is not a click token, nor the reverse.
    const pixel = pixelOf(mail1);
    const openToken = pixel.slice(pixel.lastIndexOf('/') + 1, -4);
    expect((await fetch(`${motor.baseUrl}/comm-api/t/c/${openToken}`, { redirect: 'manual' })).status).to.equal(404);
    expect((await fetch(`${motor.baseUrl}/comm-api/t/o/${token}.gif`)).status).to.equal(200);
    expect(await streamLength(M1)).to.equal(2);
    const metrics = await getJson(`${motor.baseUrl}/metrics`);
    expect(metrics.body).to.match(/motor_tracking_hits_total\{[^}]*type="click"[^}]*outcome="invalid_token"[^}]*\} 5/);
  });

  it('HEAD requests and prefetches get the answer but record nothing', async () => {
    const head = await fetch(local(linkOf(mail1)), { method: 'HEAD', redirect: 'manual' });
    expect(head.status).to.equal(302);
    const headGif = await fetch(local(pixelOf(mail1)), { method: 'HEAD' });
    expect(headGif.status).to.equal(200);
    const pre = await fetch(local(linkOf(mail1)), { redirect: 'manual', headers: { 'sec-purpose': 'prefetch' } });
    expect(pre.status).to.equal(302);
    expect(await streamLength(M1)).to.equal(2);
  });

  it('a token naming a block of another tenant records nothing (the redirect still works)', async () => {
    const m = randomUUID();
    await acceptMessage(motor, a.b, C1, m, ['x@example.test']);
    const cross = instrumentHtml(html, motor.config.authPublicUrl, secret, ctxOf(b, C1, m, a.b.motorBlockId));
    const res = await fetch(local(linkOf(cross)), { redirect: 'manual' });
    expect(res.status).to.equal(302);
    expect(await streamLength(m)).to.equal(0);
  });

  it('the URLs hold no address: the recipient recorded is the single `to` of the message\'s MessageAccepted', async () => {
    for (const url of [pixelOf(mail1), linkOf(mail1)]) {
      const token = new URL(url).pathname.split('/').pop()!.replace(/\.gif$/, '');
      const raw = Buffer.from(token, 'base64url');
      expect(raw.toString('base64url')).to.equal(token);
      for (const needle of ['Reader@Example.test', 'reader@example.test', 'Example.test', 'example.test']) {
        expect(raw.includes(Buffer.from(needle)), needle).to.equal(false);
        expect(url.toLowerCase()).not.to.include(needle.toLowerCase());
      }
    }
    const recorded = await motor.rt.store.readStream(`tracking-${M1}`);
    expect(recorded.map((e) => [e.type, (e.data as { recipient: string }).recipient])).to.deep.equal([['EmailOpened', 'Reader@Example.test'], ['LinkClicked', 'Reader@Example.test']]);
  });

  it('a message with no stream, or with several recipients: the gif and the redirect are served, nothing is recorded (skipped)', async () => {
    const skipped = async () => (await motor.rt.metrics.trackingHits.get()).values.filter((v) => v.labels.outcome === 'skipped').reduce((n, v) => n + v.value, 0);
    const before = await skipped();
    const gone = randomUUID();
    const two = randomUUID();
    await acceptMessage(motor, a.b, C1, two, ['one@example.test', 'two@example.test']);
    for (const m of [gone, two]) {
      const mail = instrumentHtml(html, motor.config.authPublicUrl, secret, ctxOf(a, C1, m));
      const gif = await fetch(local(pixelOf(mail)), { headers: UA });
      expect(gif.status).to.equal(200);
      expect(Buffer.from(await gif.arrayBuffer()).equals(TRANSPARENT_GIF)).to.equal(true);
      const click = await fetch(local(linkOf(mail)), { redirect: 'manual', headers: UA });
      expect(click.status).to.equal(302);
      expect(click.headers.get('location')).to.equal('https://shop.example/p?a=1&b=2');
      expect(await streamLength(m)).to.equal(0);
    }
    expect(await skipped()).to.equal(before + 4);
    expect(await motor.rt.store.readStream(streamName('message', gone))).to.deep.equal([]);
  });

  describe('GET /tracking/events', () => {
    const hits: Array<{ campaign: string; message: string; email: string; kind: 'open' | 'click' }> = [];
    let blockA2: string;

    before(async () => {
      blockA2 = (await oauthBlock(motor, a.b, 'Second block')).motorBlockId;
      // Tenant A: campaign C1 (M1 above: 1 open, 1 click) and C2 on its second block; tenant B: one open.
      for (const [campaign, block, email, opens, clicks] of [[C1, a.b.motorBlockId, 'two@example.test', 2, 1], [C2, blockA2, 'three@example.test', 1, 2], [C2, blockA2, 'four@example.test', 1, 0]] as const) {
        const message = randomUUID();
        const mail = await mailTo(a, campaign, message, email, block);
        for (let i = 0; i < opens; i++) { expect((await fetch(local(pixelOf(mail)))).status).to.equal(200); hits.push({ campaign, message, email, kind: 'open' }); }
        for (let i = 0; i < clicks; i++) { expect((await fetch(local(linkOf(mail)), { redirect: 'manual' })).status).to.equal(302); hits.push({ campaign, message, email, kind: 'click' }); }
      }
      const mailB = await mailTo(b, C1, randomUUID(), 'b-reader@example.test');
      expect((await fetch(local(pixelOf(mailB)))).status).to.equal(200);
      await eventually(async () => {
        const [ra, rb] = [await events(a, '?limit=500'), await events(b)];
        return ra.body.data?.items.length === 9 && rb.body.data?.items.length === 1;
      });
    });

    it('tenant isolation: each tenant sees only its own; another tenant id is 403, no credential 401, no header 400', async () => {
      const rb = await events(b);
      expect(rb.body.data.items.map((x: Item) => x.email)).to.deep.equal(['b-reader@example.test']);
      const ra = await events(a, '?limit=500');
      expect(ra.body.data.items.map((x: Item) => x.email)).not.to.include('b-reader@example.test');
      const foreign = await commGet(motor, '/tracking/events', as(b, a.accountId));
      expect([foreign.status, foreign.body.code]).to.deep.equal([403, 'tenant_forbidden']);
      const none = await commGet(motor, '/tracking/events', { 'x-tenant-id': a.accountId });
      expect([none.status, none.body.code]).to.deep.equal([401, 'invalid_token']);
      const noHeader = await commGet(motor, '/tracking/events', as(a, null));
      expect([noHeader.status, noHeader.body.code]).to.deep.equal([400, 'tenant_required']);
    });

    it('filters: type, campaign_id, message_id, email (any case), from/to', async () => {
      const count = async (q: string) => (await events(a, `?limit=500&${q}`)).body.data.items.length as number;
      expect(await count('type=open')).to.equal(5);
      expect(await count('type=click')).to.equal(4);
      expect(await count(`campaign_id=${C2}`)).to.equal(4);
      expect(await count(`campaign_id=${C2}&type=click`)).to.equal(2);
      expect(await count(`message_id=${M1}`)).to.equal(2);
      expect(await count('email=TWO@example.test')).to.equal(3);
      expect(await count(`from=${encodeURIComponent(new Date(Date.now() + 60_000).toISOString())}`)).to.equal(0);
      expect(await count(`to=${encodeURIComponent(new Date(Date.now() - 3_600_000).toISOString())}`)).to.equal(0);
      expect(await count(`from=${encodeURIComponent(new Date(Date.now() - 3_600_000).toISOString())}`)).to.equal(9);
      const c2 = (await events(a, `?campaign_id=${C2}`)).body.data.items as Item[];
      expect(new Set(c2.map((x) => x.motor_block_id))).to.deep.equal(new Set([blockA2]));
    });

    it('bad parameters: 400 invalid_query / invalid_cursor / outside_retention_window', async () => {
      for (const [q, code] of [
        ['type=view', 'invalid_query'], ['campaign_id=nope', 'invalid_query'], ['message_id=1', 'invalid_query'], ['limit=0', 'invalid_query'], ['limit=501', 'invalid_query'],
        ['from=yesterday', 'invalid_query'], ['cursor=abc', 'invalid_cursor'], ['from=2000-01-01T00:00:00Z', 'outside_retention_window'],
        [`email=${'x'.repeat(400)}`, 'invalid_query'],
      ]) {
        const r = await events(a, `?${q}`);
        expect([r.status, r.body.code, r.body.success], q).to.deep.equal([400, code, false]);
      }
    });

    it('paging: newest first, keyset cursor, every event once', async () => {
      const all = (await events(a, '?limit=500')).body.data.items as Item[];
      const order = [...all].sort((x, y) => (y.occurred_at.localeCompare(x.occurred_at) || y.id.localeCompare(x.id)));
      expect(all.map((x) => x.id)).to.deep.equal(order.map((x) => x.id));
      const walked: string[] = [];
      let cursor: string | null = null;
      let pages = 0;
      do {
        const r = await events(a, `?limit=2${cursor ? `&cursor=${cursor}` : ''}`);
        expect(r.status).to.equal(200);
        expect(r.body.data.items.length).to.be.at.most(2);
        walked.push(...r.body.data.items.map((x: Item) => x.id));
        cursor = r.body.data.next_cursor;
        pages++;
      } while (cursor !== null && pages < 20);
      expect(pages).to.equal(5);
      expect(walked).to.deep.equal(all.map((x) => x.id));
    });

    it('trackingTotals: hits and distinct messages per campaign, per tenant', async () => {
      expect(await trackingTotals(motor.rt.db, a.accountId, C1)).to.deep.equal({ opens: 3, uniqueOpens: 2, clicks: 2, uniqueClicks: 2 });
      expect(await trackingTotals(motor.rt.db, a.accountId, C2)).to.deep.equal({ opens: 2, uniqueOpens: 2, clicks: 2, uniqueClicks: 1 });
      expect(await trackingTotals(motor.rt.db, b.accountId, C1)).to.deep.equal({ opens: 1, uniqueOpens: 1, clicks: 0, uniqueClicks: 0 });
      expect(await trackingTotals(motor.rt.db, b.accountId, C2)).to.deep.equal({ opens: 0, uniqueOpens: 0, clicks: 0, uniqueClicks: 0 });
    });

    it('the block-deletion job finds the block\'s tracking streams (history deleted with the block)', async () => {
      const found = await findHistoryStreams(motor.rt.store, blockA2);
      const mine = [...new Set(hits.filter((h) => h.campaign === C2).map((h) => `tracking-${h.message}`))].sort();
      expect(mine).to.have.length(2);
      expect(found.streams.filter((x) => x.startsWith('tracking-')).sort()).to.deep.equal(mine);
      const other = await findHistoryStreams(motor.rt.store, a.b.motorBlockId);
      expect(other.streams).to.include(`tracking-${M1}`);
      expect(other.streams.filter((x) => mine.includes(x))).to.deep.equal([]);
    });

    describe('the read model', () => {
      const scratch = 'rm_commtracking_replaytest';
      const snapshot = async (schema: string) => (await motor.rt.db.raw(`select * from "${schema}"."hits" order by id`)).rows;
      const apply = (schema: string, batch: RecordedEvent[]) => motor.rt.db.transaction((trx) => commTrackingProjection.applyBatch(trx, schema, batch));
      let log: RecordedEvent[];

      before(async () => {
        log = [];
        for (let after: string | null = null; ;) {
          const page = await motor.rt.store.readAll({ after, maxCount: 1000 });
          if (page.length === 0) break;
          log.push(...page.filter((e) => e.type === 'EmailOpened' || e.type === 'LinkClicked'));
          after = page[page.length - 1].position;
        }
      });
      after(async () => {
        for (const s of [scratch, `${scratch}_single`]) await motor.rt.db.raw(`drop schema if exists "${s}" cascade`);
      });

      it('a replay, a re-delivered batch, or one event at a time gives the live rows', async () => {
        const live = await snapshot(TRACKING_SCHEMA);
        expect(live).to.have.length(10);
        await migrateProjection(motor.rt.db, commTrackingProjection, scratch);
        await apply(scratch, log);
        await apply(scratch, log);
        await apply(scratch, log.slice(2, 6));
        expect(await snapshot(scratch)).to.deep.equal(live);
        await migrateProjection(motor.rt.db, commTrackingProjection, `${scratch}_single`);
        for (const e of log) await apply(`${scratch}_single`, [e]);
        expect(await snapshot(`${scratch}_single`)).to.deep.equal(live);
      });

      it('a deleted block\'s history (tombstone) takes its rows', async () => {
        const tombstone = {
          id: randomUUID(), streamId: `motorBlock-${blockA2}`, type: 'MotorBlockDeleted', revision: 9n, position: '0', createdAt: new Date(), metadata: {},
          data: { motorBlockId: blockA2, accountId: a.accountId, jobId: randomUUID(), historyDeleted: true, messagesDeleted: 0, streamsDeleted: 2, eventsDeleted: 4, deletedAt: new Date().toISOString() },
        } as unknown as RecordedEvent;
        await apply(scratch, [tombstone]);
        const rows = await snapshot(scratch) as Array<{ motor_block_id: string }>;
        expect(rows).to.have.length(6);
        expect(rows.some((r) => r.motor_block_id === blockA2)).to.equal(false);
      });

      it('rows past the account\'s retention are pruned by the sweeper', async () => {
        const old = randomUUID();
        const longAgo = new Date(Date.now() - 400 * 86_400_000).toISOString();
        await motor.rt.db.raw(
          `insert into "${TRACKING_SCHEMA}"."hits" (id, account_id, type, campaign_id, message_id, motor_block_id, email, occurred_at) values (?, ?, 'open', ?, ?, ?, 'old@example.test', ?)`,
          [old, a.accountId, C1, randomUUID(), a.b.motorBlockId, longAgo],
        );
        const report = await new RetentionSweeper(motor.rt.db, motor.config, createLogger('silent'), { intervalMs: 3_600_000, batchSize: 100, pauseMs: 0 }).sweepOnce(new Date());
        expect(report.deleted['rm_commtracking.hits']).to.equal(1);
        expect((await snapshot(TRACKING_SCHEMA)).map((r: { id: string }) => r.id)).not.to.include(old);
        expect(await snapshot(TRACKING_SCHEMA)).to.have.length(10);
      });
    });
  });

  // Last (mocha runs a describe's own tests before its nested describes): it closes the store under the running API.
  describe('with the event store down', () => {
  it('the reader still gets the gif and the redirect, promptly; the miss is counted', async () => {
    await motor.rt.store.close();
    const started = Date.now();
    const gif = await fetch(local(pixelOf(mail1)));
    expect(gif.status).to.equal(200);
    expect(Buffer.from(await gif.arrayBuffer()).equals(TRANSPARENT_GIF)).to.equal(true);
    const click = await fetch(local(linkOf(mail1)), { redirect: 'manual' });
    expect(click.status).to.equal(302);
    expect(click.headers.get('location')).to.equal('https://shop.example/p?a=1&b=2');
    expect(Date.now() - started).to.be.lessThan(5000);
    const metrics = await getJson(`${motor.baseUrl}/metrics`);
    expect(metrics.body).to.match(/motor_tracking_hits_total\{[^}]*type="open"[^}]*outcome="not_recorded"[^}]*\} 1/);
    expect(metrics.body).to.match(/motor_tracking_hits_total\{[^}]*type="click"[^}]*outcome="not_recorded"[^}]*\} 1/);
  });
  });
});

/** Its own service: the tests above count every event of their database. */
describe('campaign tracking: the per-message recording limit (int)', function () {
  this.timeout(120_000);
  let motor: TestMotor;
  const html = '<html><body><a href="https://shop.example/p">Buy</a></body></html>';
  before(async () => { motor = await startTestMotor({ roles: ['api', 'projector'] }); });
  after(async () => { await motor?.close(); });
  const localPath = (mail: string, re: RegExp) => `${motor.baseUrl}${new URL(re.exec(mail)![1]).pathname}`;

  it('at most TRACKING_HITS_PER_MINUTE hits of one message are recorded per minute and kind; every request is still answered', async () => {
    const c = await tenant(motor, 'trk-c@example.test');
    const m = randomUUID();
    const campaignId = randomUUID();
    await acceptMessage(motor, c.b, campaignId, m, ['loop@example.test']);
    const mail = instrumentHtml(html, motor.config.authPublicUrl, trackingSecret(motor.config.tokenSecret), { tenantId: c.accountId, motorBlockId: c.b.motorBlockId, campaignId, messageId: m });
    await awayFromMinuteEdge(15);
    const opens = await Promise.all(Array.from({ length: TRACKING_HITS_PER_MINUTE + 3 }, () => fetch(localPath(mail, /<img src="([^"]+\.gif)"/))));
    expect(opens.map((r) => r.status)).to.deep.equal(opens.map(() => 200));
    const clicks = await Promise.all(Array.from({ length: TRACKING_HITS_PER_MINUTE + 2 }, () => fetch(localPath(mail, /<a href="([^"]+)"/), { redirect: 'manual' })));
    expect(clicks.map((r) => r.status)).to.deep.equal(clicks.map(() => 302));
    const recorded = await motor.rt.store.readStream(`tracking-${m}`);
    expect(recorded.filter((e) => e.type === 'EmailOpened')).to.have.length(TRACKING_HITS_PER_MINUTE);
    expect(recorded.filter((e) => e.type === 'LinkClicked')).to.have.length(TRACKING_HITS_PER_MINUTE);
    const limited = (await motor.rt.metrics.trackingHits.get()).values.filter((v) => v.labels.outcome === 'limited');
    expect(Object.fromEntries(limited.map((v) => [v.labels.type, v.value]))).to.deep.equal({ open: 3, click: 2 });
  });
});
