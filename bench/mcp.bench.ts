/**
 * bench:mcp — what one request to an agent-tool (MCP) server costs (docs/MCP.md "What a request
 * costs"): requests per second and latency of `tools/list` and of one read-only `tools/call`
 * (`list_motor_blocks`) on /v1/service/mcp under autocannon, with a fresh grant (three events on
 * its stream) and with a grant whose refresh token was rotated ROTATIONS times (its stream holds
 * that many more events, as a connection kept alive for months does). Next to them, measured in the
 * same run against the same process: the server's protected-resource metadata (a GET with no
 * credential and a fixed JSON answer: the app's floor) and `ping` with the fresh grant (the token
 * check, the request limit and the MCP transport, without a tool).
 *
 * Settings (env or --arg=value):
 *   MCP_DURATION / --duration        measured seconds per run (default 5)
 *   MCP_WARMUP / --warmup            warm-up seconds before each measured run (default 2)
 *   MCP_CONNECTIONS / --connections  autocannon connections (default 10)
 *   MCP_ROTATIONS / --rotations      refresh rotations of the long-lived grant (default 2000)
 *   MCP_ROUNDS / --rounds            passes over every case (default 1; throughput summed, latency median)
 *   BENCH_CPU_PROF=<dir>             --cpu-prof the Motor process
 */
import { randomBytes } from 'node:crypto';
import { streamName, type EventStore } from '../domain/eventStore';
import { toEventData, type DomainEvent } from '../domain/events';
import { newId } from '../domain/ids';
import { MCP_SERVERS, resourceUri, type AgentScope } from '../domain/oauth/agent';
import { OAUTH_RULES } from '../domain/oauth/grant';
import { signAgentToken } from '../commands/oauth/agentTokens';
import { fmt, intSetting, machine, runBench, sleep, spawnChild, table } from './lib/common';
import { cpuPerItem, cpuSnapshot } from './lib/cpu';
import { benchEnv, createFixture, motorChildEnv, type Fixture } from './lib/fixture';
import { runLoad, type LoadResult } from './lib/load';

const DURATION = intSetting('MCP_DURATION', 'duration', 5);
const WARMUP = intSetting('MCP_WARMUP', 'warmup', 2);
const CONNECTIONS = intSetting('MCP_CONNECTIONS', 'connections', 10);
const ROTATIONS = intSetting('MCP_ROTATIONS', 'rotations', 2000);
const ROUNDS = Math.max(1, intSetting('MCP_ROUNDS', 'rounds', 1));

const SERVER = MCP_SERVERS.find((s) => s.path === '/v1/service/mcp')!;

/**
 * A connection of the whole-account server as the OAuth flow records it (consent, code, first
 * token) followed by `rotations` refresh rotations, and an access token of its last token id.
 */
async function agentGrant(f: Fixture, store: EventStore, rotations: number): Promise<{ grantId: string; accessToken: string }> {
  const grantId = newId();
  const userId = newId();
  const clientId = 'https://agent.example.test/client.json';
  const resource = resourceUri(f.config.mcpPublicUrl, SERVER.path);
  const now = new Date();
  const iso = (ms: number) => new Date(now.getTime() + ms).toISOString();
  const hash = () => randomBytes(32).toString('hex');
  let tokenId = newId();
  let refreshHash = hash();
  const events: DomainEvent[] = [
    { type: 'OAuthConsentRequested', data: {
      grantId, clientId, accountId: f.block.accountId, userId, sessionId: newId(), redirectUri: 'https://agent.example.test/callback',
      scope: SERVER.scopes.join(' '), state: null, motorBlockId: null, formTokenHash: hash(), expiresAt: iso(OAUTH_RULES.consentTtlMs),
      requestedAt: now.toISOString(), resource, codeChallenge: randomBytes(32).toString('base64url').slice(0, 43), clientName: 'Bench agent',
    } },
    { type: 'OAuthCodeIssued', data: { grantId, motorBlockId: null, codeHash: hash(), expiresAt: iso(OAUTH_RULES.codeTtlMs), issuedAt: now.toISOString() } },
    { type: 'OAuthTokenIssued', data: {
      grantId, tokenId, refreshTokenHash: refreshHash, accessExpiresAt: iso(OAUTH_RULES.accessTtlSeconds * 1000), refreshExpiresAt: iso(OAUTH_RULES.refreshTtlMs), issuedAt: now.toISOString(),
    } },
  ];
  for (let i = 0; i < rotations; i++) {
    const next = hash();
    tokenId = newId();
    events.push({ type: 'OAuthRefreshRotated', data: {
      grantId, tokenId, previousHash: refreshHash, refreshTokenHash: next, accessExpiresAt: iso(OAUTH_RULES.accessTtlSeconds * 1000),
      refreshExpiresAt: iso(OAUTH_RULES.refreshTtlMs), at: now.toISOString(),
    } });
    refreshHash = next;
  }
  const stream = streamName('oauthGrant', grantId);
  for (let i = 0; i < events.length; i += 500) {
    await store.append(stream, events.slice(i, i + 500).map((e) => toEventData(newId(), e)), { expectedRevision: i === 0 ? 'no_stream' : BigInt(i - 1) });
  }
  const { token } = await signAgentToken({ keys: f.rt.keys, config: f.config }, {
    tokenId, grantId, clientId, userId, accountId: f.block.accountId, resource, scopes: [...SERVER.scopes] as AgentScope[],
  }, now, OAUTH_RULES.accessTtlSeconds);
  return { grantId, accessToken: token };
}

