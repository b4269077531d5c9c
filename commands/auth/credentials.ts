import type { Knex } from 'knex';
import type { EventStore } from '../../domain/eventStore';
import { streamName } from '../../domain/eventStore';
import { generateApiKey, generateSmtpPassword, maskApiKey, publicKeyPart, type ApiKeyKind } from '../../domain/credentials/apiKeys';
import { SCOPES, isScope } from '../../domain/credentials/scopes';
import { fail } from '../../domain/errors';
import { asDomainEvent, type ApiKeyCreated, type MotorBlockCreated } from '../../domain/events';
import { isUuid, newId } from '../../domain/ids';
import { MOTOR_BLOCK_EVENTS, errors as blockErrors, fold as foldBlock, type MotorBlock, type MotorBlockEvent } from '../../domain/motorBlock/motorBlock';
import { eventsOf } from '../decideOnStream';
import { appendEvents } from './streams';
import { listAccountApiKeys, listBlockApiKeys, type ApiKeyListItem } from '../../projections/accounts/queries';
import { listBlocksOfAccount } from '../../projections/directory/queries';

/**
 * Credential management for a signed-in dashboard user (docs/AUTH.md): account API keys, a
 * block's API keys, the block's SMTP password. Secrets are returned once and only their SHA-256
 * enters the log. Ownership is read from the streams themselves (no projection lag), and anything
 * outside the caller's account answers 404, so ids of other accounts do not leak. The operator's
 * `key create` and `key revoke` (npm run cli) go through the same functions, for any account.
 */

const validation = (message: string, field: string) => fail('validation_error', 400, message, { details: { field } });
const blockNotFound = () => fail('motor_block_not_found', 404, 'No such Motor Block in this account');
const keyNotFound = () => fail('api_key_not_found', 404, 'No such API key');

export function checkName(name: unknown): string | undefined {
  if (name === undefined) return undefined;
  if (typeof name !== 'string' || name.trim().length === 0 || name.length > 100 || /[\u0000-\u001f]/.test(name)) throw validation('name must be 1 to 100 printable characters', 'name');
  return name.trim();
}

export function checkScopes(scopes: unknown): string[] {
  if (scopes === undefined) return [...SCOPES];
  if (!Array.isArray(scopes) || scopes.length === 0 || scopes.some((s) => typeof s !== 'string')) throw validation('scopes must be a non-empty array of scope names', 'scopes');
  const unknown = scopes.filter((s) => !isScope(s));
  if (unknown.length > 0) throw validation(`Unknown scopes: ${unknown.join(', ')}`, 'scopes');
  return [...new Set(scopes as string[])].sort();
}

/**
 * The block as created and as it is now, when it is the caller's; 404 otherwise (also once it is
 * deleted; a malformed id is a 400). The current state carries what changed since creation (the
 * SMTP username after a sandbox conversion, the status).
 */
export async function ownedBlock(store: EventStore, accountId: string, motorBlockId: string): Promise<{ created: MotorBlockCreated; block: MotorBlock; revision: bigint }> {
  return existingBlock(store, motorBlockId, accountId);
}

/**
 * ownedBlock for a credential change: a new key (created or rotated) or SMTP password of a block
 * whose deletion is queued is 409 motor_block_delete_in_progress, as every change of the block is
 * (docs/BLOCKS.md): a new `apiKey-<id>` stream made after the deletion job's scan would outlive the
 * block. Revoking stays allowed: it only takes access away.
 */
async function blockTakingCredentials(store: EventStore, motorBlockId: string, accountId?: string): Promise<{ created: MotorBlockCreated; block: MotorBlock; revision: bigint }> {
  const found = await existingBlock(store, motorBlockId, accountId);
  if (found.block.status === 'deletion_queued') throw blockErrors.deleteInProgress();
  return found;
}

/** ownedBlock's reading and refusals, for whatever account the block is on when `accountId` is not given (the operator's). */
async function existingBlock(store: EventStore, motorBlockId: string, accountId?: string): Promise<{ created: MotorBlockCreated; block: MotorBlock; revision: bigint }> {
  if (!isUuid(motorBlockId)) throw fail('invalid_id', 400, 'Motor Block id must be a uuid');
  const events = await store.readStream(streamName('motorBlock', motorBlockId));
  const first = events[0] ? asDomainEvent(events[0]) : null;
  if (!first || first.type !== 'MotorBlockCreated' || (accountId !== undefined && first.data.accountId !== accountId)) throw blockNotFound();
  const block = foldBlock(eventsOf<MotorBlockEvent>(events, MOTOR_BLOCK_EVENTS));
  if (!block || block.status === 'deleted') throw blockNotFound();
  return { created: first.data, block, revision: events[events.length - 1].revision };
}

/** A key as its stream tells it (404 api_key_not_found when there is no such key). */
async function readKey(store: EventStore, keyId: string): Promise<{ created: ApiKeyCreated; revokedAt: string | null }> {
  const typed = (await store.readStream(streamName('apiKey', keyId))).map(asDomainEvent);
  const created = typed[0]?.type === 'ApiKeyCreated' ? typed[0].data : null;
  if (!created) throw keyNotFound();
  const revoked = typed.find((e) => e?.type === 'ApiKeyRevoked');
  return { created, revokedAt: revoked?.type === 'ApiKeyRevoked' ? revoked.data.revokedAt : null };
}

