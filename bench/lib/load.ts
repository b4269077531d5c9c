/** HTTP load with autocannon (programmatic), evenly paced load, and the request body the send benchmarks post. */
import { Agent, request } from 'node:http';
import autocannon from 'autocannon';

export interface LoadResult {
  requests: number;
  ok: number;
  non2xx: number;
  errors: number;
  timeouts: number;
  durationS: number;
  rps: number;
  p50: number;
  p90: number;
  p99: number;
  max: number;
  statusCodes: Record<string, number>;
  /** CPU used by this process (the load generator) during the run, in cores (1.0 = one core busy). */
  clientCores: number;
}

export interface LoadOptions {
  url: string;
  /** POST (the default) sends `body` as JSON; GET sends nothing. */
  method?: 'GET' | 'POST';
  body: string;
  headers?: Record<string, string>;
  connections: number;
  /** Seconds; ignored when `amount` is set. */
  duration?: number;
  amount?: number;
  /**
   * Requests per second across all connections. Note autocannon's pacing: each connection sends
   * its per-second share back to back at every one-second tick, so the load arrives as one burst
   * per second. For evenly spaced arrivals use `pacedLoad`.
   */
  overallRate?: number;
  timeoutS?: number;
}

export async function runLoad(o: LoadOptions): Promise<LoadResult> {
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  const r = await autocannon({
    url: o.url,
    ...(o.method === 'GET' ? { method: 'GET', headers: o.headers ?? {} } : { method: 'POST', headers: { 'content-type': 'application/json', ...o.headers }, body: o.body }),
    connections: o.connections,
    ...(o.amount ? { amount: o.amount } : { duration: o.duration ?? 10 }),
    ...(o.overallRate ? { overallRate: o.overallRate } : {}),
    timeout: o.timeoutS ?? 30,
  });
  const cpu = process.cpuUsage(cpu0);
  const clientCores = (cpu.user + cpu.system) / 1000 / (performance.now() - t0);
  const ok = r['2xx'];
  const statusCodes: Record<string, number> = {};
  for (const [code, v] of Object.entries(r.statusCodeStats ?? {})) statusCodes[code] = (v as { count: number }).count;
  return {
    requests: r.requests.total, ok, non2xx: r.non2xx, errors: r.errors, timeouts: r.timeouts, durationS: r.duration,
    rps: ok / r.duration, p50: r.latency.p50, p90: r.latency.p90, p99: r.latency.p99, max: r.latency.max, statusCodes, clientCores,
  };
}

/**
 * Open-loop load with evenly spaced arrivals: request i starts at t0 + i / rate whatever the
 * answers so far (up to `connections` keep-alive sockets; a request due while all are busy queues
 * in the agent, so a slow server shows up as latency, not as a lower rate).
 */
export async function pacedLoad(o: { url: string; body: string; headers?: Record<string, string>; connections: number; amount: number; rate: number; timeoutS?: number }): Promise<LoadResult> {
  const agent = new Agent({ keepAlive: true, maxSockets: o.connections });
  const url = new URL(o.url);
  const headers = { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(o.body)), ...o.headers };
  const statusCodes: Record<string, number> = {};
  const latencies: number[] = [];
  let errors = 0;
  let timeouts = 0;
  const one = () => new Promise<void>((resolve) => {
    const started = performance.now();
    const req = request({ host: url.hostname, port: url.port, path: url.pathname, method: 'POST', headers, agent, timeout: (o.timeoutS ?? 30) * 1000 }, (res) => {
      res.resume();
      res.on('end', () => {
        latencies.push(performance.now() - started);
        statusCodes[String(res.statusCode)] = (statusCodes[String(res.statusCode)] ?? 0) + 1;
        resolve();
      });
    });
    req.on('timeout', () => { timeouts++; req.destroy(); });
    req.on('error', () => { errors++; resolve(); });
    req.end(o.body);
  });
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  const inflight: Array<Promise<void>> = [];
  for (let i = 0; i < o.amount; i++) {
    const due = t0 + (i * 1000) / o.rate;
    const wait = due - performance.now();
    if (wait > 1) await new Promise((r) => setTimeout(r, wait));
    inflight.push(one());
  }
  await Promise.all(inflight);
  const durationS = (performance.now() - t0) / 1000;
  agent.destroy();
  const cpu = process.cpuUsage(cpu0);
  latencies.sort((a, b) => a - b);
  const at = (q: number) => Math.round(latencies[Math.min(latencies.length - 1, Math.floor((latencies.length * q) / 100))] ?? 0);
  const ok = Object.entries(statusCodes).filter(([c]) => c.startsWith('2')).reduce((a, [, n]) => a + n, 0);
  return {
    requests: o.amount, ok, non2xx: latencies.length - ok, errors, timeouts, durationS, rps: ok / durationS,
    p50: at(50), p90: at(90), p99: at(99), max: Math.round(latencies[latencies.length - 1] ?? 0), statusCodes,
    clientCores: (cpu.user + cpu.system) / 1000 / (durationS * 1000),
  };
}

/** A typical transactional message (~2 KB of JSON: text and html parts, a custom header, metadata). */
export function sendBody(from: string, to = 'user@rcpt.test'): string {
  const text = `Hello Ada,\n\nYour order #A-10442 has shipped and should arrive on Thursday.\n\n${'Track it any time from your account page. '.repeat(8)}\n\nThanks,\nThe Shop`;
  const html = `<!doctype html><html><body style="font-family:sans-serif"><p>Hello Ada,</p><p>Your order <b>#A-10442</b> has shipped and should arrive on Thursday.</p>${'<p>Track it any time from <a href="https://shop.example/orders/A-10442">your account page</a>.</p>'.repeat(8)}<p>Thanks,<br>The Shop</p></body></html>`;
  return JSON.stringify({
    from, fromName: 'The Shop', to, subject: 'Your order #A-10442 has shipped', text, html,
    headers: { 'X-Campaign': 'shipping' }, metadata: { orderId: 'A-10442', tier: 'gold' },
  });
}
