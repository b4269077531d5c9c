import { randomUUID } from 'node:crypto';
import type { BootstrapResult } from '../../commands/admin/bootstrap';
import { directoryRowShows } from '../../commands/readYourWrites';
import { generateApiKey } from '../../domain/credentials/apiKeys';
import { streamName } from '../../domain/eventStore';
import { toEventData, type DomainEvent } from '../../domain/events';
import { newId } from '../../domain/ids';
import { eventually, type TestMotor } from '../support/motor';

/** Helpers of the block lifecycle integration tests (not a test file itself). */

export const PUBLIC = '/api/public/v1';

export async function call(motor: TestMotor, method: string, path: string, token: string | null, body?: unknown, headers: Record<string, string> = {}) {
  const res = await fetch(`${motor.baseUrl}${PUBLIC}${path}`, {
    method,
    headers: { ...(body !== undefined ? { 'content-type': 'application/json' } : {}), ...(token ? { authorization: `Bearer ${token}` } : {}), ...headers },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  let json: any; // eslint-disable-line @typescript-eslint/no-explicit-any
  try { json = JSON.parse(text); } catch { json = text; }
  return { status: res.status, body: json };
}

async function append(motor: TestMotor, stream: string, events: DomainEvent[]) {
  return motor.rt.store.append(stream, events.map((e) => toEventData(newId(), e, { actor: 'test' })), { expectedRevision: 'any' });
}

/**
 * A second domain of an account, appended as bootstrap does (the domain routes are another
 * engineer's): verified and DNS-ready unless told otherwise; `sandbox` marks a sandbox domain.
 */
export async function addDomain(motor: TestMotor, accountId: string, opts: { verified?: boolean; dnsReady?: boolean; sandbox?: boolean; name?: string } = {}): Promise<string> {
  const domainId = newId();
  const at = new Date().toISOString();
  const name = opts.name ?? `d${randomUUID().slice(0, 8)}.example.test`;
  const added = {
    domainId, accountId, name, dkimSelector: 'motor20261122', dkimAlgorithm: 'rsa-sha256' as const, dkimPublicKey: 'v=DKIM1; k=rsa; p=MIIB', dkimKeyId: newId(), addedAt: at,
    ...(opts.sandbox ? { sandbox: true } : {}),
  };
  const events: DomainEvent[] = [{ type: 'DomainAdded', data: added }];
  if (opts.verified !== false) events.push({ type: 'DomainOwnershipVerified', data: { domainId, method: 'trusted', verifiedAt: at } });
  if (opts.verified !== false && opts.dnsReady !== false) {
    events.push({ type: 'DomainDnsChecked', data: { domainId, method: 'trusted', spfConfigured: true, dkimConfigured: true, dmarcConfigured: true, checkedAt: at } });
  }
  const res = await append(motor, streamName('sendingDomain', domainId), events);
  await eventually(() => directoryRowShows(motor.rt.db, 'domains', domainId, res.nextExpectedRevision));
  return domainId;
}

/** A Motor Block API key for a block (as the dashboard would create it); resolves once it authenticates. */
export async function addBlockKey(motor: TestMotor, accountId: string, motorBlockId: string): Promise<string> {
  const keyId = newId();
  const k = generateApiKey('block');
  await append(motor, streamName('apiKey', keyId), [{
    type: 'ApiKeyCreated',
    data: { keyId, kind: 'block', accountId, motorBlockId, prefix: k.prefix, secretHash: k.secretHash, scopes: [], createdAt: new Date().toISOString() },
  }]);
  await eventually(async () => (await motor.rt.db.withSchema('rm_directory').table('api_keys').where({ id: keyId }).first()) !== undefined);
  return k.key;
}

/** Mints a public token bound to `motorBlockId` with the account key of `b`. */
export async function tokenFor(motor: TestMotor, b: BootstrapResult, motorBlockId: string, scopes: string[]): Promise<string> {
  return motor.token({ ...b, motorBlockId }, scopes);
}

export const sendFrom = (motor: TestMotor, domain: string, apiKey: string, to = 'user@rcpt.test') =>
  fetch(`${motor.baseUrl}/v1/send`, {
    method: 'POST', headers: { 'content-type': 'application/json', 'X-Api-Key': apiKey },
    body: JSON.stringify({ from: `app@${domain}`, to, subject: 'Hello', text: 'Hi' }),
  }).then(async (r) => ({ status: r.status, body: await r.json() as any })); // eslint-disable-line @typescript-eslint/no-explicit-any