async function ownedKey(store: EventStore, accountId: string, keyId: string, kind: ApiKeyKind, motorBlockId?: string) {
  if (!isUuid(keyId)) throw fail('invalid_id', 400, 'API key id must be a uuid');
  const k = await readKey(store, keyId);
  const { created } = k;
  if (created.accountId !== accountId || created.kind !== kind || (motorBlockId !== undefined && created.motorBlockId !== motorBlockId)) throw keyNotFound();
  return k;
}

export interface CreatedKey { id: string; kind: ApiKeyKind; key: string; masked: string; prefix: string; name: string | null; scopes: string[]; motorBlockId: string | null; createdAt: string }

async function createKey(store: EventStore, actor: string, data: Omit<ApiKeyCreated, 'keyId' | 'prefix' | 'secretHash'>): Promise<CreatedKey> {
  const keyId = newId();
  const k = generateApiKey(data.kind);
  await appendEvents(store, streamName('apiKey', keyId), [{ type: 'ApiKeyCreated', data: { ...data, keyId, prefix: k.prefix, secretHash: k.secretHash } }], 'no_stream', actor);
  return { id: keyId, kind: data.kind, key: k.key, masked: maskApiKey(data.kind, k.prefix), prefix: k.prefix, name: data.name ?? null, scopes: data.scopes, motorBlockId: data.motorBlockId ?? null, createdAt: data.createdAt };
}

export interface Actor { userId: string; accountId: string }
const actorOf = (a: Actor) => `user:${a.userId}`;

export async function createAccountKey(store: EventStore, a: Actor, body: { name?: unknown; scopes?: unknown }, now: Date): Promise<CreatedKey> {
  return newAccountKey(store, actorOf(a), a.accountId, body, now);
}

function newAccountKey(store: EventStore, actor: string, accountId: string, body: { name?: unknown; scopes?: unknown }, now: Date): Promise<CreatedKey> {
  const name = checkName(body.name);
  const scopes = checkScopes(body.scopes);
  return createKey(store, actor, { kind: 'account', accountId, scopes, ...(name ? { name } : {}), createdAt: now.toISOString() });
}

export async function revokeAccountKey(store: EventStore, a: Actor, keyId: string, now: Date): Promise<{ id: string; revokedAt: string }> {
  return revoke(store, actorOf(a), await ownedKey(store, a.accountId, keyId, 'account'), now);
}

async function revoke(store: EventStore, actor: string, k: Awaited<ReturnType<typeof readKey>>, now: Date): Promise<{ id: string; revokedAt: string }> {
  // Revoking twice is harmless: the first revocation stands.
  if (k.revokedAt) return { id: k.created.keyId, revokedAt: k.revokedAt };
  const revokedAt = now.toISOString();
  await appendEvents(store, streamName('apiKey', k.created.keyId), [{ type: 'ApiKeyRevoked', data: { keyId: k.created.keyId, revokedAt } }], 'any', actor);
  return { id: k.created.keyId, revokedAt };
}

/**
 * The service's operator revokes a key whatever its account (`npm run cli -- key revoke`), e.g. a
 * key reported leaked: the account's own `ApiKeyRevoked`, with actor `cli`. Revoking twice is
 * harmless (`changed` false, the first revocation stands).
 */
export async function revokeKeyAsOperator(store: EventStore, keyId: string, now: Date): Promise<{ id: string; kind: ApiKeyKind; accountId: string; motorBlockId: string | null; revokedAt: string; changed: boolean }> {
  const k = await readKey(store, keyId);
  const { revokedAt } = await revoke(store, 'cli', k, now);
  return { id: keyId, kind: k.created.kind, accountId: k.created.accountId, motorBlockId: k.created.motorBlockId ?? null, revokedAt, changed: k.revokedAt === null };
}

export async function createBlockKey(store: EventStore, a: Actor, motorBlockId: string, body: { name?: unknown }, now: Date): Promise<CreatedKey> {
  return (await newBlockKey(store, actorOf(a), motorBlockId, a.accountId, body, now)).key;
}

/** `accountId` undefined: the operator's, for the account the block is on. */
async function newBlockKey(store: EventStore, actor: string, motorBlockId: string, accountId: string | undefined, body: { name?: unknown }, now: Date): Promise<{ key: CreatedKey; accountId: string }> {
  const name = checkName(body?.name);
  const { created } = await blockTakingCredentials(store, motorBlockId, accountId);
  const key = await createKey(store, actor, { kind: 'block', accountId: created.accountId, motorBlockId, scopes: [], ...(name ? { name } : {}), createdAt: now.toISOString() });
  return { key, accountId: created.accountId };
}

/** What the operator is told: the dashboard's answer (whose account is the caller's) and the account. */
export type OperatorKey = CreatedKey & { accountId: string };

