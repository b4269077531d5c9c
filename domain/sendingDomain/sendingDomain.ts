import { fail } from '../errors';
import type { DkimAlgorithm, DomainEvent, DomainRecordCheck } from '../events';
import { uuidV5 } from '../ids';

/**
 * The sending domain aggregate (stream `sendingDomain-<id>`): its state folded from its events
 * and one pure function per command. Lookups, keys, ids and the clock arrive as arguments.
 * docs/DOMAINS.md.
 */

export const SENDING_DOMAIN_EVENTS = ['DomainAdded', 'DomainOwnershipVerified', 'DomainDnsChecked', 'DomainOwnershipCheckFailed', 'DomainDkimKeyRotated'] as const;
export type SendingDomainEvent = DomainEvent<(typeof SENDING_DOMAIN_EVENTS)[number]>;
export type DkimMode = 'txt' | 'cname_managed';

export interface SendingDomain {
  exists: true;
  domainId: string; accountId: string; name: string;
  ownershipToken: string | null; dkimMode: DkimMode; sandbox: boolean;
  dkim: { selector: string; algorithm: DkimAlgorithm; publicKey: string; keyId: string };
  ownershipVerified: boolean; verifiedAt: string | null;
  spfConfigured: boolean; dkimConfigured: boolean; dmarcConfigured: boolean;
  lastCheckedAt: string | null;
  records: DomainRecordCheck[] | null;
  addedAt: string;
}
export type SendingDomainState = { exists: false } | SendingDomain;
export const initialState: SendingDomainState = { exists: false };

/**
 * A domain's id is derived from its account and name, so the stream itself is the uniqueness
 * claim: two concurrent adds of one name append to the same new stream, and only one can.
 */
export const domainIdFor = (accountId: string, name: string): string => uuidV5(`sendingDomain:${accountId}:${name.toLowerCase()}`);

export function evolve(state: SendingDomainState, event: SendingDomainEvent): SendingDomainState {
  if (event.type === 'DomainAdded') {
    const d = event.data;
    return {
      exists: true, domainId: d.domainId, accountId: d.accountId, name: d.name, ownershipToken: d.ownershipToken ?? null,
      dkimMode: d.dkimMode ?? 'txt', sandbox: d.sandbox ?? false,
      dkim: { selector: d.dkimSelector, algorithm: d.dkimAlgorithm, publicKey: d.dkimPublicKey, keyId: d.dkimKeyId },
      ownershipVerified: false, verifiedAt: null, spfConfigured: false, dkimConfigured: false, dmarcConfigured: false,
      lastCheckedAt: null, records: null, addedAt: d.addedAt,
    };
  }
  if (!state.exists) return state;
  switch (event.type) {
    case 'DomainOwnershipVerified':
      return { ...state, ownershipVerified: true, verifiedAt: event.data.verifiedAt };
    case 'DomainDnsChecked': {
      const d = event.data;
      return { ...state, spfConfigured: d.spfConfigured, dkimConfigured: d.dkimConfigured, dmarcConfigured: d.dmarcConfigured, lastCheckedAt: d.checkedAt, records: d.records ?? state.records };
    }
    case 'DomainOwnershipCheckFailed':
      return state;
    case 'DomainDkimKeyRotated': {
      const d = event.data;
      // The owner's CNAME is unchanged and the service serves the new key behind it: readiness stays.
      return { ...state, dkim: { selector: d.dkimSelector, algorithm: d.dkimAlgorithm, publicKey: d.dkimPublicKey, keyId: d.dkimKeyId } };
    }
  }
}

export const fold = (events: SendingDomainEvent[]): SendingDomainState => events.reduce(evolve, initialState);

/** Ready to send: ownership proven and SPF and DKIM published (DMARC is advised, not required). */
export const isSendReady = (s: Pick<SendingDomain, 'ownershipVerified' | 'spfConfigured' | 'dkimConfigured'>): boolean =>
  s.ownershipVerified && s.spfConfigured && s.dkimConfigured;

const notFound = () => fail('domain_not_found', 404, 'No such domain in this account', { nextAction: 'List your domains with GET /domains' });

/** The domain when it is the caller's; 404 otherwise (ids of other accounts do not leak). */
export function ownedDomain(state: SendingDomainState, accountId: string): SendingDomain {
  if (!state.exists || state.accountId !== accountId) throw notFound();
  return state;
}

// ---------------------------------------------------------------- commands

