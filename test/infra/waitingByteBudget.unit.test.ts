import { expect } from 'chai';
import { WaitingByteBudget } from '../../infra/byteBudget.js';

const tick = () => new Promise((r) => setImmediate(r));

describe('WaitingByteBudget (unit)', () => {
  it('admits what fits at once and queues the rest in order; a holding passes no one waiting before it', async () => {
    let waits = 0;
    const budget = new WaitingByteBudget(100, undefined, () => waits++);
    const a = await budget.hold(60);
    const order: string[] = [];
    const b = budget.hold(50).then((release) => { order.push('b'); return release; });
    // 10 would fit beside a's 60, but b waits first: c goes after it.
    const c = budget.hold(10).then((release) => { order.push('c'); return release; });
    await tick();
    expect([budget.held, budget.waitingCount, waits, order]).to.deep.equal([60, 2, 2, []]);
    a();
    await tick();
    expect([budget.held, order]).to.deep.equal([60, ['b', 'c']]);
    (await b)();
    (await c)();
    expect(budget.held).to.equal(0);
  });

  it('gives bytes back once however often its release is called', async () => {
    const budget = new WaitingByteBudget(100);
    const a = await budget.hold(40);
    const b = await budget.hold(40);
    a();
    a();
    expect(budget.held).to.equal(40);
    b();
    expect(budget.held).to.equal(0);
  });

  it('lets a holding larger than the limit in when nothing is held, and nothing beside it', async () => {
    const budget = new WaitingByteBudget(100);
    const big = await budget.hold(500);
    expect(budget.held).to.equal(500);
    let small = false;
    const s = budget.hold(1).then((release) => { small = true; return release; });
    await tick();
    expect(small).to.equal(false);
    big();
    (await s)();
    expect([small, budget.held]).to.deep.equal([true, 0]);
  });
});
