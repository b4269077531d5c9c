/** Helpers of the communications tests (not a test file): a tenant = a bootstrapped account and a signed-in user of it. */
import type { BootstrapResult } from '../../commands/admin/bootstrap';
import { dashboardUser } from '../oauth/support';
import { getJson, postJson, type TestMotor } from '../support/motor';

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
