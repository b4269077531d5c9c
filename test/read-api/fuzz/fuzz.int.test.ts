import { request as httpRequest } from 'node:http';
import fc from 'fast-check';
import { expect } from 'chai';
import { WEBHOOK_EVENTS } from '../../../domain/webhooks/webhooks';
import { allProjections } from '../../../projections/index';
import { ProjectionRunner } from '../../../projections/runner';
import { eventually } from '../../support/motor';
import { encodeBody, hasBody, requestPlan, urlOf, type Knowledge, type Operation, type RequestPlan } from './arbitraries';
import { eventMark, writtenSince } from './appended';
import { operations as allOperations } from './openapi';
import { errorAnswerProblems, mustRefuse, RECORDED_REFUSALS, WRITING_READS } from './oracle';
import { startWorld, type World } from './world';

/**
 * Property-based tests of the whole HTTP surface: every operation of the OpenAPI document, with
 * the credential it takes (test/auth/harness.ts: a dashboard JWT, block and account API keys, a
 * public token with every scope; none on the open routes), gets requests built from what it
 * accepts (the fixtures' ids, a valid body: world.ts, `knowledge` below) of which one part, or
 * all, is made hostile (arbitraries.ts: bodies mutated from the request schema, junk path ids,
 * query parameters repeated, mistyped, huge, crafted cursors and dates, header values, bodies in
 * other media types, encodings and framings). For each request (oracle.ts says what the
 * documentation requires):
 *
 *   - an answer arrives within ANSWER_MS, and it is not a 5xx;
 *   - a 4xx carries the JSON error envelope (read-api/http/errors.ts `errorBody`) with a `code`
 *     that docs/ERRORS.md names, with that status (or the table of docs/AUTH.md it refers to);
 *     the OAuth token and revocation endpoints answer RFC 6749's `{error, error_description}`, the
 *     token check RFC 6750's, and the pages for browsers may answer HTML;
 *   - a request the documentation says to refuse (malformed JSON, another media type, a body
 *     breaking the published schema or a SPEC rule, a junk id, a mistyped query parameter, a
 *     malformed Last-Event-ID...) is a 4xx, with the HTTP layer's own code where it decides;
 *   - a refused write, a read and a dry run append no event (the background work of earlier
 *     requests aside, the failed attempts a brute-force lock counts, and the authorization page's
 *     documented record of each view);
 *   - at the end, every read model has caught up with what was accepted.
 *
 * Writes run first, then reads (which then name, and read back, what the writes created), then
 * the writes that spoil fixtures (deletions, DNS checks, deactivation).
 *
 * Bounded: FUZZ_RUNS requests per operation (default 25: under a minute here) from the seed
 * FUZZ_SEED (default fixed, printed), so a run is repeatable; a failure prints fast-check's shrunk
 * counterexample (the request as sent), the seed and the path that replays it. FUZZ_SHRINK=0 stops
 * at the first failure; FUZZ_STATS=1 prints the answers each operation got.
 */

const SEED = process.env.FUZZ_SEED ? Number(process.env.FUZZ_SEED) : 20_261_124;
const RUNS = process.env.FUZZ_RUNS ? Number(process.env.FUZZ_RUNS) : 25;
const ANSWER_MS = 5_000;
/** FUZZ_STATS=1 prints, per operation, how many answers of each status and code the run got (is it reaching the routes?). */
const STATS = process.env.FUZZ_STATS === '1';
const stats: Record<string, Record<string, number>> = {};

/**
 * Writes that change or remove the fixtures other operations use (a live DNS check, say, finds the
 * fixture domain's records missing and turns it from send-ready to not): run after everything else.
 */
const spoils = (op: Operation): boolean => op.method === 'DELETE'
  || /\/(rotate|rotate-dkim|verify|check-dns|cancel|send|deactivate|reactivate|convert|type|assign-domain|smtp-password)$/.test(op.path) && op.path !== '/v1/send';

const operations = allOperations();
/** Writes first, then reads (which then see what the writes accepted), then the spoilers. */
const rank = (op: Operation) => (spoils(op) ? 2 : op.method === 'GET' ? 1 : 0);
operations.sort((a, b) => rank(a) - rank(b));

/**
 * Ids the run's accepted requests created, by kind, so that later requests name them too (a list
 * with an odd name, a webhook with an odd URL, read back and changed); the routes that create them.
 */
