import { fail } from '../errors';
import { refuseBounceDomainForBlock } from '../sendingDomain/sendingDomain';
import type {
  DomainEvent, MotorBlockCreated, MotorBlockDeleted, MotorBlockDeletionRequested, MotorBlockType,
} from '../events';

/**
 * The Motor Block aggregate (stream `motorBlock-<id>`): its lifecycle as a pure fold and one pure
 * decision per command. The SPEC table "Motor Block lifecycle, sandbox, recipients, send
 * acceptance" is the source of the rules; docs/BLOCKS.md describes the state machine.
 *
 * What the decider cannot see on its own stream (the target domain, the other blocks of the
 * account, whether the block ever carried a message, the plan) arrives as a `context` the handler
 * reads before deciding. Clock and ids arrive in the command.
 */

export const MOTOR_BLOCK_EVENTS = [
  'MotorBlockCreated', 'SmtpPasswordSet', 'MotorBlockLimitsSet', 'MotorBlockDeactivated', 'MotorBlockReactivated',
  'MotorBlockRenamed', 'MotorBlockTypeChanged', 'MotorBlockDomainAssigned', 'MotorBlockDeletionRequested',
  'MotorBlockDeletionStarted', 'MotorBlockDeleted', 'MotorBlockDeletionFailed', 'SandboxConverted', 'MotorBlockAuthMethodChanged',
] as const;
export type MotorBlockEvent = Extract<DomainEvent, { type: (typeof MOTOR_BLOCK_EVENTS)[number] }>;

export type BlockStatus = 'active' | 'inactive' | 'deletion_queued' | 'deleted';
/** Types the account block routes manage; everything else (sandbox, marketing, portal) is refused. */
export const MANAGED_TYPES = ['transactional', 'general_purpose'] as const;
export type ManagedType = (typeof MANAGED_TYPES)[number];
export const isManagedType = (t: unknown): t is ManagedType => typeof t === 'string' && (MANAGED_TYPES as readonly string[]).includes(t);

export interface DeletionState {
  jobId: string; deleteHistory: boolean; status: 'queued' | 'running' | 'completed' | 'failed';
}

export interface MotorBlock {
  id: string; accountId: string; name: string; type: MotorBlockType; description: string | null;
  domainId: string; smtpUsername: string; authMethod: MotorBlockCreated['authMethod'];
  /** Grants the block was added to by name (besides the account-wide grant, which covers every block). */
  grantIds: string[];
  idempotencyKey: string | null; inputFingerprint: string | null;
  status: BlockStatus;
  /** Stopped by the operator (`MotorBlockDeactivated` byOperator): only the operator reactivates it. */
  suspended: boolean;
  deletion: DeletionState | null;
  hasPassword: boolean;
}

/** No block yet (the stream does not exist). */
export type MotorBlockState = MotorBlock | null;

export function evolve(state: MotorBlockState, event: MotorBlockEvent): MotorBlockState {
  if (event.type === 'MotorBlockCreated') {
    const d = event.data;
    return {
      id: d.motorBlockId, accountId: d.accountId, name: d.name, type: d.type, description: d.description ?? null,
      domainId: d.domainId, smtpUsername: d.smtpUsername, authMethod: d.authMethod, grantIds: d.grantId ? [d.grantId] : [],
      idempotencyKey: d.idempotencyKey ?? null, inputFingerprint: d.inputFingerprint ?? null,
      status: 'active', suspended: false, deletion: null, hasPassword: false,
    };
  }
  if (state === null) return null;
  switch (event.type) {
    case 'SmtpPasswordSet': return { ...state, hasPassword: true };
    case 'MotorBlockLimitsSet': return state;
    case 'MotorBlockDeactivated': {
      const suspended = state.suspended || event.data.byOperator === true;
      return state.status === 'active' ? { ...state, status: 'inactive', suspended } : state.status === 'inactive' ? { ...state, suspended } : state;
    }
    case 'MotorBlockReactivated': return state.status === 'inactive' ? { ...state, status: 'active', suspended: false } : state;
    case 'MotorBlockRenamed': return { ...state, name: event.data.name };
    case 'MotorBlockTypeChanged': return { ...state, type: event.data.type };
    case 'MotorBlockDomainAssigned': return { ...state, domainId: event.data.domainId };
    case 'MotorBlockAuthMethodChanged': return { ...state, authMethod: event.data.authMethod };
    case 'MotorBlockDeletionRequested':
      return { ...state, status: 'deletion_queued', deletion: { jobId: event.data.jobId, deleteHistory: event.data.deleteHistory, status: 'queued' } };
    case 'MotorBlockDeletionStarted':
      return state.deletion ? { ...state, deletion: { ...state.deletion, status: 'running' } } : state;
    case 'MotorBlockDeletionFailed':
      return state.deletion ? { ...state, deletion: { ...state.deletion, status: 'failed' } } : state;
    case 'MotorBlockDeleted':
      return { ...state, status: 'deleted', deletion: state.deletion ? { ...state.deletion, status: 'completed' } : null };
    case 'SandboxConverted': {
      const d = event.data;
      return { ...state, type: d.type, name: d.name, domainId: d.domainId, smtpUsername: d.smtpUsername };
    }
    default: return state;
  }
}

