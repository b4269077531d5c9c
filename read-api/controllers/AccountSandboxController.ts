import type { Request as ExpressRequest } from 'express';
import { Body, Controller, Get, Post, Request, Response, Route, Security, SuccessResponse, Tags } from 'tsoa';
import type { ErrorResponse } from '../../commands/http/SendController';
import { sandboxCaller } from '../../commands/sandbox/http';
import { convertSandbox, provisionSandbox, sandboxStatus, type ConvertResult, type SandboxStatus } from '../../commands/sandbox/sandbox';
import type { ProductionType, SANDBOX_CHANNELS } from '../../domain/sandbox/sandbox';

export interface SandboxStatusResponse { success: true; data: SandboxStatus }
export interface SandboxProvisionResponse { success: true; data: SandboxStatus; message: string }
export interface SandboxConvertResponse { success: true; data: ConvertResult; message: string }

// The handlers (commands/sandbox/sandbox.ts) check these bodies, so every rule answers with its documented
// code; tsoa leaves them to it (read-api/http/checkedByHandler.ts). The types are the SPEC's, for the document.
export interface ProvisionSandboxBody {
  /**
   * A DNS label (1 to 63 letters, digits, inner hyphens; else 400 invalid_handle); generated when omitted. The domain is `<handle>.sandbox.<SERVICE_DOMAIN>`.
   * @pattern ^[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?$
   */
  handle?: string | null;
  /** agent (the default, also for null), dashboard, cli or api. */
  channel?: SandboxChannel;
}
export type SandboxChannel = (typeof SANDBOX_CHANNELS)[number];
export interface ConvertSandboxBody {
  /**
   * A domain of the account, added and verified, not a sandbox domain (missing: 400 validation_error; not a uuid: 400 invalid_id).
   * @format uuid
   */
  domainId: string;
  /**
   * New block name, 1 to 100 printable characters (default: the domain's name).
   * @minLength 1
   * @maxLength 100
   */
  name?: string;
  /** transactional or general_purpose (default). */
  type?: ProductionType;
}

/**
 * The account sandbox over the public API (SPEC "Account sandbox", docs/SANDBOX.md). The dashboard
 * equivalents are commands/http/DeveloperSandboxController.ts; both call commands/sandbox/sandbox.ts.
 */
@Route('api/public/v1/account/sandbox')
@Tags('Account sandbox')
@Security('publicBearer', ['sandbox.manage'])
@Response<ErrorResponse>(401, 'Token missing, invalid or expired')
@Response<ErrorResponse>(403, 'insufficient_scope (sandbox.manage)')
@Response<ErrorResponse>(429, 'rate_limited: API request limit of this token exceeded')
export class AccountSandboxController extends Controller {
  /** Provisioned or not, handle, sandbox domain, effective allowlist and its lock, whether an active production block exists, the block's id. */
  @Get()
  public async status(@Request() req: ExpressRequest): Promise<SandboxStatusResponse> {
    const { deps, actor } = sandboxCaller(req);
    return { success: true, data: await sandboxStatus(deps, actor.accountId) };
  }

  /** 201 the first time, 200 with the existing sandbox after. Creates the sandbox domain (no DNS) and the allowlist-locked block. Never returns a credential. */
  @Post('provision')
  @SuccessResponse(201, 'Provisioned')
  @Response<SandboxProvisionResponse>(200, 'Already provisioned: the existing sandbox')
  @Response<ErrorResponse>(400, 'invalid_handle, validation_error')
  @Response<ErrorResponse>(409, 'sandbox_handle_taken, sandbox_conflict')
  public async provision(@Request() req: ExpressRequest, @Body() body?: ProvisionSandboxBody): Promise<SandboxProvisionResponse> {
    const { deps, actor, now } = sandboxCaller(req);
    const { created, status } = await provisionSandbox(deps, actor, body ?? {}, now);
    this.setStatus(created ? 201 : 200);
    return { success: true, data: status, message: created ? 'Sandbox provisioned' : 'The sandbox already exists' };
  }

  /** One-way conversion of the sandbox block onto a verified domain. Reports the credential changes; never returns a credential. */
  @Post('convert')
  @Response<ErrorResponse>(400, 'validation_error, invalid_id, domain_reserved')
  @Response<ErrorResponse>(404, 'sandbox_not_provisioned, domain_not_found')
  @Response<ErrorResponse>(409, 'domain_not_verified, sandbox_already_converted, motor_block_limit_reached, motor_block_name_conflict, sandbox_conflict')
  public async convert(@Request() req: ExpressRequest, @Body() body: ConvertSandboxBody): Promise<SandboxConvertResponse> {
    const { deps, actor, now } = sandboxCaller(req);
    const data = await convertSandbox(deps, actor, body ?? {}, now);
    return { success: true, data, message: data.integrationActionRequired };
  }
}
