import { expect } from 'chai';
import { isUuid, newId, uuidV5, uuidV7 } from '../../domain/ids.js';

describe('ids', () => {
  it('newId makes RFC 9562 version 7 UUIDs carrying the time they were made', () => {
    const before = Date.now();
    const id = newId();
    const after = Date.now();
    expect(isUuid(id)).to.equal(true);
    expect(id).to.match(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    const ms = parseInt(id.replace(/-/g, '').slice(0, 12), 16);
    expect(ms).to.be.within(before, after);
  });

  it('ids of later milliseconds sort after earlier ones, as text and as PostgreSQL compares uuids', () => {
    const t = Date.parse('2026-11-23T12:00:00Z');
    const ids = [uuidV7(t + 2), uuidV7(t), uuidV7(t + 1), uuidV7(t + 86_400_000), uuidV7(t - 1)];
    expect([...ids].sort()).to.deep.equal([ids[4], ids[1], ids[2], ids[0], ids[3]]);
  });

  it('thousands of ids in one millisecond are all distinct (74 random bits each)', () => {
    const t = Date.now();
    const ids = new Set(Array.from({ length: 5000 }, () => uuidV7(t)));
    expect(ids.size).to.equal(5000);
  });

  it('uuidV5 stays deterministic (derived event ids depend on it)', () => {
    expect(uuidV5('DeliveryStarted:m:r:1')).to.equal(uuidV5('DeliveryStarted:m:r:1'));
    expect(uuidV5('DeliveryStarted:m:r:1')).to.match(/^[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-/);
  });
});
