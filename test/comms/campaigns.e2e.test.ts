import { expect } from 'chai';
import { simpleParser, type ParsedMail } from 'mailparser';
import { streamName, type RecordedEvent } from '../../domain/eventStore';
import { toEventData } from '../../domain/events';
import { newId } from '../../domain/ids';
import { campaignMessageId } from '../../domain/comms/campaigns';
import { checkSend } from '../../commands/send/sendMessage';
import { unsubscribeSecret, unsubscribeToken } from '../../domain/comms/unsubscribe';
import { campaignsProjection, CAMPAIGNS_SCHEMA } from '../../projections/campaigns/projection';
import { migrateProjection } from '../../projections/runner';
import { startDnsServer, type TestDnsServer } from '../support/dnsServer';
import { startSmtpSink, type SmtpSink } from '../support/smtpSink';
import { awayFromMinuteEdge, eventually, postJson, startTestMotor, type TestMotor } from '../support/motor';
import { as, commGet, commPost, tenant, type Tenant, extraBlock } from './support';

/**
 * Campaigns (docs/COMMUNICATIONS.md "Campaigns") end to end: the create checks and their codes,
 * tenant isolation, a campaign delivered to a loopback MX with its merge values, one-click
 * unsubscribe headers and tracking (and none without), stable message ids, cancel, and a quota
 * pause that waits and completes. The crash of the worker role: campaignsCrash.e2e.test.ts.
 */
