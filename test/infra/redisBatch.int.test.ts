import { createServer, type AddressInfo } from 'node:net';
import { expect } from 'chai';
import { createFastRedis } from '../../infra/redis';
import { MAX_OPERATIONS_PER_CALL, RedisBatch } from '../../infra/redisBatch';
import { RequestLimiter } from '../../commands/quota/requestLimiter';
import { quotaKeys, SendQuota } from '../../commands/quota/sendQuota';
import { useTestRedis } from '../support/db';

const INCRBY = { keys: 1, args: 1, lua: `return {redis.call('INCRBY', K[1], tonumber(A[1]))}` };
const GET_PAIR = { keys: 2, args: 0, lua: `return {tonumber(redis.call('GET', K[1]) or '-1'), tonumber(redis.call('GET', K[2]) or '-1')}` };

describe('RedisBatch: the request path\'s operations of one loop turn in one script call (real Redis)', () => {
  const t = useTestRedis('batch');
  const prefix = t.prefix;

  it('operations asked for in one turn go out as one script call, each caller getting its own reply', async () => {
    const batch = new RedisBatch(t.redis);
    batch.define('incrby', INCRBY);
    batch.define('pair', GET_PAIR);
    const replies = await Promise.all(Array.from({ length: 10 }, (_, i) => batch.run('incrby', [`${prefix}:n${i}`], [i + 1])));
    expect(replies).to.deep.equal([[1], [2], [3], [4], [5], [6], [7], [8], [9], [10]]);
    expect(batch.stats).to.deep.equal({ calls: 1, operations: 10 });
    // Different operations in one call, in the order asked; later turns make new calls.
    const [a, b, c] = await Promise.all([
      batch.run('pair', [`${prefix}:n3`, `${prefix}:none`], []),
      batch.run('incrby', [`${prefix}:n3`], [10]),
      batch.run('pair', [`${prefix}:n3`, `${prefix}:n9`], []),
    ]);
    expect([a, b, c]).to.deep.equal([[4, -1], [14], [14, 10]]);
    await new Promise((r) => setImmediate(r));
    expect(await batch.run('incrby', [`${prefix}:n9`], [0])).to.deep.equal([10]);
    expect(batch.stats).to.deep.equal({ calls: 3, operations: 14 });
  });

  it('one failing operation fails only its own caller; the others of its call run', async () => {
    const batch = new RedisBatch(t.redis);
    batch.define('incrby', INCRBY);
    await t.redis.set(`${prefix}:text`, 'not a number');
    const [ok, bad, ok2] = await Promise.allSettled([
      batch.run('incrby', [`${prefix}:a`], [1]),
      batch.run('incrby', [`${prefix}:text`], [1]),
      batch.run('incrby', [`${prefix}:b`], [1]),
    ]);
    expect(ok).to.deep.equal({ status: 'fulfilled', value: [1] });
    expect(bad.status).to.equal('rejected');
    expect(String((bad as PromiseRejectedResult).reason)).to.match(/not an integer/);
    expect(ok2).to.deep.equal({ status: 'fulfilled', value: [1] });
    expect(batch.stats.calls).to.equal(1);
  });

  it('a call with the wrong number of keys or arguments, or of an unknown operation, is refused before anything is sent', async () => {
    const batch = new RedisBatch(t.redis);
    batch.define('incrby', INCRBY);
    const results = await Promise.allSettled([
      batch.run('incrby', [`${prefix}:x`, `${prefix}:y`], [1]),
      batch.run('incrby', [`${prefix}:x`], []),
      batch.run('nothing', [], []),
    ]);
    expect(results.map((r) => r.status)).to.deep.equal(['rejected', 'rejected', 'rejected']);
    expect(batch.stats.calls).to.equal(0);
    expect(await t.redis.exists(`${prefix}:x`)).to.equal(0);
    expect(() => batch.define('incrby', { ...INCRBY, lua: 'return {1}' })).to.throw(/defined twice/);
  });

  it(`more than ${MAX_OPERATIONS_PER_CALL} operations in a turn are split over calls, every one answered`, async () => {
    const batch = new RedisBatch(t.redis);
    batch.define('incrby', INCRBY);
    const n = MAX_OPERATIONS_PER_CALL * 2 + 7;
    const replies = await Promise.all(Array.from({ length: n }, () => batch.run('incrby', [`${prefix}:many`], [1])));
    expect(replies.map(([v]) => v)).to.deep.equal(Array.from({ length: n }, (_, i) => i + 1));
    expect(batch.stats).to.deep.equal({ calls: 3, operations: n });
  });

  it('the limiter and the quota share the calls: concurrent hits and charges count exactly', async () => {
    const batch = new RedisBatch(t.redis);
    const limiter = new RequestLimiter(t.redis, 30, batch);
    const quota = new SendQuota(t.redis, batch);
    const id = `${prefix}-cred`;
    const now = new Date(); // one window for all hits
    const ceiling = { burst: 25, hourly: 1000, daily: 1000 };
    const [readings, decisions] = await Promise.all([
      Promise.all(Array.from({ length: 40 }, () => limiter.hit(id, now))),
      Promise.all(Array.from({ length: 30 }, () => quota.consume({
        motorBlockId: `${prefix}-block`, accountId: `${prefix}-acct`, domainId: `${prefix}-dom`, count: 1,
        block: ceiling, account: { hourly: 1000, daily: 1000 }, enforceAccount: true, warmupCap: null, now,
      }))),
    ]);
    expect(readings.filter((r) => r.kind === 'ok')).to.have.length(30);
    expect(readings.filter((r) => r.kind === 'exceeded')).to.have.length(10);
    expect(readings.map((r) => (r.kind === 'unavailable' ? -1 : r.remaining)).sort((a, b) => a - b).slice(-3)).to.deep.equal([27, 28, 29]);
    expect(decisions.filter((d) => d.kind === 'allowed')).to.have.length(25);
    expect(decisions.filter((d) => d.kind === 'denied' && d.dimension === 'burst' && d.used === 25)).to.have.length(5);
    expect(decisions.map((d) => (d.kind === 'allowed' ? d.block.burst.used : 0)).sort((a, b) => b - a)[0]).to.equal(25);
    expect(batch.stats).to.deep.equal({ calls: 1, operations: 70 });
    // The script names the counters as quotaKeys() does: read() and refund() find the charges.
    const counters = await quota.read(`${prefix}-block`, `${prefix}-acct`, now, `${prefix}-dom`);
    expect(counters).to.deep.equal({ burst: 25, hourly: 25, daily: 25, acctHourly: 25, acctDaily: 25, domainDaily: 25 });
    await quota.refund(`${prefix}-block`, `${prefix}-acct`, 5, now, `${prefix}-dom`);
    expect(await quota.read(`${prefix}-block`, `${prefix}-acct`, now, `${prefix}-dom`)).to.deep.equal({ burst: 20, hourly: 20, daily: 20, acctHourly: 20, acctDaily: 20, domainDaily: 20 });
    const ttls = await Promise.all(quotaKeys(`${prefix}-block`, `${prefix}-acct`, now, `${prefix}-dom`).map((k) => t.redis.ttl(k)));
    expect(ttls[0]).to.be.within(61, 120);
    expect(ttls[1]).to.be.within(301, 3900);
    expect(ttls[2]).to.be.within(3601, 90000);
    expect(await t.redis.ttl(`reqlimit:{${id}}:${Math.floor(now.getTime() / 60000)}`)).to.be.within(61, 120);
    await t.redis.del(...(await t.redis.keys(`reqlimit:{${id}}:*`)), ...(await t.redis.keys(`quota:*{${prefix}-*`)));
  });

  it('a Redis that forgot the script (SCRIPT FLUSH) still runs it', async () => {
    const limiter = new RequestLimiter(t.redis, 100, new RedisBatch(t.redis));
    const id = `${prefix}-flush`;
    const now = new Date();
    expect((await limiter.hit(id, now)).kind).to.equal('ok');
    await t.redis.script('FLUSH');
    const r = await limiter.hit(id, now);
    expect(r.kind === 'ok' && r.remaining).to.equal(98);
    await t.redis.del(...(await t.redis.keys(`reqlimit:{${id}}:*`)));
  });

  it('Redis unreachable: every operation of the call fails at once, and the limiter and quota read "unavailable"', async () => {
    // A port that accepts nothing: a listener closed again.
    const srv = createServer();
    await new Promise<void>((r) => srv.listen(0, '127.0.0.1', () => r()));
    const port = (srv.address() as AddressInfo).port;
    await new Promise<void>((r) => srv.close(() => r()));
    const down = createFastRedis(`redis://127.0.0.1:${port}`);
    down.on('error', () => {});
    try {
      const batch = new RedisBatch(down);
      batch.define('incrby', INCRBY);
      const t = Date.now();
      const results = await Promise.allSettled([batch.run('incrby', ['x'], [1]), batch.run('incrby', ['y'], [1])]);
      expect(results.map((r) => r.status)).to.deep.equal(['rejected', 'rejected']);
      expect(Date.now() - t).to.be.below(1000);
      expect((await new RequestLimiter(down, 10, batch).hit('someone', new Date())).kind).to.equal('unavailable');
      const decision = await new SendQuota(down, batch).consume({
        motorBlockId: 'b', accountId: 'a', domainId: 'd', count: 1, block: { burst: 1, hourly: 1, daily: 1 }, account: { hourly: 1, daily: 1 }, enforceAccount: true, warmupCap: null, now: new Date(),
      });
      expect(decision.kind).to.equal('unavailable');
    } finally {
      down.disconnect();
    }
  });
});
