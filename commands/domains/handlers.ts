import { randomBytes } from 'node:crypto';
import type { EventStore } from '../../domain/eventStore';
import { WrongExpectedRevisionError, streamName } from '../../domain/eventStore';
import { fail } from '../../domain/errors';
import { toEventData, type DkimAlgorithm, type DomainRecordCheck } from '../../domain/events';
import { isUuid, newId, type Clock } from '../../domain/ids';
import { expectedRecords } from '../../domain/sendingDomain/records';
import {
  SENDING_DOMAIN_EVENTS, addDomain as decideAdd, domainIdFor, evolve, fold, isSendReady, ownedDomain, parseDomainName, recordDnsCheck, rotateDkimKey,
  verifyDomain as decideVerify, type DkimMode, type SendingDomain, type SendingDomainEvent,
} from '../../domain/sendingDomain/sendingDomain';
import type { Config } from '../../infra/config';
import type { KeyStore } from '../../infra/keys/keyStore';
import { findDomainOfAccountByName, listDomainsOfAccount, type DomainRecord } from '../../projections/directory/queries';
import type { DnsResolver } from '../../workers/delivery/dns';
import { generateDkimKey } from '../../workers/delivery/dkim';
import { dkimSelectorFor } from '../admin/bootstrap';
import { load } from '../auth/streams';
import { conflictAfterRetries, decideOnStream, eventsOf } from '../decideOnStream';
import { awaitDirectoryRow, type ReadYourWritesDeps } from '../readYourWrites';
import { checkDomainDns } from './dnsCheck';

/**
 * One handler module behind both route families (public `/api/public/v1/domains*` with a bearer
 * token, dashboard `/api/domains*` with a dashboard JWT): same bodies, same answers. Decisions are
 * taken on the domain's stream; answers wait for the directory row (read-your-writes).
 * docs/DOMAINS.md.
 */

export interface DomainDeps extends ReadYourWritesDeps {
  store: EventStore; keys: KeyStore; resolver: DnsResolver; clock: Clock;
  /** `inbound.bounceDomain`: BOUNCE_DOMAIN, which no tenant may add (nor a name under it). */
  config: Pick<Config, 'serviceDomain' | 'domainChecks' | 'inbound'>;
}

/** Who acts: the account, and the actor recorded in event metadata (`token:<id>`, `user:<id>`). */
export interface DomainActor { accountId: string; actor: string }

export interface DomainDnsRecord {
  type: 'TXT' | 'CNAME';
  name: string;
  value: string;
  purpose: 'ownership' | 'spf' | 'dkim' | 'dmarc';
  /** `pending` until a check looked at it. */
  status: 'pending' | 'ok' | 'missing' | 'mismatch' | 'error';
  /** Why it is not ok (docs/DOMAINS.md "Check reasons"): spf_include_missing, dkim_key_mismatch, dns_timeout, ... */
  reason?: string;
  /** What the lookup found instead. */
  found?: string[];
}

export interface DomainResource {
  id: string;
  domain: string;
  /** `pending_verification` until the ownership record was found, then `verified`. */
  status: 'pending_verification' | 'verified';
  verified: boolean;
  /** Ownership verified and SPF and DKIM configured: blocks on this domain may send. */
  sendReady: boolean;
  dkimMode: 'txt' | 'cname_managed';
  /** A service-owned sandbox domain (no DNS to publish). */
  sandbox: boolean;
  dkim_configured: boolean;
  spf_configured: boolean;
  dmarc_configured: boolean;
  lastCheckedAt: string | null;
  verifiedAt: string | null;
  addedAt: string;
  dnsRecords: DomainDnsRecord[];
}

/** The common shape of a domain read from its stream or from the directory. */
export interface DomainView {
  id: string; name: string; ownershipToken: string | null; dkimMode: DkimMode; sandbox: boolean;
  dkim: { selector: string; algorithm: DkimAlgorithm; publicKey: string };
  ownershipVerified: boolean; verifiedAt: string | null; spfConfigured: boolean; dkimConfigured: boolean; dmarcConfigured: boolean;
  lastCheckedAt: string | null; records: DomainRecordCheck[] | null; addedAt: string;
}

const iso = (d: Date | string | null): string | null => (d === null ? null : typeof d === 'string' ? d : d.toISOString());

