/** Helpers of the communications tests (not a test file): a tenant = a bootstrapped account and a signed-in user of it. */
import type { BootstrapResult } from '../../commands/admin/bootstrap';
import { streamName, type EventStore } from '../../domain/eventStore';
import { toEventData, type MotorBlockType } from '../../domain/events';
import { newId } from '../../domain/ids';
import { getBlock } from '../../projections/directory/queries';
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
