import { expect } from 'chai';
import { jsonProblem, storableText } from '../../domain/storableJson';

describe('storable JSON (unit)', () => {
  it('accepts what JSON round-trips: text of every plane, dates, nulls, nesting up to the limit', () => {
    expect(jsonProblem({ s: 'Grüße 東京 😀', d: new Date(0), n: null, list: [1, 'x', { ok: true }] }, 8)).to.equal(null);
    expect(jsonProblem({ a: { b: { c: 1 } } }, 3)).to.equal(null);
  });

  it('names the first problem: U+0000, an unpaired surrogate in a value or a key, a BigInt, depth', () => {
    expect(jsonProblem({ s: 'a\u0000' }, 8)).to.match(/U\+0000/);
    expect(jsonProblem(['ok', 'x\ud83d'], 8)).to.match(/surrogate/);
    expect(jsonProblem({ ['\udc00']: 1 }, 8)).to.match(/surrogate/);
    expect(jsonProblem({ n: 1n }, 8)).to.match(/BigInt/);
    expect(jsonProblem({ a: { b: { c: 1 } } }, 2)).to.match(/deeper than 2/);
  });

  it('storableText drops U+0000, cuts without halving a pair, and repairs unpaired surrogates', () => {
    expect(storableText('a\u0000b')).to.equal('ab');
    expect(storableText('ab😀', 3)).to.equal('ab');
    expect(storableText('ab😀', 4)).to.equal('ab😀');
    expect(storableText('x\udc00y')).to.equal('x\ufffdy');
  });
});
