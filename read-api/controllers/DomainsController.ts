import type { Request as ExpressRequest } from 'express';
import { Body, Controller, Get, Path, Post, Request, Response, Route, Security, SuccessResponse, Tags } from 'tsoa';
import type { ErrorResponse } from '../../commands/http/SendController';
import { addDomain, checkDns, listDomains, rotateDkim, verifyDomain, type DomainResource } from '../../commands/domains/handlers';
import { domainActor, domainDeps } from '../../commands/domains/http';
import { ctxOf, principalOf } from '../http/context';

export interface AddDomainRequest {
  /** The domain to send from, e.g. example.com. */
  domain: string;
  /** `txt` (default): you publish the DKIM key as a TXT record; `cname_managed`: you publish a CNAME and the service manages (and can rotate) the key. */
  dkimMode?: 'txt' | 'cname_managed';
}
export interface DomainResponse { success: true; data: DomainResource }
export interface DomainListResponse { success: true; data: DomainResource[] }

/**
 * Account-wide domain management with a public bearer token (the token's account, whichever
 * block it is bound to). docs/DOMAINS.md.
 */
@Route('api/public/v1/domains')
@Tags('Domains')
@Response<ErrorResponse>(401, 'Token missing, invalid or expired; credential of wrong type')
@Response<ErrorResponse>(403, 'Scope missing')
@Response<ErrorResponse>(429, 'rate_limited: API request limit of this token exceeded')
export class DomainsController extends Controller {
  /** The account's domains with their DNS records and readiness. */
  @Get()
  @Security('publicBearer', ['config.read'])
  public async list(@Request() req: ExpressRequest): Promise<DomainListResponse> {
    const ctx = ctxOf(req);
    return { success: true, data: await listDomains(ctx, domainActor(principalOf(req)).accountId) };
  }

  /** Adds a domain; the answer lists the DNS records to publish (ownership, SPF, DKIM, DMARC). */
  @Post()
  @Security('publicBearer', ['config.manage'])
  @SuccessResponse(201, 'Created')
  @Response<ErrorResponse>(400, 'invalid_domain, domain_reserved')
  @Response<ErrorResponse>(409, 'domain_already_added')
  @Response<ErrorResponse>(422, 'validation_error')
  public async add(@Request() req: ExpressRequest, @Body() body: AddDomainRequest): Promise<DomainResponse> {
    const ctx = ctxOf(req);
    const data = await addDomain(domainDeps(ctx), domainActor(principalOf(req)), body);
    this.setStatus(201);
    return { success: true, data };
  }

  /** Looks for the ownership TXT record and refreshes SPF/DKIM/DMARC readiness; returns sendReady. */
  @Post('{id}/verify')
  @Security('publicBearer', ['config.manage'])
  @Response<ErrorResponse>(404, 'domain_not_found')
  @Response<ErrorResponse>(409, 'domain_conflict: the domain changed on every try (concurrent checks that found the same answer 200)')
  public async verify(@Request() req: ExpressRequest, @Path() id: string): Promise<DomainResponse> {
    return { success: true, data: await verifyDomain(domainDeps(ctxOf(req)), domainActor(principalOf(req)), id) };
  }

  /** A live DNS check; persists dkim_configured, spf_configured, dmarc_configured and per-record results. */
  @Post('{id}/check-dns')
  @Security('publicBearer', ['config.manage'])
  @Response<ErrorResponse>(404, 'domain_not_found')
  @Response<ErrorResponse>(409, 'domain_conflict: the domain changed on every try (concurrent checks that found the same answer 200)')
  public async checkDns(@Request() req: ExpressRequest, @Path() id: string): Promise<DomainResponse> {
    return { success: true, data: await checkDns(domainDeps(ctxOf(req)), domainActor(principalOf(req)), id) };
  }

  /** cname_managed only: a new DKIM key behind the same CNAME (no DNS change for the owner). */
  @Post('{id}/rotate-dkim')
  @Security('publicBearer', ['config.manage'])
  @Response<ErrorResponse>(404, 'domain_not_found')
  @Response<ErrorResponse>(409, 'dkim_rotation_not_available, domain_conflict')
  public async rotateDkim(@Request() req: ExpressRequest, @Path() id: string): Promise<DomainResponse> {
    return { success: true, data: await rotateDkim(domainDeps(ctxOf(req)), domainActor(principalOf(req)), id) };
  }
}
