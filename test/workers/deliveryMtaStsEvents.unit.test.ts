import { Writable } from 'node:stream';
import { expect } from 'chai';
import { createLogger } from '../../infra/logger.js';
import { LogLimiter } from '../../infra/logLimiter.js';
import { createMetrics } from '../../infra/metrics.js';
import { createResolver } from '../../workers/delivery/dns.js';
import { createMtaStsPolicies } from '../../workers/deliveryWorker.js';

/** What the worker does with MTA-STS events (createMtaStsPolicies): counted every time, warnings capped per recipient domain. */
describe('delivery worker MTA-STS events (unit)', () => {
  const settings = { mxPort: 25, allowPrivateAddresses: false, relayUrl: null, hostname: 'out.motor.test', lifetimeSeconds: 3600 };

  it('is off without settings.mtaSts', () => {
    expect(createMtaStsPolicies({ resolver: createResolver([]), logger: createLogger('silent'), metrics: createMetrics(), settings })).to.equal(undefined);
  });

  it('counts every event by result and writes at most SMTP_LOG_LINE_LIMIT warnings per domain and window', async () => {
    const lines: Array<{ msg: string; domain?: string; suppressed?: number }> = [];
    const sink = new Writable({ write: (chunk, _enc, done) => { lines.push(JSON.parse(String(chunk))); done(); } });
    const logger = createLogger('info', {}, sink);
    const logLines = new LogLimiter({ perKey: 2, perKind: 100, windowMs: 60_000 });
    const metrics = createMetrics();
    const sts = createMtaStsPolicies({ resolver: createResolver([]), logger, metrics, logLines, settings: { ...settings, mtaSts: { port: 443 } } })!;
    for (let i = 0; i < 5; i++) sts.report({ kind: 'enforced_refusal', domain: 'rcpt.test', detail: 'MTA-STS policy of rcpt.test (enforce): mx.other.test is not a listed MX' });
    sts.report({ kind: 'testing_would_fail', domain: 'other.test', detail: 'x' });
    logLines.flush();
    await new Promise((r) => setImmediate(r));
    expect(lines.map((l) => [l.msg, l.domain])).to.deep.equal([
      ['MTA-STS policy refused an MX host', 'rcpt.test'],
      ['MTA-STS policy refused an MX host', 'rcpt.test'],
      ['MTA-STS policy in testing mode would have refused this delivery', 'other.test'],
      ['MTA-STS policy refused an MX host: 3 more suppressed in the last 60s', 'rcpt.test'],
    ]);
    const counted = await metrics.registry.getSingleMetricAsString('motor_delivery_mta_sts_total');
    expect(counted).to.include('motor_delivery_mta_sts_total{result="enforced_refusal"} 5');
    expect(counted).to.include('motor_delivery_mta_sts_total{result="testing_would_fail"} 1');
  });
});
