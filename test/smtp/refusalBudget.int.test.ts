import { expect } from 'chai';
import { Redis } from 'ioredis';
import { createFastRedis } from '../../infra/redis';
import { createLogger } from '../../infra/logger';
import { RefusalEventBudget } from '../../smtp/refusalBudget';
import { TEST_REDIS_URL, useTestRedis } from '../support/db';

/**
 * The bound on SMTP refusal events (smtp/refusalBudget.ts) on real Redis: two budgets on one
 * prefix stand for two listener processes.
 */
describe('SMTP refusal event budget (int, real Redis)', () => {
  const t = useTestRedis('smtprefusals');
  const prefix = t.prefix;
  const logger = createLogger('silent');

  it('per scope and window: the first `limit` recorded, the rest counted; one summary (by whichever process counted first past the limit) takes them all', async () => {
    const a = new RefusalEventBudget(t.redis, { limit: 3, windowSeconds: 60 }, logger, prefix);
    const b = new RefusalEventBudget(t.redis, { limit: 3, windowSeconds: 60 }, logger, prefix);
    const summaries: Array<{ by: string; counted: number }> = [];
    const admit = (budget: RefusalEventBudget, by: string, scope = 'submission:x') =>
      budget.admit(scope, async (counted) => { summaries.push({ by, counted }); });

    // Ten refusals at once from two processes: exactly three recorded.
    const verdicts = await Promise.all(Array.from({ length: 10 }, (_, i) => admit(i % 2 ? a : b, i % 2 ? 'a' : 'b')));
    expect(verdicts.filter(Boolean)).to.have.length(3);
    // Another scope has its own count.
    expect(await admit(a, 'a', 'submission:y')).to.equal(true);

    // Stopping: the pending summary is appended now, with all seven counted by both.
    await Promise.all([a.flush(), b.flush()]);
    expect(summaries.map((s) => s.counted)).to.deep.equal([7]);
    // Flushed once: nothing left to append.
    await Promise.all([a.flush(), b.flush()]);
    expect(summaries).to.have.length(1);
  });

  it('at the window\'s end the summary is appended by itself, and the next window records again', async () => {
    const budget = new RefusalEventBudget(t.redis, { limit: 1, windowSeconds: 1 }, logger, prefix);
    const counted: number[] = [];
    const admit = () => budget.admit('auth:192.0.2.1', async (n) => { counted.push(n); });
    expect([await admit(), await admit(), await admit()]).to.deep.equal([true, false, false]);
    expect(counted).to.deep.equal([]);
    await new Promise((r) => setTimeout(r, 1300));
    expect(counted).to.deep.equal([2]);
    expect(await admit()).to.equal(true);
  });

  it('a count no summary took (its process died) goes into the scope\'s next summary', async () => {
    // The process that counts the first refusal past the limit loses Redis before its window ends.
    const deadRedis = createFastRedis(TEST_REDIS_URL);
    if (deadRedis.status !== 'ready') await new Promise((r) => deadRedis.once('ready', r));
    const dead = new RefusalEventBudget(deadRedis, { limit: 1, windowSeconds: 1 }, logger, prefix);
    const alive = new RefusalEventBudget(t.redis, { limit: 1, windowSeconds: 1 }, logger, prefix);
    const counted: number[] = [];
    const summarise = async (n: number) => { counted.push(n); };
    expect(await dead.admit('submission:z', summarise)).to.equal(true);
    expect(await dead.admit('submission:z', summarise)).to.equal(false);
    expect(await alive.admit('submission:z', summarise)).to.equal(false);
    deadRedis.disconnect();

    await new Promise((r) => setTimeout(r, 1200));
    expect(counted).to.deep.equal([]);
    expect(await alive.admit('submission:z', summarise)).to.equal(true);
    expect(await alive.admit('submission:z', summarise)).to.equal(false);
    await alive.flush();
    // The two of the lost window and the one of this one.
    expect(counted).to.deep.equal([3]);
  });

  it('Redis unavailable: every refusal is recorded (fail open)', async () => {
    const down = new Redis({ host: '127.0.0.1', port: 1, lazyConnect: true, enableOfflineQueue: false, maxRetriesPerRequest: 0 });
    const budget = new RefusalEventBudget(down, { limit: 1, windowSeconds: 60 }, logger, prefix);
    const verdicts = [];
    for (let i = 0; i < 3; i++) verdicts.push(await budget.admit('submission:w', async () => {}));
    expect(verdicts).to.deep.equal([true, true, true]);
    down.disconnect();
  });
});
