import { createServer, type AddressInfo } from 'node:net';
import { expect } from 'chai';
import { createFastRedis } from '../../infra/redis';
import { RedisBatch } from '../../infra/redisBatch';
import { RequestLimiter } from '../../commands/quota/requestLimiter';
import { useTestRedis } from '../support/db';

describe('RedisBatch: the request path\'s commands of one loop turn in one pipeline (real Redis)', () => {
  const t = useTestRedis('batch');
  const prefix = t.prefix;

  it('commands asked for in one turn go out as one pipeline, each caller getting its own reply', async () => {
    const batch = new RedisBatch(t.redis);
    const replies = await Promise.all(Array.from({ length: 10 }, (_, i) => batch.call<number>((p) => p.incrby(`${prefix}:n${i}`, i + 1))));
    expect(replies).to.deep.equal([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    expect(batch.stats).to.deep.equal({ pipelines: 1, commands: 10 });
    // Later turns: new pipelines.
    expect(await batch.call<string>((p) => p.get(`${prefix}:n3`))).to.equal('4');
    await new Promise((r) => setImmediate(r));
    expect(await batch.call<string>((p) => p.get(`${prefix}:n9`))).to.equal('10');
    expect(batch.stats).to.deep.equal({ pipelines: 3, commands: 12 });
  });

  it('one failing command fails only its own caller', async () => {
    const batch = new RedisBatch(t.redis);
    await t.redis.set(`${prefix}:text`, 'not a number');
    const [ok, bad, ok2] = await Promise.allSettled([
      batch.call<number>((p) => p.incr(`${prefix}:a`)),
      batch.call<number>((p) => p.incr(`${prefix}:text`)),
      batch.call<number>((p) => p.incr(`${prefix}:b`)),
    ]);
    expect(ok).to.deep.equal({ status: 'fulfilled', value: 1 });
    expect(bad.status).to.equal('rejected');
    expect(String((bad as PromiseRejectedResult).reason)).to.match(/not an integer/);
    expect(ok2).to.deep.equal({ status: 'fulfilled', value: 1 });
    expect(batch.stats.pipelines).to.equal(1);
  });

  it('custom scripts ride in the batch: concurrent limiter hits share writes and count exactly', async () => {
    const batch = new RedisBatch(t.redis);
    const limiter = new RequestLimiter(t.redis, 30, batch);
    const id = `${prefix}-cred`;
    const now = new Date(); // one window for all hits
    const readings = await Promise.all(Array.from({ length: 40 }, () => limiter.hit(id, now)));
    expect(readings.filter((r) => r.kind === 'ok')).to.have.length(30);
    expect(readings.filter((r) => r.kind === 'exceeded')).to.have.length(10);
    expect(readings.map((r) => (r.kind === 'unavailable' ? -1 : r.remaining)).sort((a, b) => a - b).slice(-3)).to.deep.equal([27, 28, 29]);
    expect(batch.stats.pipelines).to.equal(1);
    await t.redis.del(...(await t.redis.keys(`reqlimit:{${id}}:*`)));
  });

  it('a Redis that forgot the scripts (SCRIPT FLUSH) still runs them from the batch', async () => {
    const limiter = new RequestLimiter(t.redis, 100, new RedisBatch(t.redis));
    const id = `${prefix}-flush`;
    const now = new Date();
    expect((await limiter.hit(id, now)).kind).to.equal('ok');
    await t.redis.script('FLUSH');
    const r = await limiter.hit(id, now);
    expect(r.kind === 'ok' && r.remaining).to.equal(98);
    await t.redis.del(...(await t.redis.keys(`reqlimit:{${id}}:*`)));
  });

  it('Redis unreachable: every command of the batch fails at once, and the limiter reads "unavailable"', async () => {
    // A port that accepts nothing: a listener closed again.
    const srv = createServer();
    await new Promise<void>((r) => srv.listen(0, '127.0.0.1', () => r()));
    const port = (srv.address() as AddressInfo).port;
    await new Promise<void>((r) => srv.close(() => r()));
    const down = createFastRedis(`redis://127.0.0.1:${port}`);
    down.on('error', () => {});
    try {
      const batch = new RedisBatch(down);
      const t = Date.now();
      const results = await Promise.allSettled([batch.call((p) => p.get('x')), batch.call((p) => p.get('y'))]);
      expect(results.map((r) => r.status)).to.deep.equal(['rejected', 'rejected']);
      expect(Date.now() - t).to.be.below(1000);
      expect((await new RequestLimiter(down, 10, batch).hit('someone', new Date())).kind).to.equal('unavailable');
    } finally {
      down.disconnect();
    }
  });
});
