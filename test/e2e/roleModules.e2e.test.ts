import { expect } from 'chai';
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { createTestDatabase, TEST_REDIS_URL } from '../support/db.js';

const run = promisify(execFile);
const ROOT = join(__dirname, '..', '..');

/**
 * Each role loads its own modules when it starts: in a fresh process, which of the role-specific
 * modules a given set of roles brought in (the runtime itself, as `npm start -- --role ...` builds it).
 */
async function modulesLoadedBy(roles: string[]): Promise<Record<string, boolean>> {
  const db = await createTestDatabase('roles');
  try {
    const script = `
      const { loadConfig } = require('./infra/config.ts');
      const { createLogger } = require('./infra/logger.ts');
      const { createRuntime, startRoles } = require('./scripts/runtime.ts');
      (async () => {
        const config = loadConfig({ LOG_LEVEL: 'silent', TOKEN_SECRET: 'test-token-secret-0123456789abcdef0123', SMTP_PORT: '0', SMTPS_PORT: '0' });
        const rt = await createRuntime(config, { databaseUrl: process.env.URL, redisUrl: process.env.REDIS, logger: createLogger('silent'), queuePrefix: 'roles-' + process.pid });
        const started = await startRoles(rt, ${JSON.stringify(roles)}, { port: 0, host: '127.0.0.1', smtpPort: 0, smtpsPort: 0 });
        const loaded = (p) => Object.keys(require.cache).some((k) => k.endsWith(p));
        console.log(JSON.stringify({
          api: loaded('read-api/app.ts'), worker: loaded('workers/deliveryWorker.ts'), smtp: loaded('smtp/listener.ts'),
        }));
        await started.stop();
        await rt.queue.obliterate({ force: true }).catch(() => {});
        await rt.close();
      })().catch((err) => { console.error(err); process.exit(1); });`;
    const { stdout } = await run(process.execPath, ['--import', 'tsx', '-e', script], { cwd: ROOT, env: { ...process.env, URL: db.url, REDIS: TEST_REDIS_URL }, timeout: 60_000 });
    return JSON.parse(stdout.trim().split('\n').pop()!);
  } finally {
    await db.drop();
  }
}

describe('role modules (fresh processes)', function () {
  this.timeout(120_000);

  it('a worker process loads the delivery engine but not the HTTP API or the SMTP listeners', async () => {
    expect(await modulesLoadedBy(['worker'])).to.deep.equal({ api: false, worker: true, smtp: false });
  });

  it('an api process loads the HTTP API only; all roles load everything', async () => {
    expect(await modulesLoadedBy(['api'])).to.deep.equal({ api: true, worker: false, smtp: false });
    expect(await modulesLoadedBy(['api', 'projector', 'worker', 'smtp'])).to.deep.equal({ api: true, worker: true, smtp: true });
  });
});
