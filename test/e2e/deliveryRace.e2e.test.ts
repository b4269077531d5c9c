import { expect } from 'chai';
import type { BootstrapResult } from '../../commands/admin/bootstrap';
import { streamName, type RecordedEvent } from '../../domain/eventStore';
import type { DeliveryDeferred } from '../../domain/events';
import { startDnsServer, type TestDnsServer } from '../support/dnsServer';
import { startSmtpSink, type SmtpSink } from '../support/smtpSink';
import { eventually, postJson, startTestMotor, type TestMotor } from '../support/motor';

/**
 * Two delivery jobs for one message that fire at the same instant (a parked job and the
 * enqueuer's retry job, say) must not make two delivery rounds: the rounds read the same stream
 * revision, and only one may record its DeliveryStarted and go on (docs/DELIVERY.md "One round at
 * a time"). The whole worker role runs here: enqueuer, BullMQ worker with 8 slots, PostgreSQL
 * event store, a greylisting MX on loopback.
 */
describe('two jobs for one message due at the same time make one delivery round (e2e)', function () {
  this.timeout(120_000);
  const N = 30;
  let dns: TestDnsServer;
  let mx: SmtpSink;
  let motor: TestMotor;
  let block: BootstrapResult;
  const abort = new AbortController();

  before(async () => {
    dns = await startDnsServer({
      'rcpt.test': { MX: [{ exchange: 'mx.rcpt.test', priority: 10 }] },
      'mx.rcpt.test': { A: ['127.0.0.1'] },
    });
    // Greylisting: every recipient is refused with 450 the first time, accepted after that.
    const seen = new Set<string>();
    mx = await startSmtpSink({
      starttls: false,
      rcpt: (r) => {
        if (seen.has(r)) return 250;
        seen.add(r);
        return { code: 450, message: '4.2.0 Greylisted, come back later' };
      },
    });
    motor = await startTestMotor({
      env: { DNS_SERVERS: dns.address, MX_PORT: String(mx.port), DELIVERY_CONCURRENCY: '8', DELIVERY_RETRY_SCHEDULE: '3' },
    });
    block = await motor.bootstrap();
    for (const r of block.dnsRecords) dns.addRecords(r.name, { TXT: [r.value] });
  });
  after(async () => {
    abort.abort();
    await motor?.rt.queue.obliterate({ force: true }).catch(() => undefined);
    await motor?.close();
    await mx?.close();
    await dns?.close();
  });

  it('each greylisted recipient receives the message once, and the log shows one second attempt', async () => {
    const ids: string[] = [];
    const from = `app@${block.dnsRecords.find((d) => d.purpose === 'spf')!.name}`;
    // As each deferral lands, one more job for that message, due when the enqueuer's retry job is.
    const extra = new Set<string>();
    const ready = (async () => {
      for await (const batch of motor.rt.store.subscribeToAll({ signal: abort.signal, types: ['DeliveryDeferred'] })) {
        for (const e of batch.events) {
          const d = e.data as DeliveryDeferred;
          if (extra.has(d.messageId)) continue;
          extra.add(d.messageId);
          await motor.rt.queue.add('deliver', { messageId: d.messageId }, { jobId: `${d.messageId}-extra`, delay: Math.max(0, Date.parse(d.nextAttemptAt) - Date.now()) });
        }
      }
    })().catch((err) => { if (!abort.signal.aborted) throw err; });
    void ready;

    for (let i = 0; i < N; i++) {
      const r = await postJson(`${motor.baseUrl}/v1/send`, { from, to: `user${i}@rcpt.test`, subject: `race ${i}`, text: 'x' }, { 'x-api-key': block.apiKey });
      expect(r.status, JSON.stringify(r.body)).to.equal(200);
      ids.push(r.body.data.id);
    }

    const streams = async (): Promise<RecordedEvent[][]> => Promise.all(ids.map((id) => motor.rt.store.readStream(streamName('message', id))));
    await eventually(async () => (await streams()).every((s) => s.some((e) => e.type === 'DeliverySucceeded')), 60_000, 250);
    expect(extra.size, 'an extra job was added for every message').to.equal(N);
    // A second round, had it gone ahead, delivers at the same moment: give it time to land.
    await new Promise((r) => setTimeout(r, 3000));

    const perMessage = new Map<string, number>();
    for (const m of mx.messages) {
      const id = /^Message-ID: <([^>]+)>/im.exec(m.raw.toString())?.[1].split('@')[0];
      if (id) perMessage.set(id, (perMessage.get(id) ?? 0) + 1);
    }
    expect(ids.filter((id) => perMessage.get(id) !== 1), 'messages not received exactly once').to.deep.equal([]);

    for (const events of await streams()) {
      const types = events.map((e) => e.type);
      // Accepted, the first attempt (deferred), one second attempt (delivered).
      expect(types).to.deep.equal(['MessageAccepted', 'DeliveryStarted', 'DeliveryDeferred', 'DeliveryStarted', 'DeliverySucceeded']);
    }
  });
});