export function viewOfRecord(r: DomainRecord): DomainView {
  return {
    id: r.id, name: r.name, ownershipToken: r.ownershipToken, dkimMode: r.dkimMode, sandbox: r.sandbox,
    dkim: { selector: r.dkimSelector, algorithm: r.dkimAlgorithm, publicKey: r.dkimPublicKey },
    ownershipVerified: r.ownershipVerified, verifiedAt: iso(r.ownershipVerifiedAt), spfConfigured: r.spfConfigured, dkimConfigured: r.dkimConfigured,
    dmarcConfigured: r.dmarcConfigured, lastCheckedAt: iso(r.dnsCheckedAt), records: r.dnsRecords, addedAt: iso(r.addedAt)!,
  };
}

export function viewOfState(s: SendingDomain): DomainView {
  return {
    id: s.domainId, name: s.name, ownershipToken: s.ownershipToken, dkimMode: s.dkimMode, sandbox: s.sandbox, dkim: s.dkim,
    ownershipVerified: s.ownershipVerified, verifiedAt: s.verifiedAt, spfConfigured: s.spfConfigured, dkimConfigured: s.dkimConfigured,
    dmarcConfigured: s.dmarcConfigured, lastCheckedAt: s.lastCheckedAt, records: s.records, addedAt: s.addedAt,
  };
}

/** What to publish, each with the status of the last check (a record whose value changed since is pending again). */
export function dnsRecordsOf(v: DomainView, serviceDomain: string): DomainDnsRecord[] {
  if (v.sandbox) return [];
  const expected = expectedRecords({ domainId: v.id, name: v.name, serviceDomain, ownershipToken: v.ownershipToken, dkimMode: v.dkimMode, dkim: v.dkim });
  return expected.map((r) => {
    if (r.purpose === 'ownership' && v.ownershipVerified) return { ...r, status: 'ok' };
    const checked = v.records?.find((c) => c.purpose === r.purpose && c.name === r.name && c.value === r.value && c.type === r.type);
    if (!checked) return { ...r, status: 'pending' };
    return { ...r, status: checked.status, ...(checked.reason ? { reason: checked.reason } : {}), ...(checked.found ? { found: checked.found } : {}) };
  });
}

export function resourceOf(v: DomainView, serviceDomain: string): DomainResource {
  return {
    id: v.id, domain: v.name, status: v.ownershipVerified ? 'verified' : 'pending_verification', verified: v.ownershipVerified,
    sendReady: isSendReady(v), dkimMode: v.dkimMode, sandbox: v.sandbox, dkim_configured: v.dkimConfigured, spf_configured: v.spfConfigured,
    dmarc_configured: v.dmarcConfigured, lastCheckedAt: v.lastCheckedAt, verifiedAt: v.verifiedAt, addedAt: v.addedAt,
    dnsRecords: dnsRecordsOf(v, serviceDomain),
  };
}

export const resourceOfRecord = (r: DomainRecord, serviceDomain: string): DomainResource => resourceOf(viewOfRecord(r), serviceDomain);

// ---------------------------------------------------------------- stream access

const streamOf = (id: string) => streamName('sendingDomain', id);

async function loadDomain(store: EventStore, id: string) {
  const { state, expected } = await load<ReturnType<typeof fold>, SendingDomainEvent>(store, streamOf(id), SENDING_DOMAIN_EVENTS, fold);
  return { state, expected };
}


/**
 * Load → decide → append at the revision read, again (after a short random pause) on a concurrent
 * append, up to 8 tries, then 409 domain_conflict; then wait until the directory row shows the
 * stream where it now is. `decide` also gets the events appended after revision `since` (what
 * other requests wrote since the caller loaded the domain) and may decide nothing. Returns the
 * state after it.
 */
async function decideOnDomain(
  deps: DomainDeps, wait: string, a: DomainActor, id: string,
  decide: (d: SendingDomain, since: SendingDomainEvent[]) => SendingDomainEvent[],
  since: bigint | null = null,
): Promise<SendingDomain> {
  if (!isUuid(id)) throw fail('invalid_id', 400, 'Domain id must be a uuid');
  let domain: SendingDomain | undefined;
  const d = await decideOnStream(deps.store, streamOf(id), {
    actor: a.actor, attempts: 8, exhausted: conflictAfterRetries('domain_conflict', 'The domain'),
  }, (recorded) => {
    domain = ownedDomain(fold(eventsOf<SendingDomainEvent>(recorded, SENDING_DOMAIN_EVENTS)), a.accountId);
    return decide(domain, eventsOf<SendingDomainEvent>(recorded.filter((e) => since === null || e.revision > since), SENDING_DOMAIN_EVENTS));
  });
  // Nothing appended: another request's write may be what answers; the caller's next read shows it too.
  if (d.revision !== null) await awaitDirectoryRow(deps, wait, 'domains', id, d.revision);
  return d.appended.reduce(evolve, domain as ReturnType<typeof fold>) as SendingDomain;
}

