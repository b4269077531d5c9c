import { expect } from 'chai';
import type { BootstrapResult } from '../../commands/admin/bootstrap';
import { IDEMPOTENCY_WINDOW_MS, sendMessage, type SendDeps } from '../../commands/send/sendMessage';
import type { EventStore } from '../../domain/eventStore';
import { senderDomainOf } from '../read-api/publicApi';
import { startTestMotor, type TestMotor } from '../support/motor';

/**
 * Idempotency-Key generations (commands/send/sendMessage.ts): a key replays its send for 24 hours,
 * then maps to a new send. A key reused every day must not cost one read per day it was used.
 */
describe('Idempotency-Key generations (int)', function () {
  this.timeout(120_000);
  let motor: TestMotor;
  let a: BootstrapResult;
  let reads = 0;

  before(async () => {
    motor = await startTestMotor({ roles: ['api', 'projector'] });
    a = await motor.bootstrap();
  });
  after(async () => { await motor?.close(); });

  const deps = (): SendDeps => {
    // The store, counting the reads of message streams (the key's lookups).
    const store = new Proxy(motor.rt.store, {
      get(target, prop, receiver) {
        if (prop === 'readStream') {
          return (streamId: string, ...rest: unknown[]) => {
            if (streamId.startsWith('message-')) reads++;
            return (target.readStream as (...args: unknown[]) => unknown)(streamId, ...rest);
          };
        }
        return Reflect.get(target, prop, receiver);
      },
    }) as EventStore;
    return { store, directory: motor.rt.directory, quota: motor.rt.quota, config: motor.rt.config };
  };
  const send = (key: string, now: Date) => sendMessage(deps(), {
    motorBlockId: a.motorBlockId, idempotencyKey: key, source: 'http', now,
    body: { from: `app@${senderDomainOf(a)}`, to: 'user@rcpt.test', subject: 'Daily report', text: 'hello' },
  });

  it('a key reused once a day for 40 days: a new send each day, replays within the day, and a logarithmic number of reads', async () => {
    const key = `daily-${Date.now()}`;
    const day = IDEMPOTENCY_WINDOW_MS + 3600_000;
    const t0 = Date.now() - 41 * day;
    const ids: string[] = [];
    for (let g = 0; g < 40; g++) {
      const r = await send(key, new Date(t0 + g * day));
      expect(r.kind, `day ${g}`).to.equal('accepted');
      ids.push((r as { messageId: string }).messageId);
    }
    expect(new Set(ids).size).to.equal(40);

    reads = 0;
    const replay = await send(key, new Date(t0 + 39 * day + 3600_000));
    expect([replay.kind, (replay as { messageId: string }).messageId]).to.deep.equal(['replayed', ids[39]]);
    expect(reads, 'reads to find the 40th generation').to.be.at.most(12);

    reads = 0;
    const next = await send(key, new Date(t0 + 40 * day));
    expect(next.kind).to.equal('accepted');
    expect(ids).to.not.include((next as { messageId: string }).messageId);
    expect(reads, 'reads to find the next generation').to.be.at.most(13);
  });

  it('a key never used costs one read; a replay within the day of its first use costs one read', async () => {
    const key = `fresh-${Date.now()}`;
    const now = new Date();
    reads = 0;
    const first = await send(key, now);
    expect(first.kind).to.equal('accepted');
    expect(reads).to.equal(1);
    reads = 0;
    const again = await send(key, new Date(now.getTime() + 60_000));
    expect([again.kind, (again as { messageId: string }).messageId]).to.deep.equal(['replayed', (first as { messageId: string }).messageId]);
    expect(reads).to.equal(1);
  });
});
