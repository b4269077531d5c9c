/** Helpers of the analytics tests (not a test file): a Motor whose HTTP clock is fixed, event builders. */
import { randomBytes, randomUUID } from 'node:crypto';
import { bootstrap, setBlockLimits, type BootstrapResult } from '../../commands/admin/bootstrap';
import { generateApiKey, parseApiKey } from '../../domain/credentials/apiKeys';
import { toEventData } from '../../domain/events';
import type { EventData } from '../../domain/eventStore';
import type { Clock } from '../../domain/ids';
import { loadConfig, type Config } from '../../infra/config';
import { createLogger } from '../../infra/logger';
import { analyticsProjection } from '../../projections/analytics/projection';
import { directoryProjection } from '../../projections/directory/projection';
import { findApiKeyByPrefix, getBlock } from '../../projections/directory/queries';
import { ProjectionRunner } from '../../projections/runner';
import { catchUpUntil, createRuntime, startRoles, type Runtime, type StartedRoles } from '../../scripts/runtime';
import { createTestDatabase, TEST_REDIS_URL } from '../support/db';
import { getJson } from '../support/motor';

export interface AnalyticsMotor {
  baseUrl: string;
  rt: Runtime;
  started: StartedRoles;
  config: Config;
  runner: ProjectionRunner;
  bootstrap(plan?: string): Promise<BootstrapResult>;
  /** A second Motor Block (with its own block API key) on the bootstrapped account's domain. */
  addBlock(b: BootstrapResult): Promise<BootstrapResult>;
  setLimits(motorBlockId: string, limits: { burst: number; hourly: number; daily: number }): Promise<void>;
  token(b: BootstrapResult, scopes: string[]): Promise<string>;
  get(path: string, token: string | null): Promise<{ status: number; headers: Headers; body: any }>; // eslint-disable-line @typescript-eslint/no-explicit-any
  /** Appends events to one message stream. */
  append(messageId: string, events: EventData[]): Promise<void>;
  /** Appends a sentinel message and catches the analytics projection up until it is applied (so is everything before it). */
  project(): Promise<void>;
  close(): Promise<void>;
}

/** API only (projections are caught up by hand); `clock` fixes "now" for the HTTP layer and the send path. */
export async function startAnalyticsMotor(opts: { clock?: Clock; env?: Record<string, string>; redisUrl?: string } = {}): Promise<AnalyticsMotor> {
  const db = await createTestDatabase('analytics');
  const config = loadConfig({ LOG_LEVEL: 'silent', TOKEN_SECRET: 'test-token-secret-0123456789abcdef0123', ...opts.env });
  const rt = await createRuntime(config, {
    databaseUrl: db.url, redisUrl: opts.redisUrl ?? TEST_REDIS_URL, logger: createLogger('silent'), directoryTtlMs: 0,
    queuePrefix: `motor-test-${randomBytes(4).toString('hex')}`, clock: opts.clock,
  });
  const started = await startRoles(rt, ['api'], { port: 0, host: '127.0.0.1' });
  const baseUrl = `http://127.0.0.1:${started.port}`;
  const dir = new ProjectionRunner(rt.db, rt.store, directoryProjection);
  const runner = new ProjectionRunner(rt.db, rt.store, analyticsProjection, { batchSize: 7 });
  const sentinelBlock = randomUUID();
  return {
    baseUrl, rt, started, config, runner,
    async bootstrap(plan) {
      const result = await bootstrap(rt.store, rt.keys, {
        email: 'owner@example.test', domain: `d${randomBytes(4).toString('hex')}.example.test`, trustDns: true, dkimAlgorithm: 'rsa-sha256',
        plan: plan ?? config.defaultPlan.name, serviceDomain: config.serviceDomain, now: new Date(),
      });
      const prefix = parseApiKey(result.accountApiKey)!.prefix;
      await catchUpUntil(dir, async () => (await findApiKeyByPrefix(rt.db, prefix)) !== null);
      return result;
    },
    async addBlock(b) {
      const motorBlockId = randomUUID();
      const keyId = randomUUID();
      const key = generateApiKey('block');
      const at = new Date().toISOString();
      await rt.store.append(`motorBlock-${motorBlockId}`, [toEventData(randomUUID(), {
        type: 'MotorBlockCreated',
        data: { motorBlockId, accountId: b.accountId, name: `second-${motorBlockId.slice(0, 8)}`, type: 'general_purpose', domainId: b.domainId, smtpUsername: `u${randomBytes(6).toString('hex')}`, authMethod: 'smtp_password', createdAt: at },
      }, { actor: 'test' })], { expectedRevision: 'no_stream' });
      await rt.store.append(`apiKey-${keyId}`, [toEventData(randomUUID(), {
        type: 'ApiKeyCreated',
        data: { keyId, kind: 'block', accountId: b.accountId, motorBlockId, prefix: key.prefix, secretHash: key.secretHash, scopes: [], createdAt: at },
      }, { actor: 'test' })], { expectedRevision: 'no_stream' });
      await catchUpUntil(dir, async () => (await findApiKeyByPrefix(rt.db, key.prefix)) !== null && (await getBlock(rt.db, motorBlockId)) !== null);
      return { ...b, motorBlockId, apiKey: key.key };
    },
    async setLimits(id, limits) {
      await setBlockLimits(rt.store, id, limits, new Date());
      await catchUpUntil(dir, async () => (await getBlock(rt.db, id))?.limits.burst === limits.burst);
    },
    async token(b, scopes) {
      const res = await fetch(`${baseUrl}/api/public/token/account-key`, {
        method: 'POST', headers: { 'content-type': 'application/json', authorization: `ApiKey ${b.accountApiKey}` },
        body: JSON.stringify({ motorBlockId: b.motorBlockId, scopes }),
      });
      const body = (await res.json()) as { data?: { token: string } };
      if (!res.ok || !body.data) throw new Error(`token minting failed: ${res.status} ${JSON.stringify(body)}`);
      return body.data.token;
    },
    get: (path, token) => getJson(`${baseUrl}/api/public/v1${path}`, token ? { authorization: `Bearer ${token}` } : {}),
    async append(messageId, events) {
      await rt.store.append(`message-${messageId}`, events, { expectedRevision: 'any' });
    },
    async project() {
      const id = randomUUID();
      await rt.store.append(`message-${id}`, [accepted(id, sentinelBlock, ['s@sentinel.test'], '2020-01-01T00:00:00Z')], { expectedRevision: 'no_stream' });
      await catchUpUntil(runner, async () => (await rt.db.raw('select 1 from rm_analytics.recipient_stats where message_id = ?', [id])).rows.length > 0, 30_000);
    },
    async close() {
      await started.stop();
      await rt.close();
      await db.drop();
    },
  };
}

