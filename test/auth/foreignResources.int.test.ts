import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'chai';
import { SCOPES } from '../../domain/credentials/scopes';
import { eventually } from '../support/motor';
import { acceptedEvent, recipientEvent } from '../projections/fixtures';
import { createBlockFor } from './fixtures';
import { startAuthHarness, type AuthHarness } from './harness';

/**
 * The other half of the authorization table (test/auth/authorization.int.test.ts walks the
 * credentials of each route; a route there names at most the block or account its credential is
 * for): every route that names a resource of its own (a webhook, an export job, a sending domain,
 * a deletion job, a free recipient, an API key, an account block), asked about one of another
 * block or another account with a credential that passes authentication and scope. Each such
 * route must refuse, with the code its docs give, and change nothing. Routes of the OpenAPI
 * document with an id in the path are picked up automatically: a new one fails the coverage check
 * until it has a row here or is named in COVERED_ELSEWHERE.
 */

interface Row { method: string; path: string; cred: 'tA2' | 'tB1' | 'dashA' | 'dashB'; body?: unknown; status: number; code: string; ids?: Record<string, string> }

/** Routes with ids in the path whose foreign-resource cases are walked by another test. */
const COVERED_ELSEWHERE: Array<{ pattern: RegExp; by: string }> = [
  // The only id is the block (or a message of it): the authorization table's "another block/account" cases.
  { pattern: /^\/api\/public\/v1\/motor-blocks\/\{id\}(\/(?!webhooks\/\{webhookId\})[a-z-]+(\/[a-z-]+)?)?$/, by: 'test/auth/authorization.int.test.ts' },
  { pattern: /^\/api\/public\/v1\/messages\/\{id\}(\/[a-z]+)?$/, by: 'test/auth/authorization.int.test.ts' },
  { pattern: /^\/api\/motor-blocks\/\{id\}\/(smtp\/[a-z-]+|smtp-auth-failures|api-keys|smtp-password)$/, by: 'test/auth/authorization.int.test.ts' },
  { pattern: /^\/api\/oauth2\/connections\/\{id\}$/, by: 'test/oauth/agent.int.test.ts (another account\'s connection: 404)' },
  { pattern: /^\/comm-api\/api\//, by: 'test/comms/*, test/templates/* (another tenant\'s list, contact, campaign, template or suppression: 404)' },
];

const ROWS: Row[] = [
  // A webhook of block A1 through block A2's path, with A2's token: not A2's.
  { method: 'PUT', path: '/api/public/v1/motor-blocks/{id}/webhooks/{webhookId}', cred: 'tA2', body: { enabled: false }, status: 404, code: 'webhook_not_found' },
  { method: 'DELETE', path: '/api/public/v1/motor-blocks/{id}/webhooks/{webhookId}', cred: 'tA2', status: 404, code: 'webhook_not_found' },
  { method: 'POST', path: '/api/public/v1/motor-blocks/{id}/webhooks/{webhookId}/rotate-secret', cred: 'tA2', body: {}, status: 404, code: 'webhook_not_found' },
  { method: 'POST', path: '/api/public/v1/motor-blocks/{id}/webhooks/{webhookId}/test', cred: 'tA2', status: 404, code: 'webhook_not_found' },
  { method: 'GET', path: '/api/public/v1/motor-blocks/{id}/webhooks/{webhookId}/deliveries', cred: 'tA2', status: 404, code: 'webhook_not_found' },
  { method: 'GET', path: '/api/public/v1/motor-blocks/{id}/webhooks/{webhookId}/stats', cred: 'tA2', status: 404, code: 'webhook_not_found' },
  // Block A1's export job: another block of the account, another account.
  { method: 'GET', path: '/api/public/v1/exports/{jobId}', cred: 'tA2', status: 404, code: 'export_not_found' },
  { method: 'GET', path: '/api/public/v1/exports/{jobId}', cred: 'tB1', status: 404, code: 'export_not_found' },
  // Block A1's suppressed address through block A2's path, with A2's token: not on A2's list.
  { method: 'DELETE', path: '/api/public/v1/motor-blocks/{id}/suppressions/{address}', cred: 'tA2', status: 404, code: 'suppression_not_found', ids: { id: 'A2' } },
  // Account A's sending domain, by account B (public and dashboard routes).
  { method: 'POST', path: '/api/public/v1/domains/{id}/verify', cred: 'tB1', status: 404, code: 'domain_not_found' },
  { method: 'POST', path: '/api/public/v1/domains/{id}/check-dns', cred: 'tB1', status: 404, code: 'domain_not_found' },
  { method: 'POST', path: '/api/public/v1/domains/{id}/rotate-dkim', cred: 'tB1', status: 404, code: 'domain_not_found' },
  { method: 'POST', path: '/api/domains/{id}/verify', cred: 'dashB', status: 404, code: 'domain_not_found' },
  { method: 'POST', path: '/api/domains/{id}/check-dns', cred: 'dashB', status: 404, code: 'domain_not_found' },
  { method: 'POST', path: '/api/domains/{id}/rotate-dkim', cred: 'dashB', status: 404, code: 'domain_not_found' },
  // Account A's free recipient and deletion job, by account B.
  { method: 'DELETE', path: '/api/public/v1/account/free-recipients/{id}', cred: 'tB1', status: 404, code: 'not_found' },
  { method: 'GET', path: '/api/public/v1/account/motor-block-deletions/{jobId}', cred: 'tB1', status: 404, code: 'motor_block_deletion_not_found' },
  // Account A's block through the account block routes, by account B (docs/BLOCKS.md "Grants": 404; the authorization check 403).
  { method: 'PATCH', path: '/api/public/v1/account/motor-blocks/{id}/name', cred: 'tB1', body: { name: 'taken over' }, status: 404, code: 'motor_block_not_found' },
  { method: 'PATCH', path: '/api/public/v1/account/motor-blocks/{id}/type', cred: 'tB1', body: { type: 'transactional', confirm: true }, status: 404, code: 'motor_block_not_found' },
  { method: 'POST', path: '/api/public/v1/account/motor-blocks/{id}/assign-domain', cred: 'tB1', body: { domainId: '{domainB1}', confirm: true }, status: 404, code: 'motor_block_not_found' },
  { method: 'POST', path: '/api/public/v1/account/motor-blocks/{id}/deactivate', cred: 'tB1', body: { confirm: true }, status: 404, code: 'motor_block_not_found' },
  { method: 'POST', path: '/api/public/v1/account/motor-blocks/{id}/reactivate', cred: 'tB1', status: 404, code: 'motor_block_not_found' },
  { method: 'DELETE', path: '/api/public/v1/account/motor-blocks/{id}', cred: 'tB1', body: { confirm: true, deleteHistory: true }, status: 404, code: 'motor_block_not_found' },
  { method: 'GET', path: '/api/public/v1/account/authorization/motor-blocks/{id}', cred: 'tB1', status: 403, code: 'motor_block_not_authorized' },
  // API keys: block A2's key through block A1's path; an account key as a block's; a key of account A by account B.
  { method: 'POST', path: '/api/motor-blocks/{id}/api-keys/{keyId}/rotate', cred: 'dashA', status: 404, code: 'api_key_not_found' },
  { method: 'DELETE', path: '/api/motor-blocks/{id}/api-keys/{keyId}', cred: 'dashA', status: 404, code: 'api_key_not_found' },
  { method: 'DELETE', path: '/api/motor-blocks/{id}/api-keys/{keyId}', cred: 'dashA', status: 404, code: 'api_key_not_found', ids: { keyId: 'accountKeyA' } },
  { method: 'DELETE', path: '/api/account/api-keys/{keyId}', cred: 'dashA', status: 404, code: 'api_key_not_found' },
  { method: 'DELETE', path: '/api/account/api-keys/{keyId}', cred: 'dashB', status: 404, code: 'api_key_not_found', ids: { keyId: 'accountKeyA' } },
];

/** Which fixture each path id names, per route family (a row's `ids` overrides). */
function idsOf(row: Row): Record<string, string> {
  const p = row.path;
  const ids: Record<string, string> =
    p.includes('/webhooks/') ? { id: 'A2', webhookId: 'webhookA1' }
      : p.startsWith('/api/public/v1/exports/') ? { jobId: 'exportA1' }
        : p.includes('/domains/') ? { id: 'domainA1' }
          : p.includes('/free-recipients/') ? { id: 'freeA' }
            : p.includes('/motor-block-deletions/') ? { jobId: 'deletionA' }
              : p.startsWith('/api/motor-blocks/') ? { id: 'A1', keyId: 'keyA2' }
                : p.startsWith('/api/account/api-keys/') ? { keyId: 'keyA2' }
                  : { id: 'A1' };
  return { ...ids, ...row.ids };
}

const spec = JSON.parse(readFileSync(join(__dirname, '../../read-api/generated/openapi.json'), 'utf8'));

describe('authorization table: another block\'s or account\'s resource on every route that names one (int)', function () {
  this.timeout(120_000);
  let h: AuthHarness;
  const c: Record<string, string> = {};
  const bearer = (t: string) => ({ authorization: `Bearer ${t}` });

  const call = async (method: string, path: string, headers: Record<string, string>, body?: unknown) => {
    const init: RequestInit = { method, headers: { ...headers } };
    if (body !== undefined) {
      init.body = JSON.stringify(body);
      (init.headers as Record<string, string>)['content-type'] = 'application/json';
    }
    const res = await fetch(`${h.motor.baseUrl}${path}`, init);
    const text = await res.text();
    let json: any; // eslint-disable-line @typescript-eslint/no-explicit-any
    try { json = JSON.parse(text); } catch { json = text; }
    return { status: res.status, body: json };
  };
  const ok = async (what: string, r: Promise<{ status: number; body: any }>, status: number) => { // eslint-disable-line @typescript-eslint/no-explicit-any
    const got = await r;
    if (got.status !== status) throw new Error(`${what}: ${got.status} ${JSON.stringify(got.body)}`);
    return got.body.data;
  };

  /** What the routes could have changed, read with the owner's credentials. */
  const snapshot = async () => ({
    webhooks: (await ok('webhooks', call('GET', `/api/public/v1/motor-blocks/${c.A1}/webhooks`, bearer(c.tA1)), 200) as Array<Record<string, unknown>>)
      .map((w) => ({ id: w.id, url: w.url, events: w.events, enabled: w.enabled })),
    export: (await ok('export', call('GET', `/api/public/v1/exports/${c.exportA1}`, bearer(c.tA1)), 200)).id,
    domain: (await ok('domains', call('GET', '/api/public/v1/domains', bearer(c.tA1)), 200) as Array<Record<string, unknown>>)
      .filter((d) => d.id === c.domainA1).map((d) => ({ id: d.id, name: d.name, records: d.records ?? d.dnsRecords ?? null })),
    freeRecipients: (await ok('free recipients', call('GET', '/api/public/v1/account/free-recipients', bearer(c.tA1)), 200)).recipients,
    // A3's deletion job runs meanwhile (deletion_queued, then gone): the blocks the routes were asked about.
    blocks: (await ok('blocks', call('GET', '/api/public/v1/account/motor-blocks', bearer(c.tA1)), 200) as Array<Record<string, unknown>>)
      .filter((b) => b.id === c.A1 || b.id === c.A2).map((b) => ({ id: b.id, name: b.name, type: b.type, status: b.status, domain: b.domain })),
    deletion: (await ok('deletion', call('GET', `/api/public/v1/account/motor-block-deletions/${c.deletionA}`, bearer(c.tA1)), 200)).jobId,
    blockKeys: (await ok('block keys', call('GET', `/api/motor-blocks/${c.A2}/api-keys`, bearer(c.dashA)), 200) as Array<Record<string, unknown>>).map((k) => [k.id, k.status]),
    suppressionsA1: (await ok('suppressions', call('GET', `/api/public/v1/motor-blocks/${c.A1}/suppressions?includePII=true`, bearer(c.tA1)), 200)).items,
    accountKeys: (await ok('account keys', call('GET', '/api/account/api-keys', bearer(c.dashA)), 200) as Array<Record<string, unknown>>).map((k) => [k.id, k.status]),
  });

  before(async () => {
    h = await startAuthHarness({ WEBHOOK_ALLOW_PRIVATE_URLS: 'true' });
    const a = await h.signUp('foreign-a@rcpt.test');
    const b = await h.signUp('foreign-b@rcpt.test');
    c.dashA = a.token;
    c.dashB = b.token;
    const [a1, a2, a3, b1] = [
      await createBlockFor(h.motor, a.accountId), await createBlockFor(h.motor, a.accountId),
      await createBlockFor(h.motor, a.accountId), await createBlockFor(h.motor, b.accountId),
    ];
    Object.assign(c, { A1: a1.motorBlockId, A2: a2.motorBlockId, A3: a3.motorBlockId, B1: b1.motorBlockId, domainA1: a1.domainId, domainB1: b1.domainId });
    // Tokens with every scope: only the resource's owner decides.
    const mint = async (dash: string, block: string) => (await ok('mint', call('POST', '/api/public/token', bearer(dash), { motorBlockId: block, scopes: [...SCOPES] }), 200)).token as string;
    c.tA1 = await mint(c.dashA, c.A1);
    c.tA2 = await mint(c.dashA, c.A2);
    c.tB1 = await mint(c.dashB, c.B1);
    c.webhookA1 = (await ok('webhook', call('POST', `/api/public/v1/motor-blocks/${c.A1}/webhooks`, bearer(c.tA1), { url: 'http://127.0.0.1:9/hook' }), 201)).id;
    c.exportA1 = (await ok('export', call('POST', `/api/public/v1/motor-blocks/${c.A1}/exports`, bearer(c.tA1), {}), 202)).jobId;
    await ok('free recipient', call('POST', '/api/public/v1/account/free-recipients', bearer(c.tA1), { email: 'friend@rcpt.test' }), 200);
    c.freeA = (await ok('free recipients', call('GET', '/api/public/v1/account/free-recipients', bearer(c.tA1)), 200)).recipients[0].id;
    await ok('deactivate', call('POST', `/api/public/v1/account/motor-blocks/${c.A3}/deactivate`, bearer(c.tA1), { confirm: true }), 200);
    c.deletionA = (await ok('delete', call('DELETE', `/api/public/v1/account/motor-blocks/${c.A3}`, bearer(c.tA1), { confirm: true, deleteHistory: true }), 202)).jobId;
    c.keyA2 = (await ok('block key', call('POST', `/api/motor-blocks/${c.A2}/api-keys`, bearer(c.dashA), {}), 201)).id;
    c.accountKeyA = (await ok('account key', call('POST', '/api/account/api-keys', bearer(c.dashA), {}), 201)).id;
    await eventually(async () => (await call('GET', `/api/public/v1/exports/${c.exportA1}`, bearer(c.tA1))).status === 200);
    // A hard bounce of a message of A1 (the harness has no MX to bounce it: the events the worker would append) puts the address on A1's list.
    const messageId = randomUUID();
    c.address = 'gone@rcpt.test';
    await h.motor.rt.store.append(`message-${messageId}`, [
      acceptedEvent(messageId, c.A1, [c.address], 0),
      recipientEvent('DeliveryBounced', messageId, c.address, 1000),
    ], { expectedRevision: 'no_stream' });
    await eventually(async () => (await call('GET', `/api/public/v1/motor-blocks/${c.A1}/suppressions`, bearer(c.tA1))).body.data.items.length === 1);
  });
  after(async () => { await h?.close(); });

  it('every route of the OpenAPI document with an id in its path has a row here or is covered elsewhere', () => {
    const missing: string[] = [];
    for (const [path, ops] of Object.entries(spec.paths as Record<string, Record<string, { security?: unknown[] }>>)) {
      for (const [method, op] of Object.entries(ops)) {
        if ((op.security ?? []).length === 0 || !path.includes('{')) continue;
        const name = `${method.toUpperCase()} ${path}`;
        if (ROWS.some((r) => `${r.method} ${r.path}` === name) || COVERED_ELSEWHERE.some((x) => x.pattern.test(path))) continue;
        missing.push(name);
      }
    }
    expect(missing, `routes without a foreign-resource case:\n${missing.join('\n')}`).to.deep.equal([]);
  });

  it('refuses each with its documented code, and changes nothing', async () => {
    const before = await snapshot();
    const fill = (s: string, ids: Record<string, string>) => s.replace(/\{(\w+)\}/g, (_, k: string) => c[ids[k] ?? k] ?? `{${k}}`);
    const failures: string[] = [];
    for (const row of ROWS) {
      const ids = idsOf(row);
      const body = row.body === undefined ? undefined : JSON.parse(fill(JSON.stringify(row.body), {}));
      const r = await call(row.method, fill(row.path, ids), bearer(c[row.cred]), body);
      if (r.status !== row.status || r.body?.code !== row.code) {
        failures.push(`${row.method} ${row.path} [${row.cred}]: expected ${row.status} ${row.code}, got ${r.status} ${r.body?.code ?? JSON.stringify(r.body).slice(0, 120)}`);
      }
    }
    expect(failures, failures.join('\n')).to.deep.equal([]);
    expect(await snapshot()).to.deep.equal(before);
  });
});
