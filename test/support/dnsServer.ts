import { createServer as createNetServer, Socket, type AddressInfo } from 'node:net';
import DNS from 'dns2';

const { Packet } = DNS;

/** The records of one name. TXT values longer than 255 bytes are split into character-strings. */
export interface ZoneRecords {
  MX?: Array<{ exchange: string; priority: number }>;
  TXT?: string[];
  A?: string[];
  AAAA?: string[];
  CNAME?: string;
  PTR?: string[];
}

export type Zones = Record<string, ZoneRecords>;

/** `servfail` answers SERVFAIL; `timeout` never answers. */
export type DnsFailure = 'servfail' | 'timeout';

export interface TestDnsServer {
  /** "127.0.0.1:port", the form `createResolver([...])` and DNS_SERVERS take. */
  address: string;
  port: number;
  /** Replaces the records of `name` (creating it). */
  setRecords(name: string, records: ZoneRecords): void;
  /** Merges records into `name` (creating it). */
  addRecords(name: string, records: ZoneRecords): void;
  /** Deletes `name`: it answers NXDOMAIN from then on. */
  removeName(name: string): void;
  /** Makes every query for `name` fail (`null` clears it). Applies even to names not in the zone. */
  setFailure(name: string, failure: DnsFailure | null): void;
  /** Questions received, in order (lower-cased name, type as "MX", "TXT"..., transport). */
  queries: Array<{ name: string; type: string; transport: 'udp' | 'tcp' }>;
  close(): Promise<void>;
}

const TYPE_NAMES: Record<number, keyof ZoneRecords | 'ANY'> = {
  [Packet.TYPE.MX]: 'MX',
  [Packet.TYPE.TXT]: 'TXT',
  [Packet.TYPE.A]: 'A',
  [Packet.TYPE.AAAA]: 'AAAA',
  [Packet.TYPE.CNAME]: 'CNAME',
  [Packet.TYPE.PTR]: 'PTR',
};

const key = (name: string): string => name.trim().replace(/\.$/, '').toLowerCase();

/** Splits a TXT value into <=255-byte character-strings (RFC 1035 §3.3.14), as zone files do. */
export function splitTxt(value: string): Buffer[] {
  const bytes = Buffer.from(value, 'utf8');
  const parts: Buffer[] = [];
  for (let i = 0; i < bytes.length; i += 255) parts.push(bytes.subarray(i, i + 255));
  return parts.length ? parts : [Buffer.alloc(0)];
}

/**
 * An authoritative-and-recursive-enough DNS server for tests, on 127.0.0.1 (UDP and TCP on the
 * same port, so truncated UDP answers are retried over TCP). CNAMEs are chased like a recursive
 * resolver would, since Node's resolver does not follow them itself.
 */
export async function startDnsServer(zones: Zones = {}): Promise<TestDnsServer> {
  const zone = new Map<string, ZoneRecords>();
  for (const [name, records] of Object.entries(zones)) zone.set(key(name), { ...records });
  const failures = new Map<string, DnsFailure>();
  const queries: TestDnsServer['queries'] = [];

  const answersFor = (name: string, type: number, depth: number): { found: boolean; answers: DNS.Packet.Resource[] } => {
    const records = zone.get(name);
    if (!records) return { found: false, answers: [] };
    const base = { name, class: Packet.CLASS.IN, ttl: 60 };
    if (records.CNAME && type !== Packet.TYPE.CNAME) {
      const target = key(records.CNAME);
      const cname = { ...base, type: Packet.TYPE.CNAME, domain: target } as DNS.Packet.Resource;
      if (depth >= 8) return { found: true, answers: [cname] };
      const chased = answersFor(target, type, depth + 1);
      return { found: true, answers: [cname, ...chased.answers] };
    }
    const out: Array<Partial<DNS.Packet.Resource>> = [];
    switch (TYPE_NAMES[type]) {
      case 'MX':
        for (const mx of records.MX ?? []) out.push({ ...base, type: Packet.TYPE.MX, exchange: key(mx.exchange), priority: mx.priority });
        break;
      case 'TXT':
        for (const txt of records.TXT ?? []) out.push({ ...base, type: Packet.TYPE.TXT, data: splitTxt(txt) as unknown as string[] });
        break;
      case 'A':
        for (const address of records.A ?? []) out.push({ ...base, type: Packet.TYPE.A, address });
        break;
      case 'AAAA':
        for (const address of records.AAAA ?? []) out.push({ ...base, type: Packet.TYPE.AAAA, address });
        break;
      case 'CNAME':
        if (records.CNAME) out.push({ ...base, type: Packet.TYPE.CNAME, domain: key(records.CNAME) });
        break;
      case 'PTR':
        for (const domain of records.PTR ?? []) out.push({ ...base, type: Packet.TYPE.PTR, domain: key(domain) });
        break;
    }
    return { found: true, answers: out as DNS.Packet.Resource[] };
  };

  const handle: DNS.DnsHandler = (request, send, client) => {
    const response = Packet.createResponseFromRequest(request);
    response.header.aa = 1;
    response.header.ra = 1;
    const [question] = request.questions;
    if (!question) {
      response.header.rcode = 1; // FORMERR
      void send(response);
      return;
    }
    const name = key(question.name);
    queries.push({ name, type: TYPE_NAMES[question.type] ?? String(question.type), transport: client instanceof Socket ? 'tcp' : 'udp' });
    const failure = failures.get(name);
    if (failure === 'timeout') return;
    if (failure === 'servfail') {
      response.header.rcode = 2;
      void send(response);
      return;
    }
    const { found, answers } = answersFor(name, question.type, 0);
    if (!found) response.header.rcode = 3; // NXDOMAIN
    response.answers.push(...answers);
    void send(response);
  };

  const { server, port } = await listenOnSharedPort(handle);

  return {
    address: `127.0.0.1:${port}`,
    port,
    setRecords: (name, records) => void zone.set(key(name), { ...records }),
    addRecords: (name, records) => {
      const current = zone.get(key(name)) ?? {};
      const merged: ZoneRecords = { ...current };
      for (const [t, v] of Object.entries(records) as Array<[keyof ZoneRecords, unknown]>) {
        const prev = current[t];
        (merged as Record<string, unknown>)[t] = Array.isArray(prev) && Array.isArray(v) ? [...prev, ...v] : v;
      }
      zone.set(key(name), merged);
    },
    removeName: (name) => void zone.delete(key(name)),
    setFailure: (name, failure) => {
      if (failure) failures.set(key(name), failure);
      else failures.delete(key(name));
    },
    queries,
    close: async () => {
      await server.close();
    },
  };
}

/** UDP and TCP must share one port (a resolver retries a truncated UDP answer over TCP there). */
async function listenOnSharedPort(handle: DNS.DnsHandler): Promise<{ server: DNS.DnsServer; port: number }> {
  for (let attempt = 0; attempt < 20; attempt++) {
    const port = await freeTcpPort();
    const server = DNS.createServer({ udp: true, tcp: true, handle });
    const failed = new Promise<never>((_, reject) => server.once('error', (err: Error) => reject(err)));
    try {
      await Promise.race([server.listen({ udp: { port, address: '127.0.0.1' }, tcp: { port, address: '127.0.0.1' } }), failed]);
      return { server, port };
    } catch {
      // The port was taken (UDP or TCP) in between: this server is unusable, try a fresh one.
      await Promise.race([server.close(), new Promise((r) => setTimeout(r, 100))]);
    }
  }
  throw new Error('DNS test server: no free port');
}

function freeTcpPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createNetServer();
    probe.once('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as AddressInfo;
      probe.close(() => resolve(port));
    });
  });
}
