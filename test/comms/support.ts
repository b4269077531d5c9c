/** Helpers of the communications tests (not a test file): a tenant = a bootstrapped account and a signed-in user of it. */
import { randomUUID } from 'node:crypto';
import type { BootstrapResult } from '../../commands/admin/bootstrap';
import { streamName, type EventData, type EventStore } from '../../domain/eventStore';
import { toEventData, type MotorBlockType } from '../../domain/events';
import { newId } from '../../domain/ids';
import type { SuppressionView } from '../../projections/commSuppressions/queries';
import { getBlock } from '../../projections/directory/queries';
import { accepted } from '../analytics/support';
import { dashboardUser } from '../oauth/support';
import { eventually, getJson, postJson, type TestMotor } from '../support/motor';

export interface Tenant { b: BootstrapResult; accountId: string; token: string }

export async function tenant(motor: TestMotor, email: string): Promise<Tenant> {
  const b = await motor.bootstrap({ email });
  const { token } = await dashboardUser(motor, b.accountId);
  return { b, accountId: b.accountId, token };
}

/** Headers of a request as `who`, naming `tenantId` (null: no X-Tenant-Id header). */
export const as = (who: Tenant, tenantId: string | null = who.accountId): Record<string, string> => ({
  authorization: `Bearer ${who.token}`, ...(tenantId === null ? {} : { 'x-tenant-id': tenantId }),
});

export const commUrl = (motor: TestMotor, path: string) => `${motor.baseUrl}/comm-api/api${path}`;
export const commGet = (motor: TestMotor, path: string, headers: Record<string, string>) => getJson(commUrl(motor, path), headers);
export const commPost = (motor: TestMotor, path: string, body: unknown, headers: Record<string, string>) => postJson(commUrl(motor, path), body, headers);

/** Another block of `who`'s account on its domain, of any type (the account routes refuse marketing blocks, so straight into the log). */
export async function extraBlock(motor: TestMotor, who: Tenant, type: MotorBlockType, active = true): Promise<string> {
  const id = newId();
  const at = new Date().toISOString();
  const events = [toEventData(newId(), {
    type: 'MotorBlockCreated',
    data: { motorBlockId: id, accountId: who.accountId, name: `${type} block`, type, domainId: who.b.domainId, smtpUsername: `u${newId().replace(/-/g, '').slice(-12)}`, authMethod: 'smtp_password', createdAt: at },
  })];
  if (!active) events.push(toEventData(newId(), { type: 'MotorBlockDeactivated', data: { motorBlockId: id, at } }));
  await motor.rt.store.append(streamName('motorBlock', id), events, { expectedRevision: 'no_stream' });
  await eventually(async () => (await getBlock(motor.rt.db, id))?.status === (active ? 'active' : 'inactive'));
  return id;
}

/** The store, except that every append after the first `appends` throws (what a crash mid-batch leaves behind). */
export function storeFailingAfter(store: EventStore, appends: number): EventStore {
  let made = 0;
  return new Proxy(store, {
    get(target, prop, receiver) {
      if (prop === 'append') {
        return async (...args: Parameters<EventStore['append']>) => {
          if (++made > appends) throw new Error('event store gone');
          return target.append(...args);
        };
      }
      const v = Reflect.get(target, prop, receiver);
      return typeof v === 'function' ? v.bind(target) : v;
    },
  });
}

/** An ISO time `minutes` before now. */
export const minutesAgo = (minutes: number): string => new Date(Date.now() - minutes * 60_000).toISOString();

/**
 * A message of the tenant's block accepted at `acceptedAt`, with the outcome events `outcomes`
 * gives for its id, appended straight to the store (no delivery): what a suppression is made of.
 */
export async function appendMessage(motor: TestMotor, t: Tenant, to: string | string[], acceptedAt: string, outcomes: (messageId: string) => EventData[]): Promise<string> {
  const m = randomUUID();
  await motor.rt.store.append(`message-${m}`, [accepted(m, t.b.motorBlockId, typeof to === 'string' ? [to] : to, acceptedAt, t.accountId), ...outcomes(m)], { expectedRevision: 'no_stream' });
  return m;
}

/** The tenant's suppression record of an address through `GET /suppressions?email=`, if any. */
export async function suppressionRowOf(motor: TestMotor, t: Tenant, email: string): Promise<SuppressionView | undefined> {
  return ((await commGet(motor, `/suppressions?email=${encodeURIComponent(email)}`, as(t))).body.data.items as SuppressionView[])[0];
}

/** `DELETE /suppressions/{id}` as the tenant: its status and JSON body. */
export async function liftAs(motor: TestMotor, t: Tenant, id: string): Promise<{ status: number; body: { code?: string; details?: Record<string, unknown>; [k: string]: unknown } }> {
  const res = await fetch(commUrl(motor, `/suppressions/${id}`), { method: 'DELETE', headers: as(t) });
  return { status: res.status, body: await res.json() as { code?: string; details?: Record<string, unknown>; [k: string]: unknown } };
}
