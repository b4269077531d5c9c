import type { IncomingMessage, ServerResponse } from 'node:http';
import { createServer } from 'node:https';
import type { AddressInfo } from 'node:net';

/** What a policy host answers: a policy text (200, text/plain), or the whole answer. */
export type PolicyAnswer = string | { status?: number; contentType?: string; body?: string | Buffer; headers?: Record<string, string> };

export interface PolicyServer {
  port: number;
  /** Requests received, in order: the Host header (without port) and the path. */
  requests: Array<{ host: string; path: string }>;
  /** Sets what `host` (mta-sts.<domain>) answers; `null`: 404. */
  setPolicy(host: string, answer: PolicyAnswer | null): void;
  /** Requests for `host` so far. */
  count(host: string): number;
  close(): Promise<void>;
}

/**
 * MTA-STS policy hosts on 127.0.0.1 and one port (MTA_STS_PORT in tests): HTTPS with the given
 * certificate, the answer chosen by the Host header.
 */
export async function startPolicyServer(tls: { key: Buffer; cert: Buffer }): Promise<PolicyServer> {
  const answers = new Map<string, PolicyAnswer>();
  const requests: PolicyServer['requests'] = [];
  const server = createServer({ key: tls.key, cert: tls.cert }, (req: IncomingMessage, res: ServerResponse) => {
    const host = String(req.headers.host ?? '').replace(/:\d+$/, '').toLowerCase();
    requests.push({ host, path: req.url ?? '' });
    const answer = req.url === '/.well-known/mta-sts.txt' ? answers.get(host) : undefined;
    if (answer === undefined) {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('not found');
      return;
    }
    const a = typeof answer === 'string' ? { body: answer } : answer;
    res.writeHead(a.status ?? 200, { 'content-type': a.contentType ?? 'text/plain; charset=utf-8', ...a.headers }).end(a.body ?? '');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    requests,
    setPolicy: (host, answer) => void (answer === null ? answers.delete(host) : answers.set(host, answer)),
    count: (host) => requests.filter((r) => r.host === host).length,
    close: () => new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    }),
  };
}
