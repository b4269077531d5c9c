/**
 * Baseline of bench:deliver: already-built, DKIM-signed messages sent straight to the sink with
 * nodemailer's SMTP transport, `concurrency` at a time. RAW_SMTP_CHILD = JSON {port, count,
 * concurrency, pooled}. pooled: nodemailer's pool (connections reused, STARTTLS once per
 * connection); otherwise one connection per message like Motor's delivery engine. Sends
 * {type:'ready'} once the messages are built, waits for {type:'go'}, replies {type:'done', ms, failed}.
 */
import nodemailer from 'nodemailer';
import { generateDkimKey, signMessage } from '../../workers/delivery/dkim';
import { buildMime } from '../../workers/delivery/mime';
import { childMain } from './common';

childMain(async () => {
  const spec = JSON.parse(process.env.RAW_SMTP_CHILD ?? '{}') as { port: number; count: number; concurrency: number; pooled: boolean };
  const key = await generateDkimKey('rsa-sha256');
  const distinct = Math.min(spec.count, 200);
  const raws: Buffer[] = [];
  for (let i = 0; i < distinct; i++) {
    const raw = await buildMime({
      from: 'app@bench.example.test', fromName: 'The Shop', to: ['user@rcpt.test'], subject: 'Your order #A-10442 has shipped',
      text: `Hello Ada,\n\nYour order has shipped.\n${'Track it any time from your account page. '.repeat(8)}`,
      html: `<p>Hello Ada,</p>${'<p>Track it any time from <a href="https://shop.example/orders/A-10442">your account page</a>.</p>'.repeat(8)}`,
      headers: { 'X-Campaign': 'shipping' }, messageId: `raw-${i}@bench.example.test`, date: new Date(),
    });
    raws.push(await signMessage(raw, { domain: 'bench.example.test', selector: 'bench', privateKeyPem: key.privateKeyPem, algorithm: 'rsa-sha256' }));
  }
  const base = { host: '127.0.0.1', port: spec.port, name: 'localhost', tls: { rejectUnauthorized: false }, logger: false } as const;
  const envelope = { from: 'app@bench.example.test', to: ['user@rcpt.test'] };
  process.send!({ type: 'ready' });
  await new Promise<void>((resolve) => process.on('message', (m: { type?: string }) => { if (m.type === 'go') resolve(); }));

  let failed = 0;
  const t0 = performance.now();
  if (spec.pooled) {
    const transport = nodemailer.createTransport({ ...base, pool: true, maxConnections: spec.concurrency, maxMessages: Infinity });
    await Promise.all(Array.from({ length: spec.count }, (_, i) =>
      transport.sendMail({ envelope, raw: raws[i % distinct] }).catch(() => { failed++; })));
    transport.close();
  } else {
    const transport = nodemailer.createTransport({ ...base });
    let next = 0;
    await Promise.all(Array.from({ length: spec.concurrency }, async () => {
      while (next < spec.count) {
        const i = next++;
        await transport.sendMail({ envelope, raw: raws[i % distinct] }).catch(() => { failed++; });
      }
    }));
  }
  const ms = performance.now() - t0;
  process.send!({ type: 'done', ms, failed });
  process.on('message', (m: { type?: string }) => { if (m.type === 'stop') process.exit(0); });
});
