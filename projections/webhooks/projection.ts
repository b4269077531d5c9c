import type { Knex } from 'knex';
import type { RecordedEvent } from '../../domain/eventStore';
import { asDomainEvent, type MotorBlockDeleted } from '../../domain/events';
import { withLongStatements } from '../../infra/db';
import type { Projection } from '../runner';
import { TOMBSTONE } from '../blockTombstone';

/**
 * Webhook endpoints and their deliveries as the API shows them (schema `rm_webhooks`,
 * docs/WEBHOOKS.md). `endpoints.revision` is the revision of `webhook-<id>` the row reflects
 * (read-your-writes of the management routes). A delivery row follows its stream
 * `webhookDelivery-<id>`: queued, then one update per attempt; `attempts` keeps each attempt's
 * latency for the stats route. A deleted block's endpoints stop (the tombstone); with its history
 * its deliveries go too.
 */

export const WEBHOOKS_SCHEMA = 'rm_webhooks';
export const WEBHOOKS_EVENTS = ['WebhookCreated', 'WebhookUpdated', 'WebhookDeleted', 'WebhookSecretRotated', 'WebhookEndpointDisabled', 'WebhookDeliveryQueued', 'WebhookDeliveryAttempted', TOMBSTONE] as const;

const MIGRATIONS = [
  {
    name: '001_webhooks',
    async up(knex: Knex, schema: string) {
      await knex.schema.withSchema(schema).createTable('endpoints', (t) => {
        t.uuid('id').primary();
        t.uuid('motor_block_id').notNullable().index();
        t.uuid('account_id').notNullable();
        t.text('url').notNullable();
        t.specificType('events', 'text[]').notNullable();
        t.boolean('enabled').notNullable();
        t.uuid('secret_key_id').notNullable();
        t.timestamp('created_at', { useTz: true }).notNullable();
        t.timestamp('updated_at', { useTz: true }).notNullable();
        t.timestamp('deleted_at', { useTz: true });
        t.bigInteger('revision').notNullable();
      });
      await knex.schema.withSchema(schema).createTable('deliveries', (t) => {
        t.uuid('id').primary();
        t.uuid('webhook_id').notNullable();
        t.uuid('motor_block_id').notNullable().index();
        t.text('event').notNullable();
        t.uuid('message_id');
        t.text('status').notNullable();
        t.integer('attempts').notNullable().defaultTo(0);
        t.integer('last_http_status');
        t.text('last_error');
        t.text('last_response_body');
        t.integer('last_duration_ms');
        t.timestamp('queued_at', { useTz: true }).notNullable();
        t.timestamp('last_attempt_at', { useTz: true });
        t.timestamp('next_attempt_at', { useTz: true });
        t.timestamp('completed_at', { useTz: true });
        // Newest first per endpoint (deliveries route); the window of the stats route.
        t.index(['webhook_id', 'queued_at', 'id']);
      });
      await knex.schema.withSchema(schema).createTable('attempts', (t) => {
        t.uuid('delivery_id').notNullable();
        t.integer('attempt').notNullable();
        t.uuid('webhook_id').notNullable();
        t.uuid('motor_block_id').notNullable().index();
        t.text('outcome').notNullable();
        t.integer('duration_ms').notNullable();
        t.timestamp('attempted_at', { useTz: true }).notNullable();
        t.primary(['delivery_id', 'attempt']);
        t.index(['webhook_id', 'attempted_at']);
      });
    },
  },
  {
    // Secret rotation and the failure clock (docs/WEBHOOKS.md "Rotating the secret", "Failing endpoints").
    name: '002_rotation_failing',
    async up(knex: Knex, schema: string) {
      await knex.schema.withSchema(schema).alterTable('endpoints', (t) => {
        t.uuid('previous_secret_key_id');
        t.timestamp('previous_secret_valid_until', { useTz: true });
        t.text('disabled_reason');
        t.timestamp('failing_since', { useTz: true });
        // The last successful attempt of a delivery other than a test (the worker's failure clock).
        t.timestamp('last_success_at', { useTz: true });
      });
      // A read model made before this column: the last success its attempts still hold (inside the
      // retention window), rather than none, which would let the clock run from the endpoint's creation.
      await knex.raw(`
        UPDATE ${schema}.endpoints e SET last_success_at = s.at
        FROM (SELECT a.webhook_id, max(a.attempted_at) AS at FROM ${schema}.attempts a JOIN ${schema}.deliveries d ON d.id = a.delivery_id
              WHERE a.outcome = 'delivered' AND d.event <> 'webhook.test' GROUP BY a.webhook_id) s
        WHERE e.id = s.webhook_id`);
    },
  },
];

