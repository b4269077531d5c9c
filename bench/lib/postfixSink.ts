/**
 * Postfix's `smtp-sink` (Debian package postfix) as the benchmark MX: a C event loop that accepts
 * everything at once (no greeting delay, unlike smtp-server's 100 ms), PIPELINING, no TLS. Runs with
 * `-c` (running counters on stdout: "sess=N quit=N mesg=N") so the benchmark can count messages and
 * connections. Only the benchmarks use it; tests use test/support/smtpSink.ts.
 */
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { connect, createServer, type AddressInfo } from 'node:net';
import { sleep } from './common';

export const SMTP_SINK_BIN = ['/usr/sbin/smtp-sink', '/usr/bin/smtp-sink'].find((p) => existsSync(p)) ?? null;

export interface BenchSink {
  port: number;
  /** Messages received so far (end of DATA). */
  received(): number;
  /** Sessions ended so far (smtp-sink counts a connection when it closes). */
  sessions(): number;
  close(): Promise<void>;
}

/** A loopback port nobody listens on right now (also used by bench/smtp.bench.ts). */
export async function freePort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', () => r()));
  const port = (s.address() as AddressInfo).port;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

export async function startPostfixSink(): Promise<BenchSink> {
  if (!SMTP_SINK_BIN) throw new Error('smtp-sink not found: apt-get install -y postfix (or DELIVER_SINK=node)');
  const port = await freePort();
  // -a: no AUTH announced; -u: smtp-sink refuses to keep running as root; 1024: listen backlog.
  const args = ['-a', '-c', ...(process.getuid?.() === 0 ? ['-u', 'nobody'] : []), `127.0.0.1:${port}`, '1024'];
  const proc = spawn(SMTP_SINK_BIN, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let mesg = 0;
  let sess = 0;
  let tail = '';
  let stderr = '';
  proc.stdout.on('data', (d: Buffer) => {
    tail = (tail + d.toString('latin1')).slice(-200);
    const all = [...tail.matchAll(/sess=(\d+) quit=\d+ mesg=(\d+)/g)];
    const last = all[all.length - 1];
    if (last) { sess = Number(last[1]); mesg = Number(last[2]); }
  });
  proc.stderr.on('data', (d: Buffer) => { stderr += d.toString(); });
  let exited = false;
  proc.on('exit', () => { exited = true; });
  // Ready when it accepts a connection.
  for (let i = 0; ; i++) {
    if (exited) throw new Error(`smtp-sink exited: ${stderr}`);
    const ok = await new Promise<boolean>((resolve) => {
      const c = connect(port, '127.0.0.1');
      c.once('connect', () => { c.destroy(); resolve(true); });
      c.once('error', () => resolve(false));
    });
    if (ok) break;
    if (i > 50) throw new Error(`smtp-sink did not listen on ${port}: ${stderr}`);
    await sleep(50);
  }
  return {
    port,
    received: () => mesg,
    sessions: () => sess,
    async close() {
      if (exited) return;
      const done = new Promise<void>((r) => proc.once('exit', () => r()));
      proc.kill('SIGTERM');
      await Promise.race([done, sleep(2000)]);
    },
  };
}
