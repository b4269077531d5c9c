import type { Request as ExpressRequest } from 'express';
import { Body, Controller, Get, Patch, Post, Request, Response, Route, Security, SuccessResponse, Tags } from 'tsoa';
import type {
  ConvertSandboxBody, ProvisionSandboxBody, SandboxConvertResponse, SandboxProvisionResponse, SandboxStatusResponse,
} from '../../read-api/controllers/AccountSandboxController';
import { sandboxCaller } from '../sandbox/http';
import { convertSandbox, provisionSandbox, sandboxStatus, setOutboundAllowlist } from '../sandbox/sandbox';
import type { ErrorResponse } from './SendController';

/** Checked by the handler (400 validation_error, allowlist_too_large); read-api/http/checkedByHandler.ts. */
export interface OutboundAllowlistBody {
  /**
   * The allowlist's addresses (replaces the previous list; at most 25, distinct). The account owner's address is always allowed on top.
   * @maxItems 25
   */
  addresses: Email[];
}
/** @format email */
export type Email = string;

/**
 * The account sandbox for a signed-in dashboard user (SPEC "Account sandbox": dashboard-session
 * equivalents; docs/SANDBOX.md). This is how an agent starts from zero: provision here, then mint
 * a public token for the returned motorBlockId at POST /api/public/token.
 */
@Route('api/developer/sandbox')
@Tags('Account sandbox')
@Security('dashboardJwt')
@Response<ErrorResponse>(401, 'Dashboard token missing, invalid or expired')
export class DeveloperSandboxController extends Controller {
  @Get()
  public async status(@Request() req: ExpressRequest): Promise<SandboxStatusResponse> {
    const { deps, actor } = sandboxCaller(req);
    return { success: true, data: await sandboxStatus(deps, actor.accountId) };
  }

  /** 201 the first time, 200 with the existing sandbox after. */
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

  /** Sets the outbound allowlist of the sandbox block (refused once converted). */
  @Patch('outbound')
  @Response<ErrorResponse>(400, 'validation_error, invalid_email, allowlist_too_large')
  @Response<ErrorResponse>(404, 'sandbox_not_provisioned')
  @Response<ErrorResponse>(409, 'sandbox_already_converted, sandbox_conflict')
  public async outbound(@Request() req: ExpressRequest, @Body() body: OutboundAllowlistBody): Promise<SandboxStatusResponse> {
    const { deps, actor, now } = sandboxCaller(req);
    return { success: true, data: await setOutboundAllowlist(deps, actor, body ?? {}, now) };
  }

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
