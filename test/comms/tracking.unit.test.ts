import { expect } from 'chai';
import type { EventData, EventStore } from '../../domain/eventStore';
import { toEventData, type DomainEvent, type MessageAccepted } from '../../domain/events';
import {
  MAX_TOKEN_CHARS, MAX_TRACKED_URL, TRANSPARENT_GIF, clickUrl, instrumentHtml, isPrefetch, openPixelUrl, storedUserAgent, trackableUrl, trackingSecret, trackingToken,
  truncateIp, verifyTrackingToken, type TrackingContext,
} from '../../domain/comms/tracking';
import { recordTrackingHit, type TrackingDeps } from '../../commands/comms/tracking';
import type { RequestLimiter } from '../../commands/quota/requestLimiter';
import { createMetrics } from '../../infra/metrics';
import { createLogger } from '../../infra/logger';
import { MemoryEventStore } from '../support/memoryEventStore';

const BASE = 'https://auth.motor.test';
const SECRET = trackingSecret('test-token-secret-0123456789abcdef0123');
const CTX: TrackingContext = {
  tenantId: '11111111-1111-4111-8111-111111111111', motorBlockId: '22222222-2222-4222-8222-222222222222',
  campaignId: '33333333-3333-4333-8333-333333333333', messageId: '44444444-4444-4444-8444-444444444444',
};
const RECIPIENT = 'Reader@Example.test';
const CLICK_RE = /https:\/\/auth\.motor\.test\/comm-api\/t\/c\/([A-Za-z0-9_-]+)/g;
const clicksIn = (html: string): string[] => [...html.matchAll(CLICK_RE)].map((m) => m[1]);
const destinations = (html: string): string[] => clicksIn(html).map((t) => {
  const v = verifyTrackingToken(SECRET, t, 'click');
  if (v === null || v.kind !== 'click') throw new Error('a rewritten link does not verify');
  return v.url;
});
const PIXEL = /<img src="https:\/\/auth\.motor\.test\/comm-api\/t\/o\/([A-Za-z0-9_-]+)\.gif"[^>]*>/g;

