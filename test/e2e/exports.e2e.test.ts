import { expect } from 'chai';
import jwt from 'jsonwebtoken';
import type { BootstrapResult } from '../../commands/admin/bootstrap';
import { startDnsServer, type TestDnsServer } from '../support/dnsServer';
import { startSmtpSink, type SmtpSink } from '../support/smtpSink';
import { eventually, getJson, postJson, startTestMotor, type TestMotor } from '../support/motor';

/**
 * Exports end to end (SPEC "Exports", docs/EXPORTS.md): real sends, a job built by the export
 * worker, the file downloaded through its 15-minute download URL and read back line by line.
 */
describe('exports (e2e)', function () {
  this.timeout(60_000);
  let dns: TestDnsServer;
  let mx: SmtpSink;
  let motor: TestMotor;
  let block: BootstrapResult;
  let analytics: string;
  const sent: string[] = [];

  before(async () => {
    dns = await startDnsServer({ 'rcpt.test': { MX: [{ exchange: 'mx.rcpt.test', priority: 10 }] }, 'mx.rcpt.test': { A: ['127.0.0.1'] } });
    mx = await startSmtpSink({ rcpt: () => 250 });
    motor = await startTestMotor({ env: { DNS_SERVERS: dns.address, MX_PORT: String(mx.port) } });
    block = await motor.bootstrap({ trustDns: true });
    const domain = block.dnsRecords.find((r) => r.purpose === 'spf')!.name;
    for (let i = 0; i < 7; i++) {
      const r = await postJson(`${motor.baseUrl}/v1/send`, { from: `app@${domain}`, to: `user${i}@rcpt.test`, subject: `Order ${i}`, text: 'x', metadata: { n: String(i) } }, { 'X-Api-Key': block.apiKey });
      expect(r.status).to.equal(200);
      sent.push(r.body.data.id);
    }
    analytics = await motor.token(block, ['analytics.read', 'logs.read']);
    await eventually(async () => (await getJson(api('/exports/preview'), auth())).body.data?.items.length === 7, 20_000);
  });
  after(async () => {
    await motor?.close();
    await mx?.close();
    await dns?.close();
  });

  const api = (path: string) => `${motor.baseUrl}/api/public/v1/motor-blocks/${block.motorBlockId}${path}`;
  const auth = (token = analytics) => ({ authorization: `Bearer ${token}` });
  const exportAndWait = async (body: Record<string, unknown>, token = analytics) => {
    const r = await postJson(api('/exports'), body, auth(token));
    expect(r.status, JSON.stringify(r.body)).to.equal(202);
    const job = await eventually(async () => {
      const g = await getJson(`${motor.baseUrl}/api/public/v1/exports/${r.body.data.jobId}`, auth(token));
      return g.body.data?.status === 'completed' ? g.body.data : null;
    }, 20_000);
    return job;
  };
  /** The download URL's path and query on this test's server (PUBLIC_BASE_URL is not it). */
  const local = (downloadUrl: string) => { const u = new URL(downloadUrl); return `${motor.baseUrl}${u.pathname}${u.search}`; };
  const download = async (downloadUrl: string) => {
    const res = await fetch(local(downloadUrl));
    const text = await res.text();
    return { res, text, lines: text.split('\n').filter(Boolean).map((l) => JSON.parse(l)) };
  };

  it('preview shows what an export holds, newest first and masked, without a job', async () => {
    const r = await getJson(api('/exports/preview?limit=3'), auth());
    expect(r.status).to.equal(200);
    expect(r.body.data).to.include({ limit: 3, pii_masked: true });
    expect(r.body.data.items.map((m: { id: string }) => m.id)).to.deep.equal([sent[6], sent[5], sent[4]]);
    expect(r.body.data.items[0].recipient).to.equal('u***@r***.test');
    expect((await getJson(api('/exports'), auth())).body.data).to.deep.equal([]);
    expect((await getJson(api('/exports/preview?limit=501'), auth())).status).to.equal(400);
    expect((await getJson(api('/exports/preview'), auth(await motor.token(block, ['analytics.read'])))).status).to.equal(403);
  });

  it('builds the file and serves it as NDJSON through a download URL that needs no bearer', async () => {
    const job = await exportAndWait({ jobType: 'logs' });
    expect(job).to.include({ jobType: 'logs', status: 'completed', rows: 7, truncated: false, motorBlockId: block.motorBlockId });
    expect(job.download_url).to.match(/\/api\/public\/v1\/exports\/[0-9a-f-]{36}\/download\?token=/);
    expect(Date.parse(job.download_url_expires_at) - Date.now()).to.be.within(14 * 60_000, 15 * 60_000 + 1000);
    const { res, text, lines } = await download(job.download_url);
    expect(res.status).to.equal(200);
    expect(res.headers.get('content-type')).to.equal('application/x-ndjson; charset=utf-8');
    expect(res.headers.get('content-disposition')).to.include(`motor-logs-${job.id}.ndjson`);
    expect(text.endsWith('\n')).to.equal(true);
    expect(lines.map((l) => l.id).sort()).to.deep.equal([...sent].sort());
    expect(lines.every((l) => /^u\*\*\*@r\*\*\*\.test$/.test(l.recipient))).to.equal(true);
    expect(lines.find((l) => l.id === sent[3]).metadata).to.deep.equal({ n: '3' });
    expect(job.bytes).to.equal(Buffer.byteLength(text));
  });

  it('applies the filters, and addresses in clear only with includePII and logs.pii', async () => {
    const one = await exportAndWait({ query: 'recipient:user2@rcpt.test' });
    expect(one.rows).to.equal(1);
    // Without logs.pii the job shows its query with the address masked, as the logs route shows addresses.
    expect(one.filters).to.include({ query: 'recipient:u***@r***.test', includePII: false });
    const denied = await postJson(api('/exports'), { includePII: true }, auth());
    expect(denied.status).to.equal(403);
    const pii = await motor.token(block, ['analytics.read', 'logs.read', 'logs.pii']);
    const clear = await exportAndWait({ includePII: true, query: 'recipient:user2@rcpt.test' }, pii);
    expect(clear.filters).to.include({ query: 'recipient:user2@rcpt.test', includePII: true });
    const { lines } = await download(clear.download_url);
    expect(lines.map((l) => l.recipient)).to.deep.equal(['user2@rcpt.test']);
    // That job and its file are for logs.pii holders only: a token without it gets no download URL.
    const withoutPii = await getJson(`${motor.baseUrl}/api/public/v1/exports/${clear.id}`, auth());
    expect([withoutPii.status, withoutPii.body.code, withoutPii.body.data?.download_url]).to.deep.equal([403, 'insufficient_scope', undefined]);
    const listed = (await getJson(api('/exports'), auth())).body.data as Array<{ id: string; filters: { query: string } }>;
    expect(listed.find((j) => j.id === clear.id)!.filters.query, 'the list masks it too').to.equal('recipient:u***@r***.test');
    expect(JSON.stringify(listed)).to.not.include('user2@');
  });

  it('refuses a bad job type, query or window with 400 and a code', async () => {
    const codes = [];
    for (const body of [{ jobType: 'csv' }, { query: 'nonsense:term' }, { from: 'yesterday' }, { from: '2001-01-01T00:00:00Z' }]) {
      const r = await postJson(api('/exports'), body, auth());
      expect(r.status, JSON.stringify(body)).to.equal(400);
      codes.push(r.body.code);
    }
    expect(codes).to.deep.equal(['invalid_job_type', 'invalid_query', 'invalid_query', 'outside_retention_window']);
  });

  it('takes a POST without a body as the defaults (the body is optional); refuses one not sent as JSON with 415, and one of the wrong shape with 422', async () => {
    const r = await fetch(api('/exports'), { method: 'POST', headers: auth() });
    const body = await r.json() as { code?: string; data?: { jobId: string } };
    expect(r.status, JSON.stringify(body)).to.equal(202);
    const job = await eventually(async () => {
      const g = await getJson(`${motor.baseUrl}/api/public/v1/exports/${body.data!.jobId}`, auth());
      return g.body.data?.status === 'completed' ? g.body.data : null;
    }, 20_000);
    expect(job.filters).to.include({ includePII: false, query: null, status: null });
    expect(job.rows).to.equal(sent.length);
    // Not read as no body (which would queue the defaults for a request that asked for something else).
    const plain = await fetch(api('/exports'), { method: 'POST', body: '{"includePII":true}', headers: { ...auth(), 'content-type': 'text/plain' } });
    expect([plain.status, ((await plain.json()) as { code?: string }).code]).to.deep.equal([415, 'unsupported_media_type']);
    for (const body of [[], { jobType: 'logs', format: 'csv' }, { includePII: 'yes' }]) {
      const r = await postJson(api('/exports'), body, auth());
      expect([r.status, r.body.code], JSON.stringify(body)).to.deep.equal([422, 'validation_error']);
    }
  });

  it('lists recent jobs newest first; another block sees none of them', async () => {
    const list = (await getJson(api('/exports'), auth())).body.data as Array<{ id: string; requestedAt: string }>;
    expect(list.length).to.be.at.least(3);
    expect(list.map((j) => j.requestedAt)).to.deep.equal([...list.map((j) => j.requestedAt)].sort().reverse());
    const other = await motor.bootstrap({ email: 'other@example.test' });
    const otherToken = await motor.token(other, ['analytics.read']);
    const foreign = await getJson(`${motor.baseUrl}/api/public/v1/exports/${list[0].id}`, auth(otherToken));
    expect(foreign.status).to.equal(404);
    expect(foreign.body.code).to.equal('export_not_found');
    expect((await getJson(api('/exports'), auth(otherToken))).status).to.equal(403);
  });

  it('download tokens: missing, forged, for another job or expired are 401', async () => {
    const job = await exportAndWait({});
    const url = new URL(local(job.download_url));
    const token = url.searchParams.get('token')!;
    const at = (t: string | null, id = job.id) => fetch(`${motor.baseUrl}/api/public/v1/exports/${id}/download${t === null ? '' : `?token=${encodeURIComponent(t)}`}`);
    expect((await at(null)).status).to.equal(401);
    expect((await at(`${token.slice(0, -2)}xx`)).status).to.equal(401);
    const [other] = (await getJson(api('/exports'), auth())).body.data.filter((j: { id: string }) => j.id !== job.id);
    expect((await at(token, other.id)).status).to.equal(401);
    const claims = jwt.decode(token) as jwt.JwtPayload;
    const expired = jwt.sign({ ...claims, iat: claims.iat! - 3600, exp: claims.iat! - 60 }, motor.config.tokenSecret, { algorithm: 'HS256' });
    const r = await at(expired);
    expect(r.status).to.equal(401);
    expect((await r.json() as { code: string }).code).to.equal('token_expired');
    const bearer = await at(analytics);
    expect(bearer.status, 'a bearer token is not a download token').to.equal(401);
    expect((await at(token)).status).to.equal(200);
  });
});
