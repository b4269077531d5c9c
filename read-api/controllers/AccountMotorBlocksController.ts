import type { Request as ExpressRequest } from 'express';
import { Body, Controller, Delete, Get, Header, Patch, Path, Post, Query, Request, Response, Route, Security, SuccessResponse, Tags } from 'tsoa';
import type { ErrorResponse } from '../../commands/http/SendController';
import {
  assignBlockDomain, changeBlockType, checkIdConflict, createBlock, deactivateBlock, deleteBlock, deletionStatus, listBlocks,
  reactivateBlock, renameBlock, type BlockDeps, type Caller, type DeletionDto, type MotorBlockDto,
} from '../../commands/blocks/accountBlocks';
import { isCovered, notAuthorized } from '../../commands/blocks/grants';
import type { ProductionType } from '../../domain/sandbox/sandbox';
import { ctxOf, principalOf } from '../http/context';
import type { PrincipalOf } from '../http/principal';

export interface AccountMotorBlockResponse { success: true; data: MotorBlockDto }
export interface AccountMotorBlockListResponse { success: true; data: MotorBlockDto[] }
export interface BlockDeletionQueuedResponse { success: true; data: { jobId: string; motorBlockId: string; status: string } }
export interface BlockDeletionStatusResponse { success: true; data: DeletionDto }
export interface BlockAuthorizationResponse { success: true; data: { authorized: true; motorBlockId: string } }

// The handlers (commands/blocks/accountBlocks.ts) check these bodies, so every rule answers with its
// documented code; tsoa leaves them to it (read-api/http/checkedByHandler.ts). The types are the SPEC's, for the document.
export interface CreateAccountMotorBlockBody {
  /**
   * Display name, 1 to 100 printable characters (trimmed), unique in the account.
   * @minLength 1
   * @maxLength 100
   */
  name: string;
  /**
   * A verified, non-sandbox domain of the account.
   * @format uuid
   */
  domainId: string;
  /** transactional or general_purpose (default); sandbox, marketing and portal are 409 motor_block_type_not_allowed. */
  type?: ProductionType;
  /**
   * At most 500 characters.
   * @maxLength 500
   */
  description?: string | null;
}
export interface RenameBody {
  /**
   * 1 to 100 printable characters (trimmed), unique in the account.
   * @minLength 1
   * @maxLength 100
   */
  name: string;
}
export interface ChangeTypeBody {
  /** sandbox, marketing and portal are 409 motor_block_type_not_allowed. */
  type: ProductionType;
  /** Must be true (else 400 confirmation_required). */
  confirm: true;
}
export interface AssignDomainBody {
  /**
   * A verified, non-sandbox domain of the account.
   * @format uuid
   */
  domainId: string;
  /** Must be true (else 400 confirmation_required). */
  confirm: true;
}
export interface ConfirmBody {
  /** Must be true (else 400 confirmation_required). */
  confirm: true;
}
export interface DeleteBlockBody {
  /** Must be true (else 400 confirmation_required). */
  confirm: true;
  /** true also deletes the block's logs and events; false is 409 motor_block_history_present when it has any. */
  deleteHistory: boolean;
}

function callerOf(req: ExpressRequest): { deps: BlockDeps; caller: Caller } {
  const ctx = ctxOf(req);
  const p = principalOf<PrincipalOf<'publicBearer'>>(req);
  return {
    deps: { store: ctx.store, db: ctx.db, logger: ctx.logger, metrics: ctx.metrics, clock: ctx.clock, config: ctx.config },
    caller: { accountId: p.accountId, actor: `token:${p.tokenId}` },
  };
}

/**
 * Account Motor Blocks (SPEC "Account Motor Blocks", docs/BLOCKS.md). Which blocks may be touched
 * is decided by the token's grant (the whole account for tokens minted with an account key or a
 * dashboard session), read live on each call. Sandbox, marketing and portal blocks are refused.
 */