async function applyWebhooks(trx: Knex.Transaction, schema: string, events: RecordedEvent[]): Promise<void> {
  const t = (table: string) => trx.withSchema(schema).table(table);
  // The failure clock's latest success per endpoint in this batch, written once at its end: the
  // column only ever moves forward and no other event touches it, so the batch's latest gives the
  // row one success at a time would.
  const lastSuccess = new Map<string, string>();
  for (const e of events) {
    const event = asDomainEvent(e);
    if (!event) continue;
    const revision = e.revision.toString();
    switch (event.type) {
      case 'WebhookCreated': {
        const d = event.data;
        await t('endpoints').insert({
          id: d.webhookId, motor_block_id: d.motorBlockId, account_id: d.accountId, url: d.url, events: d.events, enabled: true,
          secret_key_id: d.secretKeyId, created_at: d.createdAt, updated_at: d.createdAt, revision,
        }).onConflict('id').ignore();
        break;
      }
      case 'WebhookUpdated': {
        const d = event.data;
        // Resuming clears why the worker paused it (domain/webhooks evolveEndpoint).
        await t('endpoints').where({ id: d.webhookId }).update({
          url: d.url, events: d.events, enabled: d.enabled, updated_at: d.updatedAt, revision,
          ...(d.enabled ? { disabled_reason: null, failing_since: null } : {}),
        });
        break;
      }
      case 'WebhookSecretRotated': {
        const d = event.data;
        await t('endpoints').where({ id: d.webhookId }).update({
          secret_key_id: d.secretKeyId, previous_secret_key_id: d.previousValidUntil === null ? null : d.previousSecretKeyId,
          previous_secret_valid_until: d.previousValidUntil, updated_at: d.rotatedAt, revision,
        });
        break;
      }
      case 'WebhookEndpointDisabled': {
        const d = event.data;
        await t('endpoints').where({ id: d.webhookId }).update({ enabled: false, disabled_reason: d.reason, failing_since: d.since, updated_at: d.disabledAt, revision });
        break;
      }
      case 'WebhookDeleted':
        await t('endpoints').where({ id: event.data.webhookId }).update({ deleted_at: event.data.deletedAt, updated_at: event.data.deletedAt, revision });
        break;
      case 'WebhookDeliveryQueued': {
        const d = event.data;
        await t('deliveries').insert({
          id: d.deliveryId, webhook_id: d.webhookId, motor_block_id: d.motorBlockId, event: d.event, message_id: d.messageId, status: 'queued', queued_at: d.queuedAt,
        }).onConflict('id').ignore();
        break;
      }
      case 'WebhookDeliveryAttempted': {
        const d = event.data;
        // `attempts` holds requests made (the stats route's latency): the final record of a delivery
        // to a deleted or paused endpoint made none (its 0 ms pulled the latency down), nor did an
        // attempt refused before its request (a DNS failure's seconds would have pushed it up).
        if (!NO_REQUEST_ERRORS.has(d.error ?? '')) {
          await t('attempts').insert({
            delivery_id: d.deliveryId, attempt: d.attempt, webhook_id: d.webhookId, motor_block_id: d.motorBlockId, outcome: d.outcome, duration_ms: d.durationMs, attempted_at: d.attemptedAt,
          }).onConflict(['delivery_id', 'attempt']).ignore();
        }
        // Attempts arrive in order on one stream; a later one never goes back to an earlier state.
        await t('deliveries').where({ id: d.deliveryId }).andWhere('attempts', '<', d.attempt).update({
          status: d.outcome, attempts: d.attempt, last_http_status: d.httpStatus, last_error: d.error, last_response_body: d.responseBody,
          last_duration_ms: d.durationMs, last_attempt_at: d.attemptedAt, next_attempt_at: d.nextAttemptAt,
          completed_at: d.outcome === 'retrying' ? null : d.attemptedAt,
        });
        // The failure clock: the last success of a delivery that is not a test. Events recorded before
        // they named their delivery's event are told by the delivery row.
        if (d.outcome === 'delivered') {
          const counts = d.event !== undefined ? d.event !== 'webhook.test'
            : (await t('deliveries').where({ id: d.deliveryId }).first('event'))?.event !== 'webhook.test';
          const seen = lastSuccess.get(d.webhookId);
          if (counts && (seen === undefined || Date.parse(seen) < Date.parse(d.attemptedAt))) lastSuccess.set(d.webhookId, d.attemptedAt);
        }
        break;
      }
      case 'MotorBlockDeleted': {
        const d = event.data as MotorBlockDeleted;
        await t('endpoints').where({ motor_block_id: d.motorBlockId }).whereNull('deleted_at').update({ deleted_at: d.deletedAt, enabled: false });
        // Every delivery of the block: under the long deadline, as blockTombstone.ts's forget.
        if (d.historyDeleted === true) {
          await withLongStatements(trx, async () => {
            await t('deliveries').where({ motor_block_id: d.motorBlockId }).delete();
            await t('attempts').where({ motor_block_id: d.motorBlockId }).delete();
          });
        }
        break;
      }
      default:
        break;
    }
  }
  for (const [webhookId, at] of lastSuccess) {
    await t('endpoints').where({ id: webhookId })
      .andWhere((q) => q.whereNull('last_success_at').orWhere('last_success_at', '<', at))
      .update({ last_success_at: at });
  }
}

/**
 * Errors the webhook worker records without making a request: the endpoint is gone or paused
 * (workers/webhooks/worker.ts), or the URL could not be used, its host name did not resolve, or it
 * resolved to an address the SSRF guard refuses (workers/webhooks/post.ts).
 */
const NO_REQUEST_ERRORS = new Set(['webhook_deleted', 'webhook_disabled', 'invalid_url', 'dns_error', 'blocked_address']);

export const webhooksProjection: Projection = {
  name: 'webhooks',
  migrations: MIGRATIONS,
  handles: WEBHOOKS_EVENTS,
  // Delivery payloads carry the recipient; the read model never shows them.
  ignoresData: ['payload'],
  applyBatch: applyWebhooks,
};
