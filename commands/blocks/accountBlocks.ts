import { createHash } from 'node:crypto';
import type { Knex } from 'knex';
import type { EventStore } from '../../domain/eventStore';
import { fail } from '../../domain/errors';
import { isUuid, isUuidV4, newId, uuidV5, type Clock } from '../../domain/ids';
import { grantOf } from '../../domain/motorBlock/grant';
import { blocksCountedByPlan, nameTaken } from '../../domain/account/blocks';
import {
  decide, deletionJobOf, errors, isManagedType, isProductionReady,
  type ManagedType, type MotorBlock, type MotorBlockCommand, type MotorBlockState,
} from '../../domain/motorBlock/motorBlock';
import { dashboardLink, planOf, type Config } from '../../infra/config';
import { MESSAGES_SCHEMA } from '../../projections/messages/queries';
import { messagesProjection } from '../../projections/messages/projection';
import { getBlockDeletion, getDomain, type BlockDeletionRecord } from '../../projections/directory/queries';
import { newSmtpUsername } from '../admin/bootstrap';
import { awaitDirectoryRow, awaitProjectionAtHead, type ReadYourWritesDeps } from '../readYourWrites';
import { readAccountBlocks, recordBlockAdded, withBlockNamesLock } from './accountBlockList';
import { readDomainFacts } from './domainFacts';
import { assertGrantCovers, blocksCoveredBy, decideOnBlock, loadBlock } from './grants';

/**
 * Handlers of the account Motor Block routes (SPEC "Account Motor Blocks", docs/BLOCKS.md):
 * parse and check the input, read what the decider needs (the block's stream, the domain's
 * stream, the account's other blocks), decide, append with optimistic concurrency, and wait until
 * the directory reflects the write so the caller's next GET sees it.
 */

export interface BlockDeps extends ReadYourWritesDeps {
  store: EventStore;
  clock: Clock;
  /** `inbound.bounceDomain`: no new block is put on a domain at or under BOUNCE_DOMAIN (docs/BLOCKS.md). */
  config: Pick<Config, 'plans' | 'defaultPlan' | 'accountFallback' | 'authPublicUrl' | 'inbound'>;
  /** How long a DELETE without history waits for the messages read model (default HISTORY_WAIT_MS, 10 s). */
  historyWaitMs?: number;
}
export interface Caller { accountId: string; actor: string }

export interface MotorBlockDto {
  id: string;
  name: string;
  type: string;
  description: string | null;
  domain: { id: string; name: string | null; sendReady: boolean };
  activeAuthMethod: string;
  /** Always false: secrets are never returned; see dashboardUrl. */
  credentialsAvailable: false;
  smtp_username: string;
  /** active, inactive or deletion_queued. */
  status: string;
  /** Where the owner manages credentials (SMTP password, API keys). */
  dashboardUrl: string;
}

export interface DeletionDto {
  jobId: string; motorBlockId: string; status: 'queued' | 'running' | 'completed' | 'failed'; deleteHistory: boolean;
  counts: { messagesDeleted: number | null; streamsDeleted: number | null; eventsDeleted: number | null };
  requestedAt: string; startedAt: string | null; completedAt: string | null; error: string | null;
}

// Bodies of the public API that break a rule are 422 validation_error, like the ones tsoa refuses (unknown fields, not an object).
const validation = (message: string, field: string) => fail('validation_error', 422, message, { details: { field } });

export function checkBlockName(name: unknown): string {
  if (typeof name !== 'string' || name.trim().length === 0 || name.trim().length > 100 || /[\u0000-\u001f\u007f]/.test(name)) {
    throw validation('name is required: 1 to 100 printable characters', 'name');
  }
  return name.trim();
}

/** transactional | general_purpose; the other block types are refused with 409 motor_block_type_not_allowed. */
export function checkBlockType(type: unknown, fallback?: ManagedType): ManagedType {
  if (type === undefined && fallback) return fallback;
  if (isManagedType(type)) return type;
  if (type === 'sandbox' || type === 'marketing' || type === 'portal') throw errors.typeNotAllowed(type);
  throw validation('type must be transactional or general_purpose', 'type');
}

function checkDescription(d: unknown): string | null {
  if (d === undefined || d === null) return null;
  if (typeof d !== 'string' || d.length > 500) throw validation('description must be a string of at most 500 characters', 'description');
  return d;
}

function checkDomainId(id: unknown): string {
  if (!isUuid(id)) throw validation('domainId is required and must be a uuid', 'domainId');
  return id.toLowerCase();
}

const confirmed = (c: unknown): boolean => c === true;

