import { randomBytes } from 'node:crypto';
import pg from 'pg';

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
