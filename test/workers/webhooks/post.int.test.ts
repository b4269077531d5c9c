import { createHmac, timingSafeEqual } from 'node:crypto';
import http from 'node:http';
import https from 'node:https';
import type { AddressInfo, Socket } from 'node:net';
import { expect } from 'chai';
import { postWebhook, signWebhookBody, type WebhookPostOptions } from '../../../workers/webhooks/post.js';

/** Self-signed, CN and SAN hooks.example.test, valid until 2126: trusted by nobody, on purpose. */
const TLS_KEY = `-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgUOYRH09efnfBA8SN
aiY632nMA2rZkxi8wOEYYL455wehRANCAARftrKHUPqCnPuBXDQ8oddaHCCpZY4y
51aqx43UjQdvEsb5JI6EGZTUuT6PZytqo/RjNmKKtVReFdKbwmU3lJgP
-----END PRIVATE KEY-----`;
const TLS_CERT = `-----BEGIN CERTIFICATE-----
MIIBrzCCAVagAwIBAgIULsnjBuMVd3Fts2pZbUgnLUTjrOYwCgYIKoZIzj0EAwIw
HTEbMBkGA1UEAwwSaG9va3MuZXhhbXBsZS50ZXN0MCAXDTI2MTEyNDExMzkyN1oY
DzIxMjYxMDMxMTEzOTI3WjAdMRswGQYDVQQDDBJob29rcy5leGFtcGxlLnRlc3Qw
WTATBgcqhkjOPQIBBggqhkjOPQMBBwNCAARftrKHUPqCnPuBXDQ8oddaHCCpZY4y
51aqx43UjQdvEsb5JI6EGZTUuT6PZytqo/RjNmKKtVReFdKbwmU3lJgPo3IwcDAd
BgNVHQ4EFgQULFrjdh+knyzJR21npWjOZMuQEc4wHwYDVR0jBBgwFoAULFrjdh+k
nyzJR21npWjOZMuQEc4wDwYDVR0TAQH/BAUwAwEB/zAdBgNVHREEFjAUghJob29r
cy5leGFtcGxlLnRlc3QwCgYIKoZIzj0EAwIDRwAwRAIga2y8Jl1RwWA2DpUvwn9l
sT/3D4AgbTnr0lscAysxhCMCICMcbjAthXp17dAvMPf2tUmh+UKash7sw/U4Bs8D
OnJl
-----END CERTIFICATE-----`;

const SECRET = 'whsec_test_0123456789';

interface Received { method: string; url: string; headers: http.IncomingHttpHeaders; body: Buffer; signatureValid: boolean }

interface TestServer {
  port: number;
  url(path?: string): string;
  received: Received[];
  /** TCP connections accepted, answered or not. */
  connections: number;
  /** Sockets accepted and not yet closed. */
  open: Set<Socket>;
  close(): Promise<void>;
}