/** 400 motor_block_id_conflict when a `motorBlockId` query parameter names another block than the path. */
export function checkIdConflict(pathId: string, queryId: string | undefined): void {
  if (queryId !== undefined && queryId.toLowerCase() !== pathId.toLowerCase()) {
    throw fail('motor_block_id_conflict', 400, 'The path and the motorBlockId query parameter name different Motor Blocks', {
      nextAction: 'Name one block: drop motorBlockId or make it equal the path id',
    });
  }
}

const withAccountLock = <T>(deps: BlockDeps, accountId: string, fn: (deps: BlockDeps) => Promise<T>): Promise<T> =>
  withBlockNamesLock(deps.db, accountId, (db) => fn({ ...deps, db }));

/** decideOnBlock as the caller, then the wait until the directory shows the stream where it now is (read-your-writes). */
async function run(
  deps: BlockDeps, caller: Caller, motorBlockId: string, wait: string,
  command: (state: MotorBlockState) => Promise<MotorBlockCommand>,
): Promise<{ before: MotorBlockState; after: MotorBlockState; appended: boolean }> {
  return awaitWritten(deps, motorBlockId, wait, await decideOnBlock(deps.store, caller.actor, motorBlockId, command));
}

/**
 * `run` for the commands that look at the account's other blocks (create, rename): decided under
 * the account's lock, on the streams (readAccountBlocks), then the read-your-writes wait once the
 * lock is released. The next command of the account does not need the directory to show this
 * write, so a lagging projector does not hold the lock.
 */
async function runLocked(
  deps: BlockDeps, caller: Caller, motorBlockId: string, wait: string,
  command: (locked: BlockDeps, state: MotorBlockState) => Promise<MotorBlockCommand>,
): Promise<{ before: MotorBlockState; after: MotorBlockState; appended: boolean }> {
  const decided = await withAccountLock(deps, caller.accountId, (locked) => decideOnBlock(deps.store, caller.actor, motorBlockId, (state) => command(locked, state)));
  return awaitWritten(deps, motorBlockId, wait, decided);
}

async function awaitWritten(deps: BlockDeps, motorBlockId: string, wait: string, { revision, ...r }: Awaited<ReturnType<typeof decideOnBlock>>) {
  if (revision !== null) await awaitDirectoryRow(deps, wait, 'motor_blocks', motorBlockId, revision);
  return r;
}

async function dto(deps: BlockDeps, b: MotorBlock): Promise<MotorBlockDto> {
  const d = await readDomainFacts(deps.store, b.domainId);
  return {
    id: b.id, name: b.name, type: b.type, description: b.description,
    domain: { id: b.domainId, name: d?.name ?? null, sendReady: isProductionReady(d, b.accountId) },
    activeAuthMethod: b.authMethod, credentialsAvailable: false, smtp_username: b.smtpUsername, status: b.status,
    dashboardUrl: dashboardLink(deps.config, `/dashboard/motor-blocks/${b.id}`),
  };
}

/** Blocks the caller's grant covers, in the Motor Block shape; sandbox, marketing and portal blocks are not listed. */
export async function listBlocks(deps: BlockDeps, caller: Caller): Promise<MotorBlockDto[]> {
  const blocks = (await blocksCoveredBy(deps.db, caller)).filter((b) => isManagedType(b.type));
  const out: MotorBlockDto[] = [];
  for (const b of blocks) {
    const d = await getDomain(deps.db, b.domainId);
    out.push({
      id: b.id, name: b.name, type: b.type, description: b.description,
      domain: { id: b.domainId, name: d?.name ?? null, sendReady: !!d && d.ownershipVerified && d.spfConfigured && d.dkimConfigured && !d.sandbox },
      activeAuthMethod: b.authMethod, credentialsAvailable: false, smtp_username: b.smtpUsername, status: b.status,
      dashboardUrl: dashboardLink(deps.config, `/dashboard/motor-blocks/${b.id}`),
    });
  }
  return out;
}

export interface CreateBlockBody { name?: unknown; domainId?: unknown; type?: unknown; description?: unknown }

/**
 * Create with a required Idempotency-Key (UUID v4). The block id is derived from (account, key),
 * so a retry lands on the same stream: same input → the same block (created false), different
 * input → 409 idempotency_conflict. Concurrent retries race on `no_stream`; one wins.
 */