/** One record's result, `found` in a fixed order (a TXT lookup returns its strings in any order). */
const checkKey = (r: DomainRecordCheck): string =>
  JSON.stringify([r.type, r.name, r.value, r.purpose, r.status, r.reason ?? null, [...(r.found ?? [])].sort()]);

/** Two checks that found the same thing, record for record. */
export function sameCheck(a: readonly DomainRecordCheck[], b: readonly DomainRecordCheck[]): boolean {
  return a.length === b.length && a.every((r, i) => checkKey(r) === checkKey(b[i]));
}

/**
 * Whether a DNS check another request recorded after ours began already answers ours: it found the
 * same, record for record. Checks are idempotent: concurrent checks of one domain (a client's
 * retries, the dashboard and an agent, the background re-check) then all answer 200 with that state
 * instead of racing each other to 409 domain_conflict.
 */
const answeredBy = (since: readonly SendingDomainEvent[], records: readonly DomainRecordCheck[]): boolean =>
  since.some((e) => e.type === 'DomainDnsChecked' && e.data.records !== undefined && sameCheck(e.data.records, records));

// ---------------------------------------------------------------- commands and reads

export interface AddDomainBody { domain?: unknown; dkimMode?: unknown }

const DKIM_MODES: DkimMode[] = ['txt', 'cname_managed'];
/** The fixed selector of service-managed keys: the owner's CNAME never changes, rotation swaps the key behind it. */
export const MANAGED_DKIM_SELECTOR = 'motor';

export async function listDomains(deps: Pick<DomainDeps, 'db' | 'config'>, accountId: string): Promise<DomainResource[]> {
  return (await listDomainsOfAccount(deps.db, accountId)).map((r) => resourceOfRecord(r, deps.config.serviceDomain));
}

/**
 * Adds a domain with a fresh ownership token and DKIM key; 409 domain_already_added when the name is
 * on the account, 400 domain_reserved for the operator's names (SERVICE_DOMAIN, BOUNCE_DOMAIN).
 */
export async function addDomain(deps: DomainDeps, a: DomainActor, body: AddDomainBody): Promise<DomainResource> {
  const name = parseDomainName(body?.domain, { serviceDomain: deps.config.serviceDomain, bounceDomain: deps.config.inbound.bounceDomain });
  const dkimMode = body?.dkimMode ?? 'txt';
  if (typeof dkimMode !== 'string' || !DKIM_MODES.includes(dkimMode as DkimMode)) {
    throw fail('invalid_dkim_mode', 400, 'dkimMode must be txt or cname_managed', { details: { field: 'dkimMode' } });
  }
  const id = domainIdFor(a.accountId, name);
  const conflict = (existingId: string) => fail('domain_already_added', 409, `${name} is already on this account`, {
    nextAction: 'List your domains with GET /domains; verify the existing one instead of adding it again', details: { domainId: existingId },
  });
  // Domains made before ids were derived from the name (bootstrap, sandbox) have other ids: the directory knows them.
  const legacy = await findDomainOfAccountByName(deps.db, a.accountId, name);
  if (legacy && legacy.id !== id) throw conflict(legacy.id);

  const now = deps.clock.now();
  const algorithm: DkimAlgorithm = 'rsa-sha256';
  const { state, expected } = await loadDomain(deps.store, id);
  if (state.exists) throw conflict(id);
  const key = await generateDkimKey(algorithm);
  const keyId = newId();
  await deps.keys.put(keyId, algorithm, key.privateKeyPem);
  const events = decideAdd(state, {
    domainId: id, accountId: a.accountId, name, dkimMode: dkimMode as DkimMode, ownershipToken: randomBytes(16).toString('hex'),
    dkim: { selector: dkimMode === 'cname_managed' ? MANAGED_DKIM_SELECTOR : dkimSelectorFor(now), algorithm, publicKey: key.publicKeyDnsValue, keyId },
    now,
  });
  let revision: bigint;
  try {
    revision = (await deps.store.append(streamOf(id), events.map((e) => toEventData(newId(), e, { actor: a.actor })), { expectedRevision: expected })).nextExpectedRevision;
  } catch (err) {
    // Another add of the same name won the stream (the uniqueness claim).
    if (err instanceof WrongExpectedRevisionError) throw conflict(id);
    throw err;
  }
  await awaitDirectoryRow(deps, 'domain.add', 'domains', id, revision);
  const added = fold(events) as SendingDomain;
  return resourceOf(viewOfState(added), deps.config.serviceDomain);
}

