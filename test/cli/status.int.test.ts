import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { expect } from 'chai';
import { allProjections } from '../../projections';
import { createDeliveryQueue } from '../../workers/queue';
import { CHECKPOINTS, initCheckpoints } from '../../workers/logEnqueuer';
import { QUEUE_NAMES, type SystemStatus } from '../../scripts/status';
import { eventually, startTestMotor, type TestMotor } from '../support/motor';

const run = promisify(execFile);

/** `npm run cli -- status` (scripts/status.ts) against a running Motor: store, read models, queues; Redis down. */
describe('CLI status (int)', function () {
  this.timeout(120_000);
  let motor: TestMotor;

  before(async () => {
    // No worker role: nothing takes the job the test queues.
    motor = await startTestMotor({ roles: ['api', 'projector'] });
    await motor.bootstrap();
  });
  after(async () => { await motor?.close(); });

  const status = async (env: Record<string, string> = {}): Promise<{ code: number; out: SystemStatus; ms: number }> => {
    const started = Date.now();
    const args = ['tsx', 'scripts/cli.ts', 'status', '--queue-prefix', motor.rt.queuePrefix, '--json'];
    const options = { env: { ...process.env, DATABASE_URL: motor.rt.databaseUrl, REDIS_URL: motor.rt.redisUrl, TOKEN_SECRET: 'test-token-secret-0123456789abcdef0123', LOG_LEVEL: 'silent', ...env } };
    try {
      const { stdout } = await run('npx', args, options);
      return { code: 0, out: JSON.parse(stdout) as SystemStatus, ms: Date.now() - started };
    } catch (err) {
      const e = err as { code?: number; stdout?: string };
      return { code: e.code ?? -1, out: JSON.parse(e.stdout ?? 'null') as SystemStatus, ms: Date.now() - started };
    }
  };

  it('reports the store, every read model with its lag, and each queue\'s jobs by state', async () => {
    const queue = createDeliveryQueue(motor.rt.redisUrl, motor.rt.queuePrefix);
    try {
      await queue.add('deliver', { messageId: 'status-test' }, { jobId: 'status-test', delay: 600_000 });
    } finally {
      await queue.close();
    }
    const { code, out } = await eventually(async () => {
      const s = await status();
      return s.out.projections.every((p) => p.eventsBehind === 0) ? s : null;
    }, 30_000);
    expect(code).to.equal(0);
    expect(out.ok).to.equal(true);
    expect(out.store).to.deep.equal({ ok: true });
    expect(out.redis).to.deep.equal({ ok: true });
    expect(out.projections.map((p) => p.name)).to.deep.equal(allProjections().map((p) => p.name));
    for (const p of out.projections) expect(p.error, p.name).to.equal(undefined);
    expect(out.projections.find((p) => p.name === 'directory')!.checkpoint, 'the bootstrap was applied').to.be.a('string');
    expect(out.consumers, 'no worker role ran here: no enqueuer checkpoints').to.deep.equal([]);
    expect(Object.keys(out.queues)).to.deep.equal([...QUEUE_NAMES]);
    expect(out.queues['motor-delivery']).to.include({ delayed: 1, waiting: 0, failed: 0 });
    expect(out.queues['motor-webhooks']).to.deep.equal({ waiting: 0, active: 0, delayed: 0, prioritized: 0, 'waiting-children': 0, failed: 0, completed: 0 });
  });

  it('lists the queue feeders\' checkpoints with when they last moved', async () => {
    await initCheckpoints(motor.rt.db);
    const at = new Date('2026-11-24T12:00:00.000Z');
    await motor.rt.db.table(CHECKPOINTS).insert([{ name: 'webhook-dispatcher', position: '42', updated_at: at }, { name: 'delivery-enqueuer', position: null, updated_at: at }]);
    const { out } = await status();
    expect(out.consumers).to.deep.equal([
      { name: 'delivery-enqueuer', checkpoint: null, updatedAt: at.toISOString() },
      { name: 'webhook-dispatcher', checkpoint: '42', updatedAt: at.toISOString() },
    ]);
  });

  it('with Redis unreachable: redis not ok, no queues, exit code 1, and it does not hang', async () => {
    const { code, out, ms } = await status({ REDIS_URL: 'redis://127.0.0.1:1' });
    expect(code).to.equal(1);
    expect(out.ok).to.equal(false);
    expect(out.redis.ok).to.equal(false);
    expect(out.redis.error).to.be.a('string');
    expect(out.queues).to.deep.equal({});
    expect(out.store.ok, 'the store still answers').to.equal(true);
    expect(ms, 'answered promptly').to.be.below(30_000);
  });
});
