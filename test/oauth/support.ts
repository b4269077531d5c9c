import { randomBytes } from 'node:crypto';
import { expect } from 'chai';
import { streamName } from '../../domain/eventStore';
import { toEventData, type DomainEvent, type MotorBlockCreated } from '../../domain/events';
import { newId } from '../../domain/ids';
import { dashboardTokenSettings, signDashboardToken } from '../../commands/auth/dashboardTokens';
import { registerClient, type RegisteredClient } from '../../commands/oauth/clients';
import { catchUpUntil } from '../../scripts/runtime';
import { ProjectionRunner } from '../../projections/runner';
import { directoryProjection } from '../../projections/directory/projection';
import { getBlock } from '../../projections/directory/queries';
import type { BootstrapResult } from '../../commands/admin/bootstrap';
import { postJson, type TestMotor } from '../support/motor';

/** Helpers of the OAuth tests: a signed-in dashboard user, an oauth2 block, the browser's side of the consent. */

const append = (motor: TestMotor, stream: string, events: DomainEvent[]) =>
  motor.rt.store.append(stream, events.map((e) => toEventData(newId(), e)), { expectedRevision: 'no_stream' });

/** A dashboard session of a user of `accountId` (SessionStarted, as login would append) and its JWT. */
export async function dashboardUser(motor: TestMotor, accountId: string): Promise<{ token: string; userId: string; sessionId: string }> {
  const userId = newId();
  const sessionId = newId();
  const now = new Date();
  await append(motor, streamName('authSession', sessionId), [{ type: 'SessionStarted', data: {
    sessionId, userId, accountId, channel: 'web', refreshTokenHash: randomBytes(32).toString('hex'), refreshExpiresAt: new Date(now.getTime() + 86_400_000).toISOString(), startedAt: now.toISOString(),
  } }]);
  const { token } = signDashboardToken(dashboardTokenSettings(motor.config), { userId, accountId, sessionId }, now);
  return { token, userId, sessionId };
}

/** A second block on the bootstrapped domain, whose auth method is OAuth 2.0; directory caught up. */
export async function oauthBlock(motor: TestMotor, b: BootstrapResult, name = 'OAuth block'): Promise<MotorBlockCreated> {
  const data: MotorBlockCreated = {
    motorBlockId: newId(), accountId: b.accountId, name, type: 'general_purpose', domainId: b.domainId,
    smtpUsername: `mb_${randomBytes(6).toString('hex')}`, authMethod: 'oauth2', createdAt: new Date().toISOString(),
  };
  await append(motor, streamName('motorBlock', data.motorBlockId), [{ type: 'MotorBlockCreated', data }]);
  await catchUpUntil(new ProjectionRunner(motor.rt.db, motor.rt.store, directoryProjection), async () => (await getBlock(motor.rt.db, data.motorBlockId)) !== null);
  return data;
}

export const REDIRECT = 'https://app.example.test/oauth/callback';

export async function newClient(motor: TestMotor, accountId: string, redirectUris = [REDIRECT]): Promise<RegisteredClient> {
  return registerClient(motor.rt.store, { accountId, name: 'Mail app <test>', redirectUris }, 'cli', new Date());
}

export function authorizeUrl(motor: TestMotor, q: Record<string, string | undefined>): string {
  const u = new URL(`${motor.baseUrl}/api/oauth2/authorize`);
  for (const [k, v] of Object.entries(q)) if (v !== undefined) u.searchParams.set(k, v);
  return u.toString();
}

export async function getPage(url: string, headers: Record<string, string> = {}) {
  const res = await fetch(url, { headers, redirect: 'manual' });
  return { status: res.status, headers: res.headers, text: await res.text() };
}

export const formTokenOf = (html: string): string => /name="form_token" value="([^"]+)"/.exec(html)![1];

export async function postForm(url: string, form: Record<string, string>, headers: Record<string, string> = {}) {
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers }, body: new URLSearchParams(form).toString(), redirect: 'manual' });
  return { status: res.status, location: res.headers.get('location'), text: await res.text() };
}

/** The whole browser side: authorize page, approve, the code from the redirect. */
export async function authorize(motor: TestMotor, o: {
  client: RegisteredClient; dashboardToken: string; motorBlockId: string; state?: string; viaForm?: boolean;
  /** More query parameters of the authorize request (PKCE's code_challenge and code_challenge_method). */
  query?: Record<string, string>;
}): Promise<{ code: string; state: string | null }> {
  const auth = { authorization: `Bearer ${o.dashboardToken}` };
  const page = await getPage(authorizeUrl(motor, {
    client_id: o.client.clientId, response_type: 'code', redirect_uri: o.client.redirectUris[0], scope: 'email.send', state: o.state ?? 'xyz',
    motor_block_id: o.viaForm ? undefined : o.motorBlockId, ...o.query,
  }), auth);
  expect(page.status, page.text).to.equal(200);
  const r = await postForm(`${motor.baseUrl}/api/oauth2/consent`, {
    form_token: formTokenOf(page.text), decision: 'approve', ...(o.viaForm ? { motor_block_id: o.motorBlockId } : {}),
  }, auth);
  expect(r.status, r.text).to.equal(302);
  const loc = new URL(r.location!);
  return { code: loc.searchParams.get('code')!, state: loc.searchParams.get('state') };
}

export async function exchange(motor: TestMotor, client: RegisteredClient, code: string, extra: Record<string, unknown> = {}) {
  return postJson(`${motor.baseUrl}/api/oauth2/token`, {
    grant_type: 'authorization_code', client_id: client.clientId, client_secret: client.clientSecret, code, redirect_uri: client.redirectUris[0], ...extra,
  });
}

export async function refresh(motor: TestMotor, client: RegisteredClient, refreshToken: string) {
  return postJson(`${motor.baseUrl}/api/oauth2/token`, { grant_type: 'refresh_token', client_id: client.clientId, client_secret: client.clientSecret, refresh_token: refreshToken });
}
