import { expect } from 'chai';
import { NOTIFY_PAYLOAD_MAX, notifyPayload, typesOfPayload } from '../../../infra/eventstore/postgres/schema.js';

describe('NOTIFY payload of the PostgreSQL store', () => {
  it('names the distinct types of a batch, and reads back as that list', () => {
    const p = notifyPayload(['MessageAccepted', 'DeliveryStarted', 'MessageAccepted']);
    expect(p).to.equal('MessageAccepted,DeliveryStarted');
    expect(typesOfPayload(p)).to.deep.equal(['MessageAccepted', 'DeliveryStarted']);
  });

  it("falls back to '' (wake everyone) for a type with a comma or a list over the limit", () => {
    expect(notifyPayload(['A,B'])).to.equal('');
    expect(notifyPayload(Array.from({ length: 500 }, (_, i) => `Type${i}${'x'.repeat(10)}`))).to.equal('');
    expect(NOTIFY_PAYLOAD_MAX).to.be.below(8000);
    expect(typesOfPayload('')).to.equal(null);
    expect(typesOfPayload(undefined)).to.equal(null);
  });
});
