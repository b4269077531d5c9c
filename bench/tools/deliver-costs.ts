/**
 * `tsx bench/tools/deliver-costs.ts [n]`: CPU cost per message of the delivery steps that do not
 * need a network (MIME build, DKIM signing as the worker does it, and the part of signing that is
 * PEM parsing), to put bench:deliver's per-message CPU in proportion.
 */
import { createPrivateKey, createSign } from 'node:crypto';
import { generateDkimKey, signMessage } from '../../workers/delivery/dkim';
import { buildMime } from '../../workers/delivery/mime';

async function main() {
  const n = Number(process.argv[2] ?? 500);
  const key = await generateDkimKey('rsa-sha256');
  const input = (i: number) => ({
    from: 'app@bench.example.test', fromName: 'The Shop', to: ['user@rcpt.test'], subject: 'Your order #A-10442 has shipped',
    text: `Hello Ada,\n\n${'Track it any time from your account page. '.repeat(8)}`,
    html: `<p>Hello Ada,</p>${'<p>Track it any time from <a href="https://shop.example/orders/A-10442">your account page</a>.</p>'.repeat(8)}`,
    headers: { 'X-Campaign': 'shipping' }, messageId: `m-${i}@bench.example.test`, date: new Date(),
  });
  const time = async (label: string, fn: (i: number) => Promise<unknown> | unknown) => {
    for (let i = 0; i < 20; i++) await fn(i); // warm-up
    const c0 = process.cpuUsage();
    const t0 = performance.now();
    for (let i = 0; i < n; i++) await fn(i);
    const wall = (performance.now() - t0) / n;
    const c = process.cpuUsage(c0);
    console.log(`${label.padEnd(44)} ${wall.toFixed(3)} ms wall, ${((c.user + c.system) / 1000 / n).toFixed(3)} ms CPU per message`);
  };
  const raw = await buildMime(input(0));
  await time('buildMime', (i) => buildMime(input(i)));
  await time('signMessage (worker path: parsed key cached)', () => signMessage(raw, { domain: 'bench.example.test', selector: 's', privateKeyPem: key.privateKeyPem, algorithm: 'rsa-sha256' }));
  await time('createPrivateKey(PEM) alone', () => createPrivateKey(key.privateKeyPem));
  const ko = createPrivateKey(key.privateKeyPem);
  await time('RSA-SHA256 sign with a cached KeyObject', () => createSign('RSA-SHA256').update(raw).sign(ko));
}
main();