/**
 * The service's operator issues a key (`npm run cli -- key create`), e.g. to replace a key lost
 * after bootstrap or to rotate one (create, move the app over, `key revoke` the old one) without a
 * dashboard login. The dashboard routes' own path and rules, with actor `cli`: a block key for a
 * block that is unknown or deleted is 404 motor_block_not_found; account key scopes are checked
 * as the route checks them (default all). An unknown account: the CLI's not_found.
 */
export async function createBlockKeyAsOperator(store: EventStore, motorBlockId: string, now: Date): Promise<OperatorKey> {
  const { key, accountId } = await newBlockKey(store, 'cli', motorBlockId, undefined, {}, now);
  return { ...key, accountId };
}

export async function createAccountKeyAsOperator(store: EventStore, accountId: string, body: { scopes?: unknown }, now: Date): Promise<OperatorKey> {
  await existingAccount(store, accountId);
  return { ...await newAccountKey(store, 'cli', accountId, body, now), accountId };
}

/** The operator names an account by id: read from its stream (no projection lag), 404 not_found when there is none. */
async function existingAccount(store: EventStore, accountId: string): Promise<void> {
  const first = (await store.readStream(streamName('account', accountId)))[0];
  if (first?.type !== 'AccountCreated') throw fail('not_found', 404, `No account ${accountId}`);
}

/** A key as `key list` shows it: its public prefix (what key revoke takes), never the secret or its hash. */
export interface OperatorKeyListItem {
  keyId: string; kind: ApiKeyKind; prefix: string; name: string | null; accountId: string; motorBlockId: string | null;
  /** Account keys only: the scopes the key may grant. */
  scopes?: string[];
  createdAt: string; revoked: boolean; revokedAt: string | null;
}

/**
 * The operator's list of keys (`npm run cli -- key list`), e.g. to find the keys of a bootstrap cut
 * off before it printed them, or every key of an account after a leak: the account's keys and the
 * keys of each of its blocks, or one block's keys, oldest first. Read from the dashboard's lists
 * (the accounts read model; the account's blocks from the directory), which the caller catches up
 * first. The account or block is checked on its stream as key create checks it: an unknown account
 * is 404 not_found, an unknown or deleted block 404 motor_block_not_found.
 */
export async function listKeysAsOperator(store: EventStore, db: Knex, of: { accountId: string } | { motorBlockId: string }): Promise<OperatorKeyListItem[]> {
  let accountId: string;
  let items: ApiKeyListItem[];
  if ('motorBlockId' in of) {
    accountId = (await existingBlock(store, of.motorBlockId)).created.accountId;
    items = await listBlockApiKeys(db, of.motorBlockId);
  } else {
    accountId = of.accountId;
    await existingAccount(store, accountId);
    const blocks = await listBlocksOfAccount(db, accountId);
    items = [await listAccountApiKeys(db, accountId), ...await Promise.all(blocks.map((b) => listBlockApiKeys(db, b.id)))].flat();
  }
  return items
    .sort((a, b) => a.createdAt.localeCompare(b.createdAt))
    .map((k) => ({
      keyId: k.id, kind: k.kind, prefix: publicKeyPart(k.kind, k.prefix), name: k.name, accountId, motorBlockId: k.motorBlockId,
      ...(k.kind === 'account' ? { scopes: k.scopes } : {}), createdAt: k.createdAt, revoked: k.revokedAt !== null, revokedAt: k.revokedAt,
    }));
}

export async function revokeBlockKey(store: EventStore, a: Actor, motorBlockId: string, keyId: string, now: Date) {
  await ownedBlock(store, a.accountId, motorBlockId);
  return revoke(store, actorOf(a), await ownedKey(store, a.accountId, keyId, 'block', motorBlockId), now);
}

/** A new key replaces the old one: created first, then the old one revoked (a crash in between leaves two valid keys, never none). */
export async function rotateBlockKey(store: EventStore, a: Actor, motorBlockId: string, keyId: string, now: Date): Promise<CreatedKey & { replaces: string }> {
  await blockTakingCredentials(store, motorBlockId, a.accountId);
  const old = await ownedKey(store, a.accountId, keyId, 'block', motorBlockId);
  if (old.revokedAt) throw fail('api_key_revoked', 409, 'This key is revoked; create a new one instead');
  const created = await createKey(store, actorOf(a), { kind: 'block', accountId: a.accountId, motorBlockId, scopes: [], ...(old.created.name ? { name: old.created.name } : {}), createdAt: now.toISOString() });
  await revoke(store, actorOf(a), old, now);
  return { ...created, replaces: keyId };
}

/** Generates the block's SMTP password (shown once; replaces the previous one at once). */
export async function resetSmtpPassword(store: EventStore, a: Actor, motorBlockId: string, now: Date) {
  const { block } = await blockTakingCredentials(store, motorBlockId, a.accountId);
  const smtp = generateSmtpPassword();
  const setAt = now.toISOString();
  await appendEvents(store, streamName('motorBlock', motorBlockId), [{ type: 'SmtpPasswordSet', data: { motorBlockId, passwordHash: smtp.passwordHash, setAt } }], 'any', actorOf(a));
  return { motorBlockId, smtpUsername: block.smtpUsername, password: smtp.password, setAt };
}
