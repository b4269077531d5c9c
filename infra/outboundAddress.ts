import { lookup as dnsLookup } from 'node:dns/promises';
import { BlockList, isIP, type LookupFunction } from 'node:net';

/**
 * Connections Motor opens to places its tenants name (webhook URLs, OAuth client metadata, MX hosts
 * of recipient domains): which addresses count as public, and host resolution pinned to the
 * addresses that were checked, so a second resolution (DNS rebinding) never happens.
 */

export interface Address { address: string; family: 4 | 6 }

/** Host name resolution with { all: true } semantics; injectable for tests. */
export type HostLookup = (hostname: string) => Promise<{ address: string; family: number }[]>;

/**
 * Addresses that are not public unicast (IANA special-purpose registries, RFC 6890 and updates):
 * private, shared, loopback, link-local, documentation, benchmarking, multicast, reserved.
 */
const SPECIAL_V4 = blockList('ipv4', [
  '0.0.0.0/8', '10.0.0.0/8', '100.64.0.0/10', '127.0.0.0/8', '169.254.0.0/16', '172.16.0.0/12',
  '192.0.0.0/24', '192.0.2.0/24', '192.88.99.0/24', '192.168.0.0/16', '198.18.0.0/15',
  '198.51.100.0/24', '203.0.113.0/24', '224.0.0.0/4', '240.0.0.0/4',
]);
/** IPv6 unicast is public only inside 2000::/3: that leaves out ::/8, fc00::/7, fe80::/10, ff00::/8... */
const GLOBAL_UNICAST_V6 = blockList('ipv6', ['2000::/3']);
/** ...minus the IETF protocol range (Teredo, ORCHID, benchmarking) and documentation. */
const SPECIAL_V6 = blockList('ipv6', ['2001::/23', '2001:db8::/32', '3fff::/20']);

/** True when the IP (v4 or v6 text) is a public unicast address. */
export function isPublicAddress(ip: string): boolean {
  switch (isIP(ip)) {
    case 4:
      return !SPECIAL_V4.check(ip, 'ipv4');
    case 6: {
      const v4 = embeddedIpv4(ip);
      if (v4 !== undefined) return v4 !== null && isPublicAddress(v4);
      return GLOBAL_UNICAST_V6.check(ip, 'ipv6') && !SPECIAL_V6.check(ip, 'ipv6');
    }
    default:
      return false;
  }
}

/**
 * The IPv4 address an IPv6 address stands for, because the kernel or a NAT64 gateway would send
 * the packets there: IPv4-mapped (::ffff:0:0/96), NAT64 (64:ff9b::/96) and 6to4 (2002::/16).
 * null for the deprecated IPv4-compatible ::/96 (:: and ::1 included), refused whatever it
 * embeds; undefined when the address embeds none.
 */
function embeddedIpv4(ip: string): string | null | undefined {
  const w = ipv6Words(ip);
  const dotted = (hi: number, lo: number) => `${hi >> 8}.${hi & 0xff}.${lo >> 8}.${lo & 0xff}`;
  const zeros = (from: number, to: number) => w.slice(from, to).every((x) => x === 0);
  if (zeros(0, 5) && w[5] === 0xffff) return dotted(w[6], w[7]);
  if (zeros(0, 6)) return null;
  if (w[0] === 0x64 && w[1] === 0xff9b && zeros(2, 6)) return dotted(w[6], w[7]);
  if (w[0] === 0x2002) return dotted(w[1], w[2]);
  return undefined;
}

/** The eight 16-bit words of an IPv6 address that isIP() accepted (a zone index is ignored). */
function ipv6Words(ip: string): number[] {
  let text = ip.replace(/%.*$/, '');
  const dotted = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text);
  if (dotted) {
    const [a, b, c, d] = dotted.slice(1).map(Number);
    text = `${text.slice(0, dotted.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head, tail] = text.split('::');
  const words = (part: string | undefined) => (part ? part.split(':').map((h) => parseInt(h, 16)) : []);
  const before = words(head);
  const after = words(tail);
  return [...before, ...Array<number>(8 - before.length - after.length).fill(0), ...after];
}

function blockList(type: 'ipv4' | 'ipv6', cidrs: string[]): BlockList {
  const list = new BlockList();
  for (const cidr of cidrs) {
    const [network, prefix] = cidr.split('/');
    list.addSubnet(network, Number(prefix), type);
  }
  return list;
}

export const systemLookup = (hostname: string) => dnsLookup(hostname, { all: true });

/** IP literals (URL gives IPv6 in brackets, already normalised) are not looked up. */
export async function resolveHost(hostname: string, lookup: HostLookup): Promise<Address[]> {
  const literal = hostname.replace(/^\[(.*)\]$/, '$1');
  if (isIP(literal)) return [{ address: literal, family: isIP(literal) as 4 | 6 }];
  const addresses = (await lookup(hostname)).map(({ address }) => ({ address, family: isIP(address) }));
  if (addresses.length === 0 || addresses.some((a) => a.family === 0)) throw new Error(`no usable address for ${hostname}`);
  return addresses as Address[];
}

/**
 * The lookup net.connect uses, answering with the addresses already checked, so the socket goes
 * to one of them and nowhere else. With several, net tries them in turn (autoSelectFamily); the
 * host name still gives the Host header, the TLS SNI and the name the certificate must match.
 */
export function pinnedLookup(addresses: Address[]): LookupFunction {
  return (_hostname, options, callback) => {
    if (options.all) callback(null, addresses);
    else callback(null, addresses[0].address, addresses[0].family);
  };
}

/** Resolution cannot be cancelled, but it cannot hold the attempt past its deadline either. */
export function untilAborted<T>(work: Promise<T>, signal: AbortSignal): Promise<T> {
  return new Promise((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    if (signal.aborted) return onAbort();
    signal.addEventListener('abort', onAbort, { once: true });
    work.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
  });
}
