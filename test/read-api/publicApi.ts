import type { BootstrapResult } from '../../commands/admin/bootstrap';
import { streamName } from '../../domain/eventStore';
import { toEventData, type DomainEvent } from '../../domain/events';
import { newId } from '../../domain/ids';
import { getJson, postJson, type TestMotor } from '../support/motor';

/** Helpers shared by the public API integration tests (not a test file itself). */

export const senderDomainOf = (b: BootstrapResult): string => b.dnsRecords.find((r) => r.purpose === 'spf')!.name;

export async function sendMail(motor: TestMotor, b: BootstrapResult, extra: Record<string, unknown> = {}, headers: Record<string, string> = {}) {
  const res = await postJson(`${motor.baseUrl}/v1/send`, { from: `app@${senderDomainOf(b)}`, to: 'user@rcpt.test', subject: 'Hello', text: 'Hi', ...extra }, { 'X-Api-Key': b.apiKey, ...headers });
  if (res.status !== 200) throw new Error(`send failed: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.data as { id: string; timestamp: string; to: string[] };
}

export const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

export const getPublic = (motor: TestMotor, path: string, token: string | null, headers: Record<string, string> = {}) =>
  getJson(`${motor.baseUrl}/api/public/v1${path}`, { ...(token ? bearer(token) : {}), ...headers });

type Outcome = 'processed' | 'deferred' | 'delivered' | 'bounced' | 'failed' | 'complained';

/** Appends the delivery events that take one recipient of a message to `outcome`, as a worker would. */
export async function appendOutcome(motor: TestMotor, messageId: string, recipient: string, outcome: Outcome, at = new Date()): Promise<void> {
  const iso = (offsetMs: number) => new Date(at.getTime() + offsetMs).toISOString();
  const base = { messageId, recipient };
  const events: DomainEvent[] = [{ type: 'DeliveryStarted', data: { ...base, at: iso(0), attempt: 1 } }];
  const reply = (code: string, text: string) => ({ smtpCode: code, smtpResponse: text, enhancedCode: null, mx: 'mx.rcpt.test', attempt: 1 });
  switch (outcome) {
    case 'processed': break;
    case 'deferred': events.push({ type: 'DeliveryDeferred', data: { ...base, at: iso(1), ...reply('451', '4.7.1 try later'), nextAttemptAt: iso(3_600_000) } }); break;
    case 'delivered': events.push({ type: 'DeliverySucceeded', data: { ...base, at: iso(1), ...reply('250', '2.0.0 OK') } }); break;
    case 'bounced': events.push({ type: 'DeliveryBounced', data: { ...base, at: iso(1), ...reply('550', '5.1.1 No such user') } }); break;
    case 'failed': events.push({ type: 'DeliveryFailed', data: { ...base, at: iso(1), ...reply('', ''), smtpCode: null, smtpResponse: null, reason: 'no_mx' } }); break;
    case 'complained':
      events.push({ type: 'DeliverySucceeded', data: { ...base, at: iso(1), ...reply('250', '2.0.0 OK') } });
      events.push({ type: 'ComplaintReceived', data: { ...base, at: iso(2), feedbackType: 'abuse' } });
      break;
  }
  await motor.rt.store.append(streamName('message', messageId), events.map((e) => toEventData(newId(), e, { actor: 'test' })), { expectedRevision: 'any' });
}
