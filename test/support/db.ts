import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import pg from 'pg';
import { createFastRedis } from '../../infra/redis';

/** Server every integration test talks to: the machine's PostgreSQL (CI starts it). */
export const TEST_PG_ADMIN_URL = process.env.TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
export const TEST_REDIS_URL = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';

/**
 * A fresh, empty database for one test suite (so suites never see each other's rows), dropped by
 * the returned cleanup. Returns its connection string.
 */
export async function createTestDatabase(label = 't'): Promise<{ url: string; drop: () => Promise<void> }> {
  const name = `motor_${label.replace(/[^a-z0-9_]/gi, '').toLowerCase()}_${randomBytes(4).toString('hex')}`;
  const admin = new pg.Client({ connectionString: TEST_PG_ADMIN_URL });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${name}`);
  } finally {
    await admin.end();
  }
  const u = new URL(TEST_PG_ADMIN_URL);
  u.pathname = `/${name}`;
  return {
    url: u.toString(),
    drop: async () => {
      const c = new pg.Client({ connectionString: TEST_PG_ADMIN_URL });
      await c.connect();
      try {
        await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      } finally {
        await c.end();
      }
    },
  };
}

/**
 * A connected Redis client for the test file's hooks to use (set in its `before`), and a random
 * key prefix whose keys are deleted in its `after`, with the client. Call at describe level.
 */
export function useTestRedis(label: string): { readonly redis: Redis; readonly prefix: string } {
  const handle = { redis: undefined as unknown as Redis, prefix: `motor-test:${label}:${randomBytes(4).toString('hex')}` };
  before(async () => {
    handle.redis = createFastRedis(TEST_REDIS_URL);
    // No offline queue on this client: wait until it is connected.
    if (handle.redis.status !== 'ready') await new Promise((r) => handle.redis.once('ready', r));
  });
  after(async () => {
    const keys = await handle.redis.keys(`${handle.prefix}*`);
    if (keys.length > 0) await handle.redis.del(...keys);
    handle.redis.disconnect();
  });
  return handle;
}