/** Tracking of campaign mail (docs/COMMUNICATIONS.md "Tracking"): rewriting, tokens, the recorded hit. */
describe('campaign tracking (unit)', () => {
  describe('instrumentHtml', () => {
    it('rewrites http(s) links in place and keeps every other byte', () => {
      const html = '<html><body>\n<p>Hi <b>there</b></p><a href="https://shop.example/p?a=1" class="btn">Buy</a>\n<!-- <a href="https://in.comment">x</a> -->\n</body></html>';
      const out = instrumentHtml(html, BASE, SECRET, CTX, { opens: false });
      expect(destinations(out)).to.deep.equal(['https://shop.example/p?a=1']);
      const token = clicksIn(out)[0];
      expect(out).to.equal(html.replace('https://shop.example/p?a=1', clickUrl(BASE, token)));
    });

    it('decodes entities in hrefs (&amp; is &) and the redirect goes to the decoded URL', () => {
      const out = instrumentHtml('<a href="https://shop.example/p?a=1&amp;b=2&#38;c=3">x</a>', BASE, SECRET, CTX, { opens: false });
      expect(destinations(out)).to.deep.equal(['https://shop.example/p?a=1&b=2&c=3']);
    });

    it('uppercase tags and attributes, single-quoted and unquoted values, <area>, surrounding whitespace', () => {
      const html = `<A HREF="https://a.example/1">a</A><a href='http://b.example/2'>b</a><a href=https://c.example/3>c</a><map><area shape="rect" href="https://d.example/4"></map><a href="  https://e.example/5\n">e</a>`;
      const out = instrumentHtml(html, BASE, SECRET, CTX, { opens: false });
      expect(destinations(out)).to.deep.equal(['https://a.example/1', 'http://b.example/2', 'https://c.example/3', 'https://d.example/4', 'https://e.example/5']);
      expect(out).to.match(/<a href='https:\/\/auth\.motor\.test\/comm-api\/t\/c\/[A-Za-z0-9_-]+'>b<\/a>/);
      expect(out).to.match(/<a href="https:\/\/auth\.motor\.test\/comm-api\/t\/c\/[A-Za-z0-9_-]+">c<\/a>/);
    });

    it('leaves unsubscribe, mailto:, tel:, fragment, relative, javascript: and placeholder links alone, and only the first href of a tag', () => {
      const html = [
        `<a href="${BASE}/comm-api/u/abc.def">unsubscribe</a>`, '<a href="mailto:help@shop.example">m</a>', '<a href="tel:+15551234">t</a>',
        '<a href="#top">f</a>', '<a href="/relative">r</a>', '<a href="javascript:alert(1)">j</a>', '<a href="{{unsubscribe_url}}">p</a>',
        '<a href="ftp://files.example/x">ftp</a>', '<a name="anchor">n</a>', '<link href="https://cdn.example/s.css">', '<a href="https://x.example/first" href="https://x.example/second">d</a>',
        `<script>var s = '<a href="https://in.script">';</script>`,
      ].join('');
      const out = instrumentHtml(html, BASE, SECRET, CTX, { opens: false });
      expect(destinations(out)).to.deep.equal(['https://x.example/first']);
      expect(out).to.equal(html.replace('https://x.example/first', clickUrl(BASE, clicksIn(out)[0])));
    });

    it('the open pixel goes right before the last </body>, or at the end without one', () => {
      const withBody = instrumentHtml('<html><BODY><p>x</p></Body></html>', BASE, SECRET, CTX);
      expect(withBody).to.match(/^<html><BODY><p>x<\/p><img src="https:\/\/auth\.motor\.test\/comm-api\/t\/o\/[A-Za-z0-9_-]+\.gif" width="1" height="1" alt=""[^>]*><\/Body><\/html>$/);
      const bare = instrumentHtml('<p>no body</p>', BASE, SECRET, CTX);
      expect(bare.startsWith('<p>no body</p><img src=')).to.equal(true);
      const token = [...bare.matchAll(PIXEL)][0][1];
      expect(verifyTrackingToken(SECRET, token, 'open')).to.deep.equal({ kind: 'open', ctx: CTX });
      expect(bare).to.include(openPixelUrl(BASE, token));
    });

    it('is idempotent and deterministic: instrumenting twice changes nothing, one pixel only', () => {
      const html = '<body><a href="https://shop.example/">x</a></body>';
      const once = instrumentHtml(html, BASE, SECRET, CTX);
      expect(instrumentHtml(html, BASE, SECRET, CTX)).to.equal(once);
      expect(instrumentHtml(once, BASE, SECRET, CTX)).to.equal(once);
      expect([...once.matchAll(PIXEL)]).to.have.length(1);
      expect(instrumentHtml(html, `${BASE}/`, SECRET, CTX), 'a trailing slash on the base URL').to.equal(once);
    });

    it('opts: no clicks, no opens, neither', () => {
      const html = '<body><a href="https://shop.example/">x</a></body>';
      expect(clicksIn(instrumentHtml(html, BASE, SECRET, CTX, { clicks: false }))).to.have.length(0);
      expect([...instrumentHtml(html, BASE, SECRET, CTX, { clicks: false }).matchAll(PIXEL)]).to.have.length(1);
      expect([...instrumentHtml(html, BASE, SECRET, CTX, { opens: false }).matchAll(PIXEL)]).to.have.length(0);
      expect(instrumentHtml(html, BASE, SECRET, CTX, { opens: false, clicks: false })).to.equal(html);
    });

    it('a destination longer than the cap stays untracked', () => {
      const long = `https://shop.example/${'a'.repeat(MAX_TRACKED_URL)}`;
      expect(instrumentHtml(`<a href="${long}">x</a>`, BASE, SECRET, CTX, { opens: false })).to.equal(`<a href="${long}">x</a>`);
    });

    it('trackableUrl: absolute http(s) only, WHATWG-serialised (no raw spaces or non-ASCII)', () => {
      expect(trackableUrl('HTTPS://Shop.Example/a b?q=é')).to.equal('https://shop.example/a%20b?q=%C3%A9');
      for (const bad of ['mailto:a@b', 'https://', '//cdn.example/x', 'data:text/html,x', 'https://[::1', ' javascript:x']) expect(trackableUrl(bad), bad).to.equal(null);
    });
  });

  describe('tokens', () => {
    const click = trackingToken(SECRET, CTX, 'https://shop.example/p');
    const open = trackingToken(SECRET, CTX);

    it('verify to what was signed, and only as their own kind', () => {
      expect(verifyTrackingToken(SECRET, click, 'click')).to.deep.equal({ kind: 'click', ctx: CTX, url: 'https://shop.example/p' });
      expect(verifyTrackingToken(SECRET, open, 'open')).to.deep.equal({ kind: 'open', ctx: CTX });
      expect(verifyTrackingToken(SECRET, click, 'open')).to.equal(null);
      expect(verifyTrackingToken(SECRET, open, 'click')).to.equal(null);
      expect(click).to.match(/^[A-Za-z0-9_-]+$/);
    });

    it('a tampered, truncated, extended, re-signed or malformed token is refused', () => {
      const flip = (t: string, i: number) => t.slice(0, i) + (t[i] === 'A' ? 'B' : 'A') + t.slice(i + 1);
      for (const i of [0, 5, 40, 90, click.length - 20, click.length - 1]) expect(verifyTrackingToken(SECRET, flip(click, i), 'click'), `flip ${i}`).to.equal(null);
      expect(verifyTrackingToken(SECRET, click.slice(0, -1), 'click')).to.equal(null);
      expect(verifyTrackingToken(SECRET, `${click}A`, 'click')).to.equal(null);
      expect(verifyTrackingToken(trackingSecret('another-secret-0123456789abcdef0123456'), click, 'click')).to.equal(null);
      // The unsubscribe and JWT keys are other keys: a token signed with the raw secret is refused.
      expect(verifyTrackingToken(SECRET, trackingToken('test-token-secret-0123456789abcdef0123', CTX, 'https://evil.example/'), 'click')).to.equal(null);
      for (const junk of ['', 'x', 'a.b', '%00', 'A'.repeat(5000), null, 12, {}]) expect(verifyTrackingToken(SECRET, junk, 'click')).to.equal(null);
    });

    it('a click token never yields a URL that is not a normalised http(s) URL, even when signed', () => {
      expect(verifyTrackingToken(SECRET, trackingToken(SECRET, CTX, 'javascript:alert(1)'), 'click')).to.equal(null);
      expect(verifyTrackingToken(SECRET, trackingToken(SECRET, CTX, 'https://a.example/x\r\nSet-Cookie: a=b'), 'click')).to.equal(null);
    });

    it('the tracking key is HKDF-derived and distinct per secret', () => {
      expect(SECRET).to.have.length(32);
      expect(trackingSecret('test-token-secret-0123456789abcdef0123').equals(SECRET)).to.equal(true);
      expect(trackingSecret('test-token-secret-0123456789abcdef0124').equals(SECRET)).to.equal(false);
    });

    it('carry opaque ids only: no address bytes; an open token is exactly ids + MAC, a click token adds only the URL', () => {
      const html = instrumentHtml(`<body>Hi ${RECIPIENT}<a href="https://shop.example/p">x</a></body>`, BASE, SECRET, CTX);
      const tokens = [...clicksIn(html), ...[...html.matchAll(PIXEL)].map((m) => m[1])];
      expect(tokens).to.have.length(2);
      for (const t of tokens) {
        const raw = Buffer.from(t, 'base64url');
        for (const needle of [RECIPIENT, RECIPIENT.toLowerCase(), 'Example.test']) expect(raw.includes(Buffer.from(needle)), needle).to.equal(false);
        const payload = raw.subarray(0, raw.length - 32);
        // version, kind, 4 × 16 id bytes, then (a click) the URL: nothing else.
        expect(payload.subarray(2, 66).toString('hex')).to.equal([CTX.tenantId, CTX.motorBlockId, CTX.campaignId, CTX.messageId].join('').replace(/-/g, ''));
        expect(payload.subarray(66).toString('latin1')).to.be.oneOf(['', 'https://shop.example/p']);
      }
      expect(Buffer.from(open, 'base64url')).to.have.length(1 + 1 + 64 + 32);
      expect(open).to.have.length(131);
    });

    it('the longest click token fits MAX_TOKEN_CHARS, one byte more does not verify', () => {
      const url = `https://shop.example/${'a'.repeat(MAX_TRACKED_URL - 'https://shop.example/'.length)}`;
      expect(trackableUrl(url)).to.equal(url);
      const longest = trackingToken(SECRET, CTX, url);
      expect(longest.length).to.be.at.most(MAX_TOKEN_CHARS);
      expect(verifyTrackingToken(SECRET, longest, 'click')).to.deep.equal({ kind: 'click', ctx: CTX, url });
      expect(verifyTrackingToken(SECRET, trackingToken(SECRET, CTX, `${url}a`), 'click')).to.equal(null);
    });

    it('ids must be uuids', () => {
      expect(() => trackingToken(SECRET, { ...CTX, campaignId: 'c1' })).to.throw(/campaignId/);
    });
  });

  describe('what a hit stores', () => {
    it('ip: IPv4 to its /24, IPv6 to its /48, mapped IPv4 as IPv4', () => {
      expect(truncateIp('203.0.113.77')).to.equal('203.0.113.0');
      expect(truncateIp('::ffff:198.51.100.9')).to.equal('198.51.100.0');
      expect(truncateIp('2001:db8:abcd:12::1')).to.equal('2001:db8:abcd::');
      expect(truncateIp('2001:0db8:0000:0012:0000:0000:0000:0001')).to.equal('2001:db8::');
      expect(truncateIp('::1')).to.equal('::');
      expect(truncateIp('fe80::1%eth0')).to.equal('fe80::');
      for (const bad of [undefined, null, '', 'localhost', '999.1.1.1']) expect(truncateIp(bad)).to.equal(null);
    });

    it('user agent: control characters dropped, 512 characters at most', () => {
      expect(storedUserAgent('Mozilla/5.0\u0000 (X)')).to.equal('Mozilla/5.0 (X)');
      expect(storedUserAgent('x'.repeat(600))).to.have.length(512);
      expect(storedUserAgent('  ')).to.equal(null);
      expect(storedUserAgent(undefined)).to.equal(null);
    });

    it('prefetch requests are recognised', () => {
      expect(isPrefetch({ purpose: 'prefetch' })).to.equal(true);
      expect(isPrefetch({ 'sec-purpose': 'prefetch;prerender' })).to.equal(true);
      expect(isPrefetch({ 'x-moz': 'prefetch' })).to.equal(true);
      expect(isPrefetch({ 'user-agent': 'Mozilla/5.0' })).to.equal(false);
    });

    it('the pixel is the 43-byte transparent GIF', () => {
      expect(TRANSPARENT_GIF).to.have.length(43);
      expect(TRANSPARENT_GIF.subarray(0, 6).toString('latin1')).to.equal('GIF89a');
      // The graphic control extension marks colour 0 transparent.
      expect(TRANSPARENT_GIF.subarray(13 + 6, 13 + 6 + 8).toString('hex')).to.equal('21f9040100000000');
    });
  });

  describe('recordTrackingHit', () => {
    const deps = (store: EventStore, block: { accountId: string; status: string } | null = { accountId: CTX.tenantId, status: 'active' }) => {
      const metrics = createMetrics();
      const d: TrackingDeps = {
        store, metrics, logger: createLogger('silent'), clock: { now: () => new Date('2026-03-01T12:00:00Z') },
        directory: { block: async () => block },
        // The limit itself is tested over real Redis in tracking.int.test.ts.
        limiter: { withLimit: () => ({ hit: async () => ({ kind: 'ok', limit: 10, remaining: 9, resetSeconds: 60 }) }) } as unknown as RequestLimiter,
      };
      return d;
    };
    /** A store holding the campaign message `CTX.messageId` to `to` (its MessageAccepted, overridable). */
    const withMessage = async (to: string[] = [RECIPIENT], over: Partial<MessageAccepted> = {}) => {
      const store = new MemoryEventStore();
      const accepted: MessageAccepted = {
        messageId: CTX.messageId, motorBlockId: CTX.motorBlockId, accountId: CTX.tenantId, domainId: '66666666-6666-4666-8666-666666666666',
        from: 'news@shop.example', fromName: null, to, subject: 's', text: 't', html: null, headers: {}, smtpMessageId: 'x@shop.example',
        idempotencyKey: null, source: 'http', metadata: { campaign_id: CTX.campaignId }, acceptedAt: '2026-03-01T11:00:00.000Z', ...over,
      };
      await store.append(`message-${CTX.messageId}`, [toEventData('77777777-7777-4777-8777-777777777777', { type: 'MessageAccepted', data: accepted }, { actor: 'test' })]);
      return store;
    };
    const counted = async (d: TrackingDeps) => (await d.metrics.trackingHits.get()).values.map((v) => `${v.labels.type}:${v.labels.outcome}=${v.value}`);
    const target = { kind: 'click' as const, ctx: CTX, url: 'https://shop.example/p' };

    it('appends LinkClicked on tracking-<messageId> with the message\'s recipient and the truncated ip and user agent', async () => {
      const store = await withMessage();
      const d = deps(store);
      expect(await recordTrackingHit(d, target, { userAgent: 'UA/1', ip: '203.0.113.77' })).to.equal('recorded');
      const events = await store.readStream(`tracking-${CTX.messageId}`);
      expect(events.map((e) => [e.type, e.version])).to.deep.equal([['LinkClicked', 1]]);
      expect(events[0].data).to.deep.equal({ ...CTX, recipient: RECIPIENT, url: 'https://shop.example/p', userAgent: 'UA/1', ip: '203.0.113.0', occurredAt: '2026-03-01T12:00:00.000Z' });
      expect(await counted(d)).to.deep.equal(['click:recorded=1']);
    });

    it('no message stream, several recipients, or a message of another tenant, block or campaign: skipped, nothing appended', async () => {
      const cases: Array<[string, () => Promise<MemoryEventStore>]> = [
        ['no stream', async () => new MemoryEventStore()],
        ['two recipients', () => withMessage([RECIPIENT, 'other@example.test'])],
        ['no recipient', () => withMessage([])],
        ['another tenant', () => withMessage(undefined, { accountId: '55555555-5555-4555-8555-555555555555' })],
        ['another block', () => withMessage(undefined, { motorBlockId: '55555555-5555-4555-8555-555555555555' })],
        ['another campaign', () => withMessage(undefined, { metadata: { campaign_id: '55555555-5555-4555-8555-555555555555' } })],
        ['not a campaign message', () => withMessage(undefined, { metadata: {} })],
      ];
      for (const [name, make] of cases) {
        const store = await make();
        const d = deps(store);
        expect(await recordTrackingHit(d, { kind: 'open', ctx: CTX }, { userAgent: undefined, ip: undefined }), name).to.equal('skipped');
        expect(await store.readStream(`tracking-${CTX.messageId}`), name).to.deep.equal([]);
        expect(await counted(d), name).to.deep.equal(['open:skipped=1']);
      }
    });

    it('a store that hangs: answers within the timeout, records nothing, counts not_recorded', async () => {
      const hanging = Object.assign(await withMessage(), { append: () => new Promise(() => undefined) }) as unknown as EventStore;
      const d = deps(hanging);
      const started = Date.now();
      expect(await recordTrackingHit(d, target, { userAgent: undefined, ip: undefined }, 200)).to.equal('not_recorded');
      expect(Date.now() - started).to.be.lessThan(1000);
      expect(await counted(d)).to.deep.equal(['click:not_recorded=1']);
    });

    it('a store that fails: not_recorded, never thrown', async () => {
      const failing = Object.assign(await withMessage(), { append: async (_s: string, _e: EventData[]) => { throw new Error('connection refused'); } }) as unknown as EventStore;
      const d = deps(failing);
      expect(await recordTrackingHit(d, { kind: 'open', ctx: CTX }, { userAgent: undefined, ip: undefined })).to.equal('not_recorded');
      expect(await counted(d)).to.deep.equal(['open:not_recorded=1']);
    });

    it('a block that is deleted, being deleted, unknown or of another tenant: skipped, nothing appended', async () => {
      for (const block of [null, { accountId: CTX.tenantId, status: 'deleted' }, { accountId: CTX.tenantId, status: 'deletion_queued' }, { accountId: '55555555-5555-4555-8555-555555555555', status: 'active' }]) {
        const store = await withMessage();
        expect(await recordTrackingHit(deps(store, block), target, { userAgent: undefined, ip: undefined })).to.equal('skipped');
        expect(await store.readStream(`tracking-${CTX.messageId}`)).to.deep.equal([]);
      }
    });

    it('a block the cache still shows inactive: its own stream decides (deletion requested: skipped, nothing appended; not: recorded)', async () => {
      const at = '2026-03-01T11:30:00.000Z';
      const blockEvents: DomainEvent[] = [
        {
          type: 'MotorBlockCreated',
          data: {
            motorBlockId: CTX.motorBlockId, accountId: CTX.tenantId, name: 'News', type: 'general_purpose', domainId: '66666666-6666-4666-8666-666666666666',
            smtpUsername: 'mb_news', authMethod: 'smtp_password', createdAt: at,
          },
        },
        { type: 'MotorBlockDeactivated', data: { motorBlockId: CTX.motorBlockId, at } },
      ];
      const requested: DomainEvent = {
        type: 'MotorBlockDeletionRequested',
        data: { motorBlockId: CTX.motorBlockId, accountId: CTX.tenantId, jobId: '88888888-8888-4888-8888-888888888888', deleteHistory: true, requestedAt: at },
      };
      const inactive = { accountId: CTX.tenantId, status: 'inactive' };
      for (const [events, outcome] of [[blockEvents, 'recorded'], [[...blockEvents, requested], 'skipped']] as const) {
        const store = await withMessage();
        await store.append(`motorBlock-${CTX.motorBlockId}`, events.map((e, i) => toEventData(`99999999-9999-4999-8999-99999999999${i}`, e, { actor: 'test' })));
        expect(await recordTrackingHit(deps(store, inactive), target, { userAgent: undefined, ip: undefined })).to.equal(outcome);
        expect((await store.readStream(`tracking-${CTX.messageId}`)).length).to.equal(outcome === 'recorded' ? 1 : 0);
      }
    });
  });
});