export const ACCOUNT = '33333333-3333-4333-8333-333333333333';

export function accepted(messageId: string, motorBlockId: string, to: string[], at: string, accountId = ACCOUNT): EventData {
  return {
    id: randomUUID(), type: 'MessageAccepted', version: 1,
    data: {
      messageId, motorBlockId, accountId, domainId: '44444444-4444-4444-8444-444444444444', from: 'app@sender.test', fromName: null, to,
      subject: 's', text: 't', html: null, headers: {}, smtpMessageId: `${messageId}@sender.test`, idempotencyKey: null, source: 'http',
      metadata: {}, acceptedAt: at,
    },
  };
}

type Reply = { smtpCode?: string | null; enhancedCode?: string | null; mx?: string | null };
export const started = (m: string, r: string, at: string): EventData => ({ id: randomUUID(), type: 'DeliveryStarted', version: 1, data: { messageId: m, recipient: r, at, attempt: 1 } });
const withReply = (type: string, m: string, r: string, at: string, reply: Reply, extra: Record<string, unknown> = {}): EventData => ({
  id: randomUUID(), type, version: 1,
  data: { messageId: m, recipient: r, at, attempt: 1, smtpCode: reply.smtpCode ?? null, smtpResponse: reply.smtpCode ? `${reply.smtpCode} text` : null, enhancedCode: reply.enhancedCode ?? null, mx: reply.mx ?? null, ...extra },
});
export const delivered = (m: string, r: string, at: string, mx: string) => withReply('DeliverySucceeded', m, r, at, { smtpCode: '250', enhancedCode: '2.0.0', mx });
export const bounced = (m: string, r: string, at: string, code: string, enhanced: string, mx: string) => withReply('DeliveryBounced', m, r, at, { smtpCode: code, enhancedCode: enhanced, mx });
export const deferred = (m: string, r: string, at: string, code: string, enhanced: string, mx: string) =>
  withReply('DeliveryDeferred', m, r, at, { smtpCode: code, enhancedCode: enhanced, mx }, { nextAttemptAt: new Date(Date.parse(at) + 600_000).toISOString() });
export const failed = (m: string, r: string, at: string) => withReply('DeliveryFailed', m, r, at, {}, { reason: 'no_mx' });
export const complained = (m: string, r: string, at: string): EventData => ({ id: randomUUID(), type: 'ComplaintReceived', version: 1, data: { messageId: m, recipient: r, at, feedbackType: 'abuse' } });
