import { expect } from 'chai';
import { isPermanentSendFailure, isTemporarySendFailure } from '../../commands/auth/systemMail';
import { fail } from '../../domain/errors';
import { EventStoreUnavailableError, InvalidEventDataError } from '../../domain/eventStore';

/**
 * Which failures of a system mail a later try can get past (commands/auth/systemMail.ts): the
 * verdict its callers act on, the pause notices by retrying or not, HTTP clients by `temporary`.
 */
describe('system mail: temporary and permanent send failures (unit)', () => {
  it('the machinery failing (store away, the directory not showing the system block yet, a bug), a quota refusal and any 5xx: temporary', () => {
    for (const err of [
      new EventStoreUnavailableError('down'),
      new Error('the directory projection does not show the system block yet'),
      fail('rate_limited_block', 429, 'over'),
      fail('rate_limited_warmup', 429, 'warming up'),
      fail('directory_unavailable', 503, 'away'),
    ]) expect(isTemporarySendFailure(err), String(err)).to.equal(true);
  });

  it('the mail or its sender refused (a recipient that is not an address, the system block stopped, its domain without DNS), text the store cannot keep: permanent', () => {
    for (const err of [
      fail('validation_error', 422, 'to: not an address'),
      fail('motor_block_inactive', 403, 'deactivated'),
      fail('DOMAIN_DNS_INCOMPLETE', 403, 'no SPF'),
      fail('from_domain_mismatch', 403, 'mismatch'),
      new InvalidEventDataError('message-x', 'MessageAccepted', 'U+0000'),
    ]) expect(isTemporarySendFailure(err), String(err)).to.equal(false);
  });

  it('isPermanentSendFailure: only an email_send_failed that says it is not temporary', () => {
    expect(isPermanentSendFailure(fail('email_send_failed', 502, 'refused', { details: { temporary: false } }))).to.equal(true);
    expect(isPermanentSendFailure(fail('email_send_failed', 502, 'later', { details: { temporary: true } }))).to.equal(false);
    // A failure of the caller's own (reading the log) is not the send's verdict.
    expect(isPermanentSendFailure(fail('validation_error', 422, 'x'))).to.equal(false);
    expect(isPermanentSendFailure(new Error('the system mail is down'))).to.equal(false);
  });
});