export async function createBlock(deps: BlockDeps, caller: Caller, body: CreateBlockBody, idempotencyKey: string | undefined): Promise<{ block: MotorBlockDto; created: boolean }> {
  if (!isUuidV4(idempotencyKey)) {
    throw fail('invalid_idempotency_key', 400, 'Header Idempotency-Key is required and must be a UUID v4', { nextAction: 'Send Idempotency-Key: <uuid v4>, the same one when retrying' });
  }
  const key = idempotencyKey.toLowerCase();
  const name = checkBlockName(body.name);
  const domainId = checkDomainId(body.domainId);
  const type = checkBlockType(body.type, 'general_purpose');
  const description = checkDescription(body.description);
  const fingerprint = createHash('sha256').update(JSON.stringify([name, domainId, type, description])).digest('hex');
  const motorBlockId = uuidV5(`motorBlock:${caller.accountId}:${key}`);
  const now = deps.clock.now();

  const base = {
    motorBlockId, accountId: caller.accountId, grantId: grantOf(caller), name, blockType: type, description, domainId,
    smtpUsername: newSmtpUsername(), idempotencyKey: key, inputFingerprint: fingerprint, now,
  };
  // A retry needs no context: the decider compares fingerprints.
  const retryCommand: MotorBlockCommand = { type: 'CreateMotorBlock', data: base, context: { domain: null, liveBlocks: 0, maxBlocks: 0, nameTaken: false, bounceDomain: null } };
  // A retry of a key already used needs no lock; a new block is decided under the account's lock.
  const r = (await loadBlock(deps.store, motorBlockId)).state !== null
    ? await run(deps, caller, motorBlockId, 'block.create', async () => retryCommand)
    : await runLocked(deps, caller, motorBlockId, 'block.create', async (locked, state) => {
      if (state !== null) return retryCommand;
      const [domain, account] = await Promise.all([
        readDomainFacts(deps.store, domainId), readAccountBlocks(locked, caller.accountId, caller.actor, now),
      ]);
      const command: MotorBlockCommand = {
        type: 'CreateMotorBlock', data: base,
        context: {
          domain, liveBlocks: blocksCountedByPlan(account.blocks), maxBlocks: planOf(deps.config, account.plan).plan.maxBlocks, nameTaken: nameTaken(account.blocks, name),
          bounceDomain: deps.config.inbound.bounceDomain,
        },
      };
      // A refused create records nothing; an accepted one is on the account's list before its
      // stream exists, so no later create of the account can miss it.
      decide(command, null);
      await recordBlockAdded(deps.store, caller.accountId, motorBlockId, caller.actor, now);
      return command;
    });
  return { block: await dto(deps, r.after!), created: r.appended };
}

export async function renameBlock(deps: BlockDeps, caller: Caller, id: string, body: { name?: unknown }): Promise<MotorBlockDto> {
  await assertGrantCovers(deps.store, caller, id);
  const name = checkBlockName(body?.name);
  const now = deps.clock.now();
  const r = await runLocked(deps, caller, id, 'block.rename', async (locked) => ({
    type: 'RenameMotorBlock', data: { name, now },
    context: { nameTaken: nameTaken((await readAccountBlocks(locked, caller.accountId, caller.actor, now)).blocks, name, id) },
  }));
  return dto(deps, r.after!);
}

export async function changeBlockType(deps: BlockDeps, caller: Caller, id: string, body: { type?: unknown; confirm?: unknown }): Promise<MotorBlockDto> {
  await assertGrantCovers(deps.store, caller, id);
  const type = checkBlockType(body?.type);
  const r = await run(deps, caller, id, 'block.change_type', async () => ({ type: 'ChangeMotorBlockType', data: { blockType: type, confirm: confirmed(body.confirm), now: deps.clock.now() } }));
  return dto(deps, r.after!);
}

export async function assignBlockDomain(deps: BlockDeps, caller: Caller, id: string, body: { domainId?: unknown; confirm?: unknown }): Promise<MotorBlockDto> {
  await assertGrantCovers(deps.store, caller, id);
  const domainId = checkDomainId(body?.domainId);
  const r = await run(deps, caller, id, 'block.assign_domain', async () => ({
    type: 'AssignMotorBlockDomain', data: { domainId, confirm: confirmed(body.confirm), now: deps.clock.now() },
    context: { domain: await readDomainFacts(deps.store, domainId), bounceDomain: deps.config.inbound.bounceDomain },
  }));
  return dto(deps, r.after!);
}

export async function deactivateBlock(deps: BlockDeps, caller: Caller, id: string, body: { confirm?: unknown }): Promise<MotorBlockDto> {
  await assertGrantCovers(deps.store, caller, id);
  const r = await run(deps, caller, id, 'block.deactivate', async () => ({ type: 'DeactivateMotorBlock', data: { confirm: confirmed(body?.confirm), now: deps.clock.now() } }));
  return dto(deps, r.after!);
}

