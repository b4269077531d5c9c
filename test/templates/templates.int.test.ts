import { expect } from 'chai';
import { getJson, postJson } from '../support/motor';
import { startAuthHarness, type AuthHarness } from '../auth/harness';
import { validateTemplate } from '../../domain/templates/templates';

const HTML = '<html><body><p>Hi {{name}},</p><p>Your order from {{identity_name}} ships {{ship_date}}.</p><a href="{{unsubscribe_url}}">Unsubscribe</a></body></html>';

/**
 * The communications templates API (SPEC "Communications templates", docs/TEMPLATES.md): tenant
 * scoped by X-Tenant-Id under a dashboard JWT, every validation rule, the preview, CRUD with
 * read-your-writes, and a tenant that cannot see another's templates.
 */
describe('communications templates (int)', function () {
  this.timeout(60_000);
  let h: AuthHarness;
  let a: { token: string; accountId: string };
  let b: { token: string; accountId: string };

  before(async () => {
    h = await startAuthHarness();
    a = await h.signUp('tenant-a@rcpt.test');
    b = await h.signUp('tenant-b@rcpt.test');
  });
  after(async () => { await h?.close(); });

  const url = (path = '') => `${h.motor.baseUrl}/comm-api/api/templates${path}`;
  const as = (who: { token: string; accountId: string }, tenant: string | null = who.accountId) => ({
    authorization: `Bearer ${who.token}`, ...(tenant === null ? {} : { 'x-tenant-id': tenant }),
  });
  const send = async (method: string, path: string, body: unknown, headers: Record<string, string>) => {
    const res = await fetch(url(path), { method, headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });
    return { status: res.status, body: await res.json() as any }; // eslint-disable-line @typescript-eslint/no-explicit-any
  };

  it('GET /comm-api/api/health answers without a credential', async () => {
    const r = await getJson(`${h.motor.baseUrl}/comm-api/api/health`);
    expect(r.status).to.equal(200);
    expect(r.body).to.deep.equal({ success: true, status: 'ok' });
  });

  it('validate: metrics, merge variables and a preview rendered with sampleData (HTML-escaped), nothing stored', async () => {
    const r = await postJson(url('/validate'), { name: 'Shipping', subject: 'Order for {{name}}', type: 'html', body_html: HTML, body_text: 'Hi {{name}}', sampleData: { name: 'Zoë <Admin>', ship_date: 'Monday' } }, as(a));
    expect(r.status).to.equal(200);
    const d = r.body.data;
    expect(d).to.include({ valid: true });
    expect(d.errors).to.deep.equal([]);
    expect(d.warnings).to.deep.equal([]);
    expect(d.metrics).to.deep.include({ linkCount: 1, imageCount: 0, subjectLength: 'Order for {{name}}'.length, textLength: 'Hi {{name}}'.length, htmlSize: Buffer.byteLength(HTML) });
    expect(d.metrics.nodeCount, 'html, body, p, p, a').to.equal(5);
    expect(d.metrics.mergeVariables).to.deep.equal(['identity_name', 'name', 'ship_date', 'unsubscribe_url']);
    expect(d.preview.subject).to.equal('Order for Zoë <Admin>');
    expect(d.preview.body_html).to.include('Hi Zoë &lt;Admin&gt;,').and.include('ships Monday');
    expect(d.preview.body_text).to.equal('Hi Zoë <Admin>');
    expect((await getJson(url(), as(a))).body.data).to.deep.equal([]);
  });

  it('validate reports every rule as an error or a warning', async () => {
    const bad = await postJson(url('/validate'), {
      name: '', subject: 'x', type: 'html',
      body_html: '<p onclick="steal()">x</p><a href="java\tscript:alert(1)">y</a><script>z()</script>{{broken',
    }, as(a));
    expect(bad.status).to.equal(200);
    expect(bad.body.data.valid).to.equal(false);
    expect(bad.body.data.errors.map((e: { code: string }) => e.code).sort()).to.deep.equal(['event_handler', 'javascript_url', 'malformed_merge_tag', 'name_required', 'script_tag']);
    expect(bad.body.data.warnings.map((e: { code: string }) => e.code).sort()).to.deep.equal(['body_text_missing', 'unsubscribe_missing']);
    const missing = await postJson(url('/validate'), { subject: 's' }, as(a));
    expect(missing.body.data.errors.map((e: { code: string }) => e.code)).to.deep.equal(['name_required', 'type_required']);
    const text = await postJson(url('/validate'), { name: 'n', subject: 's', type: 'text' }, as(a));
    expect(text.body.data.errors.map((e: { code: string }) => e.code)).to.deep.equal(['body_text_required']);
    const big = validateTemplate({ name: 'n', subject: 's', type: 'html', body_html: `<p>${'<a href="https://x.test/">l</a><img src="https://x.test/i.png">'.repeat(900)}{{unsubscribe_url}}</p>`, body_text: 't' });
    expect(big.warnings.map((w) => w.code).sort()).to.deep.equal(['many_images', 'many_links', 'many_nodes']);
    for (const [html, code] of [['<a href="&#106;avascript:alert(1)">x</a>', 'javascript_url'], ['<a href=" JAVASCRIPT:alert(1)">x</a>', 'javascript_url'], ['<img src=x OnError=alert(1)>', 'event_handler'], ['<SCRIPT>x</SCRIPT>', 'script_tag']]) {
      expect(validateTemplate({ name: 'n', subject: 's', type: 'html', body_html: html, body_text: 't' }).errors.map((e) => e.code), html).to.deep.equal([code]);
    }
    const huge = validateTemplate({ name: 'n', subject: 's', type: 'html', body_html: 'x'.repeat(600 * 1024), body_text: 't' });
    expect(huge.errors.map((e) => e.code)).to.include('html_too_large');
    expect((await postJson(url('/validate'), { name: 'n', subject: 's', type: 'pdf' }, as(a))).status).to.equal(400);
  });

  it('validate: script in any URL-bearing attribute, meta refresh, SVG animation, srcdoc is an error', async () => {
    const cases: Array<[string, string]> = [
      ['<object data="javascript:alert(1)"></object>', 'javascript_url'],
      ['<video poster="javascript:alert(1)"></video>', 'javascript_url'],
      ['<meta http-equiv="refresh" content="0;url=javascript:alert(1)">', 'javascript_url'],
      ['<svg><a><animate attributeName="href" values="javascript:alert(1)"/><text>x</text></a></svg>', 'javascript_url'],
      ['<a href="vbscript:msgbox(1)">x</a>', 'javascript_url'],
      ['<a href="data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==">x</a>', 'javascript_url'],
      ['<iframe srcdoc="&lt;script&gt;alert(1)&lt;/script&gt;"></iframe>', 'script_tag'],
    ];
    for (const [html, code] of cases) {
      const r = await postJson(url('/validate'), { name: 'n', subject: 's', type: 'html', body_html: `${html} {{unsubscribe_url}}`, body_text: 't' }, as(a));
      expect(r.status, html).to.equal(200);
      expect([r.body.data.valid, r.body.data.errors.map((e: { code: string }) => e.code)], html).to.deep.equal([false, [code]]);
    }
  });

  it('validate: a merge tag where a value could add markup is an error; sampleData cannot inject into the preview', async () => {
    const check = (body_html: string, sampleData: Record<string, string>) =>
      postJson(url('/validate'), { name: 'n', subject: 's', type: 'html', body_html: `${body_html} {{unsubscribe_url}}`, body_text: 't', sampleData }, as(a));
    const inTag = await check('<img src="x" {{x}}>', { x: 'onerror=alert(1)' });
    expect([inTag.body.data.valid, inTag.body.data.errors.map((e: { code: string }) => e.code)]).to.deep.equal([false, ['merge_tag_in_tag']]);
    expect(inTag.body.data.preview.body_html).not.to.contain('onerror');
    const unquoted = await check('<a href={{u}}>x</a>', { u: 'x onclick=alert(1)' });
    expect([unquoted.body.data.valid, unquoted.body.data.errors.map((e: { code: string }) => e.code)]).to.deep.equal([false, ['merge_tag_in_tag']]);
    expect(unquoted.body.data.preview.body_html).to.contain('<a href="x onclick=alert(1)">');
    // A quoted href is a fine place for a merge tag; a javascript: value is neutralised and reported.
    const link = await check('<a href="{{u}}">x</a>', { u: 'javascript:alert(1)' });
    expect([link.body.data.valid, link.body.data.errors]).to.deep.equal([true, []]);
    expect(link.body.data.warnings.map((w: { code: string }) => w.code)).to.deep.equal(['merge_value_unsafe']);
    expect(link.body.data.preview.body_html).to.contain('<a href="about:invalid">x</a>').and.not.contain('javascript:');
    // And a template with a merge tag inside a tag is refused on create.
    const refused = await postJson(url(), { name: 'n', subject: 's', type: 'html', body_html: '<img src="x" {{x}}>', body_text: 't' }, as(a));
    expect([refused.status, refused.body.code, refused.body.errors.map((e: { code: string }) => e.code)]).to.deep.equal([422, 'template_invalid', ['merge_tag_in_tag']]);
  });

  it('create (201, warnings kept), list, read, patch, delete; read-your-writes all along', async () => {
    const created = await postJson(url(), { name: 'Welcome', subject: 'Welcome {{name}}', type: 'html', body_html: '<p>Hi {{name}}</p>' }, as(a));
    expect(created.status, JSON.stringify(created.body)).to.equal(201);
    const t = created.body.data;
    expect(t).to.include({ name: 'Welcome', type: 'html', body_text: null });
    expect(created.body.warnings.map((w: { code: string }) => w.code).sort()).to.deep.equal(['body_text_missing', 'unsubscribe_missing']);
    const list = await getJson(url(), as(a));
    expect(list.body.data.map((x: { id: string }) => x.id)).to.deep.equal([t.id]);
    expect(list.body.data[0]).not.to.have.property('body_html');
    expect((await getJson(url(`/${t.id}`), as(a))).body.data.body_html).to.equal('<p>Hi {{name}}</p>');

    const patched = await send('PATCH', `/${t.id}`, { body_text: 'Hi {{name}}', body_html: '<p>Hi {{name}}</p><a href="{{unsubscribe_url}}">u</a>' }, as(a));
    expect(patched.status).to.equal(200);
    expect(patched.body.data).to.include({ name: 'Welcome', body_text: 'Hi {{name}}' });
    expect(patched.body.warnings).to.deep.equal([]);
    const refused = await send('PATCH', `/${t.id}`, { body_html: '<script>x()</script>' }, as(a));
    expect([refused.status, refused.body.code]).to.deep.equal([422, 'template_invalid']);
    expect(refused.body.errors.map((e: { code: string }) => e.code)).to.include('script_tag');
    expect((await getJson(url(`/${t.id}`), as(a))).body.data.body_html).to.include('unsubscribe_url');
    expect((await send('PATCH', `/${t.id}`, {}, as(a))).status).to.equal(400);

    expect((await send('DELETE', `/${t.id}`, undefined, as(a))).body.data).to.deep.equal({ id: t.id, deleted: true });
    expect((await getJson(url(`/${t.id}`), as(a))).status).to.equal(404);
    expect((await getJson(url(), as(a))).body.data).to.deep.equal([]);
  });

  it('refuses an invalid template whole (422 template_invalid) and stores nothing', async () => {
    const r = await postJson(url(), { name: 'Bad', subject: 'x', type: 'text' }, as(a));
    expect([r.status, r.body.code]).to.deep.equal([422, 'template_invalid']);
    expect(r.body.errors.map((e: { code: string }) => e.code)).to.deep.equal(['body_text_required']);
    expect((await getJson(url(), as(a))).body.data).to.deep.equal([]);
  });

  it('the tenant header: required, must be the signed-in account; another tenant sees nothing', async () => {
    const mine = await postJson(url(), { name: 'Mine', subject: 's', type: 'text', body_text: 't {{unsubscribe_url}}' }, as(a));
    expect(mine.status).to.equal(201);
    const noHeader = await getJson(url(), as(a, null));
    expect([noHeader.status, noHeader.body.code]).to.deep.equal([400, 'tenant_required']);
    const other = await getJson(url(), as(a, b.accountId));
    expect([other.status, other.body.code]).to.deep.equal([403, 'tenant_forbidden']);
    expect((await getJson(url(`/${mine.body.data.id}`), as(b))).status).to.equal(404);
    expect((await send('PATCH', `/${mine.body.data.id}`, { name: 'x' }, as(b))).status).to.equal(404);
    expect((await getJson(url(), as(b))).body.data).to.deep.equal([]);
    expect((await getJson(url(), { 'x-tenant-id': a.accountId })).status).to.equal(401);
  });
});
