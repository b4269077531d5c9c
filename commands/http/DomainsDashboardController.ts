import type { Request as ExpressRequest } from 'express';
import { Body, Controller, Get, Path, Post, Request, Response, Route, Security, SuccessResponse, Tags } from 'tsoa';
import { ctxOf, principalOf } from '../../read-api/http/context';
import { addDomain, checkDns, listDomains, rotateDkim, verifyDomain } from '../domains/handlers';
import { domainActor, domainDeps } from '../domains/http';
import type { AddDomainRequest, DomainListResponse, DomainResponse } from '../../read-api/controllers/DomainsController';
import type { ErrorResponse } from './SendController';

/** The dashboard's domain routes (dashboard JWT): the same handlers, bodies and answers as /api/public/v1/domains. */
@Route('api/domains')
@Tags('Domains')
@Security('dashboardJwt')
@Response<ErrorResponse>(401, 'Dashboard token missing, invalid or expired')
export class DomainsDashboardController extends Controller {
  @Get()
  public async list(@Request() req: ExpressRequest): Promise<DomainListResponse> {
    const ctx = ctxOf(req);
    return { success: true, data: await listDomains(ctx, domainActor(principalOf(req)).accountId) };
  }

  @Post()
  @SuccessResponse(201, 'Created')
  @Response<ErrorResponse>(400, 'invalid_domain, domain_reserved, validation_error')
  @Response<ErrorResponse>(409, 'domain_already_added')
  public async add(@Request() req: ExpressRequest, @Body() body: AddDomainRequest): Promise<DomainResponse> {
    const data = await addDomain(domainDeps(ctxOf(req)), domainActor(principalOf(req)), body);
    this.setStatus(201);
    return { success: true, data };
  }

  @Post('{id}/verify')
  @Response<ErrorResponse>(404, 'domain_not_found')
  @Response<ErrorResponse>(409, 'domain_conflict: the domain changed on every try (concurrent checks that found the same answer 200)')
  public async verify(@Request() req: ExpressRequest, @Path() id: string): Promise<DomainResponse> {
    return { success: true, data: await verifyDomain(domainDeps(ctxOf(req)), domainActor(principalOf(req)), id) };
  }

  @Post('{id}/check-dns')
  @Response<ErrorResponse>(404, 'domain_not_found')
  @Response<ErrorResponse>(409, 'domain_conflict: the domain changed on every try (concurrent checks that found the same answer 200)')
  public async checkDns(@Request() req: ExpressRequest, @Path() id: string): Promise<DomainResponse> {
    return { success: true, data: await checkDns(domainDeps(ctxOf(req)), domainActor(principalOf(req)), id) };
  }

  @Post('{id}/rotate-dkim')
  @Response<ErrorResponse>(404, 'domain_not_found')
  @Response<ErrorResponse>(409, 'dkim_rotation_not_available, domain_conflict')
  public async rotateDkim(@Request() req: ExpressRequest, @Path() id: string): Promise<DomainResponse> {
    return { success: true, data: await rotateDkim(domainDeps(ctxOf(req)), domainActor(principalOf(req)), id) };
  }
}