@Route('api/public/v1/account')
@Tags('Account Motor Blocks')
@Response<ErrorResponse>(401, 'Token missing, invalid or expired')
@Response<ErrorResponse>(403, 'insufficient_scope or motor_block_not_authorized')
@Response<ErrorResponse>(429, 'rate_limited: API request limit of this token exceeded')
export class AccountMotorBlocksController extends Controller {
  /** Blocks covered by the current grant, inactive included; an empty array when none. */
  @Get('motor-blocks')
  @Security('publicBearer', ['config.read'])
  public async listAccountBlocks(@Request() req: ExpressRequest): Promise<AccountMotorBlockListResponse> {
    const { deps, caller } = callerOf(req);
    return { success: true, data: await listBlocks(deps, caller) };
  }

  /**
   * Creates a block on a verified domain. Same Idempotency-Key and input: the same block (201 the
   * first time, 200 after); same key with another input: 409 idempotency_conflict.
   * @param idempotencyKey UUID v4, required (else 400 invalid_idempotency_key, checked by the handler)
   * @pattern idempotencyKey ^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-4[0-9a-fA-F]{3}-[89abAB][0-9a-fA-F]{3}-[0-9a-fA-F]{12}$
   */
  @Post('motor-blocks')
  @Security('publicBearer', ['config.manage'])
  @SuccessResponse(201, 'Created')
  @Response<ErrorResponse>(400, 'invalid_idempotency_key, validation_error, domain_reserved')
  @Response<ErrorResponse>(404, 'domain_not_found')
  @Response<ErrorResponse>(409, 'idempotency_conflict, domain_not_verified, motor_block_limit_reached, motor_block_name_conflict, motor_block_type_not_allowed')
  public async createAccountBlock(
    @Request() req: ExpressRequest,
    @Body() body: CreateAccountMotorBlockBody,
    @Header('Idempotency-Key') idempotencyKey: string,
  ): Promise<AccountMotorBlockResponse> {
    const { deps, caller } = callerOf(req);
    const r = await createBlock(deps, caller, body ?? {}, idempotencyKey);
    this.setStatus(r.created ? 201 : 200);
    return { success: true, data: r.block };
  }

  /** Renames the block; the SMTP username never changes. */
  @Patch('motor-blocks/{id}/name')
  @Security('publicBearer', ['config.manage'])
  @Response<ErrorResponse>(400, 'validation_error, motor_block_id_conflict')
  @Response<ErrorResponse>(404, 'motor_block_not_found')
  @Response<ErrorResponse>(409, 'motor_block_name_conflict, motor_block_delete_in_progress, motor_block_type_not_allowed')
  public async renameAccountBlock(@Request() req: ExpressRequest, @Path() id: string, @Body() body: RenameBody, @Query() motorBlockId?: string): Promise<AccountMotorBlockResponse> {
    checkIdConflict(id, motorBlockId);
    const { deps, caller } = callerOf(req);
    return { success: true, data: await renameBlock(deps, caller, id, body) };
  }

  /** Changes the type (transactional or general_purpose); needs confirm: true. */
  @Patch('motor-blocks/{id}/type')
  @Security('publicBearer', ['config.manage'])
  @Response<ErrorResponse>(400, 'confirmation_required, validation_error, motor_block_id_conflict')
  @Response<ErrorResponse>(404, 'motor_block_not_found')
  @Response<ErrorResponse>(409, 'motor_block_type_not_allowed, motor_block_delete_in_progress')
  public async changeAccountBlockType(@Request() req: ExpressRequest, @Path() id: string, @Body() body: ChangeTypeBody, @Query() motorBlockId?: string): Promise<AccountMotorBlockResponse> {
    checkIdConflict(id, motorBlockId);
    const { deps, caller } = callerOf(req);
    return { success: true, data: await changeBlockType(deps, caller, id, body) };
  }

  /** Moves the block to another verified, non-sandbox domain of the account; needs confirm: true. */
  @Post('motor-blocks/{id}/assign-domain')
  @Security('publicBearer', ['config.manage'])
  @Response<ErrorResponse>(400, 'confirmation_required, validation_error, motor_block_id_conflict, domain_reserved')
  @Response<ErrorResponse>(404, 'motor_block_not_found, domain_not_found')
  @Response<ErrorResponse>(409, 'domain_not_verified, motor_block_type_not_allowed, motor_block_delete_in_progress')
  public async assignAccountBlockDomain(@Request() req: ExpressRequest, @Path() id: string, @Body() body: AssignDomainBody, @Query() motorBlockId?: string): Promise<AccountMotorBlockResponse> {
    checkIdConflict(id, motorBlockId);
    const { deps, caller } = callerOf(req);
    return { success: true, data: await assignBlockDomain(deps, caller, id, body) };
  }