describe('communications campaigns (e2e)', function () {
  this.timeout(180_000);
  let dns: TestDnsServer;
  let mx: SmtpSink;
  let motor: TestMotor;
  let a: Tenant;
  let b: Tenant;
  let domainA: string;
  let templateA: string;
  let templateText: string;
  let listA: string;
  let listB: string;
  let templateB: string;
  const received: ParsedMail[] = [];

  const post = (path: string, body: unknown, who: Tenant = a) => commPost(motor, path, body, as(who));
  const get = (path: string, who: Tenant = a) => commGet(motor, path, as(who));


  async function addContact(listId: string, email: string, name: string | null, fields: Record<string, string> = {}, who: Tenant = a): Promise<string> {
    const r = await post(`/lists/${listId}/contacts`, { email, ...(name ? { name } : {}), fields }, who);
    if (r.status !== 201) throw new Error(`add contact: ${r.status} ${JSON.stringify(r.body)}`);
    return r.body.data.id as string;
  }

  async function makeList(name: string, who: Tenant = a): Promise<string> {
    const r = await post('/lists', { name }, who);
    if (r.status !== 201) throw new Error(JSON.stringify(r.body));
    return r.body.data.id as string;
  }

  async function makeTemplate(body: Record<string, unknown>, who: Tenant = a): Promise<string> {
    const r = await post('/templates', body, who);
    if (r.status !== 201) throw new Error(JSON.stringify(r.body));
    return r.body.data.id as string;
  }

  const campaignBody = (over: Record<string, unknown> = {}) => ({
    name: 'Spring sale', template_id: templateA, list_id: listA, motor_block_id: a.b.motorBlockId, from: `news@${domainA}`, from_name: 'Acme News', ...over,
  });

  async function createCampaign(over: Record<string, unknown> = {}, who: Tenant = a) {
    const r = await post('/campaigns', campaignBody(over), who);
    if (r.status !== 201) throw new Error(`create campaign: ${r.status} ${JSON.stringify(r.body)}`);
    return r.body.data as { id: string; status: string };
  }

  async function waitFor(id: string, status: string, timeoutMs = 60_000) {
    return eventually(async () => {
      const r = await get(`/campaigns/${id}`);
      return r.body.data?.status === status ? r.body.data : null;
    }, timeoutMs, 100);
  }

  /** A header's unfolded value as sent (mailparser folds List-* headers into one structured `list` header). */
  const header = (m: ParsedMail, name: string): string | undefined => {
    const line = m.headerLines.find((h) => h.key === name)?.line;
    return line === undefined ? undefined : line.slice(line.indexOf(':') + 1).replace(/\r?\n[ \t]+/g, '').trim();
  };
  const messagesTo = (addr: string) => received.filter((m) => (m.to && !Array.isArray(m.to) ? m.to.value : []).some((v) => v.address === addr));

  before(async () => {
    dns = await startDnsServer({
      'rcpt.test': { MX: [{ exchange: 'mx.rcpt.test', priority: 10 }] },
      'mx.rcpt.test': { A: ['127.0.0.1'] },
    });
    mx = await startSmtpSink({
      starttls: false,
      rcpt: (r) => (r === 'bounce@rcpt.test' ? { code: 550, message: '5.1.1 no such user' } : 250),
      data: async (m): Promise<250> => { received.push(await simpleParser(m.raw)); return 250; },
    });
    motor = await startTestMotor({ env: { DNS_SERVERS: dns.address, MX_PORT: String(mx.port), CAMPAIGN_PAGE_SIZE: '2', AUTH_PUBLIC_URL: 'https://auth.motor.test' } });
    a = await tenant(motor, 'campaigns-a@example.test');
    b = await tenant(motor, 'campaigns-b@example.test');
    const dom = await motor.rt.directory.domain(a.b.domainId);
    domainA = dom!.name;
    templateA = await makeTemplate({
      name: 'Spring', subject: 'Hello {{name}}, {{code}} inside', type: 'html',
      body_html: '<p>Hi {{name}} from {{identity_name}}: code {{code}}. <a href="https://shop.example.com/sale?x=1">Shop</a> <a href="{{unsubscribe_url}}">Unsubscribe</a></p>',
      body_text: 'Hi {{name}} from {{identity_name}}: code {{code}}. Unsubscribe: {{unsubscribe_url}}',
    });
    templateText = await makeTemplate({ name: 'Plain', subject: 'Plain {{name}}', type: 'text', body_text: 'Hello {{name}} {{unsubscribe_url}}' });
    listA = await makeList('Customers');
    listB = await makeList('Customers', b);
    templateB = await makeTemplate({ name: 'B', subject: 'B', type: 'text', body_text: 'b {{unsubscribe_url}}' }, b);
  });
  after(async () => {
    await motor?.close();
    await mx?.close();
    await dns?.close();
  });

  describe('create', () => {
    it('201 draft with the record fields and defaults; GET reads it, the list shows it', async () => {
      const r = await post('/campaigns', campaignBody({ from_name: undefined, track_opens: undefined }));
      expect(r.status).to.equal(201);
      const c = r.body.data;
      expect(c).to.include({ name: 'Spring sale', status: 'draft', template_id: templateA, list_id: listA, motor_block_id: a.b.motorBlockId, from: `news@${domainA}`, from_name: null, track_opens: true, track_clicks: true });
      expect(c.counts).to.deep.equal({ recipients: 0, accepted: 0, skipped_suppressed: 0, failed: 0 });
      expect(c.tracking).to.deep.equal({ opens: 0, unique_opens: 0, clicks: 0, unique_clicks: 0 });
      expect(c.started_at).to.equal(null);
      expect(c.completed_at).to.equal(null);
      const read = await get(`/campaigns/${c.id}`);
      expect(read.status).to.equal(200);
      expect(read.body.data).to.deep.equal(c);
      const list = await get('/campaigns?status=draft');
      expect(list.body.data.items.map((x: { id: string }) => x.id)).to.include(c.id);
    });

    it('every error code of the create', async () => {
      const other = newId();
      const cases: Array<[Record<string, unknown>, number, string]> = [
        [{ name: '' }, 400, 'validation_error'],
        [{ name: 42 }, 400, 'validation_error'],
        [{ template_id: 'nope' }, 400, 'validation_error'],
        [{ from: 'Acme <news@x.test>' }, 400, 'validation_error'],
        [{ from_name: 'a\nb' }, 400, 'validation_error'],
        [{ track_opens: 'yes' }, 400, 'validation_error'],
        [{ template_id: other }, 404, 'template_not_found'],
        [{ template_id: templateB }, 404, 'template_not_found'],
        [{ list_id: other }, 404, 'list_not_found'],
        [{ list_id: listB }, 404, 'list_not_found'],
        [{ motor_block_id: other }, 404, 'motor_block_not_found'],
        [{ motor_block_id: b.b.motorBlockId }, 404, 'motor_block_not_found'],
        [{ motor_block_id: await extraBlock(motor, a, 'transactional') }, 409, 'campaign_block_type_not_allowed'],
        [{ motor_block_id: await extraBlock(motor, a, 'sandbox') }, 409, 'campaign_block_type_not_allowed'],
        [{ motor_block_id: await extraBlock(motor, a, 'portal') }, 409, 'campaign_block_type_not_allowed'],
        [{ motor_block_id: await extraBlock(motor, a, 'marketing', false) }, 403, 'motor_block_inactive'],
        [{ from: 'news@elsewhere.test' }, 403, 'from_domain_mismatch'],
      ];
      for (const [over, status, code] of cases) {
        const r = await post('/campaigns', campaignBody(over));
        expect(r.status, JSON.stringify(over)).to.equal(status);
        expect(r.body, JSON.stringify(over)).to.include({ success: false, code });
      }
      // An unknown property is refused by the OpenAPI validator.
      const extra = await post('/campaigns', { ...campaignBody(), schedule: 'now' });
      expect(extra.status).to.equal(422);
      // A marketing block is a campaign's block (while /v1/send refuses it: use_comms_api).
      const marketing = await extraBlock(motor, a, 'marketing');
      const ok = await post('/campaigns', campaignBody({ motor_block_id: marketing }));
      expect(ok.status).to.equal(201);
    });

    it('DNS incomplete on the block domain: 403 DOMAIN_DNS_INCOMPLETE', async () => {
      const c = await tenant(motor, 'campaigns-dns@example.test');
      await motor.rt.store.append(streamName('sendingDomain', c.b.domainId), [toEventData(newId(), {
        type: 'DomainDnsChecked', data: { domainId: c.b.domainId, method: 'dns', spfConfigured: false, dkimConfigured: true, dmarcConfigured: true, checkedAt: new Date().toISOString() },
      })], { expectedRevision: 'any' });
      const dom = await eventually(async () => { const d = await motor.rt.directory.domain(c.b.domainId); return d && !d.spfConfigured ? d : null; });
      const tpl = await makeTemplate({ name: 'T', subject: 'S', type: 'text', body_text: 't {{unsubscribe_url}}' }, c);
      const list = await makeList('L', c);
      const r = await post('/campaigns', { name: 'x', template_id: tpl, list_id: list, motor_block_id: c.b.motorBlockId, from: `a@${dom.name}` }, c);
      expect(r.status).to.equal(403);
      expect(r.body.code).to.equal('DOMAIN_DNS_INCOMPLETE');
    });
  });

  describe('tenant isolation and paging', () => {
    it('another tenant sees 404 on read, send and cancel, and none in its list; the tenant header rules apply', async () => {
      const c = await createCampaign();
      for (const [path, method] of [[`/campaigns/${c.id}`, 'GET'], [`/campaigns/${c.id}/send`, 'POST'], [`/campaigns/${c.id}/cancel`, 'POST']] as const) {
        const r = method === 'GET' ? await get(path, b) : await post(path, {}, b);
        expect(r.status, path).to.equal(404);
        expect(r.body.code).to.equal('campaign_not_found');
      }
      expect((await get('/campaigns', b)).body.data.items).to.deep.equal([]);
      expect((await commGet(motor, '/campaigns', as(a, null))).body.code).to.equal('tenant_required');
      expect((await commGet(motor, '/campaigns', as(a, b.accountId))).body.code).to.equal('tenant_forbidden');
      expect((await commGet(motor, '/campaigns', {})).status).to.equal(401);
      expect((await get('/campaigns/not-a-uuid')).body.code).to.equal('invalid_id');
      expect((await get(`/campaigns/${newId()}`)).body.code).to.equal('campaign_not_found');
    });

    it('keyset pages newest first; bad limit, status and cursor are 400', async () => {
      const t = await tenant(motor, 'campaigns-page@example.test');
      const tpl = await makeTemplate({ name: 'T', subject: 'S', type: 'text', body_text: 't {{unsubscribe_url}}' }, t);
      const list = await makeList('L', t);
      const dom = (await motor.rt.directory.domain(t.b.domainId))!.name;
      const ids: string[] = [];
      for (let i = 0; i < 5; i++) ids.push((await createCampaign({ name: `c${i}`, template_id: tpl, list_id: list, motor_block_id: t.b.motorBlockId, from: `x@${dom}` }, t)).id);
      const seen: string[] = [];
      let cursor: string | null = null;
      do {
        const r = await get(`/campaigns?limit=2${cursor ? `&cursor=${cursor}` : ''}`, t);
        expect(r.status).to.equal(200);
        seen.push(...r.body.data.items.map((x: { id: string }) => x.id));
        cursor = r.body.data.next_cursor;
      } while (cursor);
      expect(seen).to.deep.equal([...ids].reverse());
      expect((await get('/campaigns?limit=0', t)).body.code).to.equal('invalid_query');
      expect((await get('/campaigns?limit=101', t)).body.code).to.equal('invalid_query');
      expect((await get('/campaigns?status=paused', t)).status).to.equal(400);
      expect((await get('/campaigns?cursor=abc', t)).body.code).to.equal('invalid_cursor');
      expect((await get('/campaigns?status=sending', t)).body.data.items).to.deep.equal([]);
    });
  });

  describe('sending', () => {
    let contacts: Record<string, string>;
    let campaign: { id: string };

    before(async () => {
      contacts = {
        ann: await addContact(listA, 'ann@rcpt.test', 'Ann', { code: 'A1' }),
        bob: await addContact(listA, 'bob@rcpt.test', 'Bob', { code: 'B2' }),
        cy: await addContact(listA, 'cy@rcpt.test', null, { code: 'C3' }),
        gone: await addContact(listA, 'gone@rcpt.test', 'Gone'),
        bounce: await addContact(listA, 'bounce@rcpt.test', 'Bouncy'),
      };
      // One contact unsubscribes (RFC 8058 one-click), one address hard-bounced before (suppressed).
      const token = unsubscribeToken(unsubscribeSecret(motor.config.tokenSecret), { tenantId: a.accountId, listId: listA, contactId: contacts.gone });
      const unsub = await fetch(`${motor.baseUrl}/comm-api/u/${token}`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: 'List-Unsubscribe=One-Click' });
      expect(unsub.status).to.be.lessThan(300);
      const sent = await postJson(`${motor.baseUrl}/v1/send`, { from: `ops@${domainA}`, to: 'bounce@rcpt.test', subject: 'x', text: 'x' }, { 'x-api-key': a.b.apiKey });
      expect(sent.status).to.equal(200);
      await eventually(async () => (await get('/suppressions?email=bounce@rcpt.test')).body.data.items.length === 1, 30_000, 100);
      await eventually(async () => (await get(`/lists/${listA}/contacts?status=unsubscribed`)).body.data.items.length === 1, 10_000, 100);
    });

    it('a marketing block is still refused on /v1/send (use_comms_api)', async () => {
      const marketing = await extraBlock(motor, a, 'marketing');
      // The rule lives in checkSend, which /v1/send and SMTP call (their own tests send with a key).
      const err = await checkSend({ store: motor.rt.store, directory: motor.rt.directory, quota: motor.rt.quota, config: motor.config },
        { motorBlockId: marketing, body: { from: `a@${domainA}`, to: 'x@rcpt.test', subject: 's', text: 't' }, idempotencyKey: null, source: 'http', now: new Date() })
        .then(() => null, (e: { code: string }) => e);
      expect(err?.code).to.equal('use_comms_api');
    });

    it('sends 3 of 5 (one unsubscribed, one suppressed): rendered, List-Unsubscribe, tracked links and pixel; stable ids', async () => {
      campaign = await createCampaign();
      const r = await post(`/campaigns/${campaign.id}/send`, {});
      expect(r.status).to.equal(202);
      expect(r.body.data.status).to.equal('sending');
      expect(r.body.data.started_at).to.be.a('string');
      const again = await post(`/campaigns/${campaign.id}/send`, {});
      expect(again.status).to.equal(409);
      expect(again.body.code).to.equal('campaign_not_draft');

      const done = await waitFor(campaign.id, 'sent');
      expect(done.counts).to.deep.equal({ recipients: 4, accepted: 3, skipped_suppressed: 1, failed: 0 });
      expect(done.completed_at).to.be.a('string');
      await eventually(async () => ['ann', 'bob', 'cy'].every((n) => messagesTo(`${n}@rcpt.test`).length === 1), 30_000, 100);
      expect(messagesTo('gone@rcpt.test')).to.have.length(0);
      expect(received.filter((m) => m.subject?.startsWith('Hello Bouncy'))).to.have.length(0);

      const ann = messagesTo('ann@rcpt.test')[0];
      expect(ann.subject).to.equal('Hello Ann, A1 inside');
      expect(ann.text).to.contain('Hi Ann from Acme News: code A1');
      const unsub = `https://auth.motor.test/comm-api/u/${unsubscribeToken(unsubscribeSecret(motor.config.tokenSecret), { tenantId: a.accountId, listId: listA, contactId: contacts.ann })}`;
      expect(ann.text).to.contain(unsub);
      expect(header(ann, 'list-unsubscribe-post')).to.equal('List-Unsubscribe=One-Click');
      expect(header(ann, 'list-unsubscribe')).to.equal(`<${unsub}>`);
      const html = String(ann.html);
      expect(html).to.contain('Hi Ann from Acme News: code A1');
      expect(html).to.contain(`href="${unsub}"`);
      expect(html).not.to.contain('href="https://shop.example.com/sale?x=1"');
      expect(html).to.match(/<img[^>]+auth\.motor\.test/);
      expect(messagesTo('cy@rcpt.test')[0].subject).to.equal('Hello , C3 inside');

      // The message ids are those derived from campaign + contact, each accepted once, tagged with the campaign.
      for (const n of ['ann', 'bob', 'cy'] as const) {
        const events = await motor.rt.store.readStream(streamName('message', campaignMessageId(campaign.id, contacts[n])));
        expect(events.filter((e) => e.type === 'MessageAccepted')).to.have.length(1);
        expect((events[0].data as { metadata: Record<string, string> }).metadata.campaign_id).to.equal(campaign.id);
      }
      const r2 = await motor.rt.db.raw(`select count(*)::int as n from events where type = 'MessageAccepted' and data->'metadata'->>'campaign_id' = ?`, [campaign.id]);
      expect(r2.rows[0].n).to.equal(3);
      // The logs filter by the campaign.
      const token = await motor.token(a.b);
      const logs = await eventually(async () => {
        const l = await fetch(`${motor.baseUrl}/api/public/v1/motor-blocks/${a.b.motorBlockId}/logs?query=${encodeURIComponent(`metadata.campaign_id:${campaign.id}`)}`, { headers: { authorization: `Bearer ${token}` } });
        const body = await l.json() as { data?: unknown[] | { items?: unknown[] }; items?: unknown[] };
        const items = Array.isArray(body.data) ? body.data : (body.data?.items ?? body.items ?? []);
        return items.length === 3 ? items : null;
      }, 15_000, 200).catch(() => null);
      expect(logs, 'logs filter metadata.campaign_id').to.not.equal(null);
    });

    it('GET /campaigns/{id}/messages: each message with its address and outcome, filtered by status, paged; another tenant 404', async () => {
      const all = await eventually(async () => {
        const r = await get(`/campaigns/${campaign.id}/messages`);
        return r.body.data?.items?.length === 3 && r.body.data.items.every((m: { status: string }) => m.status === 'delivered') ? r.body.data : null;
      }, 30_000, 200);
      expect(all.items.map((m: { email: string }) => m.email).sort()).to.deep.equal(['ann@rcpt.test', 'bob@rcpt.test', 'cy@rcpt.test']);
      expect(all.next_cursor).to.equal(null);
      const ann = all.items.find((m: { email: string }) => m.email === 'ann@rcpt.test');
      expect(ann).to.include({ message_id: campaignMessageId(campaign.id, contacts.ann), status: 'delivered', smtp_code: '250', bounced_at: null });
      expect(ann.delivered_at).to.be.a('string');
      expect((await get(`/campaigns/${campaign.id}/messages?status=bounced`)).body.data.items).to.deep.equal([]);
      expect((await get(`/campaigns/${campaign.id.toUpperCase()}/messages?status=delivered,bounced`)).body.data.items).to.have.length(3);
      // Pages of one, newest first, the three of them once each.
      const seen: string[] = [];
      let cursor: string | null = null;
      do {
        const page: { items: Array<{ message_id: string }>; next_cursor: string | null } = (await get(`/campaigns/${campaign.id}/messages?limit=1${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`)).body.data;
        seen.push(...page.items.map((m) => m.message_id));
        cursor = page.next_cursor;
      } while (cursor !== null && seen.length < 10);
      expect(seen).to.deep.equal(all.items.map((m: { message_id: string }) => m.message_id));
      // Another campaign of the same block shows none of these.
      const other = await createCampaign({ name: 'Other' });
      expect((await get(`/campaigns/${other.id}/messages`)).body.data.items).to.deep.equal([]);
      const foreign = await get(`/campaigns/${campaign.id}/messages`, b);
      expect([foreign.status, foreign.body.code]).to.deep.equal([404, 'campaign_not_found']);
      for (const q of ['limit=0', 'limit=501', 'status=nope', 'cursor=nope']) {
        const bad = await get(`/campaigns/${campaign.id}/messages?${q}`);
        expect(bad.status, q).to.equal(400);
      }
      expect((await get('/campaigns/not-a-uuid/messages')).body.code).to.equal('invalid_id');
    });

    it('tracking URLs carry opaque ids, never the address; a hit records the message\'s recipient', async () => {
      const html = String(messagesTo('ann@rcpt.test')[0].html);
      const tracked = [...html.matchAll(/https:\/\/auth\.motor\.test\/comm-api\/t\/(?:o|c)\/([A-Za-z0-9_-]+)/g)];
      expect(tracked.length).to.be.at.least(2);
      for (const [url, token] of tracked) {
        // The token is random base64url, so it can hold the letters "ann" by chance: look for the address itself.
        for (const form of ['ann@', 'ann%40', 'rcpt.test', 'rcpt%2etest']) expect(url.toLowerCase()).not.to.contain(form);
        const raw = Buffer.from(token, 'base64url');
        for (const enc of ['utf8', 'utf16le'] as const) expect(raw.includes(Buffer.from('ann@rcpt.test', enc)), enc).to.equal(false);
        expect(raw.includes(Buffer.from('rcpt.test'))).to.equal(false);
      }
      const pixel = /<img src="https:\/\/auth\.motor\.test(\/comm-api\/t\/o\/[A-Za-z0-9_-]+\.gif)"/.exec(html)![1];
      expect((await fetch(`${motor.baseUrl}${pixel}`)).status).to.equal(200);
      const messageId = campaignMessageId(campaign.id, contacts.ann);
      const hits = await motor.rt.store.readStream(streamName('tracking', messageId));
      expect(hits.map((e) => [e.type, (e.data as { recipient: string }).recipient])).to.deep.equal([['EmailOpened', 'ann@rcpt.test']]);
      const shown = await eventually(async () => {
        const r = await get(`/campaigns/${campaign.id}`);
        return r.body.data?.tracking?.opens === 1 ? r.body.data.tracking : null;
      });
      expect(shown).to.deep.equal({ opens: 1, unique_opens: 1, clicks: 0, unique_clicks: 0 });
    });

    it('tracking off: no rewritten links and no pixel (and a text template sends text)', async () => {
      const list = await makeList('Untracked');
      await addContact(list, 'dora@rcpt.test', 'Dora', { code: 'D4' });
      const c = await createCampaign({ list_id: list, track_opens: false, track_clicks: false });
      expect((await post(`/campaigns/${c.id}/send`, {})).status).to.equal(202);
      await waitFor(c.id, 'sent');
      const m = await eventually(async () => messagesTo('dora@rcpt.test')[0], 30_000, 100);
      const html = String(m.html);
      expect(html).to.contain('href="https://shop.example.com/sale?x=1"');
      expect(html).not.to.match(/<img/);
      expect(header(m, 'list-unsubscribe-post')).to.equal('List-Unsubscribe=One-Click');

      const list2 = await makeList('Plain');
      await addContact(list2, 'eve@rcpt.test', 'Eve');
      const p = await createCampaign({ list_id: list2, template_id: templateText });
      expect((await post(`/campaigns/${p.id}/send`, {})).status).to.equal(202);
      expect((await waitFor(p.id, 'sent')).counts.accepted).to.equal(1);
      const e = await eventually(async () => messagesTo('eve@rcpt.test')[0], 30_000, 100);
      expect(e.subject).to.equal('Plain Eve');
      expect(e.html).to.equal(false);
    });

    it('a contact field with a javascript: URL in a link\'s href does not reach the sent HTML as a link', async () => {
      const tpl = await makeTemplate({
        name: 'Links', subject: 'Links', type: 'html',
        body_html: '<p><a href="{{site}}">Your site</a> <a href="{{home}}">Home</a> <a href="{{unsubscribe_url}}">Unsubscribe</a></p>',
        body_text: 'Links {{unsubscribe_url}}',
      });
      const list = await makeList('Links');
      await addContact(list, 'mal@rcpt.test', 'Mal', { site: 'javascript:alert(document.domain)', home: 'https://home.example.com/' });
      const c = await createCampaign({ list_id: list, template_id: tpl, track_opens: false, track_clicks: false });
      expect((await post(`/campaigns/${c.id}/send`, {})).status).to.equal(202);
      await waitFor(c.id, 'sent');
      const m = await eventually(async () => messagesTo('mal@rcpt.test')[0], 30_000, 100);
      const html = String(m.html);
      expect(html).not.to.match(/javascript:/i);
      expect(html).to.contain('<a href="about:invalid">Your site</a>');
      expect(html).to.contain('<a href="https://home.example.com/">Home</a>');
    });

    it('cancel: a draft is cancelled and cannot be sent; a sent campaign cannot be cancelled', async () => {
      const d = await createCampaign();
      const r = await post(`/campaigns/${d.id}/cancel`, {});
      expect(r.status).to.equal(200);
      expect(r.body.data.status).to.equal('cancelled');
      expect(r.body.data.completed_at).to.be.a('string');
      expect((await post(`/campaigns/${d.id}/send`, {})).body.code).to.equal('campaign_not_draft');
      expect((await post(`/campaigns/${d.id}/cancel`, {})).body.code).to.equal('campaign_not_cancellable');
      expect((await post(`/campaigns/${campaign.id}/cancel`, {})).body.code).to.equal('campaign_not_cancellable');
    });

    it('cancel of a sending campaign: it stops after the messages in flight and sends nothing more', async () => {
      const list = await makeList('Cancel me');
      const n = 40;
      for (let i = 0; i < n; i += 10) await Promise.all(Array.from({ length: 10 }, (_, k) => addContact(list, `k${i + k}@rcpt.test`, `K${i + k}`)));
      const c = await createCampaign({ list_id: list });
      expect((await post(`/campaigns/${c.id}/send`, {})).status).to.equal(202);
      await eventually(async () => (await get(`/campaigns/${c.id}`)).body.data.counts.accepted >= 2, 30_000, 20);
      const r = await post(`/campaigns/${c.id}/cancel`, {});
      expect(r.status).to.equal(200);
      expect(r.body.data.status).to.equal('cancelled');
      const count = async () => (await motor.rt.db.raw(`select count(*)::int as n from events where type = 'MessageAccepted' and data->'metadata'->>'campaign_id' = ?`, [c.id])).rows[0].n as number;
      const atCancel = await count();
      await new Promise((res) => setTimeout(res, 2000));
      const later = await count();
      // At most the messages in flight when the cancel landed: one chunk (CAMPAIGN_CONCURRENCY,
      // here cut to the page size of 2).
      expect(later - atCancel).to.be.at.most(2);
      expect(later).to.be.lessThan(n);
      // The page under way when the cancel landed still counts what it accepted.
      const after = await eventually(async () => {
        const x = (await get(`/campaigns/${c.id}`)).body.data;
        return x.counts.accepted === later ? x : null;
      }, 10_000, 100);
      expect(after.status).to.equal('cancelled');
      expect(after.counts.recipients).to.equal(later);
    });

    it('quota: a rate-limited page pauses the campaign, which waits and completes (not failures)', async () => {
      const t = await tenant(motor, 'campaigns-quota@example.test');
      const dom = (await motor.rt.directory.domain(t.b.domainId))!.name;
      await motor.setLimits(t.b.motorBlockId, { burst: 2, hourly: 1000, daily: 1000 });
      const tpl = await makeTemplate({ name: 'Q', subject: 'Q {{name}}', type: 'text', body_text: 'q {{unsubscribe_url}}' }, t);
      const list = await makeList('Q', t);
      for (let i = 0; i < 3; i++) await addContact(list, `q${i}@rcpt.test`, `Q${i}`, {}, t);
      const c = await createCampaign({ template_id: tpl, list_id: list, motor_block_id: t.b.motorBlockId, from: `q@${dom}` }, t);
      await awayFromMinuteEdge(15);
      expect((await post(`/campaigns/${c.id}/send`, {}, t)).status).to.equal(202);
      // Burst 2 per UTC minute: two go, the third waits for the next minute.
      const paused = await eventually(async () => {
        const r = await get(`/campaigns/${c.id}`, t);
        return r.body.data.paused_until ? r.body.data : null;
      }, 30_000, 100);
      expect(paused.status).to.equal('sending');
      expect(paused.counts.accepted).to.equal(2);
      expect(paused.counts.failed).to.equal(0);
      const done = await eventually(async () => {
        const r = await get(`/campaigns/${c.id}`, t);
        return r.body.data.status === 'sent' ? r.body.data : null;
      }, 90_000, 250);
      expect(done.counts).to.deep.equal({ recipients: 3, accepted: 3, skipped_suppressed: 0, failed: 0 });
      expect(done.paused_until).to.equal(null);
    });

    it('the read model: applied again from zero, twice, in part again, or one event at a time, gives the live rows', async () => {
      const events: RecordedEvent[] = [];
      let after: string | null = null;
      for (;;) {
        const batch = await motor.rt.store.readAll({ after, maxCount: 1000 });
        if (batch.length === 0) break;
        events.push(...batch.filter((e) => e.type.startsWith('Campaign')));
        after = batch[batch.length - 1].position;
      }
      const snapshot = async (schema: string) => (await motor.rt.db.raw(`select * from "${schema}"."campaigns" order by id`)).rows;
      const live = await snapshot(CAMPAIGNS_SCHEMA);
      expect(live.length).to.be.greaterThan(2);
      expect(live.some((r: { status: string }) => r.status === 'sent')).to.equal(true);
      const apply = (schema: string, batch: RecordedEvent[]) => motor.rt.db.transaction((trx) => campaignsProjection.applyBatch(trx, schema, batch));
      const scratch = 'rm_campaigns_replaytest';
      await migrateProjection(motor.rt.db, campaignsProjection, scratch);
      await apply(scratch, events);
      expect(await snapshot(scratch)).to.deep.equal(live);
      await apply(scratch, events);
      await apply(scratch, events.slice(3, 12));
      expect(await snapshot(scratch), 're-delivered').to.deep.equal(live);
      const single = `${scratch}_single`;
      await migrateProjection(motor.rt.db, campaignsProjection, single);
      for (const e of events) await apply(single, [e]);
      expect(await snapshot(single)).to.deep.equal(live);
    });
  });
});