/** A loopback HTTP server that records every request (after reading its body) then lets `handler` answer. */
async function startServer(handler: (req: http.IncomingMessage, res: http.ServerResponse, received: Received) => void): Promise<TestServer> {
  const received: Received[] = [];
  const open = new Set<Socket>();
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      const given = Buffer.from(String(req.headers['x-service-signature'] ?? ''), 'utf8');
      const expected = Buffer.from(createHmac('sha256', SECRET).update(body).digest('hex'), 'utf8');
      const signatureValid = given.length === expected.length && timingSafeEqual(given, expected);
      const r = { method: req.method ?? '', url: req.url ?? '', headers: req.headers, body, signatureValid };
      received.push(r);
      handler(req, res, r);
    });
  });
  const state: TestServer = {
    port: 0,
    url: (path = '/') => `http://127.0.0.1:${state.port}${path}`,
    received,
    connections: 0,
    open,
    close: () => {
      for (const s of open) s.destroy();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
  server.on('connection', (socket: Socket) => {
    state.connections++;
    open.add(socket);
    socket.on('close', () => open.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  state.port = (server.address() as AddressInfo).port;
  return state;
}

const options = (over: Partial<WebhookPostOptions> & { url: string }): WebhookPostOptions => ({
  body: '{"event":"message.delivered"}',
  headers: {},
  timeoutMs: 3000,
  allowPrivateAddresses: true,
  ...over,
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('postWebhook (loopback sockets)', () => {
  const servers: TestServer[] = [];
  const serve = async (handler: Parameters<typeof startServer>[0]) => {
    const s = await startServer(handler);
    servers.push(s);
    return s;
  };
  afterEach(async () => {
    await Promise.all(servers.splice(0).map((s) => s.close()));
  });

  it('posts the exact UTF-8 body with its signature and headers, and reports a 2xx as ok', async () => {
    const server = await serve((_req, res, r) => {
      res.writeHead(r.signatureValid ? 202 : 401, { 'Content-Type': 'text/plain' });
      res.end(r.signatureValid ? 'accepted ✓' : 'bad signature');
    });
    const body = JSON.stringify({ event: 'message.delivered', subject: 'Café ✓ 𝄞', id: 'f1c2' });
    const result = await postWebhook(options({
      url: server.url('/hooks/motor?team=7'),
      body,
      headers: {
        'X-Service-Signature': signWebhookBody(SECRET, body),
        'X-Service-Event': 'message.delivered',
        'X-Service-Delivery': 'd-123',
      },
    }));

    expect(result).to.include({ ok: true, status: 202, error: null, responseBody: 'accepted ✓' });
    expect(Number.isInteger(result.durationMs) && result.durationMs >= 0).to.equal(true);
    expect(server.received).to.have.length(1);
    const [r] = server.received;
    expect(r.signatureValid).to.equal(true);
    expect(r.method).to.equal('POST');
    expect(r.url).to.equal('/hooks/motor?team=7');
    expect(r.body.equals(Buffer.from(body, 'utf8'))).to.equal(true);
    expect(r.headers['content-length']).to.equal(String(Buffer.byteLength(body, 'utf8')));
    expect(r.headers['content-type']).to.equal('application/json');
    expect(r.headers['user-agent']).to.equal('Motor-Webhooks/1.2');
    expect(r.headers['x-service-event']).to.equal('message.delivered');
    expect(r.headers['x-service-delivery']).to.equal('d-123');
    expect(r.headers.host).to.equal(`127.0.0.1:${server.port}`);
  });

  it('keeps its own Content-Type, Content-Length and User-Agent over the caller\'s', async () => {
    const server = await serve((_req, res) => res.end());
    const body = '{"a":1}';
    const result = await postWebhook(options({
      url: server.url(),
      body,
      headers: { 'content-type': 'text/plain', 'user-agent': 'curl/8', 'Content-Length': '999' },
    }));
    expect(result).to.include({ ok: true, status: 200, responseBody: '' });
    const [r] = server.received;
    expect(r.headers['content-type']).to.equal('application/json');
    expect(r.headers['user-agent']).to.equal('Motor-Webhooks/1.2');
    expect(r.headers['content-length']).to.equal('7');
    expect(r.body.toString('utf8')).to.equal(body);
  });

  it('reports a 500 as not ok with its status and body', async () => {
    const server = await serve((_req, res) => {
      res.writeHead(500);
      res.end('boom: database unavailable');
    });
    const result = await postWebhook(options({ url: server.url() }));
    expect(result).to.include({ ok: false, status: 500, error: 'http_500', responseBody: 'boom: database unavailable' });
    expect(server.received).to.have.length(1);
  });

  it('reads 1,024 characters of a 10 MB body and stops there', async () => {
    const size = 10 * 1024 * 1024;
    let finished = false;
    let closed!: () => void;
    const serverClosed = new Promise<void>((resolve) => (closed = resolve));
    const server = await serve((_req, res) => {
      res.writeHead(200, { 'Content-Length': String(size) });
      const chunk = Buffer.alloc(64 * 1024, 'abcdefghijklmnopqrstuvwxyz0123456789');
      let sent = 0;
      const pump = () => {
        while (sent < size && !res.destroyed) {
          sent += chunk.length;
          if (!res.write(chunk)) return void res.once('drain', pump);
        }
        if (sent >= size) res.end(() => (finished = true));
      };
      res.on('close', closed);
      pump();
    });

    const result = await postWebhook(options({ url: server.url() }));
    expect(result).to.include({ ok: true, status: 200, error: null });
    expect(result.responseBody).to.equal('abcdefghijklmnopqrstuvwxyz0123456789'.repeat(29).slice(0, 1024));
    expect(result.durationMs).to.be.below(1000);
    await serverClosed;
    expect(finished, 'the server could write the whole body').to.equal(false);
  });

  it('counts the 1,024 in characters, not bytes', async () => {
    const server = await serve((_req, res) => res.end('é'.repeat(5000)));
    const result = await postWebhook(options({ url: server.url() }));
    expect(result.responseBody).to.equal('é'.repeat(1024));
  });

  it('does not follow a redirect', async () => {
    const target = await serve((_req, res) => res.end('redirected'));
    const server = await serve((_req, res) => {
      res.writeHead(302, { Location: target.url('/elsewhere') });
      res.end('moved');
    });
    const result = await postWebhook(options({ url: server.url() }));
    expect(result).to.include({ ok: false, status: 302, error: 'http_302', responseBody: 'moved' });
    await sleep(50);
    expect(target.connections).to.equal(0);
  });

  it('gives up on a server that never answers, at the deadline, and closes its socket', async () => {
    const server = await serve(() => undefined);
    const result = await postWebhook(options({ url: server.url(), timeoutMs: 300 }));
    expect(result).to.include({ ok: false, status: null, error: 'timeout', responseBody: null });
    expect(result.durationMs).to.be.within(295, 300 + 250);
    await sleep(100);
    expect(server.connections).to.equal(1);
    expect(server.open.size, 'sockets left open').to.equal(0);
  });

  it('counts reading a slow body against the deadline', async () => {
    const server = await serve((_req, res) => {
      res.writeHead(200);
      const drip = setInterval(() => res.write('.'), 50);
      res.on('close', () => clearInterval(drip));
    });
    const result = await postWebhook(options({ url: server.url(), timeoutMs: 400 }));
    expect(result.error).to.equal('timeout');
    expect(result.ok).to.equal(false);
    expect(result.status).to.equal(200);
    expect(result.responseBody).to.match(/^\.+$/);
    expect(result.durationMs).to.be.within(395, 400 + 250);
  });

  it('counts name resolution against the deadline', async () => {
    const result = await postWebhook(options({
      url: 'http://hooks.example.test/',
      timeoutMs: 200,
      lookup: () => new Promise(() => undefined),
    }));
    expect(result).to.include({ ok: false, status: null, error: 'timeout' });
    expect(result.durationMs).to.be.within(195, 200 + 250);
  });

  it('reports a closed port as connection_refused', async () => {
    const server = await serve(() => undefined);
    const url = server.url();
    await servers.pop()!.close();
    const result = await postWebhook(options({ url }));
    expect(result).to.include({ ok: false, status: null, error: 'connection_refused', responseBody: null });
  });

  it('reports a failed resolution as dns_error', async () => {
    const notFound = Object.assign(new Error('getaddrinfo ENOTFOUND nowhere.test'), { code: 'ENOTFOUND' });
    expect(await postWebhook(options({ url: 'http://nowhere.test/', lookup: () => Promise.reject(notFound) })))
      .to.include({ ok: false, status: null, error: 'dns_error' });
    expect(await postWebhook(options({ url: 'http://nowhere.test/', lookup: async () => [] })))
      .to.include({ ok: false, status: null, error: 'dns_error' });
  });

  describe('with private addresses refused', () => {
    it('refuses loopback, link-local and mapped literals without connecting', async () => {
      const server = await serve((_req, res) => res.end('reached'));
      const urls = [
        server.url(),
        `http://[::1]:${server.port}/`,
        `http://[::ffff:127.0.0.1]:${server.port}/`,
        `http://0x7f000001:${server.port}/`,
        'http://169.254.169.254/latest/meta-data/',
      ];
      for (const url of urls) {
        const result = await postWebhook(options({ url, allowPrivateAddresses: false }));
        expect(result, url).to.include({ ok: false, status: null, error: 'blocked_address', responseBody: null });
      }
      expect(server.connections).to.equal(0);
    });

    it('refuses a host name that resolves to a private address', async () => {
      const server = await serve((_req, res) => res.end('reached'));
      const asked: string[] = [];
      const result = await postWebhook(options({
        url: `http://hooks.example.test:${server.port}/`,
        allowPrivateAddresses: false,
        lookup: async (host) => (asked.push(host), [{ address: '10.0.0.1', family: 4 }]),
      }));
      expect(result).to.include({ ok: false, error: 'blocked_address' });
      expect(asked).to.deep.equal(['hooks.example.test']);
      expect(server.connections).to.equal(0);
    });

    it('refuses a host name when any one of its addresses is private', async () => {
      const server = await serve((_req, res) => res.end('reached'));
      const result = await postWebhook(options({
        url: `http://hooks.example.test:${server.port}/`,
        allowPrivateAddresses: false,
        lookup: async () => [{ address: '8.8.8.8', family: 4 }, { address: '127.0.0.1', family: 4 }],
      }));
      expect(result).to.include({ ok: false, status: null, error: 'blocked_address' });
      expect(server.connections).to.equal(0);
    });
  });

  it('connects to the address it resolved, once, and keeps the host name in Host', async () => {
    const server = await serve((_req, res) => res.end('pinned'));
    let lookups = 0;
    // A rebinding resolver: the first answer only is ever used.
    const lookup = async () => (++lookups === 1 ? [{ address: '127.0.0.1', family: 4 }] : [{ address: '192.0.2.1', family: 4 }]);
    const result = await postWebhook(options({ url: `http://hooks.example.test:${server.port}/in`, lookup }));
    expect(result).to.include({ ok: true, status: 200, responseBody: 'pinned' });
    expect(lookups).to.equal(1);
    expect(server.received).to.have.length(1);
    expect(server.received[0].headers.host).to.equal(`hooks.example.test:${server.port}`);
  });

  it('tries the next resolved address when one refuses', async () => {
    const server = await serve((_req, res) => res.end('second'));
    const result = await postWebhook(options({
      url: `http://hooks.example.test:${server.port}/`,
      lookup: async () => [{ address: '127.0.0.2', family: 4 }, { address: '127.0.0.1', family: 4 }],
    }));
    expect(result).to.include({ ok: true, responseBody: 'second' });
  });

  it('sends the host name as TLS SNI and reports an untrusted certificate as tls_error', async () => {
    const names: string[] = [];
    let requests = 0;
    const server = https.createServer({
      key: TLS_KEY,
      cert: TLS_CERT,
      SNICallback: (name, cb) => (names.push(name), cb(null)),
    }, (_req, res) => (requests++, res.end()));
    server.on('tlsClientError', () => undefined);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const port = (server.address() as AddressInfo).port;
      const result = await postWebhook(options({
        url: `https://hooks.example.test:${port}/`,
        lookup: async () => [{ address: '127.0.0.1', family: 4 }],
      }));
      expect(result).to.include({ ok: false, status: null, error: 'tls_error', responseBody: null });
      expect(names).to.deep.equal(['hooks.example.test']);
      expect(requests).to.equal(0);
    } finally {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  });

  it('refuses what is not an http(s) URL without resolving anything', async () => {
    let lookups = 0;
    const lookup = async () => (lookups++, [{ address: '127.0.0.1', family: 4 }]);
    for (const url of ['ftp://hooks.example.test/x', 'not a url', 'javascript:alert(1)', 'file:///etc/passwd', '']) {
      const result = await postWebhook(options({ url, lookup }));
      expect(result, url).to.include({ ok: false, status: null, error: 'invalid_url', responseBody: null });
    }
    expect(lookups).to.equal(0);
  });
});

describe('signWebhookBody', () => {
  it('is the hex HMAC-SHA256 of the body (RFC 4231 test case 2)', () => {
    expect(signWebhookBody('Jefe', 'what do ya want for nothing?'))
      .to.equal('5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843');
  });

  it('signs the UTF-8 bytes of the body', () => {
    const body = '{"s":"Café"}';
    expect(signWebhookBody('k', body)).to.equal(createHmac('sha256', 'k').update(Buffer.from(body, 'utf8')).digest('hex'));
    expect(signWebhookBody('k', body)).not.to.equal(createHmac('sha256', 'k').update(Buffer.from(body, 'latin1')).digest('hex'));
  });
});