interface Case { name: string; method: 'GET' | 'POST'; url: string; body: string; headers: Record<string, string> }

runBench('bench:mcp', 120 + ROUNDS * 6 * (DURATION + WARMUP + 5), async () => {
  console.log(`bench:mcp — ${machine()}`);
  console.log(`duration ${DURATION}s (+${WARMUP}s warm-up) × ${ROUNDS} round(s), ${CONNECTIONS} connections (closed loop), long-lived grant: ${fmt(ROTATIONS)} refresh rotations\n`);

  const f = await createFixture('mcp', benchEnv());
  const fresh = await agentGrant(f, f.rt.store, 0);
  const long = await agentGrant(f, f.rt.store, ROTATIONS);

  const motor = spawnChild('motorChild.ts', 'motor-mcp', motorChildEnv(f, ['api']));
  const { port } = await motor.next<{ port: number }>('ready');
  const base = `http://127.0.0.1:${port}`;
  const mcp = `${base}${SERVER.path}`;
  const rpc = (method: string, params: Record<string, unknown>) => JSON.stringify({ jsonrpc: '2.0', id: 1, method, params });
  const as = (token: string) => ({ authorization: `Bearer ${token}`, accept: 'application/json, text/event-stream' });
  const list = rpc('tools/list', {});
  const callTool = rpc('tools/call', { name: 'list_motor_blocks', arguments: {} });

  const cases: Case[] = [
    { name: 'metadata GET (no credential): floor', method: 'GET', url: `${base}/.well-known/oauth-protected-resource${SERVER.path}`, body: '', headers: {} },
    { name: 'ping, fresh grant', method: 'POST', url: mcp, body: rpc('ping', {}), headers: as(fresh.accessToken) },
    { name: 'tools/list, fresh grant', method: 'POST', url: mcp, body: list, headers: as(fresh.accessToken) },
    { name: 'tools/call list_motor_blocks, fresh grant', method: 'POST', url: mcp, body: callTool, headers: as(fresh.accessToken) },
    { name: `tools/list, ${fmt(ROTATIONS)} rotations`, method: 'POST', url: mcp, body: list, headers: as(long.accessToken) },
    { name: `tools/call list_motor_blocks, ${fmt(ROTATIONS)} rotations`, method: 'POST', url: mcp, body: callTool, headers: as(long.accessToken) },
  ];

  // One request of each first: every case answers 200 with a JSON-RPC result (no error, no isError) before anything is measured.
  for (const c of cases) {
    const res = await fetch(c.url, { method: c.method, headers: { ...(c.method === 'POST' ? { 'content-type': 'application/json' } : {}), ...c.headers }, body: c.method === 'POST' ? c.body : undefined });
    const text = await res.text();
    const json = JSON.parse(text) as { error?: unknown; result?: { isError?: boolean; tools?: unknown[] } };
    if (res.status !== 200 || (c.method === 'POST' && (json.error !== undefined || json.result === undefined || json.result.isError))) {
      throw new Error(`${c.name}: ${res.status} ${text.slice(0, 500)}`);
    }
    if (json.result?.tools) console.log(`tools/list answers ${json.result.tools.length} tools in ${fmt(Buffer.byteLength(text))} bytes`);
  }

  const results = new Map<string, LoadResult[]>(cases.map((c) => [c.name, []]));
  for (let round = 1; round <= ROUNDS; round++) {
    for (const c of cases) {
      const load = { url: c.url, method: c.method, body: c.body, headers: c.headers, connections: CONNECTIONS };
      if (WARMUP > 0) await runLoad({ ...load, duration: WARMUP });
      const cpu0 = cpuSnapshot([motor.proc.pid!]);
      const r = await runLoad({ ...load, duration: DURATION });
      const cpu1 = cpuSnapshot([motor.proc.pid!]);
      results.get(c.name)!.push(r);
      console.log(`round ${round} ${c.name}: ${fmt(r.rps)} req/s, p50 ${r.p50} ms, p99 ${r.p99} ms, non-2xx ${r.non2xx}, errors ${r.errors}, timeouts ${r.timeouts}, load generator ${fmt(r.clientCores, 2)} cores${r.non2xx ? ` ${JSON.stringify(r.statusCodes)}` : ''}\n` +
        `        CPU per request: ${cpuPerItem(cpu0, cpu1, r.requests)}`);
      await sleep(500);
    }
  }
  await motor.stop();

  const agg = (rs: LoadResult[]) => {
    const ok = rs.reduce((s, r) => s + r.ok, 0);
    const secs = rs.reduce((s, r) => s + r.durationS, 0);
    const med = (k: 'p50' | 'p99') => [...rs.map((r) => r[k])].sort((a, b) => a - b)[Math.floor(rs.length / 2)];
    return { rps: ok / secs, p50: med('p50'), p99: med('p99'), failed: rs.reduce((s, r) => s + r.non2xx + r.errors + r.timeouts, 0) };
  };
  const floor = agg(results.get(cases[0].name)!);
  console.log('\n' + table(['', 'req/s', 'p50 ms', 'p99 ms', 'non-2xx/errors', 'ratio to floor'], cases.map((c) => {
    const a = agg(results.get(c.name)!);
    return [c.name, fmt(a.rps), a.p50, a.p99, a.failed, fmt(a.rps / floor.rps, 2)];
  })));
  const failed = cases.reduce((s, c) => s + agg(results.get(c.name)!).failed, 0);
  if (failed > 0) {
    console.log(`\n${failed} requests failed: the figures above are not comparable`);
    process.exitCode = 2;
  }
});
