import { connect, createServer, type AddressInfo, type Socket } from 'node:net';

/**
 * A TCP proxy on loopback that can stop answering: `pause()` keeps every connection open but
 * forwards nothing either way (what a client sees of a server on a host that froze, or behind a
 * network black hole), `resume()` delivers what was held and goes on. For testing the deadlines of
 * clients that would otherwise wait as long as the operating system keeps a connection.
 */
export interface PausableProxy {
  port: number;
  pause(): void;
  resume(): void;
  /**
   * The connections open now never forward anything again, held bytes included, while staying
   * open: a black hole that outlived their server sessions (the server restarted behind it, a
   * firewall forgot them). Connections made later are forwarded as usual (held while paused). A
   * client that waits on an abandoned connection without a deadline waits for ever.
   */
  abandon(): void;
  /**
   * The network between the two sides goes, as abandon() but for closes too: on the connections
   * open now nothing passes either way again, and a side that closes its end is not heard by the
   * other, which keeps its end open (a host cut off: its server learns nothing until close()).
   * Connections made later reach the proxy and go no further: the client's connect times out.
   */
  cutOff(): void;
  close(): Promise<void>;
}

export interface PausableProxyOptions {
  /**
   * Pauses the proxy as a chunk the client sends matches, that chunk held with the rest: a server
   * that freezes at one given statement (its text is in the chunk), after answering what came before.
   */
  pauseOn?: (chunk: Buffer) => boolean;
}

export async function startPausableProxy(target: { host: string; port: number }, options: PausableProxyOptions = {}): Promise<PausableProxy> {
  let paused = false;
  const links = new Set<{ from: Socket; to: Socket; held: Buffer[]; lost: boolean; cut: boolean }>();
  const sockets = new Set<Socket>();
  const forward = (from: Socket, to: Socket, fromClient: boolean) => {
    const link = { from, to, held: [] as Buffer[], lost: false, cut: false };
    links.add(link);
    from.on('data', (chunk: Buffer) => {
      if (link.lost) return;
      if (fromClient && options.pauseOn?.(chunk)) paused = true;
      if (paused) link.held.push(chunk);
      else to.write(chunk);
    });
    from.on('close', () => { links.delete(link); if (!link.cut) to.destroy(); });
    from.on('error', () => { if (!link.cut) to.destroy(); });
  };
  /** cutOff(): new connections are taken and held, never forwarded (the host's network is gone, not only its open connections). */
  let cut = false;
  const server = createServer((client) => {
    if (cut) {
      sockets.add(client);
      client.on('close', () => sockets.delete(client));
      client.on('error', () => undefined);
      return;
    }
    const upstream = connect(target.port, target.host);
    sockets.add(client);
    sockets.add(upstream);
    client.on('close', () => sockets.delete(client));
    upstream.on('close', () => sockets.delete(upstream));
    forward(client, upstream, true);
    forward(upstream, client, false);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    pause: () => { paused = true; },
    abandon: () => {
      for (const link of links) {
        link.lost = true;
        link.held = [];
      }
    },
    cutOff: () => {
      cut = true;
      for (const link of links) {
        link.lost = true;
        link.cut = true;
        link.held = [];
      }
    },
    resume: () => {
      paused = false;
      for (const link of links) {
        for (const chunk of link.held.splice(0)) link.to.write(chunk);
      }
    },
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
