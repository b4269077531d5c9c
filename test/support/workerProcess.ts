import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { TEST_REDIS_URL } from './db';
import type { Role } from '../../scripts/runtime';
import type { TestMotor } from './motor';

const ROOT = join(__dirname, '..', '..');

/**
 * The worker role (`npm start -- --role worker`) in a fresh process on `motor`'s database, Redis
 * and queue prefix, configured by `env`; resolves once it runs. `clockOffsetMs` moves its clock
 * ahead (a test need not wait for a stale-attempt window). Crash tests kill it with SIGKILL. Its
 * database sessions name it as `npm start` does (`motor-worker@<host>:<pid>`), so a test can tell
 * which child holds a lease (infra/lease.ts leaseHolders).
 */
export function startWorkerProcess(motor: TestMotor, env: Record<string, string>, clockOffsetMs = 0): Promise<ChildProcess> {
  return startRoleProcess(motor, ['worker'], env, clockOffsetMs);
}

/** As startWorkerProcess, for any roles (`--role projector`: the projections, under their leases). */
export async function startRoleProcess(motor: TestMotor, roles: Role[], env: Record<string, string>, clockOffsetMs = 0): Promise<ChildProcess> {
  const script = `
    const { loadConfig } = require('./infra/config.ts');
    const { createLogger } = require('./infra/logger.ts');
    const { createRuntime, roleApplicationName, startRoles } = require('./scripts/runtime.ts');
    (async () => {
      const config = loadConfig(JSON.parse(process.env.MOTOR_ENV));
      const offset = Number(process.env.CLOCK_OFFSET_MS);
      const roles = JSON.parse(process.env.ROLES);
      const rt = await createRuntime(config, {
        databaseUrl: process.env.URL, redisUrl: process.env.REDIS, logger: createLogger('silent'), queuePrefix: process.env.PREFIX,
        clock: { now: () => new Date(Date.now() + offset) }, directoryTtlMs: 0, applicationName: roleApplicationName(roles),
      });
      await startRoles(rt, roles);
      console.log('ready');
    })().catch((err) => { console.error(err); process.exit(1); });`;
  const child = spawn(process.execPath, ['--import', 'tsx', '-e', script], {
    cwd: ROOT,
    env: {
      ...process.env, URL: motor.rt.databaseUrl, REDIS: process.env.TEST_REDIS_URL ?? TEST_REDIS_URL, PREFIX: motor.rt.queuePrefix,
      MOTOR_ENV: JSON.stringify(env), ROLES: JSON.stringify(roles), CLOCK_OFFSET_MS: String(clockOffsetMs),
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  await new Promise<void>((resolve, reject) => {
    child.stdout!.on('data', (d: Buffer) => { if (d.toString().includes('ready')) resolve(); });
    child.once('exit', (code) => reject(new Error(`${roles.join(',')} process exited (${code}) before it was ready`)));
  });
  return child;
}