export interface AddDomain {
  domainId: string; accountId: string; name: string; dkimMode: DkimMode; ownershipToken: string;
  dkim: { selector: string; algorithm: DkimAlgorithm; publicKey: string; keyId: string };
  now: Date;
}

export function addDomain(state: SendingDomainState, cmd: AddDomain): SendingDomainEvent[] {
  if (state.exists) {
    throw fail('domain_already_added', 409, `${cmd.name} is already on this account`, {
      nextAction: 'List your domains with GET /domains; verify the existing one instead of adding it again',
      details: { domainId: state.domainId },
    });
  }
  return [{
    type: 'DomainAdded',
    data: {
      domainId: cmd.domainId, accountId: cmd.accountId, name: cmd.name, dkimSelector: cmd.dkim.selector, dkimAlgorithm: cmd.dkim.algorithm,
      dkimPublicKey: cmd.dkim.publicKey, dkimKeyId: cmd.dkim.keyId, ownershipToken: cmd.ownershipToken, dkimMode: cmd.dkimMode, sandbox: false,
      addedAt: cmd.now.toISOString(),
    },
  }];
}

/**
 * Flags from a check. A record that could not be looked up (SERVFAIL, timeout) keeps its
 * previous flag: a resolver hiccup must not stop a working domain from sending. A definitive
 * answer (missing, wrong) sets it.
 */
export function flagsFrom(state: SendingDomain, records: DomainRecordCheck[]): { spfConfigured: boolean; dkimConfigured: boolean; dmarcConfigured: boolean } {
  const flag = (purpose: DomainRecordCheck['purpose'], previous: boolean): boolean => {
    const r = records.find((x) => x.purpose === purpose);
    if (!r || r.status === 'error') return previous;
    return r.status === 'ok';
  };
  return { spfConfigured: flag('spf', state.spfConfigured), dkimConfigured: flag('dkim', state.dkimConfigured), dmarcConfigured: flag('dmarc', state.dmarcConfigured) };
}

/** A DNS check: persists the flags and the per-record results. Ownership is not touched. */
export function recordDnsCheck(state: SendingDomain, cmd: { records: DomainRecordCheck[]; now: Date }): SendingDomainEvent[] {
  return [{ type: 'DomainDnsChecked', data: { domainId: state.domainId, method: 'dns', ...flagsFrom(state, cmd.records), records: cmd.records, checkedAt: cmd.now.toISOString() } }];
}

/**
 * Verify: the ownership record decides ownership (once proven it stays proven), and the same
 * lookups refresh SPF/DKIM/DMARC readiness.
 */
export function verifyDomain(state: SendingDomain, cmd: { records: DomainRecordCheck[]; now: Date }): SendingDomainEvent[] {
  const at = cmd.now.toISOString();
  const events: SendingDomainEvent[] = [];
  if (!state.ownershipVerified) {
    const own = cmd.records.find((r) => r.purpose === 'ownership');
    if (own?.status === 'ok') events.push({ type: 'DomainOwnershipVerified', data: { domainId: state.domainId, method: 'dns', verifiedAt: at } });
    else events.push({ type: 'DomainOwnershipCheckFailed', data: { domainId: state.domainId, reason: own?.reason ?? 'ownership_missing', ...(own?.found ? { found: own.found } : {}), checkedAt: at } });
  }
  events.push(...recordDnsCheck(state, cmd));
  return events;
}

/** cname_managed only: a new key at the same selector; the owner's CNAME does not change. */
export function rotateDkimKey(state: SendingDomain, cmd: { key: { algorithm: DkimAlgorithm; publicKey: string; keyId: string }; now: Date }): SendingDomainEvent[] {
  if (state.sandbox || state.dkimMode !== 'cname_managed') {
    throw fail('dkim_rotation_not_available', 409, 'Only service-managed (cname_managed) DKIM keys can be rotated by the service', {
      nextAction: 'Add the domain with dkimMode cname_managed, or publish a new TXT key yourself',
    });
  }
  return [{
    type: 'DomainDkimKeyRotated',
    data: {
      domainId: state.domainId, dkimSelector: state.dkim.selector, dkimAlgorithm: cmd.key.algorithm, dkimPublicKey: cmd.key.publicKey,
      dkimKeyId: cmd.key.keyId, previousKeyId: state.dkim.keyId, rotatedAt: cmd.now.toISOString(),
    },
  }];
}