export const fold = (events: MotorBlockEvent[]): MotorBlockState => events.reduce(evolve, null as MotorBlockState);

// ------------------------------------------------------------------------------------------ context

/** What the handler read about a domain (from its stream): owner, verification, sandbox. */
export interface DomainFacts {
  id: string; accountId: string; name: string;
  ownershipVerified: boolean; spfConfigured: boolean; dkimConfigured: boolean; sandbox: boolean;
}
/** Verified production domain: owned, ownership proven, SPF and DKIM configured, not a sandbox domain. */
export const isProductionReady = (d: DomainFacts | null, accountId: string): boolean =>
  d !== null && d.accountId === accountId && d.ownershipVerified && d.spfConfigured && d.dkimConfigured && !d.sandbox;

// ------------------------------------------------------------------------------------------ commands

export interface CreateMotorBlock {
  type: 'CreateMotorBlock';
  data: {
    motorBlockId: string; accountId: string; grantId: string; name: string; blockType: ManagedType; description: string | null;
    domainId: string; smtpUsername: string; idempotencyKey: string; inputFingerprint: string; now: Date;
  };
  context: { domain: DomainFacts | null; liveBlocks: number; maxBlocks: number; nameTaken: boolean; bounceDomain: string | null };
}
export interface RenameMotorBlock { type: 'RenameMotorBlock'; data: { name: string; now: Date }; context: { nameTaken: boolean } }
export interface ChangeMotorBlockType { type: 'ChangeMotorBlockType'; data: { blockType: ManagedType; confirm: boolean; now: Date } }
export interface AssignMotorBlockDomain {
  type: 'AssignMotorBlockDomain'; data: { domainId: string; confirm: boolean; now: Date }; context: { domain: DomainFacts | null; bounceDomain: string | null };
}
export interface DeactivateMotorBlock { type: 'DeactivateMotorBlock'; data: { confirm: boolean; now: Date } }
export interface ReactivateMotorBlock { type: 'ReactivateMotorBlock'; data: { now: Date }; context: { domain: DomainFacts | null } }
/** The operator stops a block of any type (`cli block deactivate`): a suspension the account cannot lift. */
export interface SuspendMotorBlock { type: 'SuspendMotorBlock'; data: { now: Date } }
/** The operator starts a block again (`cli block reactivate`), suspended or stopped by its account; no domain check: the operator's call. */
export interface LiftMotorBlockSuspension { type: 'LiftMotorBlockSuspension'; data: { now: Date } }
export interface DeleteMotorBlock {
  type: 'DeleteMotorBlock'; data: { confirm: boolean; deleteHistory: boolean; jobId: string; now: Date }; context: { historyPresent: boolean };
}
export interface StartMotorBlockDeletion { type: 'StartMotorBlockDeletion'; data: { jobId: string; now: Date } }
export interface CompleteMotorBlockDeletion {
  type: 'CompleteMotorBlockDeletion';
  data: { jobId: string; historyDeleted: boolean; messagesDeleted: number; streamsDeleted: number; eventsDeleted: number; now: Date };
}
export interface FailMotorBlockDeletion { type: 'FailMotorBlockDeletion'; data: { jobId: string; reason: string; now: Date } }

