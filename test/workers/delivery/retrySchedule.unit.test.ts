import { expect } from 'chai';
import { MAX_RETRY_DELAY_SECONDS, nextAttemptAt, nextAttemptDelay, shouldGiveUp } from '../../../workers/delivery/retrySchedule.js';

describe('retrySchedule', () => {
  describe('nextAttemptDelay', () => {
    it('retries within minutes first (greylisting), then backs off to a 4 h cap', () => {
      const delays = [1, 2, 3, 4, 5, 6, 7, 8, 20].map((a) => nextAttemptDelay(a, 0));
      expect(delays).to.deep.equal([60, 300, 900, 1800, 3600, 7200, 14400, 14400, 14400]);
    });

    it('never exceeds the cap, even with maximum positive jitter', () => {
      expect(nextAttemptDelay(50, 1)).to.equal(MAX_RETRY_DELAY_SECONDS);
      expect(nextAttemptDelay(6, 1)).to.equal(7920);
    });

    it('applies jitter of at most ±10% and clamps out-of-range jitter', () => {
      expect(nextAttemptDelay(1, 1)).to.equal(66);
      expect(nextAttemptDelay(1, -1)).to.equal(54);
      expect(nextAttemptDelay(1, 5)).to.equal(66);
      expect(nextAttemptDelay(1, Number.NaN)).to.equal(60);
    });

    it('treats attempt numbers below 1 as the first retry', () => {
      expect(nextAttemptDelay(0)).to.equal(60);
      expect(nextAttemptDelay(-3)).to.equal(60);
    });
  });

  describe('shouldGiveUp', () => {
    const first = new Date('2026-01-01T00:00:00Z');
    it('is false within the lifetime and true from its end on', () => {
      expect(shouldGiveUp(first, new Date('2026-01-01T00:59:59Z'), 3600)).to.equal(false);
      expect(shouldGiveUp(first, new Date('2026-01-01T01:00:00Z'), 3600)).to.equal(true);
      expect(shouldGiveUp(first, new Date('2026-01-05T00:00:00Z'), 3600)).to.equal(true);
    });
  });

  describe('nextAttemptAt', () => {
    const first = new Date('2026-01-01T00:00:00Z');
    it('adds the delay to now', () => {
      const at = nextAttemptAt(1, first, new Date('2026-01-01T00:00:10Z'), 86400, 0);
      expect(at?.toISOString()).to.equal('2026-01-01T00:01:10.000Z');
    });
    it('moves an attempt past the deadline to the deadline, and gives up after it', () => {
      const at = nextAttemptAt(7, first, new Date('2026-01-01T00:50:00Z'), 3600, 0);
      expect(at?.toISOString()).to.equal('2026-01-01T01:00:00.000Z');
      expect(nextAttemptAt(7, first, new Date('2026-01-01T01:00:00Z'), 3600, 0)).to.equal(null);
    });
  });
});