const created: Record<string, string[]> = {};
const CREATES: Record<string, string> = {
  '/v1/send': 'message', '/api/public/v1/motor-blocks/{id}/webhooks': 'webhook', '/api/public/v1/motor-blocks/{id}/exports': 'export',
  '/api/public/v1/domains': 'domain', '/api/domains': 'domain', '/api/public/v1/account/motor-blocks': 'accountBlock',
  '/api/account/api-keys': 'accountKey', '/api/motor-blocks/{id}/api-keys': 'blockKey',
  '/comm-api/api/lists': 'list', '/comm-api/api/templates': 'template', '/comm-api/api/campaigns': 'campaign', '/comm-api/api/suppressions': 'suppression',
};
/** The kind of id a path parameter names (null: only the fixture's). */
function kindOf(path: string, name: string): string | null {
  if (name === 'webhookId') return 'webhook';
  if (name === 'listId') return 'list';
  if (name === 'keyId') return path.startsWith('/api/account/') ? 'accountKey' : 'blockKey';
  if (name === 'jobId') return path.startsWith('/api/public/v1/exports/') ? 'export' : null;
  if (name !== 'id') return null;
  if (path.startsWith('/api/public/v1/messages/')) return 'message';
  if (path.includes('/domains/')) return 'domain';
  if (path.startsWith('/api/public/v1/account/motor-blocks/')) return 'accountBlock';
  for (const kind of ['template', 'campaign', 'suppression']) if (path.startsWith(`/comm-api/api/${kind}s/`)) return kind;
  return null;
}
/** Keeps what a 2xx of a creating route names (its `data.id` or `data.jobId`), the last few of each kind. */
function remember(op: Operation, status: number, text: string): void {
  const kind = op.method === 'POST' ? CREATES[op.path] : undefined;
  if (!kind || status < 200 || status > 299) return;
  let id: unknown;
  try { const d = JSON.parse(text).data; id = d?.id ?? d?.jobId; } catch { return; }
  if (typeof id !== 'string') return;
  const ids = (created[kind] ??= []);
  if (!ids.includes(id)) ids.push(id);
  if (ids.length > 5) ids.shift();
}

/** The fixture's id for a path parameter. */
function fixtureId(op: Operation, name: string): string {
  const p = op.path;
  switch (name) {
    case 'keyId': return p.startsWith('/api/account/') ? w.spareAccountKeyId : w.spareBlockKeyId;
    case 'webhookId': return w.webhookId;
    case 'listId': return w.listId;
    case 'contactId': return w.contactId;
    case 'jobId': return w.exportJobId; // of the deletions route: a job id of another kind
    case 'token': return 'not-a-token';
    case 'address': return 'nobody@rcpt.test'; // on no block's suppression list
    case 'id':
      if (p.startsWith('/api/public/v1/messages')) return w.message;
      if (p.includes('/domains/')) return w.domainId;
      if (p.startsWith('/api/public/v1/account/motor-blocks') || p.startsWith('/api/public/v1/account/authorization')) return w.victimBlock;
      if (p.startsWith('/api/public/v1/account/free-recipients')) return w.freeRecipientId;
      if (p.startsWith('/comm-api/api/templates')) return w.templateId;
      if (p.startsWith('/comm-api/api/campaigns')) return w.campaignId;
      if (p.startsWith('/comm-api/api/suppressions')) return w.suppressionId;
      if (p.startsWith('/api/oauth2/connections')) return w.domainId; // names no connection
      return w.block;
    default: throw new Error(`no value for path parameter ${name} of ${op.path}`);
  }
}

interface Answer { status: number; type: string; text: string; ms: number }