export type MotorBlockCommand =
  | CreateMotorBlock | RenameMotorBlock | ChangeMotorBlockType | AssignMotorBlockDomain | DeactivateMotorBlock
  | ReactivateMotorBlock | SuspendMotorBlock | LiftMotorBlockSuspension | DeleteMotorBlock | StartMotorBlockDeletion
  | CompleteMotorBlockDeletion | FailMotorBlockDeletion;

// ------------------------------------------------------------------------------------------ errors

export const errors = {
  notFound: () => fail('motor_block_not_found', 404, 'No such Motor Block in this account', { nextAction: 'List your blocks: GET /api/public/v1/account/motor-blocks' }),
  confirmationRequired: () => fail('confirmation_required', 400, 'This operation changes or removes the block: send "confirm": true', { nextAction: 'Repeat the request with "confirm": true' }),
  typeNotAllowed: (type: string) => fail('motor_block_type_not_allowed', 409, `Blocks of type ${type} are not managed through the account block routes`, {
    nextAction: type === 'sandbox' ? 'Use the sandbox routes (/api/public/v1/account/sandbox*)' : 'Manage this block in the dashboard',
  }),
  idempotencyConflict: () => fail('idempotency_conflict', 409, 'This Idempotency-Key was already used with a different input', { nextAction: 'Use a new Idempotency-Key (UUID v4) for a different block' }),
  createdBlockDeleted: () => fail('motor_block_not_found', 404, 'The Motor Block this Idempotency-Key created has been deleted', {
    nextAction: 'To create the block again, send the request with a new Idempotency-Key (UUID v4)',
  }),
  domainNotFound: () => fail('domain_not_found', 404, 'No such domain in this account', { nextAction: 'List your domains: GET /api/public/v1/domains' }),
  domainNotVerified: (d: DomainFacts) => d.sandbox
    ? fail('domain_not_verified', 409, `${d.name} is a sandbox domain; production blocks need a verified domain of your own`, {
      nextAction: 'Add and verify your domain (POST /api/public/v1/domains), or convert the sandbox (POST /api/public/v1/account/sandbox/convert)', details: { reason: 'sandbox_domain' },
    })
    : fail('domain_not_verified', 409, `${d.name} is not verified and send-ready (ownership, SPF and DKIM)`, {
      nextAction: `Verify it: POST /api/public/v1/domains/${d.id}/verify`, details: { reason: 'not_send_ready' },
    }),
  limitReached: (max: number) => fail('motor_block_limit_reached', 409, `Your plan allows ${max} Motor Block${max === 1 ? '' : 's'}`, { nextAction: 'Delete a block you no longer use, or upgrade your plan', details: { limit: max } }),
  nameConflict: (name: string) => fail('motor_block_name_conflict', 409, `A Motor Block named "${name}" already exists in this account`, { nextAction: 'Choose another name' }),
  mustBeInactive: () => fail('motor_block_must_be_inactive', 409, 'Only an inactive block can be deleted', { nextAction: 'Deactivate it first: POST /api/public/v1/account/motor-blocks/{id}/deactivate with {"confirm": true}' }),
  historyPresent: () => fail('motor_block_history_present', 409, 'This block has sent mail; deleting it without its history is refused', { nextAction: 'Repeat with "deleteHistory": true to delete its logs and events too' }),
  domainRequired: () => fail('motor_block_domain_required', 409, 'The block has no verified production domain', { nextAction: 'Assign a verified domain: POST /api/public/v1/account/motor-blocks/{id}/assign-domain' }),
  suspended: () => fail('motor_block_suspended', 403, 'This block was stopped by the service\'s operator and cannot be reactivated from the account', {
    nextAction: 'Contact the operator of this Motor installation',
  }),
  deleteInProgress: () => fail('motor_block_delete_in_progress', 409, 'A deletion of this block is queued', { nextAction: 'Follow it at GET /api/public/v1/account/motor-block-deletions/{jobId}' }),
};

