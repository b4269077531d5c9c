import type { Knex } from 'knex';
import type { RecordedEvent } from '../../domain/eventStore';
import { asDomainEvent } from '../../domain/events';
import type { Projection } from '../runner';

/**
 * The OAuth clients read model (schema `rm_oauthclients`): the clients of each account as the
 * dashboard lists them (never the secret or its hash). The authorization server itself reads the
 * client's stream, never this table, so nothing waits for the projection.
 */

export const OAUTH_CLIENTS_EVENTS = ['OAuthClientRegistered'] as const;

const MIGRATIONS = [
  {
    name: '001_oauth_clients',
    async up(knex: Knex, schema: string) {
      await knex.schema.withSchema(schema).createTable('clients', (t) => {
        t.uuid('id').primary();
        t.uuid('account_id').notNullable().index();
        t.text('name').notNullable();
        t.specificType('redirect_uris', 'text[]').notNullable();
        t.text('registered_by').notNullable();
        t.timestamp('registered_at', { useTz: true }).notNullable();
      });
    },
  },
];

export const oauthClientsProjection: Projection = {
  name: 'oauthclients',
  migrations: MIGRATIONS,
  handles: OAUTH_CLIENTS_EVENTS,
  async applyBatch(trx, schema, events: RecordedEvent[]) {
    for (const e of events) {
      const event = asDomainEvent(e);
      if (event?.type !== 'OAuthClientRegistered') continue;
      const d = event.data;
      await trx.withSchema(schema).table('clients').insert({
        id: d.clientId, account_id: d.accountId, name: d.name, redirect_uris: d.redirectUris, registered_by: d.registeredBy, registered_at: d.registeredAt,
      }).onConflict('id').ignore();
    }
  },
};