async function live(deps: DomainDeps, d: SendingDomain, timeoutMs?: number): Promise<DomainRecordCheck[]> {
  const cap = Math.min(deps.config.domainChecks.lookupTimeoutMs, timeoutMs ?? Infinity);
  return (await checkDomainDns(deps.resolver, d, { serviceDomain: deps.config.serviceDomain, timeoutMs: cap })).records;
}

/**
 * Looks for the ownership token and refreshes SPF/DKIM/DMARC readiness in the same pass. Nothing is
 * appended when a check another request recorded meanwhile found the same and left nothing for
 * this one to change (ownership proven already, or not proven by this check either).
 */
export async function verifyDomain(deps: DomainDeps, a: DomainActor, id: string): Promise<DomainResource> {
  const { domain: before, revision } = await ownedForCheck(deps, a, id);
  if (before.sandbox) return resourceOf(viewOfState(before), deps.config.serviceDomain);
  const records = await live(deps, before);
  const now = deps.clock.now();
  const ownershipFound = records.some((r) => r.purpose === 'ownership' && r.status === 'ok');
  const after = await decideOnDomain(deps, 'domain.verify', a, id, (d, since) =>
    ((d.ownershipVerified || !ownershipFound) && answeredBy(since, records) ? [] : decideVerify(d, { records, now })), revision);
  return resourceOf(viewOfState(after), deps.config.serviceDomain);
}

/**
 * A live check of every record; persists spf/dkim/dmarc_configured and the per-record results
 * (unless a check another request recorded meanwhile found the same: then that one is the answer).
 */
export async function checkDns(deps: DomainDeps, a: DomainActor, id: string, opts: { timeoutMs?: number } = {}): Promise<DomainResource> {
  const { domain: before, revision } = await ownedForCheck(deps, a, id);
  if (before.sandbox) return resourceOf(viewOfState(before), deps.config.serviceDomain);
  const records = await live(deps, before, opts.timeoutMs);
  const now = deps.clock.now();
  const after = await decideOnDomain(deps, 'domain.check_dns', a, id, (d, since) => (answeredBy(since, records) ? [] : recordDnsCheck(d, { records, now })), revision);
  return resourceOf(viewOfState(after), deps.config.serviceDomain);
}

/** cname_managed: a new key behind the same CNAME; signing uses it from the next delivery on. */
export async function rotateDkim(deps: DomainDeps, a: DomainActor, id: string): Promise<DomainResource> {
  const { domain: before } = await ownedForCheck(deps, a, id);
  // Refuse before generating a key (the decider says why).
  rotateDkimKey(before, { key: { algorithm: before.dkim.algorithm, publicKey: '', keyId: '' }, now: deps.clock.now() });
  const key = await generateDkimKey(before.dkim.algorithm);
  const keyId = newId();
  await deps.keys.put(keyId, before.dkim.algorithm, key.privateKeyPem);
  const now = deps.clock.now();
  const after = await decideOnDomain(deps, 'domain.rotate_dkim', a, id, (d) => rotateDkimKey(d, { key: { algorithm: d.dkim.algorithm, publicKey: key.publicKeyDnsValue, keyId }, now }));
  return resourceOf(viewOfState(after), deps.config.serviceDomain);
}

/** The caller's domain and the revision it was read at (null: no stream). */
async function ownedForCheck(deps: DomainDeps, a: DomainActor, id: string): Promise<{ domain: SendingDomain; revision: bigint | null }> {
  if (!isUuid(id)) throw fail('invalid_id', 400, 'Domain id must be a uuid');
  const { state, expected } = await loadDomain(deps.store, id);
  return { domain: ownedDomain(state, a.accountId), revision: expected === 'no_stream' ? null : (expected as bigint) };
}
