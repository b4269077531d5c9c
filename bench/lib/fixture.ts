/**
 * The benchmark fixture, parent side: an own test database (createTestDatabase), an own queue
 * prefix on the machine's Redis, a Motor Runtime with no roles started (for bootstrap, limits and
 * checks against the store), and cleanup of all of it (database dropped, queue obliterated, the
 * block's quota and request-limit keys deleted).
 */
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { bootstrap, setBlockLimits, type BootstrapResult } from '../../commands/admin/bootstrap';
import { parseApiKey } from '../../domain/credentials/apiKeys';
import { loadConfig, type Config } from '../../infra/config';
import { createLogger } from '../../infra/logger';
import { directoryProjection } from '../../projections/directory/projection';
import { findApiKeyByPrefix, getBlock } from '../../projections/directory/queries';
import { ProjectionRunner } from '../../projections/runner';
import { catchUpUntil, createRuntime, type Runtime } from '../../scripts/runtime';
import { createTestDatabase, TEST_REDIS_URL } from '../../test/support/db';
import { onCleanup } from './common';

/** Environment every Motor of a benchmark runs with (children get the same through MOTOR_ENV). */
export function benchEnv(extra: Record<string, string> = {}): Record<string, string> {
  return {
    LOG_LEVEL: process.env.BENCH_LOG_LEVEL ?? 'error',
    TOKEN_SECRET: 'bench-token-secret-0123456789abcdef0123456789',
    KEY_ENCRYPTION_KEY: 'bench-key-encryption-key-0123456789abcdef0123',
    // The per-credential API request limit (600/min by default) would refuse a benchmark.
    API_REQUEST_LIMIT: '1000000',
    ...extra,
  };
}

export interface Fixture {
  databaseUrl: string;
  redisUrl: string;
  queuePrefix: string;
  config: Config;
  env: Record<string, string>;
  rt: Runtime;
  block: BootstrapResult;
  senderDomain: string;
  /** Number of events of a type in the store. */
  countEvents(type: string): Promise<number>;
}

export async function createFixture(label: string, env: Record<string, string>): Promise<Fixture> {
  const db = await createTestDatabase(`bench_${label}`);
  // BENCH_KEEP_DB=1 keeps the database for a look afterwards (its URL is printed); drop it by hand.
  if (process.env.BENCH_KEEP_DB === '1') console.log(`database kept: ${db.url}`);
  else onCleanup(`drop database (${label})`, () => db.drop());
  const redisUrl = process.env.TEST_REDIS_URL ?? TEST_REDIS_URL;
  const queuePrefix = `motor-bench-${label}-${randomBytes(4).toString('hex')}`;
  const config = loadConfig(env);
  const rt = await createRuntime(config, { databaseUrl: db.url, redisUrl, logger: createLogger('silent'), queuePrefix });
  onCleanup(`runtime (${label})`, async () => {
    await rt.queue.obliterate({ force: true }).catch(() => undefined);
    await rt.close();
  });

  const block = await bootstrap(rt.store, rt.keys, {
    email: 'bench@example.test', domain: `bench-${randomBytes(3).toString('hex')}.example.test`, trustDns: true,
    dkimAlgorithm: 'rsa-sha256', plan: config.defaultPlan.name, serviceDomain: config.serviceDomain, now: new Date(),
  });
  onCleanup(`redis keys (${label})`, () => deleteKeys(redisUrl, [
    `quota:block:{${block.motorBlockId}}:*`, `quota:acct:{${block.accountId}}:*`, `${queuePrefix}:*`,
  ]));
  // Quota limits high enough that the benchmark is never refused (burst <= hourly <= daily).
  await setBlockLimits(rt.store, block.motorBlockId, { burst: 100_000_000, hourly: 500_000_000, daily: 1_000_000_000 }, new Date());
  const runner = new ProjectionRunner(rt.db, rt.store, directoryProjection);
  const prefix = parseApiKey(block.apiKey)!.prefix;
  await catchUpUntil(runner, async () =>
    (await findApiKeyByPrefix(rt.db, prefix)) !== null && (await getBlock(rt.db, block.motorBlockId))?.limits.burst === 100_000_000);

  return {
    databaseUrl: db.url, redisUrl, queuePrefix, config, env, rt, block,
    senderDomain: block.dnsRecords.find((r) => r.purpose === 'spf')!.name,
    async countEvents(type) {
      const r = await rt.db.raw('select count(*)::int as n from events where type = ?', [type]);
      return r.rows[0].n as number;
    },
  };
}

/** Deletes keys by pattern (request-limit keys `reqlimit:*` are left: they expire after 120 s). */
async function deleteKeys(redisUrl: string, patterns: string[]): Promise<void> {
  const redis = new Redis(redisUrl, { maxRetriesPerRequest: 1, lazyConnect: true });
  try {
    await redis.connect();
    for (const pattern of patterns) {
      let cursor = '0';
      do {
        const [next, keys] = await redis.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
        cursor = next;
        if (keys.length > 0) await redis.del(...keys);
      } while (cursor !== '0');
    }
  } finally {
    redis.disconnect();
  }
}

/** Arguments a Motor child needs (see motorChild.ts). */
export function motorChildEnv(f: Fixture, roles: string[], extraEnv: Record<string, string> = {}): Record<string, string> {
  return {
    MOTOR_CHILD: JSON.stringify({ databaseUrl: f.databaseUrl, redisUrl: f.redisUrl, queuePrefix: f.queuePrefix, roles, env: { ...f.env, ...extraEnv } }),
  };
}
