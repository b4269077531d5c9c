import { expect } from 'chai';
import { bundleFromString, createConfig, lintFromString } from '@redocly/openapi-core';
import { getJson, postJson, startTestMotor, type TestMotor } from '../support/motor';
import { bearer, getPublic, sendMail, senderDomainOf } from './publicApi';

/** Operational surface: status, health, readiness, metrics, the OpenAPI document and its docs page. */
describe('status, health, metrics and OpenAPI (int)', function () {
  this.timeout(60_000);
  let motor: TestMotor;

  before(async () => { motor = await startTestMotor({ roles: ['api', 'projector'] }); });
  after(async () => { await motor?.close(); });

  it('GET /v1/status answers 200 with every component, without a credential', async () => {
    const r = await getJson(`${motor.baseUrl}/v1/status`);
    expect(r.status).to.equal(200);
    expect(r.body).to.include({ success: true, status: 'operational', version: '1.2.0' });
    expect(r.body.components).to.have.keys(['eventStore', 'database', 'redis', 'deliveryQueue']);
    for (const [name, c] of Object.entries<{ ok: boolean; latencyMs: number }>(r.body.components)) {
      expect(c.ok, name).to.equal(true);
      expect(c.latencyMs, name).to.be.a('number');
    }
    expect(Number.isNaN(Date.parse(r.body.timestamp))).to.equal(false);
    expect(r.headers.get('x-ratelimit-limit')).to.equal(null);
  });

  it('/healthz and /readyz', async () => {
    const h = await getJson(`${motor.baseUrl}/healthz`);
    expect(h.status).to.equal(200);
    expect(h.body).to.deep.equal({ ok: true });
    const r = await getJson(`${motor.baseUrl}/readyz`);
    expect(r.status).to.equal(200);
    expect(r.body.ok).to.equal(true);
    expect(r.body.components.eventStore.ok).to.equal(true);
  });

  it('/metrics is Prometheus text and counts accepted sends', async () => {
    const b = await motor.bootstrap();
    await sendMail(motor, b);
    await sendMail(motor, b);
    const res = await fetch(`${motor.baseUrl}/metrics`);
    expect(res.status).to.equal(200);
    expect(res.headers.get('content-type')).to.match(/^text\/plain/);
    const text = await res.text();
    expect(text).to.match(/^# HELP motor_sends_accepted_total /m);
    expect(text).to.match(/^# TYPE motor_sends_accepted_total counter$/m);
    expect(text).to.match(/^motor_sends_accepted_total\{source="http"\} 2$/m);
    expect(text).to.match(/^motor_http_request_duration_seconds_bucket\{/m);
  });

  it('answers carry X-Request-Id (a valid one sent is echoed) and no ETag: answers are not conditional', async () => {
    const b = await motor.bootstrap();
    const sent = await postJson(`${motor.baseUrl}/v1/send`, { from: `app@${senderDomainOf(b)}`, to: 'user@rcpt.test', subject: 'Hello', text: 'Hi' }, { 'X-Api-Key': b.apiKey, 'X-Request-Id': 'trace-42' });
    expect(sent.status).to.equal(200);
    expect(sent.headers.get('x-request-id')).to.equal('trace-42');
    const token = await motor.token(b, ['logs.read']);
    const read = await getPublic(motor, `/messages/${sent.body.data.id}`, token);
    expect(read.status).to.equal(200);
    expect(read.headers.get('x-request-id')).to.match(/^[0-9a-f-]{36}$/);
    // The same read with the previous answer's validator is answered in full, never 304.
    const again = await getJson(`${motor.baseUrl}/api/public/v1/messages/${sent.body.data.id}`, { ...bearer(token), 'If-None-Match': '*' });
    expect(again.status).to.equal(200);
    for (const r of [sent, read, again]) expect(r.headers.get('etag')).to.equal(null);
  });

  it('an unknown route is a JSON 404', async () => {
    const r = await getJson(`${motor.baseUrl}/api/public/v1/nothing-here`);
    expect(r.status).to.equal(404);
    expect(r.body).to.include({ success: false, code: 'not_found' });
  });

  describe('/api/public/openapi.json', () => {
    let doc: any; // eslint-disable-line @typescript-eslint/no-explicit-any
    let source: string;
    before(async () => {
      const res = await fetch(`${motor.baseUrl}/api/public/openapi.json`);
      expect(res.status).to.equal(200);
      expect(res.headers.get('content-type')).to.match(/application\/json/);
      source = await res.text();
      doc = JSON.parse(source);
    });

    it('declares OpenAPI 3.1.0 and API version 1.2.0', () => {
      expect(doc.openapi).to.equal('3.1.0');
      expect(doc.info.version).to.equal('1.2.0');
    });

    it('describes every route with its security', () => {
      const ops = Object.entries<Record<string, { security?: Array<Record<string, string[]>> }>>(doc.paths)
        .flatMap(([path, item]) => Object.entries(item).map(([method, op]) => ({ key: `${method.toUpperCase()} ${path}`, security: op.security })));
      const byKey = Object.fromEntries(ops.map((o) => [o.key, o.security]));
      expect(Object.keys(byKey)).to.include.members([
        'POST /v1/send', 'GET /v1/status', 'POST /api/public/token/account-key', 'GET /api/public/v1/motor-blocks',
        'GET /api/public/v1/motor-blocks/{id}/logs', 'GET /api/public/v1/messages', 'GET /api/public/v1/messages/{id}',
        'GET /api/public/v1/messages/{id}/events', 'GET /api/public/v1/messages/{id}/recipients',
      ]);
      expect(byKey['POST /v1/send']).to.deep.equal([{ blockApiKey: [] }]);
      expect(byKey['POST /api/public/token/account-key']).to.deep.equal([{ accountApiKey: [] }]);
      expect(byKey['GET /api/public/v1/motor-blocks/{id}/logs']).to.deep.equal([{ publicBearer: ['logs.read'] }]);
      expect(byKey['GET /v1/status'] ?? []).to.deep.equal([]);
      expect(doc.components.securitySchemes.publicBearer).to.include({ type: 'http', scheme: 'bearer' });
    });

    it('is valid per the Redocly recommended ruleset (no errors)', async () => {
      const config = await createConfig({ extends: ['recommended'] });
      const problems = await lintFromString({ source, absoluteRef: 'openapi.json', config });
      const errors = problems.filter((p) => p.severity === 'error');
      const warnings = problems.filter((p) => p.severity === 'warn');
      console.log(`      OpenAPI lint: ${errors.length} errors, ${warnings.length} warnings${warnings.length ? ` (${[...new Set(warnings.map((w) => w.ruleId))].join(', ')})` : ''}`);
      expect(errors.map((e) => `${e.ruleId}: ${e.message} at ${e.location[0]?.pointer}`)).to.deep.equal([]);
      const bundled = await bundleFromString({ source, absoluteRef: 'openapi.json', config });
      expect(bundled.problems.filter((p) => p.severity === 'error')).to.deep.equal([]);
      expect((bundled.bundle.parsed as { openapi?: string }).openapi).to.equal('3.1.0');
    });
  });

  it('/api/public/docs serves the HTML reference', async () => {
    const res = await fetch(`${motor.baseUrl}/api/public/docs`);
    expect(res.status).to.equal(200);
    expect(res.headers.get('content-type')).to.match(/^text\/html/);
    const html = await res.text();
    expect(html).to.match(/<html/i);
    expect(html).to.include('swagger-ui');
    expect(html).to.include('Motor API reference');
    const init = await fetch(`${motor.baseUrl}/api/public/docs/swagger-ui-init.js`);
    expect(init.status).to.equal(200);
    expect(await init.text()).to.include('/api/public/openapi.json');
  });
});
