import { connect } from 'node:net';

/** What came back on a raw connection: status line, headers, body (the connection closes after it or after `waitMs`). */
export interface RawAnswer { status: number; headers: Record<string, string>; body: string; ms: number }

/**
 * Writes `parts` on a fresh connection (a number is a pause in ms), half-closes it when `end` is set,
 * and reads until the server closes it or `waitMs` passes. A request Node or the app refuses before
 * reading it whole must still be answered, on this very socket.
 */
export function rawRequest(port: number, parts: Array<string | Buffer | number>, o: { end?: boolean; waitMs?: number } = {}): Promise<RawAnswer> {
  return new Promise((resolve) => {
    const started = Date.now();
    const chunks: Buffer[] = [];
    const socket = connect(port, '127.0.0.1', async () => {
      for (const p of parts) {
        if (typeof p === 'number') await new Promise((r) => setTimeout(r, p));
        else if (!socket.destroyed) socket.write(p);
      }
      if (o.end && !socket.destroyed) socket.end();
    });
    const finish = () => {
      const text = Buffer.concat(chunks).toString('utf8');
      const head = text.slice(0, Math.max(0, text.indexOf('\r\n\r\n')));
      const [statusLine = '', ...lines] = head.split('\r\n');
      const headers = Object.fromEntries(lines.map((l) => [l.slice(0, l.indexOf(':')).toLowerCase(), l.slice(l.indexOf(':') + 1).trim()]));
      resolve({ status: Number(statusLine.split(' ')[1] ?? 0), headers, body: text.slice(head.length + 4), ms: Date.now() - started });
    };
    socket.on('data', (d: Buffer) => chunks.push(d));
    socket.on('close', finish);
    socket.on('error', () => { /* judged by what arrived */ });
    socket.setTimeout(o.waitMs ?? 10_000, () => socket.destroy());
  });
}