  /** Deactivates the block (sends refused until reactivated; nothing deleted); needs confirm: true. */
  @Post('motor-blocks/{id}/deactivate')
  @Security('publicBearer', ['config.manage'])
  @Response<ErrorResponse>(400, 'confirmation_required, motor_block_id_conflict')
  @Response<ErrorResponse>(404, 'motor_block_not_found')
  @Response<ErrorResponse>(409, 'motor_block_type_not_allowed, motor_block_delete_in_progress')
  public async deactivateAccountBlock(@Request() req: ExpressRequest, @Path() id: string, @Body() body?: ConfirmBody, @Query() motorBlockId?: string): Promise<AccountMotorBlockResponse> {
    checkIdConflict(id, motorBlockId);
    const { deps, caller } = callerOf(req);
    return { success: true, data: await deactivateBlock(deps, caller, id, body ?? {}) };
  }

  /** Reactivates an inactive block whose domain is a verified production domain. */
  @Post('motor-blocks/{id}/reactivate')
  @Security('publicBearer', ['config.manage'])
  @Response<ErrorResponse>(400, 'motor_block_id_conflict')
  @Response<ErrorResponse>(404, 'motor_block_not_found')
  @Response<ErrorResponse>(409, 'motor_block_domain_required, motor_block_delete_in_progress, motor_block_type_not_allowed')
  public async reactivateAccountBlock(@Request() req: ExpressRequest, @Path() id: string, @Query() motorBlockId?: string): Promise<AccountMotorBlockResponse> {
    checkIdConflict(id, motorBlockId);
    const { deps, caller } = callerOf(req);
    return { success: true, data: await reactivateBlock(deps, caller, id) };
  }

  /** Queues the deletion of an inactive block (202 with jobId); deleteHistory true also deletes its logs and events. */
  @Delete('motor-blocks/{id}')
  @Security('publicBearer', ['config.manage'])
  @SuccessResponse(202, 'Deletion queued')
  @Response<ErrorResponse>(400, 'confirmation_required, validation_error, motor_block_id_conflict')
  @Response<ErrorResponse>(404, 'motor_block_not_found')
  @Response<ErrorResponse>(409, 'motor_block_must_be_inactive, motor_block_history_present, motor_block_type_not_allowed')
  @Response<ErrorResponse>(503, 'history_unknown (deleteHistory false while the messages read model is behind the log; Retry-After)')
  public async deleteAccountBlock(@Request() req: ExpressRequest, @Path() id: string, @Body() body?: DeleteBlockBody, @Query() motorBlockId?: string): Promise<BlockDeletionQueuedResponse> {
    checkIdConflict(id, motorBlockId);
    const { deps, caller } = callerOf(req);
    const r = await deleteBlock(deps, caller, id, body ?? {});
    this.setStatus(202);
    return { success: true, data: r };
  }

  /** Status of a deletion job (queued, running, completed, failed), visible only to the account that queued it. */
  @Get('motor-block-deletions/{jobId}')
  @Security('publicBearer', ['config.read'])
  @Response<ErrorResponse>(400, 'invalid_id')
  @Response<ErrorResponse>(404, 'motor_block_deletion_not_found')
  public async accountBlockDeletion(@Request() req: ExpressRequest, @Path() jobId: string): Promise<BlockDeletionStatusResponse> {
    const { deps, caller } = callerOf(req);
    return { success: true, data: await deletionStatus(deps, caller, jobId) };
  }

  /** Infrastructure check: authorized true when the current grant covers the block, 403 otherwise. */
  @Get('authorization/motor-blocks/{id}')
  @Security('publicBearer', ['config.manage'])
  @Response<ErrorResponse>(403, 'motor_block_not_authorized')
  public async authorizeAccountBlock(@Request() req: ExpressRequest, @Path() id: string, @Query() motorBlockId?: string): Promise<BlockAuthorizationResponse> {
    checkIdConflict(id, motorBlockId);
    const { deps, caller } = callerOf(req);
    if (!(await isCovered(deps.store, caller, id))) throw notAuthorized();
    return { success: true, data: { authorized: true, motorBlockId: id } };
  }
}
