import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { loadConfig, type Config } from '../../infra/config';
import { createLogger } from '../../infra/logger';
import { bootstrap, setBlockLimits, type BootstrapResult } from '../../commands/admin/bootstrap';
import { directoryProjection } from '../../projections/directory/projection';
import { ProjectionRunner } from '../../projections/runner';
import { catchUpUntil, createRuntime, startRoles, type Role, type Runtime, type StartedRoles } from '../../scripts/runtime';
import { findApiKeyByPrefix, getBlock } from '../../projections/directory/queries';
import { parseApiKey } from '../../domain/credentials/apiKeys';
import { createTestDatabase, TEST_REDIS_URL } from './db';

/**
 * A whole Motor (API, projectors, delivery workers) on a fresh database, the machine's Redis (a
 * queue prefix of its own) and an ephemeral HTTP port, configured like production through
 * loadConfig. Tests talk to it over real HTTP.
 */
export interface TestMotor {
  baseUrl: string;
  rt: Runtime;
  started: StartedRoles;
  config: Config;
  /** `npm run cli -- bootstrap` equivalent; directory caught up on return. */
  bootstrap(opts?: { email?: string; domain?: string; trustDns?: boolean; dkim?: 'rsa' | 'ed25519' }): Promise<BootstrapResult>;
  setLimits(motorBlockId: string, limits: { burst: number; hourly: number; daily: number }): Promise<void>;
  /** Mints a public bearer token with the account key. */
  token(b: BootstrapResult, scopes?: string[], ttlSeconds?: number): Promise<string>;
  close(): Promise<void>;
}

/**
 * `redisUrl` overrides the test Redis (e.g. a port nobody listens on, to test Redis being down);
 * `logLines` collects every log line at trace level instead of the silent default; `port` fixes the
 * HTTP port (for a config that must name Motor's own URL), else an ephemeral one; `databasePort`
 * has Motor reach its database through that port on 127.0.0.1 (a proxy in front of PostgreSQL:
 * test/support/pausableProxy.ts).
 */
export async function startTestMotor(
  opts: { env?: Record<string, string>; roles?: Role[]; redisUrl?: string; logLines?: string[]; port?: number; databasePort?: number } = {},
): Promise<TestMotor> {
  const db = await createTestDatabase('motor');
  const databaseUrl = new URL(db.url);
  if (opts.databasePort !== undefined) {
    databaseUrl.hostname = '127.0.0.1';
    databaseUrl.port = String(opts.databasePort);
  }
  // The tests' MX hosts listen on loopback: delivery may connect there (MX_ALLOW_PRIVATE_ADDRESSES).
  const config = loadConfig({ LOG_LEVEL: 'silent', TOKEN_SECRET: 'test-token-secret-0123456789abcdef0123', MX_ALLOW_PRIVATE_ADDRESSES: 'true', ...opts.env });
  const lines = opts.logLines;
  const logger = lines
    ? createLogger('trace', {}, { write: (line: string) => { lines.push(line); } })
    : createLogger(process.env.TEST_LOG_LEVEL ?? 'silent');
  const rt = await createRuntime(config, {
    databaseUrl: databaseUrl.toString(), redisUrl: opts.redisUrl ?? process.env.TEST_REDIS_URL ?? TEST_REDIS_URL, logger, directoryTtlMs: 0,
    queuePrefix: `motor-test-${randomBytes(4).toString('hex')}`,
  });
  // The inbound listener (when the roles name it) on a free port: the setting's 0 means off.
  const started = await startRoles(rt, opts.roles ?? ['api', 'projector', 'worker'], { port: opts.port ?? 0, host: '127.0.0.1', inboundPort: 0 });
  const baseUrl = `http://127.0.0.1:${started.port}`;
  const runner = new ProjectionRunner(rt.db, rt.store, directoryProjection);
  return {
    baseUrl, rt, started, config,
    async bootstrap(b = {}) {
      const result = await bootstrap(rt.store, rt.keys, {
        email: b.email ?? 'owner@example.test', domain: b.domain ?? `d${randomBytes(4).toString('hex')}.example.test`,
        trustDns: b.trustDns ?? true, dkimAlgorithm: b.dkim === 'ed25519' ? 'ed25519-sha256' : 'rsa-sha256',
        plan: config.defaultPlan.name, serviceDomain: config.serviceDomain, now: new Date(),
      });
      const prefix = parseApiKey(result.accountApiKey)!.prefix;
      // The block too: bootstrap appends the keys before the block, and a projector running beside this runner may show one without the other.
      await catchUpUntil(runner, async () => (await findApiKeyByPrefix(rt.db, prefix)) !== null && (await getBlock(rt.db, result.motorBlockId)) !== null);
      return result;
    },
    async setLimits(id, limits) {
      await setBlockLimits(rt.store, id, limits, new Date());
      await catchUpUntil(runner, async () => (await getBlock(rt.db, id))?.limits.burst === limits.burst);
    },
    async token(b, scopes, ttlSeconds) {
      const res = await fetch(`${baseUrl}/api/public/token/account-key`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `ApiKey ${b.accountApiKey}` },
        body: JSON.stringify({ motorBlockId: b.motorBlockId, ...(scopes ? { scopes } : {}), ...(ttlSeconds ? { ttlSeconds } : {}) }),
      });
      const body = (await res.json()) as { data?: { token: string } };
      if (!res.ok || !body.data) throw new Error(`token minting failed: ${res.status} ${JSON.stringify(body)}`);
      return body.data.token;
    },
    async close() {
      await started.stop();
      await rt.close();
      await db.drop();
    },
  };
}

