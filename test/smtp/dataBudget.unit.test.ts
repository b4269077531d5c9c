import { expect } from 'chai';
import { DataBudget, declaredSize } from '../../smtp/dataBudget';

const bytes = (n: number) => Buffer.alloc(n, 0x61);

describe('smtp/dataBudget: message bytes held per process (unit)', () => {
  it('counts each message\'s chunks as they arrive, and gives them back when it is released', () => {
    const seen: number[] = [];
    const budget = new DataBudget(1000, (held) => seen.push(held));
    const a = budget.message();
    const b = budget.message();
    a.push(bytes(300));
    b.push(bytes(200));
    a.push(bytes(100));
    expect(budget.held).to.equal(600);
    expect([a.bytes, b.bytes]).to.deep.equal([400, 200]);
    expect(a.data().equals(bytes(400))).to.equal(true);
    // data() replaces the chunks with one buffer: the same bytes, held until the release.
    expect(budget.held).to.equal(600);
    a.release();
    expect(budget.held).to.equal(200);
    b.release();
    expect(budget.held).to.equal(0);
    expect(seen).to.deep.equal([300, 500, 600, 200, 0]);
  });

  it('the chunk that would go over the budget is not taken: that message stops being kept and gives back what it held at once', () => {
    const budget = new DataBudget(1000);
    const first = budget.message();
    const second = budget.message();
    first.push(bytes(600));
    second.push(bytes(300));
    second.push(bytes(200));
    expect(second.overBudget).to.equal(true);
    expect(second.bytes).to.equal(0);
    expect(budget.held).to.equal(600);
    // Later chunks of it are dropped too, even once there would be room.
    first.release();
    second.push(bytes(10));
    expect(second.bytes).to.equal(0);
    expect(budget.held).to.equal(0);
    expect(second.data().length).to.equal(0);
    // A message of exactly the budget fits.
    const whole = budget.message();
    whole.push(bytes(1000));
    expect(whole.overBudget).to.equal(false);
    expect(budget.held).to.equal(1000);
    whole.release();
  });

  it('a message gives its bytes back once, however often it is released, and takes none after', () => {
    const budget = new DataBudget(1000);
    const m = budget.message();
    const other = budget.message();
    m.push(bytes(400));
    other.push(bytes(100));
    m.release();
    m.release();
    expect(budget.held).to.equal(100);
    m.push(bytes(50));
    expect(budget.held).to.equal(100);
    m.release();
    other.release();
    expect(budget.held).to.equal(0);
  });

  it('fits(): whether a declared size has room now', () => {
    const budget = new DataBudget(1000);
    const m = budget.message();
    m.push(bytes(700));
    expect(budget.fits(300)).to.equal(true);
    expect(budget.fits(301)).to.equal(false);
    m.release();
    expect(budget.fits(1000)).to.equal(true);
  });

  it('refuses a budget that is not a positive whole number of bytes', () => {
    for (const bad of [0, -1, 1.5, Number.NaN]) expect(() => new DataBudget(bad)).to.throw(RangeError);
  });

  it('declaredSize(): the MAIL FROM SIZE= parameter, when there is one', () => {
    expect(declaredSize({ SIZE: '350000' })).to.equal(350_000);
    expect(declaredSize({ BODY: '8BITMIME' })).to.equal(null);
    expect(declaredSize(false)).to.equal(null);
    expect(declaredSize({ SIZE: true })).to.equal(null);
  });
});
