import { expect } from 'chai';
import { ATTEMPT_DEADLINE_MAX_MS, IN_FLIGHT_STALE_MS } from '../../domain/message/message.js';
import { ConfigError, loadConfig } from '../../infra/config.js';

/** DELIVERY_ATTEMPT_DEADLINE_SECONDS: a round's deadline must end well inside the in-flight window (docs/DELIVERY.md). */
describe('delivery attempt deadline configuration (unit)', () => {
  it('defaults to 8 minutes, 2 minutes inside the 10-minute in-flight window', () => {
    expect(ATTEMPT_DEADLINE_MAX_MS).to.equal(8 * 60_000);
    expect(IN_FLIGHT_STALE_MS - ATTEMPT_DEADLINE_MAX_MS).to.be.at.least(2 * 60_000);
    expect(loadConfig({}).deliveryAttemptDeadlineSeconds).to.equal(480);
  });

  it('takes a shorter deadline and refuses one that would reach into the in-flight window', () => {
    expect(loadConfig({ DELIVERY_ATTEMPT_DEADLINE_SECONDS: '120' }).deliveryAttemptDeadlineSeconds).to.equal(120);
    for (const bad of ['481', '600', '9', '0', '90.5', 'soon']) {
      expect(() => loadConfig({ DELIVERY_ATTEMPT_DEADLINE_SECONDS: bad }), bad).to.throw(ConfigError, /DELIVERY_ATTEMPT_DEADLINE_SECONDS must be an integer between 10 and 480/);
    }
  });
});