const live = (s: MotorBlockState): MotorBlock => {
  if (s === null || s.status === 'deleted') throw errors.notFound();
  return s;
};
const managed = (s: MotorBlock): MotorBlock => {
  if (!isManagedType(s.type)) throw errors.typeNotAllowed(s.type);
  return s;
};
const notDeleting = (s: MotorBlock): MotorBlock => {
  if (s.status === 'deletion_queued') throw errors.deleteInProgress();
  return s;
};
/**
 * The domain a block is put on (create, assign-domain): the account's, not at or under the bounce
 * domain (`bounceDomain`: BOUNCE_DOMAIN, or null when it is off or not asked; such a domain was
 * added before it was set), and a verified production domain. The blocks already on a domain are
 * not asked about the bounce domain (a reactivation, an assign of the current domain).
 */
function checkDomain(d: DomainFacts | null, accountId: string, bounceDomain: string | null): DomainFacts {
  if (d === null || d.accountId !== accountId) throw errors.domainNotFound();
  refuseBounceDomainForBlock(d, bounceDomain);
  if (!isProductionReady(d, accountId)) throw errors.domainNotVerified(d);
  return d;
}

// ------------------------------------------------------------------------------------------ decide

/** Events the command produces on the block's stream ([] = nothing to do: an idempotent repeat). */
export function decide(command: MotorBlockCommand, state: MotorBlockState): MotorBlockEvent[] {
  switch (command.type) {
    case 'CreateMotorBlock': {
      const c = command.data;
      if (state !== null) {
        // The id is derived from (account, Idempotency-Key): an existing stream is a retry.
        if (state.accountId !== c.accountId || state.inputFingerprint !== c.inputFingerprint) throw errors.idempotencyConflict();
        // The key's block was deleted since: it is gone like on every account route, and the key
        // cannot make another (the id is the key's).
        if (state.status === 'deleted') throw errors.createdBlockDeleted();
        return [];
      }
      checkDomain(command.context.domain, c.accountId, command.context.bounceDomain);
      if (command.context.liveBlocks >= command.context.maxBlocks) throw errors.limitReached(command.context.maxBlocks);
      if (command.context.nameTaken) throw errors.nameConflict(c.name);
      return [{
        type: 'MotorBlockCreated',
        data: {
          motorBlockId: c.motorBlockId, accountId: c.accountId, name: c.name, type: c.blockType, ...(c.description !== null ? { description: c.description } : {}),
          domainId: c.domainId, smtpUsername: c.smtpUsername, authMethod: 'smtp_password', grantId: c.grantId,
          idempotencyKey: c.idempotencyKey, inputFingerprint: c.inputFingerprint, createdAt: c.now.toISOString(),
        },
      }];
    }
    case 'RenameMotorBlock': {
      const s = notDeleting(managed(live(state)));
      if (s.name === command.data.name) return [];
      if (command.context.nameTaken) throw errors.nameConflict(command.data.name);
      // The SMTP username is not touched: integrations keep working.
      return [{ type: 'MotorBlockRenamed', data: { motorBlockId: s.id, name: command.data.name, at: command.data.now.toISOString() } }];
    }
    case 'ChangeMotorBlockType': {
      const s = notDeleting(managed(live(state)));
      if (!command.data.confirm) throw errors.confirmationRequired();
      if (s.type === command.data.blockType) return [];
      return [{ type: 'MotorBlockTypeChanged', data: { motorBlockId: s.id, type: command.data.blockType, at: command.data.now.toISOString() } }];
    }
    case 'AssignMotorBlockDomain': {
      const s = notDeleting(managed(live(state)));
      if (!command.data.confirm) throw errors.confirmationRequired();
      checkDomain(command.context.domain, s.accountId, s.domainId === command.data.domainId ? null : command.context.bounceDomain);
      if (s.domainId === command.data.domainId) return [];
      return [{ type: 'MotorBlockDomainAssigned', data: { motorBlockId: s.id, domainId: command.data.domainId, previousDomainId: s.domainId, at: command.data.now.toISOString() } }];
    }
    case 'DeactivateMotorBlock': {
      const s = notDeleting(managed(live(state)));
      if (!command.data.confirm) throw errors.confirmationRequired();
      if (s.status === 'inactive') return [];
      return [{ type: 'MotorBlockDeactivated', data: { motorBlockId: s.id, at: command.data.now.toISOString() } }];
    }
    case 'ReactivateMotorBlock': {
      const s = notDeleting(managed(live(state)));
      if (s.status === 'active') return [];
      if (s.suspended) throw errors.suspended();
      if (!isProductionReady(command.context.domain, s.accountId)) throw errors.domainRequired();
      return [{ type: 'MotorBlockReactivated', data: { motorBlockId: s.id, at: command.data.now.toISOString() } }];
    }
    case 'SuspendMotorBlock': {
      const s = notDeleting(live(state));
      // A block its account stopped is suspended all the same: the account must not undo the operator's stop.
      if (s.status === 'inactive' && s.suspended) return [];
      return [{ type: 'MotorBlockDeactivated', data: { motorBlockId: s.id, at: command.data.now.toISOString(), byOperator: true } }];
    }
    case 'LiftMotorBlockSuspension': {
      const s = notDeleting(live(state));
      if (s.status === 'active') return [];
      return [{ type: 'MotorBlockReactivated', data: { motorBlockId: s.id, at: command.data.now.toISOString(), byOperator: true } }];
    }
    case 'DeleteMotorBlock': {
      const s = managed(live(state));
      if (!command.data.confirm) throw errors.confirmationRequired();
      // A repeated DELETE while queued answers with the queued job (see deletionJobOf); after the
      // job gave up, it queues a new job.
      if (s.status === 'deletion_queued' && s.deletion?.status !== 'failed') return [];
      if (s.status !== 'inactive' && s.status !== 'deletion_queued') throw errors.mustBeInactive();
      if (!command.data.deleteHistory && command.context.historyPresent) throw errors.historyPresent();
      const requested: MotorBlockDeletionRequested = {
        motorBlockId: s.id, accountId: s.accountId, jobId: command.data.jobId, deleteHistory: command.data.deleteHistory, requestedAt: command.data.now.toISOString(),
      };
      return [{ type: 'MotorBlockDeletionRequested', data: requested }];
    }
    case 'StartMotorBlockDeletion': {
      if (state === null || state.deletion?.jobId !== command.data.jobId) return [];
      if (state.deletion.status !== 'queued' && state.deletion.status !== 'failed') return [];
      return [{ type: 'MotorBlockDeletionStarted', data: { motorBlockId: state.id, jobId: command.data.jobId, at: command.data.now.toISOString() } }];
    }
    case 'CompleteMotorBlockDeletion': {
      if (state === null || state.status === 'deleted' || state.deletion?.jobId !== command.data.jobId) return [];
      const c = command.data;
      const deleted: MotorBlockDeleted = {
        motorBlockId: state.id, accountId: state.accountId, jobId: c.jobId, historyDeleted: c.historyDeleted,
        messagesDeleted: c.messagesDeleted, streamsDeleted: c.streamsDeleted, eventsDeleted: c.eventsDeleted, deletedAt: c.now.toISOString(),
      };
      return [{ type: 'MotorBlockDeleted', data: deleted }];
    }
    case 'FailMotorBlockDeletion': {
      if (state === null || state.status === 'deleted' || state.deletion?.jobId !== command.data.jobId) return [];
      return [{ type: 'MotorBlockDeletionFailed', data: { motorBlockId: state.id, jobId: command.data.jobId, reason: command.data.reason, at: command.data.now.toISOString() } }];
    }
  }
}

/** The job of the current deletion request, if any (a repeated DELETE answers with it). */
export const deletionJobOf = (s: MotorBlockState): string | null => s?.deletion?.jobId ?? null;