export async function reactivateBlock(deps: BlockDeps, caller: Caller, id: string): Promise<MotorBlockDto> {
  await assertGrantCovers(deps.store, caller, id);
  const r = await run(deps, caller, id, 'block.reactivate', async (state) => ({
    type: 'ReactivateMotorBlock', data: { now: deps.clock.now() },
    context: { domain: state ? await readDomainFacts(deps.store, state.domainId) : null },
  }));
  return dto(deps, r.after!);
}

/** How long a DELETE without history waits for the messages read model to reach the log's last MessageAccepted. */
const HISTORY_WAIT_MS = 10_000;
const RETRY_AFTER_SECONDS = 5;

/** 503 history_unknown: the messages read model did not reach the log's last MessageAccepted in time; nothing was decided. */
const historyUnknown = () => fail('history_unknown', 503,
  'The message log is behind the event log, so whether this block has sent mail cannot be told yet; nothing was changed', {
    nextAction: `Retry in ${RETRY_AFTER_SECONDS} seconds, or repeat with "deleteHistory": true`, details: { retryAfterSeconds: RETRY_AFTER_SECONDS },
  });

/**
 * Any message ever accepted on the block (the messages read model: every MessageAccepted has a row
 * until the block's history is deleted). A row settles it; without one, the answer is only taken
 * once the read model has every MessageAccepted committed before the question
 * (awaitProjectionAtHead), so a message accepted a moment before the DELETE, not projected yet,
 * still counts.
 */
async function historyPresent(deps: BlockDeps, motorBlockId: string): Promise<boolean> {
  const anyRow = async () => (await deps.db.withSchema(MESSAGES_SCHEMA).table('messages').where({ motor_block_id: motorBlockId }).first('id')) !== undefined;
  if (await anyRow()) return true;
  const wait = await awaitProjectionAtHead(deps, {
    projection: messagesProjection.name, types: ['MessageAccepted'], wait: 'block.delete_history', timeoutMs: deps.historyWaitMs ?? HISTORY_WAIT_MS,
  });
  if (!wait.caughtUp) {
    deps.logger.warn({ motorBlockId, head: wait.head, checkpoint: wait.checkpoint, waitedMs: wait.waitedMs }, 'messages projection behind the log: block deletion without history refused (503 history_unknown)');
    throw historyUnknown();
  }
  return anyRow();
}

export async function deleteBlock(deps: BlockDeps, caller: Caller, id: string, body: { confirm?: unknown; deleteHistory?: unknown }): Promise<{ jobId: string; motorBlockId: string; status: string }> {
  await assertGrantCovers(deps.store, caller, id);
  if (typeof body?.deleteHistory !== 'boolean') throw validation('deleteHistory (boolean) is required', 'deleteHistory');
  const deleteHistory = body.deleteHistory;
  const jobId = newId();
  // Also asked of a block whose deletion is queued: after a failed job a new DELETE queues again,
  // and its deleteHistory false meets the same rule (the failed job may have left the history).
  const r = await run(deps, caller, id, 'block.delete', async (state) => ({
    type: 'DeleteMotorBlock', data: { confirm: confirmed(body.confirm), deleteHistory, jobId, now: deps.clock.now() },
    context: {
      historyPresent: state !== null && (state.status === 'inactive' || state.status === 'deletion_queued') && !deleteHistory ? await historyPresent(deps, id) : false,
    },
  }));
  return { jobId: deletionJobOf(r.after)!, motorBlockId: id, status: 'queued' };
}

const iso = (d: Date | null) => (d ? new Date(d).toISOString() : null);
const deletionDto = (r: BlockDeletionRecord): DeletionDto => ({
  jobId: r.jobId, motorBlockId: r.motorBlockId, status: r.status, deleteHistory: r.deleteHistory,
  counts: { messagesDeleted: r.messagesDeleted, streamsDeleted: r.streamsDeleted, eventsDeleted: r.eventsDeleted },
  requestedAt: iso(r.requestedAt)!, startedAt: iso(r.startedAt), completedAt: iso(r.completedAt), error: r.error,
});

/** Status of a deletion job; only the account that queued it sees it (404 otherwise), also after the block is gone. */
export async function deletionStatus(deps: BlockDeps, caller: Caller, jobId: string): Promise<DeletionDto> {
  if (!isUuid(jobId)) throw fail('invalid_id', 400, 'jobId must be a uuid');
  const r = await getBlockDeletion(deps.db, jobId.toLowerCase());
  if (!r || r.accountId !== caller.accountId) throw fail('motor_block_deletion_not_found', 404, 'No such deletion job in this account');
  return deletionDto(r);
}