const DOMAIN_RE = /^(?=.{1,253}$)(?!-)[a-z0-9-]{1,63}(?<!-)(\.(?!-)[a-z0-9-]{1,63}(?<!-))+$/;
/**
 * The longest name a domain's records put in front of it: the DKIM TXT name
 * `motorYYYYMMDD._domainkey.` (25 characters). A longer domain would have record names past
 * DNS's 253, which no lookup can find: it could never be verified.
 */
export const MAX_DOMAIN_NAME_LENGTH = 253 - 'motor20261122._domainkey.'.length;

/** A domain name as the domain code compares and stores it: trimmed, lower case, no trailing dot. */
export const normalizeDomainName = (input: string): string => input.trim().toLowerCase().replace(/\.$/, '');

/** `name` is `domain` itself or a name under it (both normalised); a sibling sharing a suffix (`xbounces.example.com`) is not. */
export const isAtOrUnder = (name: string, domain: string): boolean => name === domain || name.endsWith(`.${domain}`);

/** The operator's names a tenant may not add, each with every name under it. */
export interface ReservedDomains {
  serviceDomain: string;
  /** BOUNCE_DOMAIN (normalised), or null when asynchronous bounces are off. */
  bounceDomain: string | null;
}

const BOUNCE_DOMAIN_IS_THE_OPERATORS = 'the bounce domain carries the envelope sender of every message and is the operator\'s';

/**
 * 400 domain_reserved for the operator's bounce domain and the names under it: a tenant holding a
 * DKIM key for it could send From: the domain every delivery's MAIL FROM is on, and its DSNs and
 * reports would mix with the operator's. A parent (example.com when the bounce domain is
 * bounces.example.com) is the tenant's own and is not refused.
 */
export function refuseBounceDomain(name: string, bounceDomain: string | null): void {
  if (bounceDomain === null || !isAtOrUnder(name, bounceDomain)) return;
  throw fail('domain_reserved', 400, `${name} is the service's bounce domain or under it`, {
    nextAction: `Add a domain of your own; ${BOUNCE_DOMAIN_IS_THE_OPERATORS}`, details: { field: 'domain' },
  });
}

/**
 * 400 domain_reserved for a block newly put on a domain at or under the bounce domain (create,
 * assign-domain, sandbox convert). Such a domain was added before BOUNCE_DOMAIN named it: it stays
 * the tenant's, and the blocks on it keep sending and reactivating (stopping them would break a
 * live sender without warning), but it gets no new one. Names are compared normalised (an older
 * release may have stored another spelling).
 */
export function refuseBounceDomainForBlock(domain: { id: string; name: string }, bounceDomain: string | null): void {
  if (bounceDomain === null || !isAtOrUnder(normalizeDomainName(domain.name), bounceDomain)) return;
  throw fail('domain_reserved', 400, `${domain.name} is the service's bounce domain or under it (set after the domain was added): no new Motor Block may use it`, {
    nextAction: `Use a domain of your own for the block; blocks already on ${domain.name} keep sending, and ${BOUNCE_DOMAIN_IS_THE_OPERATORS}`,
    details: { field: 'domainId', domainId: domain.id },
  });
}

/** Normalises and validates a domain name to add; names under the service's own domain and its bounce domain are reserved. */
export function parseDomainName(input: unknown, reserved: ReservedDomains): string {
  if (typeof input !== 'string') throw fail('invalid_domain', 400, 'domain must be a domain name such as example.com', { details: { field: 'domain' } });
  const name = normalizeDomainName(input);
  if (!DOMAIN_RE.test(name) || /^\d+(\.\d+)+$/.test(name) || !/[a-z]/.test(name.slice(name.lastIndexOf('.') + 1))) {
    throw fail('invalid_domain', 400, `Not a valid domain name: ${input.slice(0, 260)}`, { details: { field: 'domain' } });
  }
  if (name.length > MAX_DOMAIN_NAME_LENGTH) {
    throw fail('invalid_domain', 400, `A sending domain has at most ${MAX_DOMAIN_NAME_LENGTH} characters (its DKIM record name must fit in 253)`, { details: { field: 'domain' } });
  }
  if (isAtOrUnder(name, reserved.serviceDomain.toLowerCase())) {
    throw fail('domain_reserved', 400, `${name} is under the service's own domain`, { nextAction: 'Use POST /account/sandbox/provision for a sandbox domain', details: { field: 'domain' } });
  }
  refuseBounceDomain(name, reserved.bounceDomain);
  return name;
}
