import { expect } from 'chai';
import { blockSuppressionFactOf, blockSuppressionIdOf, isHardBounce } from '../../domain/motorBlock/suppressions';

const bounce = (smtpCode: string | null, enhancedCode: string | null, recipient = 'User@Example.test') =>
  ({ type: 'DeliveryBounced', data: { messageId: 'm1', recipient, at: '2026-01-01T00:00:00.000Z', attempt: 1, smtpCode, enhancedCode, smtpResponse: null } });

describe('block suppressions: what suppresses an address (unit)', () => {
  it('hard: enhanced 5.1.x and 5.2.1; without an enhanced code, 550, 551 and 553', () => {
    for (const [code, enhanced] of [['550', '5.1.1'], ['550', '5.1.2'], ['553', '5.1.3'], ['556', '5.1.10'], ['550', '5.2.1'], ['550', null], ['551', null], ['553', null]] as const) {
      expect(isHardBounce(code, enhanced), `${code} ${enhanced}`).to.equal(true);
    }
  });

  it('soft or not about the mailbox: 5.2.2 full, 5.7.x policy, other 5xx, 4xx, no code', () => {
    for (const [code, enhanced] of [['552', '5.2.2'], ['550', '5.7.1'], ['554', '5.7.26'], ['550', '5.0.0'], ['552', null], ['554', null], ['450', '4.1.1'], ['450', null], [null, null]] as const) {
      expect(isHardBounce(code, enhanced), `${code} ${enhanced}`).to.equal(false);
    }
  });

  it('a hard bounce and a complaint are facts under the lower-cased address; a soft bounce and a failure are none', () => {
    expect(blockSuppressionFactOf(bounce('550', '5.1.1'))).to.deep.include({ address: 'user@example.test', reason: 'hard_bounce', smtpCode: '550', enhancedCode: '5.1.1' });
    expect(blockSuppressionFactOf({ type: 'ComplaintReceived', data: { messageId: 'm1', recipient: ' A@B.test ', at: '2026-01-01T00:00:00.000Z', feedbackType: 'abuse' } }))
      .to.deep.include({ address: 'a@b.test', reason: 'complaint', smtpCode: null });
    expect(blockSuppressionFactOf(bounce('552', '5.2.2'))).to.equal(null);
    expect(blockSuppressionFactOf({ type: 'DeliveryFailed', data: { ...bounce('550', '5.1.1').data, reason: 'x' } })).to.equal(null);
    expect(blockSuppressionFactOf({ type: 'DeliveryBounced', data: { messageId: 'm1' } }), 'malformed').to.equal(null);
  });

  it('names the lift stream from block and address, whatever their case', () => {
    const b = '11111111-1111-4111-8111-111111111111';
    expect(blockSuppressionIdOf(b.toUpperCase(), 'A@B.test')).to.equal(blockSuppressionIdOf(b, 'a@b.test'));
    expect(blockSuppressionIdOf(b, 'a@b.test')).to.not.equal(blockSuppressionIdOf('22222222-2222-4222-8222-222222222222', 'a@b.test'));
  });
});
