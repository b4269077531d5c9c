import type { Knex } from 'knex';
import type { RecordedEvent } from '../../domain/eventStore';
import { asDomainEvent } from '../../domain/events';
import type { Projection } from '../runner';

/**
 * The OAuth connections read model (schema `rm_oauthconnections`): every grant a user of an
 * account consented to, SMTP clients' and agents', with its state, for the dashboard's list of
 * connections (docs/OAUTH.md). A row appears at the consent page and counts as a connection once a
 * token was issued; a denied consent's row is removed. Revocation itself never waits for this
 * table: tokens are checked against the grant's stream.
 */

export const OAUTH_CONNECTIONS_EVENTS = [
  'OAuthConsentRequested', 'OAuthCodeIssued', 'OAuthConsentDenied', 'OAuthTokenIssued', 'OAuthRefreshRotated', 'OAuthGrantRevoked',
] as const;

const MIGRATIONS = [
  {
    name: '001_connections',
    async up(knex: Knex, schema: string) {
      await knex.schema.withSchema(schema).createTable('connections', (t) => {
        t.uuid('grant_id').primary();
        t.uuid('account_id').notNullable();
        t.uuid('user_id').notNullable();
        t.text('client_id').notNullable();
        t.text('client_name');
        t.text('kind').notNullable();
        t.text('resource');
        t.text('scope').notNullable();
        t.uuid('motor_block_id');
        t.timestamp('requested_at', { useTz: true }).notNullable();
        t.timestamp('connected_at', { useTz: true });
        t.timestamp('last_refreshed_at', { useTz: true });
        t.timestamp('revoked_at', { useTz: true });
        t.text('revoked_reason');
        t.index(['account_id', 'connected_at']);
      });
    },
  },
];

export const oauthConnectionsProjection: Projection = {
  name: 'oauthconnections',
  migrations: MIGRATIONS,
  handles: OAUTH_CONNECTIONS_EVENTS,
  async applyBatch(trx, schema, events: RecordedEvent[]) {
    const table = () => trx.withSchema(schema).table('connections');
    for (const e of events) {
      const event = asDomainEvent(e);
      if (!event) continue;
      switch (event.type) {
        case 'OAuthConsentRequested': {
          const d = event.data;
          await table().insert({
            grant_id: d.grantId, account_id: d.accountId, user_id: d.userId, client_id: d.clientId, client_name: d.clientName ?? null,
            kind: d.resource ? 'agent' : 'smtp', resource: d.resource ?? null, scope: d.scope, motor_block_id: d.motorBlockId, requested_at: d.requestedAt,
          }).onConflict('grant_id').ignore();
          break;
        }
        case 'OAuthCodeIssued':
          await table().where({ grant_id: event.data.grantId }).update({ motor_block_id: event.data.motorBlockId });
          break;
        case 'OAuthConsentDenied':
          await table().where({ grant_id: event.data.grantId }).delete();
          break;
        case 'OAuthTokenIssued':
          await table().where({ grant_id: event.data.grantId }).update({ connected_at: event.data.issuedAt });
          break;
        case 'OAuthRefreshRotated':
          await table().where({ grant_id: event.data.grantId }).update({ last_refreshed_at: event.data.at });
          break;
        case 'OAuthGrantRevoked':
          await table().where({ grant_id: event.data.grantId }).update({ revoked_at: event.data.at, revoked_reason: event.data.reason });
          break;
        default:
          break;
      }
    }
  },
};
