import { expect } from 'chai';
import { TtlCache } from '../../infra/ttlCache.js';

/** A load that the test settles by hand, counting how often it was started. */
function manualLoad<V>() {
  let starts = 0;
  const pending: Array<{ resolve: (v: V) => void; reject: (e: Error) => void }> = [];
  return {
    load: () => {
      starts++;
      return new Promise<V>((resolve, reject) => pending.push({ resolve, reject }));
    },
    starts: () => starts,
    resolveAll: (v: V) => pending.splice(0).forEach((p) => p.resolve(v)),
    rejectAll: (e: Error) => pending.splice(0).forEach((p) => p.reject(e)),
  };
}

describe('TtlCache', () => {
  let clock = 0;
  beforeEach(() => { clock = 1_000_000; });

  it('shares one load among concurrent misses of a key, keeps the value for the TTL, then loads once more', async () => {
    const cache = new TtlCache<string>(1000, () => clock);
    const m = manualLoad<string>();
    const waiting = Array.from({ length: 20 }, () => cache.get('k', m.load));
    expect(m.starts()).to.equal(1);
    m.resolveAll('v1');
    expect(await Promise.all(waiting)).to.deep.equal(Array(20).fill('v1'));
    clock += 999;
    expect(await cache.get('k', m.load)).to.equal('v1');
    expect(m.starts(), 'a hit within the TTL').to.equal(1);
    clock += 1;
    const again = [cache.get('k', m.load), cache.get('k', m.load)];
    expect(m.starts(), 'expired: one more load for both').to.equal(2);
    m.resolveAll('v2');
    expect(await Promise.all(again)).to.deep.equal(['v2', 'v2']);
  });

  it('does not share between keys', () => {
    const cache = new TtlCache<string>(1000, () => clock);
    const m = manualLoad<string>();
    void cache.get('a', m.load);
    void cache.get('b', m.load);
    expect(m.starts()).to.equal(2);
    m.resolveAll('x');
  });

  it('with a TTL of 0 loads on every call', async () => {
    const cache = new TtlCache<string>(0, () => clock);
    const m = manualLoad<string>();
    const calls = [cache.get('k', m.load), cache.get('k', m.load), cache.get('k', m.load)];
    expect(m.starts()).to.equal(3);
    m.resolveAll('v');
    await Promise.all(calls);
    void cache.get('k', m.load);
    expect(m.starts()).to.equal(4);
    m.resolveAll('v');
  });

  it('gives a failed load to every caller that shared it, keeps nothing, and the next call loads again', async () => {
    const cache = new TtlCache<string>(1000, () => clock);
    const m = manualLoad<string>();
    const shared = [cache.get('k', m.load), cache.get('k', m.load)];
    m.rejectAll(new Error('store down'));
    const settled = await Promise.allSettled(shared);
    expect(settled.map((s) => s.status)).to.deep.equal(['rejected', 'rejected']);
    const next = cache.get('k', m.load);
    expect(m.starts()).to.equal(2);
    m.resolveAll('ok');
    expect(await next).to.equal('ok');
  });

  it('after clear(), neither serves nor keeps a load that was in flight before it', async () => {
    const cache = new TtlCache<string>(1000, () => clock);
    const m = manualLoad<string>();
    const before = cache.get('k', m.load);
    cache.clear();
    const after = cache.get('k', m.load);
    expect(m.starts(), 'the call after clear() started its own load').to.equal(2);
    m.resolveAll('v');
    expect(await Promise.all([before, after])).to.deep.equal(['v', 'v']);
    // The value kept is the second load's; the first one's result was dropped.
    void cache.get('k', m.load);
    expect(m.starts()).to.equal(2);
  });

  it('forgets everything when it reaches its size bound', async () => {
    const cache = new TtlCache<number>(1000, () => clock, 3);
    let loads = 0;
    const load = (n: number) => () => { loads++; return Promise.resolve(n); };
    for (const n of [1, 2, 3]) await cache.get(`k${n}`, load(n));
    await cache.get('k1', load(1));
    expect(loads).to.equal(3);
    await cache.get('k4', load(4)); // the fourth entry: the three before it are dropped
    await cache.get('k1', load(1));
    expect(loads).to.equal(5);
  });
});
