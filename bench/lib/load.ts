/** HTTP load with autocannon (programmatic), and the request body the send benchmarks post. */
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
  body: string;
  headers?: Record<string, string>;
  connections: number;
  /** Seconds; ignored when `amount` is set. */
  duration?: number;
  amount?: number;
  /** Requests per second across all connections (open-model pacing). */
  overallRate?: number;
  timeoutS?: number;
}

export async function runLoad(o: LoadOptions): Promise<LoadResult> {
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  const r = await autocannon({
    url: o.url,
    method: 'POST',
    headers: { 'content-type': 'application/json', ...o.headers },
    body: o.body,
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

/** A typical transactional message (~2 KB of JSON: text and html parts, a custom header, metadata). */
export function sendBody(from: string, to = 'user@rcpt.test'): string {
  const text = `Hello Ada,\n\nYour order #A-10442 has shipped and should arrive on Thursday.\n\n${'Track it any time from your account page. '.repeat(8)}\n\nThanks,\nThe Shop`;
  const html = `<!doctype html><html><body style="font-family:sans-serif"><p>Hello Ada,</p><p>Your order <b>#A-10442</b> has shipped and should arrive on Thursday.</p>${'<p>Track it any time from <a href="https://shop.example/orders/A-10442">your account page</a>.</p>'.repeat(8)}<p>Thanks,<br>The Shop</p></body></html>`;
  return JSON.stringify({
    from, fromName: 'The Shop', to, subject: 'Your order #A-10442 has shipped', text, html,
    headers: { 'X-Campaign': 'shipping' }, metadata: { orderId: 'A-10442', tier: 'gold' },
  });
}
