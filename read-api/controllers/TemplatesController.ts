import type { Request as ExpressRequest } from 'express';
import { Body, Controller, Delete, Get, Header, Patch, Path, Post, Request, Response, Route, Security, SuccessResponse, Tags } from 'tsoa';
import type { ErrorResponse } from '../../commands/http/SendController';
import {
  createTemplate, deleteTemplate, getTemplate, listTemplates, updateTemplate, validateTemplateRequest, type TemplateView,
} from '../../commands/templates/templates';
import type { TemplateIssue, TemplateType, TemplateValidation } from '../../domain/templates/templates';
import { ctxOf } from '../http/context';
import { tenantOf } from '../http/tenant';

// The handlers (domain/templates/templates.ts) check these bodies, so every rule answers with its documented code
// (400 validation_error, 422 template_invalid); tsoa leaves them to it (read-api/http/checkedByHandler.ts).
/** POST /templates and POST /templates/validate. */
export interface TemplateBody {
  name: string;
  subject: string;
  type: TemplateType;
  /** Required when type is `html`. */
  body_html?: string | null;
  /** Required when type is `text`. */
  body_text?: string | null;
  /** validate only (ignored on create): merge values for the preview. */
  sampleData?: { [name: string]: string | number | boolean } | null;
}
/** PATCH /templates/{id}: any of the template fields, at least one; what is left out keeps its value. */
export interface TemplateUpdateBody {
  name?: string;
  subject?: string;
  type?: TemplateType;
  body_html?: string | null;
  body_text?: string | null;
  /** Ignored. */
  sampleData?: { [name: string]: string | number | boolean } | null;
}
export interface TemplateResponse { success: true; data: TemplateView; warnings: TemplateIssue[] }
export interface TemplateReadResponse { success: true; data: TemplateView }
export interface TemplateListResponse { success: true; data: Array<Omit<TemplateView, 'body_html' | 'body_text'>> }
export interface TemplateValidationResponse { success: true; data: TemplateValidation }
export interface TemplateDeletedResponse { success: true; data: { id: string; deleted: true } }

/** Communications templates (SPEC "Communications templates", base {auth_url}/comm-api/api). */
@Route('comm-api/api')
@Tags('Communications templates')
@Security('dashboardJwt')
@Response<ErrorResponse>(400, 'tenant_required, validation_error, invalid_id')
@Response<ErrorResponse>(401, 'Dashboard token missing, invalid or expired')
@Response<ErrorResponse>(403, 'tenant_forbidden: X-Tenant-Id is not the signed-in account')
export class TemplatesController extends Controller {
  /** Creates a template; refused whole (422 template_invalid, every error listed) when a check fails. Warnings come back with it. */
  @Post('templates')
  @SuccessResponse(201, 'Created')
  @Response<ErrorResponse>(422, 'template_invalid')
  public async create(@Request() req: ExpressRequest, @Header('X-Tenant-Id') tenant: string | undefined, @Body() body: TemplateBody): Promise<TemplateResponse> {
    const t = tenantOf(req, tenant);
    const { template, warnings } = await createTemplate(t.deps, t.tenantId, t.actor, body);
    this.setStatus(201);
    return { success: true, data: template, warnings };
  }

  /** Runs every check and renders a preview with `sampleData`. Creates no template, campaign, log or email. */
  @Post('templates/validate')
  public async validate(@Request() req: ExpressRequest, @Header('X-Tenant-Id') tenant: string | undefined, @Body() body: TemplateBody): Promise<TemplateValidationResponse> {
    tenantOf(req, tenant);
    return { success: true, data: validateTemplateRequest(body) };
  }

  /** The tenant's templates, newest first (without bodies). */
  @Get('templates')
  public async list(@Request() req: ExpressRequest, @Header('X-Tenant-Id') tenant: string | undefined): Promise<TemplateListResponse> {
    const t = tenantOf(req, tenant);
    return { success: true, data: await listTemplates(t.deps.db, t.tenantId) };
  }

  /** One template with its stored content. */
  @Get('templates/{id}')
  @Response<ErrorResponse>(404, 'template_not_found')
  public async get(@Request() req: ExpressRequest, @Header('X-Tenant-Id') tenant: string | undefined, @Path() id: string): Promise<TemplateReadResponse> {
    const t = tenantOf(req, tenant);
    return { success: true, data: await getTemplate(t.deps.db, t.tenantId, id) };
  }

  /** Changes any of the fields; the result must pass the checks like a new template. */
  @Patch('templates/{id}')
  @Response<ErrorResponse>(404, 'template_not_found')
  @Response<ErrorResponse>(409, 'template_conflict')
  @Response<ErrorResponse>(422, 'template_invalid')
  public async update(@Request() req: ExpressRequest, @Header('X-Tenant-Id') tenant: string | undefined, @Path() id: string, @Body() body: TemplateUpdateBody): Promise<TemplateResponse> {
    const t = tenantOf(req, tenant);
    const { template, warnings } = await updateTemplate(t.deps, t.tenantId, t.actor, id, body);
    return { success: true, data: template, warnings };
  }

  @Delete('templates/{id}')
  @Response<ErrorResponse>(404, 'template_not_found')
  public async remove(@Request() req: ExpressRequest, @Header('X-Tenant-Id') tenant: string | undefined, @Path() id: string): Promise<TemplateDeletedResponse> {
    const t = tenantOf(req, tenant);
    return { success: true, data: await deleteTemplate(t.deps, t.tenantId, t.actor, id) };
  }
}

/** The communications API's health (no credential, no tenant): whether its store answers. */
@Route('comm-api/api')
@Tags('Communications templates')
export class CommHealthController extends Controller {
  @Get('health')
  @Response<ErrorResponse>(503, 'store_unavailable')
  public async health(@Request() req: ExpressRequest): Promise<{ success: boolean; status: 'ok' | 'unavailable' }> {
    const report = await ctxOf(req).health();
    const ok = report.ok;
    if (!ok) this.setStatus(503);
    return { success: ok, status: ok ? 'ok' : 'unavailable' };
  }
}
