import { generateApiKey } from '../../domain/credentials/apiKeys';
import { streamName } from '../../domain/eventStore';
import { toEventData, type DomainEvent } from '../../domain/events';
import { newId } from '../../domain/ids';
import { newSmtpUsername } from '../../commands/admin/bootstrap';
import { findApiKeyByPrefix } from '../../projections/directory/queries';
import type { TestDnsServer } from '../support/dnsServer';
import { eventually, getJson, postJson, type TestMotor } from '../support/motor';

/** Helpers of the domain tests (not a test file). */

export interface DnsRecordDto { type: 'TXT' | 'CNAME'; name: string; value: string; purpose: string; status: string; reason?: string; found?: string[] }

/**
 * A Motor Block on `domainId` with a block API key, appended the way the CLI does (the block
 * routes are another work area; sending only needs the block and its key in the directory).
 */
export async function blockOn(motor: TestMotor, accountId: string, domainId: string): Promise<{ motorBlockId: string; apiKey: string }> {
  const motorBlockId = newId();
  const keyId = newId();
  const key = generateApiKey('block');
  const at = new Date().toISOString();
  const append = (stream: string, events: DomainEvent[]) =>
    motor.rt.store.append(stream, events.map((e) => toEventData(newId(), e, { actor: 'test' })), { expectedRevision: 'no_stream' });
  await append(streamName('motorBlock', motorBlockId), [{
    type: 'MotorBlockCreated',
    data: { motorBlockId, accountId, name: 'domain test', type: 'general_purpose', domainId, smtpUsername: newSmtpUsername(), authMethod: 'smtp_password', createdAt: at },
  }]);
  await append(streamName('apiKey', keyId), [{
    type: 'ApiKeyCreated', data: { keyId, kind: 'block', accountId, motorBlockId, prefix: key.prefix, secretHash: key.secretHash, scopes: [], createdAt: at },
  }]);
  await eventually(async () => (await findApiKeyByPrefix(motor.rt.db, key.prefix)) !== null);
  return { motorBlockId, apiKey: key.key };
}

/** Publishes records in the test zone (TXT values merged per name, CNAMEs replace the name). */
export function publish(dns: TestDnsServer, records: Array<{ type: string; name: string; value: string }>): void {
  for (const r of records) {
    if (r.type === 'CNAME') dns.setRecords(r.name, { CNAME: r.value });
    else dns.addRecords(r.name, { TXT: [r.value] });
  }
}

export const recordOf = (body: { data: { dnsRecords: DnsRecordDto[] } }, purpose: string): DnsRecordDto => body.data.dnsRecords.find((r) => r.purpose === purpose)!;

export function publicApi(motor: TestMotor, token: string) {
  const h = { authorization: `Bearer ${token}` };
  return {
    get: (path: string) => getJson(`${motor.baseUrl}/api/public/v1${path}`, h),
    post: (path: string, body: unknown = {}) => postJson(`${motor.baseUrl}/api/public/v1${path}`, body, h),
  };
}

export function dashboardApi(motor: TestMotor, token: string) {
  const h = { authorization: `Bearer ${token}` };
  return {
    get: (path: string) => getJson(`${motor.baseUrl}/api${path}`, h),
    post: (path: string, body: unknown = {}) => postJson(`${motor.baseUrl}/api${path}`, body, h),
  };
}