function send(base: string, op: Operation, plan: RequestPlan, creds: Record<string, string>): Promise<Answer> {
  const { bytes: body, contentType, contentEncoding, chunked } = encodeBody(plan.body);
  const headers: Record<string, string | number> = { ...creds, ...plan.headers };
  if (contentType !== undefined) headers['content-type'] = contentType;
  if (contentEncoding !== undefined) headers['content-encoding'] = contentEncoding;
  if (chunked) headers['transfer-encoding'] = 'chunked';
  else if (body !== undefined) headers['content-length'] = body.length;
  const started = Date.now();
  return new Promise((resolve, reject) => {
    // The path as generated: a URL string would be parsed, and its dot segments (`.`, `%2e`) removed, before it is sent.
    const { hostname, port } = new URL(base);
    const req = httpRequest({ hostname, port, path: urlOf(op, plan), method: op.method, headers, timeout: ANSWER_MS }, (res) => {
      const chunks: Buffer[] = [];
      const type = String(res.headers['content-type'] ?? '');
      const done = () => resolve({ status: res.statusCode ?? 0, type, text: Buffer.concat(chunks).toString('utf8'), ms: Date.now() - started });
      res.on('data', (c: Buffer) => {
        chunks.push(c);
        // An event stream that opened never ends by itself: its first chunk is the answer.
        if (type.startsWith('text/event-stream')) { res.destroy(); done(); }
      });
      res.on('end', done);
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(new Error(`no answer within ${ANSWER_MS} ms`)));
    req.on('error', reject);
    if (chunked && body !== undefined) req.write(body);
    req.end(chunked ? undefined : body);
  });
}

/** The fixtures of the run (set in `before`). */
let w: World;

describe('fuzzing the HTTP surface: a clear 4xx with a documented code, never a 5xx, a hang or a write (int)', function () {
  this.timeout(300_000);
  let checked = 0;
  const started = Date.now();

  before(async () => {
    console.log(`      fuzz: seed ${SEED}, ${RUNS} runs per operation (FUZZ_SEED, FUZZ_RUNS)`); // eslint-disable-line no-console
    w = await startWorld();
  });
  after(async () => {
    console.log(`      fuzz: ${operations.length} operations, ${checked} requests, ${((Date.now() - started) / 1000).toFixed(1)} s`); // eslint-disable-line no-console
    if (STATS) for (const [key, tally] of Object.entries(stats)) console.log(`      ${key}: ${Object.entries(tally).sort((x, y) => y[1] - x[1]).map(([k, n]) => `${k} ×${n}`).join(', ')}`); // eslint-disable-line no-console
    await w?.h.close();
  });

  const knowledge = (): Knowledge => ({
    accountId: w.accountId,
    pathValues(op, name) {
      const kind = kindOf(op.path, name);
      return [fixtureId(op, name), ...(kind ? created[kind] ?? [] : [])];
    },
    queryValue(_op, param) {
      const now = Date.now();
      const s = param.schema ?? {};
      switch (param.name) {
        case 'from': return new Date(now - 3600_000).toISOString();
        case 'to': return new Date(now).toISOString();
        case 'limit': return '10';
        case 'days': return '7';
        case 'hours': return '24';
        case 'interval': return 'day';
        case 'refresh': return 'false';
        case 'includePII': return 'false';
        case 'query': return 'recipient:user@rcpt.test';
        case 'smtpMessageId': return w.smtpMessageId;
        case 'motorBlockId': return w.victimBlock;
        case 'email': return 'user@rcpt.test';
        case 'campaign_id': return w.campaignId;
        case 'message_id': return w.message;
        case 'cursor': case 'token': case 'access_token': case 'lastEventId': return undefined;
        default: return Array.isArray(s.enum) ? String(s.enum[0]) : s.type === 'integer' || s.type === 'number' ? '1' : s.type === 'boolean' ? 'false' : undefined;
      }
    },
    impliedQuery(op): Record<string, string> {
      // An SMTP client's authorization request (docs/OAUTH.md "1. GET /api/oauth2/authorize").
      if (op.path !== '/api/oauth2/authorize') return {};
      return { client_id: w.oauthClientId, response_type: 'code', redirect_uri: w.oauthRedirectUri, scope: 'email.send', state: 'fuzz', motor_block_id: w.block };
    },
    headerValue(_op, name) {
      switch (name.toLowerCase()) {
        case 'idempotency-key': return fc.uuid({ version: 4 });
        case 'x-tenant-id': return fc.constant(w.accountId);
        default: return undefined;
      }
    },
    body(op) {
      const soon = new Date(Date.now() + 86_400_000).toISOString();
      const p = op.path;
      const exact: Record<string, Record<string, unknown>> = {
        '/v1/send': { from: w.from, to: 'user@rcpt.test', subject: 's', text: 't', dryRun: true },
        '/v1/test-email': { method: 'starttls', host: w.h.motor.config.smtpPublicHosts[0], port: w.h.motor.config.smtpPublicPorts[0], username: w.smtpUsername, password: 'x', to: 'user@rcpt.test', subject: 's', requireTLS: false },
        '/api/public/token/account-key': { motorBlockId: w.block, scopes: ['logs.read'], ttlSeconds: 300 },
        '/api/public/token': { motorBlockId: w.block, scopes: ['logs.read'], ttlSeconds: 300 },
        '/api/motor-blocks/{id}/smtp/auth-method': { authMethod: 'smtp_password' },
        '/api/motor-blocks/{id}/smtp/client-certificate': { certificate: '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n' },
        '/api/oauth2/token': { grant_type: 'authorization_code', code: 'c', redirect_uri: w.oauthRedirectUri, client_id: w.oauthClientId, client_secret: w.oauthClientSecret },
        '/api/oauth2/revoke': { token: 't', token_type_hint: 'refresh_token', client_id: w.oauthClientId, client_secret: w.oauthClientSecret },
        '/api/oauth2/clients': { name: 'Fuzz app', redirectUris: ['https://app.example.test/cb'] },
        '/api/email/validate': { email: 'user@rcpt.test' },
        '/api/email/validate/batch': { emails: ['user@rcpt.test', 'other@rcpt.test'] },
        '/api/public/v1/domains': { domain: 'fuzz.example.test', dkimMode: 'txt' },
        '/api/domains': { domain: 'fuzz-dash.example.test', dkimMode: 'cname_managed' },
        '/api/public/v1/account/sandbox/provision': { handle: 'fuzzbox', channel: 'agent' },
        '/api/developer/sandbox/provision': { handle: 'fuzzbox', channel: 'dashboard' },
        '/api/public/v1/account/sandbox/convert': { domainId: w.domainId, name: 'Converted', type: 'transactional' },
        '/api/developer/sandbox/convert': { domainId: w.domainId, name: 'Converted', type: 'transactional' },
        '/api/developer/sandbox/outbound': { addresses: ['user@rcpt.test'] },
        '/api/account/api-keys': { name: 'fuzz', scopes: ['logs.read'] },
        '/api/motor-blocks/{id}/api-keys': { name: 'fuzz' },
        '/api/auth/register': { email: 'fuzz-new@rcpt.test' },
        '/api/auth/verify-code': { email: 'fuzz-new@rcpt.test', code: '123456' },
        '/api/auth/set-password': { email: 'fuzz-new@rcpt.test', password: 'correct horse battery staple', setupToken: 'x', channel: 'agent' },
        '/api/auth/login': { email: w.email, password: 'not the password at all' },
        '/api/auth/refresh': { refreshToken: 'x' },
        '/api/auth/web-handoff': { redirectPath: '/dashboard' },
        '/api/auth/web-handoff/redeem': { code: 'x' },
        '/api/public/v1/motor-blocks/{id}/webhooks': { url: 'https://hooks.example.test/fuzz', events: [WEBHOOK_EVENTS[0]] },
        '/api/public/v1/motor-blocks/{id}/webhooks/{webhookId}': { url: 'https://hooks.example.test/fuzz', events: [...WEBHOOK_EVENTS], enabled: true },
        '/comm-api/api/templates': { name: 'T', subject: 'S {{name}}', type: 'text', body_text: 'Hello {{unsubscribe_url}}' },
        '/comm-api/api/templates/validate': { name: 'T', subject: 'S', type: 'html', body_html: '<p>Hi {{name}} <a href="{{unsubscribe_url}}">u</a></p>', sampleData: { name: 'x' } },
        '/comm-api/api/templates/{id}': { subject: 'S2' },
        '/api/public/v1/account/free-recipients': { email: 'friend2@rcpt.test' },
        '/api/public/v1/motor-blocks/{id}/exports': { jobType: 'logs', from: new Date(Date.now() - 3600_000).toISOString(), query: 'recipient:user@rcpt.test', status: 'delivered', includePII: false },
        '/comm-api/api/lists': { name: 'Another list', description: 'd' },
        '/comm-api/api/lists/{listId}': { name: 'Fuzz list', description: 'renamed' },
        '/comm-api/api/suppressions': { email: 'sup@rcpt.test', note: 'n' },
        '/comm-api/api/suppressions/batch': { suppressions: [{ email: 'b1@rcpt.test' }, { email: 'b2@rcpt.test', note: 'x' }] },
        '/comm-api/api/lists/{listId}/contacts': { email: 'c@rcpt.test', name: 'C', fields: { plan: 'pro' } },
        '/comm-api/api/lists/{listId}/contacts/batch': { contacts: [{ email: 'd@rcpt.test' }, { email: 'e@rcpt.test', name: 'E' }] },
        '/comm-api/api/lists/{listId}/contacts/{contactId}': { name: 'R', fields: { plan: 'free' } },
        '/comm-api/api/campaigns': { name: 'C2', template_id: w.templateId, list_id: w.listId, motor_block_id: w.block, from: w.from, from_name: 'Fuzz', track_opens: true, track_clicks: false },
        '/comm-api/api/campaigns/{id}': { name: 'Renamed' },
        '/comm-api/api/campaigns/{id}/send': { scheduled_at: soon },
        '/api/public/v1/account/motor-blocks': { name: 'Fuzz block', domainId: w.domainId, type: 'transactional', description: 'd' },
        '/api/public/v1/account/motor-blocks/{id}/name': { name: 'Victim' },
        '/api/public/v1/account/motor-blocks/{id}/type': { type: 'transactional', confirm: true },
        '/api/public/v1/account/motor-blocks/{id}/assign-domain': { domainId: w.domainId, confirm: true },
        '/api/public/v1/account/motor-blocks/{id}/deactivate': { confirm: true },
        '/api/public/v1/account/motor-blocks/{id}': { confirm: true, deleteHistory: true },
        '/free-recipients/confirm': { token: 'x' },
      };
      return exact[p];
    },
  });

  /** The operation's credential; the OAuth pages take the signed-in user's dashboard JWT (docs/OAUTH.md), though the document declares none. */
  const credentialOf = (op: Operation): Record<string, string> => {
    if (op.scheme) return w.creds[op.scheme as keyof World['creds']];
    return op.path === '/api/oauth2/authorize' || op.path === '/api/oauth2/consent' ? w.creds.dashboardJwt : {};
  };

  /** What is wrong with one answer to one request (empty: nothing). */
  async function judge(op: Operation, plan: RequestPlan, k: Knowledge): Promise<string[]> {
    const write = hasBody(op);
    const refusal = mustRefuse(op, plan, k);
    const before = await eventMark(w.h.motor.rt.db);
    let a: Answer;
    try {
      a = await send(w.h.motor.baseUrl, op, plan, credentialOf(op));
    } catch (err) {
      return [`no answer: ${(err as Error).message}`];
    }
    checked++;
    remember(op, a.status, a.text);
    if (STATS) {
      let code = '';
      try { const b = JSON.parse(a.text); code = b.code ?? b.error ?? ''; } catch { /* not JSON */ }
      const key = `${op.method} ${op.path}`;
      const tally = (stats[key] ??= {});
      tally[`${a.status}${code ? ` ${code}` : ''}`] = (tally[`${a.status}${code ? ` ${code}` : ''}`] ?? 0) + 1;
    }
    const problems: string[] = [];
    if (a.status >= 500) problems.push(`${a.status}: ${a.text.slice(0, 300)}`);
    if (refusal && a.status < 400) problems.push(`${a.status} for a request to refuse (${refusal.why}): ${a.text.slice(0, 200)}`);
    if (a.ms > ANSWER_MS) problems.push(`answered after ${a.ms} ms`);
    if (a.status >= 400 && a.status < 500) problems.push(...errorAnswerProblems(op, a.status, a.type, a.text, refusal));
    // Nothing written: by a refused write, by a read, by a dry run (SPEC "Send API" rule 1, and the
    // template check that "creates no template, campaign, log or email").
    const refused = write && a.status >= 400 && a.status < 500;
    const dryRun = a.status < 300 && (op.path === '/comm-api/api/templates/validate' || (op.path === '/v1/send' && /"dryRun":true/.test(a.text)));
    if (refused || op.method === 'GET' || dryRun) {
      const allowed = new Set([...RECORDED_REFUSALS, ...(op.method === 'GET' && a.status < 300 ? WRITING_READS[op.path] ?? [] : [])]);
      const written = await writtenSince(w.h.motor.rt.db, before, allowed);
      const what = refused ? 'refused' : op.method === 'GET' ? 'a read' : 'a dry run';
      if (written.length) problems.push(`${a.status} (${what}), yet appended ${written.join(', ')}`);
    }
    return problems;
  }

  for (const op of operations) {
    it(`${op.method} ${op.path}${op.scheme ? ` [${op.scheme}]` : ''}`, async () => {
      const k = knowledge();
      await fc.assert(fc.asyncProperty(requestPlan(op, k), async (plan) => {
        const problems = await judge(op, plan, k);
        expect(problems, problems.join('\n')).to.deep.equal([]);
      }), { seed: SEED, numRuns: RUNS, endOnFailure: process.env.FUZZ_SHRINK === '0' });
    });
  }

  // What the accepted requests wrote is readable: no read model stuck on an event it cannot apply.
  it('every projection catches up with what the run appended', async () => {
    for (const projection of allProjections()) {
      const runner = new ProjectionRunner(w.h.motor.rt.db, w.h.motor.rt.store, projection);
      await eventually(async () => (await runner.lag()).eventsBehind === 0, 20_000, 200)
        .catch(async () => expect.fail(`${projection.name} is ${(await runner.lag()).eventsBehind} events behind`));
    }
  });
});
