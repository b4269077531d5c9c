import { connect, type Socket } from 'node:net';
import { Worker } from 'node:worker_threads';

/**
 * A TCP port on loopback where a new connection never completes its handshake: what a host that
 * drops SYNs (a firewall, a dead route) looks like to a client, without a firewall rule.
 *
 * A listener with a backlog of 1 is opened in a worker thread whose event loop is then blocked
 * (Atomics.wait, no CPU), so nothing accepts: the kernel completes the first handshakes into the
 * accept queue until it is full (backlog + 1 on Linux) and from then on drops every SYN, so the
 * client's connect() waits with its SYN retransmitted, as it would for a silent host. The queue is
 * filled here before the port is handed out, so the next connection to it is the one that hangs.
 */
export interface UnansweredListener {
  host: string;
  port: number;
  close(): Promise<void>;
}

const WORKER = `
const { parentPort, workerData } = require('node:worker_threads');
const net = require('node:net');
const server = net.createServer((socket) => socket.destroy());
server.on('error', (err) => parentPort.postMessage({ error: err.message }));
server.listen({ host: workerData.host, port: workerData.port, backlog: 1 }, () => {
  parentPort.postMessage({ port: server.address().port });
  // Nothing accepts until the test wakes this thread (close()).
  Atomics.wait(new Int32Array(workerData.wake), 0, 0);
  server.close();
});
`;

/** Whether a connection to host:port completes within ms (the socket is kept open when it does: it holds a place in the queue). */
function handshake(host: string, port: number, ms: number): Promise<Socket | null> {
  return new Promise((resolve) => {
    const socket = connect({ host, port });
    const timer = setTimeout(() => { socket.destroy(); resolve(null); }, ms);
    socket.on('error', () => { clearTimeout(timer); socket.destroy(); resolve(null); });
    socket.once('connect', () => { clearTimeout(timer); resolve(socket); });
  });
}

export async function startUnansweredListener(opts: { host?: string; port?: number } = {}): Promise<UnansweredListener> {
  const host = opts.host ?? '127.0.0.1';
  const wake = new SharedArrayBuffer(4);
  const worker = new Worker(WORKER, { eval: true, workerData: { host, port: opts.port ?? 0, wake } });
  const answer = await new Promise<{ port?: number; error?: string }>((resolve, reject) => {
    worker.once('message', resolve);
    worker.once('error', reject);
  });
  if (answer.error || !answer.port) {
    await worker.terminate();
    throw new Error(`could not listen on ${host}:${opts.port ?? 0}: ${answer.error}`);
  }
  const port = answer.port;
  const held: Socket[] = [];
  const close = async (): Promise<void> => {
    for (const s of held) s.destroy();
    const w = new Int32Array(wake);
    Atomics.store(w, 0, 1);
    Atomics.notify(w, 0);
    await worker.terminate();
  };
  // Fill the accept queue: connections complete until it is full, then one does not.
  for (;;) {
    const s = await handshake(host, port, 300);
    if (!s) break;
    held.push(s);
    if (held.length > 16) {
      await close();
      throw new Error('the accept queue never filled: connections to a listener that does not accept kept completing');
    }
  }
  return { host, port, close };
}
