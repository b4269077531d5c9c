import { randomBytes, timingSafeEqual } from 'node:crypto';
import type { EventStore } from '../../domain/eventStore';
import { streamName } from '../../domain/eventStore';
import { fail } from '../../domain/errors';
import { asDomainEvent, type OAuthClientRegistered } from '../../domain/events';
import { hashSecret } from '../../domain/credentials/apiKeys';
import { isUuid, newId } from '../../domain/ids';
import { isAcceptableRedirectUri, oauthError } from '../../domain/oauth/grant';
import { appendEvents } from '../auth/streams';

/**
 * OAuth 2.0 clients of the SMTP authorization server (docs/OAUTH.md). Registered by the operator
 * (CLI `oauth-client create`) or a dashboard user (POST /api/oauth2/clients); either way one
 * OAuthClientRegistered event on `oauthClient-<clientId>`. The secret (`mcs_` + 43 base64url
 * characters, 256 bits) is returned once; only its SHA-256 is recorded.
 */

export interface RegisteredClient { clientId: string; clientSecret: string; accountId: string; name: string; redirectUris: string[]; createdAt: string }

const invalid = (message: string, field: string) => fail('validation_error', 400, message, { details: { field } });

export async function registerClient(
  store: EventStore, input: { accountId: string; name: unknown; redirectUris: unknown }, registeredBy: string, now: Date,
): Promise<RegisteredClient> {
  const { name, redirectUris } = input;
  if (typeof name !== 'string' || name.trim().length === 0 || name.length > 100 || /[\u0000-\u001f]/.test(name)) throw invalid('name must be 1 to 100 printable characters', 'name');
  if (!Array.isArray(redirectUris) || redirectUris.length === 0 || redirectUris.length > 10) throw invalid('redirectUris must list 1 to 10 URIs', 'redirectUris');
  const bad = redirectUris.filter((u) => !isAcceptableRedirectUri(u));
  if (bad.length > 0) throw invalid(`Not an acceptable redirect URI (absolute https, or http on localhost, no fragment): ${bad.map(String).join(', ')}`, 'redirectUris');
  const clientId = newId();
  const clientSecret = `mcs_${randomBytes(32).toString('base64url')}`;
  const data: OAuthClientRegistered = {
    clientId, accountId: input.accountId, name: name.trim(), redirectUris: [...new Set(redirectUris as string[])], secretHash: hashSecret(clientSecret),
    registeredBy, registeredAt: now.toISOString(),
  };
  await appendEvents(store, streamName('oauthClient', clientId), [{ type: 'OAuthClientRegistered', data }], 'no_stream', registeredBy);
  return { clientId, clientSecret, accountId: data.accountId, name: data.name, redirectUris: data.redirectUris, createdAt: data.registeredAt };
}

/** The client as registered, or null (also for a malformed id). Read from its stream: no projection lag. */
export async function findClient(store: EventStore, clientId: unknown): Promise<OAuthClientRegistered | null> {
  if (typeof clientId !== 'string' || !isUuid(clientId)) return null;
  const events = await store.readStream(streamName('oauthClient', clientId));
  const first = events[0] ? asDomainEvent(events[0]) : null;
  return first?.type === 'OAuthClientRegistered' ? first.data : null;
}

// Compared against when the client is unknown, so an unknown id costs the same as a wrong secret.
const DUMMY_HASH = hashSecret('motor-oauth-no-such-client');

/** client_id + client_secret, compared in constant time; 400 invalid_client otherwise. */
export async function authenticateClient(store: EventStore, clientId: unknown, clientSecret: unknown): Promise<OAuthClientRegistered> {
  const client = await findClient(store, clientId);
  const presented = Buffer.from(hashSecret(typeof clientSecret === 'string' ? clientSecret : ''), 'hex');
  const stored = Buffer.from(client?.secretHash ?? DUMMY_HASH, 'hex');
  const ok = presented.length === stored.length && timingSafeEqual(presented, stored);
  if (!client || !ok) throw oauthError('invalid_client', 'Client authentication failed');
  return client;
}
