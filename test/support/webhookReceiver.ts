import { createHmac, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface ReceivedWebhook { path: string; headers: IncomingHttpHeaders; raw: string; body: any } // eslint-disable-line @typescript-eslint/no-explicit-any

export interface WebhookReceiver { url: (path: string) => string; received: ReceivedWebhook[]; close(): Promise<void> }

/**
 * A webhook receiver on loopback: records every POST and answers by the path's start: `/down` 503,
 * `/flaky` 500 on a delivery's first POST then 200, anything else 200 (a query string tells
 * endpoints apart: `/ok?n=1`).
 */
export async function startWebhookReceiver(): Promise<WebhookReceiver> {
  const received: ReceivedWebhook[] = [];
  const flakySeen = new Set<string>();
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const raw = Buffer.concat(chunks).toString('utf8');
      received.push({ path: req.url ?? '', headers: req.headers, raw, body: JSON.parse(raw) });
      const delivery = String(req.headers['x-service-delivery']);
      if (req.url?.startsWith('/down')) res.writeHead(503).end('maintenance');
      else if (req.url?.startsWith('/flaky') && !flakySeen.has(delivery)) {
        flakySeen.add(delivery);
        res.writeHead(500).end('try later');
      } else res.writeHead(200).end('ok');
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const port = (server.address() as AddressInfo).port;
  return {
    url: (path) => `http://127.0.0.1:${port}${path}`,
    received,
    close: () => new Promise((r) => { server.closeAllConnections(); server.close(() => r()); }),
  };
}

/** What a receiver does (docs/WEBHOOKS.md "Verifying"): the HMAC of the raw bytes under `secret`, compared in constant time with `header`. */
export function verifiesWebhook(secret: string, r: ReceivedWebhook, header = 'x-service-signature'): boolean {
  const given = r.headers[header];
  if (typeof given !== 'string') return false;
  const expected = Buffer.from(createHmac('sha256', secret).update(r.raw).digest('hex'));
  return expected.length === given.length && timingSafeEqual(expected, Buffer.from(given));
}