/**
 * Holds a projection back: takes, from a session of its own, the advisory lock its projector takes
 * for every batch (projections/runner.ts). The projector then waits on it and applies nothing until
 * the returned release, while the others go on. Releasing twice is harmless (for a `finally`).
 */
export async function holdProjection(motor: TestMotor, schema: string): Promise<() => Promise<void>> {
  const client = new pg.Client({ connectionString: motor.rt.databaseUrl });
  await client.connect();
  await client.query('select pg_advisory_lock(hashtext($1))', [`motor.projection:${schema}`]);
  let held = true;
  return async () => {
    if (!held) return;
    held = false;
    await client.query('select pg_advisory_unlock(hashtext($1))', [`motor.projection:${schema}`]);
    await client.end();
  };
}

/**
 * A response's text; for an event stream that opened (it never ends by itself), its first chunk,
 * then the connection is dropped. For sweeps that call every route.
 */
export async function answerText(res: Response): Promise<string> {
  if (res.status !== 200 || !(res.headers.get('content-type') ?? '').startsWith('text/event-stream')) return res.text();
  const reader = res.body!.getReader();
  const { value } = await reader.read();
  await reader.cancel();
  return new TextDecoder().decode(value);
}

/** POST JSON and return status, headers and parsed body. */
/** Waits, if needed, so that the next few requests fall inside one fixed one-minute window (the API request limit's). */
export async function awayFromMinuteEdge(marginSeconds = 8): Promise<void> {
  const left = 60 - (Math.floor(Date.now() / 1000) % 60);
  if (left <= marginSeconds) await new Promise((r) => setTimeout(r, left * 1000 + 100));
}

export async function postJson(url: string, body: unknown, headers: Record<string, string> = {}) {
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: typeof body === 'string' ? body : JSON.stringify(body) });
  const text = await res.text();
  let json: any; // eslint-disable-line @typescript-eslint/no-explicit-any
  try { json = JSON.parse(text); } catch { json = text; }
  return { status: res.status, headers: res.headers, body: json };
}

export async function getJson(url: string, headers: Record<string, string> = {}) {
  const res = await fetch(url, { headers });
  const text = await res.text();
  let json: any; // eslint-disable-line @typescript-eslint/no-explicit-any
  try { json = JSON.parse(text); } catch { json = text; }
  return { status: res.status, headers: res.headers, body: json };
}

/** Polls until fn returns a truthy value other than an empty array (or throws after timeoutMs). */
export async function eventually<T>(fn: () => Promise<T | null | undefined | false>, timeoutMs = 10_000, everyMs = 50): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    let v: T | null | undefined | false = undefined;
    try {
      v = await fn();
    } catch (e) {
      last = e;
    }
    // An empty array is truthy, but what it says is "nothing yet": wait on.
    if (v && !(Array.isArray(v) && v.length === 0)) return v;
    if (Date.now() > deadline) throw new Error(`condition not met within ${timeoutMs} ms${last ? `: ${(last as Error).message}` : ''}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}
