import type { Request as ExpressRequest } from 'express';
import { Body, Controller, Post, Request, Response, Route, Security, Tags } from 'tsoa';
import { fail } from '../../domain/errors';
import { createResolver, type DnsResolver } from '../../workers/delivery/dns';
import { applyClientIpLimit } from '../../read-api/http/authentication';
import { ctxOf, type HttpContext } from '../../read-api/http/context';
import { MAX_BATCH, validateBatch, validateEmail, type ValidationResult } from '../auth/emailValidation';
import type { ErrorResponse } from './SendController';

export interface ValidateEmailRequest { /** The address to check (at most 320 characters). */ email: string }
export interface ValidateEmailResponse { success: true; data: ValidationResult }
export interface ValidateBatchRequest { /** 1 to 100 addresses. */ emails: string[] }
export interface ValidateBatchResponse { success: true; data: { results: ValidationResult[]; count: number } }

const resolvers = new WeakMap<HttpContext, DnsResolver>();
const resolverOf = (ctx: HttpContext): DnsResolver => {
  let r = resolvers.get(ctx);
  if (!r) {
    r = createResolver(ctx.config.dnsServers, { timeoutMs: 3000, tries: 1 });
    resolvers.set(ctx, r);
  }
  return r;
};

const checkAddress = (v: unknown, field: string): string => {
  if (typeof v !== 'string' || v.length > 320) throw fail('validation_error', 400, `${field} must be a string of at most 320 characters`, { details: { field } });
  return v;
};

/** Email address validation (SPEC "Email validation"; answer documented in docs/AUTH.md). */
@Route('api/email/validate')
@Tags('Email validation')
@Response<ErrorResponse>(400, 'validation_error')
export class EmailValidationController extends Controller {
  /** Validates one address. No credential; limited per client IP (ANONYMOUS_REQUEST_LIMIT per minute). */
  @Post()
  @Response<ErrorResponse>(429, 'rate_limited')
  public async validate(@Request() req: ExpressRequest, @Body() body: ValidateEmailRequest): Promise<ValidateEmailResponse> {
    await applyClientIpLimit(req);
    return { success: true, data: await validateEmail(resolverOf(ctxOf(req)), checkAddress(body.email, 'email')) };
  }

  /** Validates up to 100 addresses (dashboard JWT); one result per address, in order. */
  @Post('batch')
  @Security('dashboardJwt')
  @Response<ErrorResponse>(401, 'Dashboard token missing, invalid or expired')
  public async batch(@Request() req: ExpressRequest, @Body() body: ValidateBatchRequest): Promise<ValidateBatchResponse> {
    if (!Array.isArray(body.emails) || body.emails.length === 0 || body.emails.length > MAX_BATCH) {
      throw fail('validation_error', 400, `emails must hold 1 to ${MAX_BATCH} addresses`, { details: { field: 'emails', max: MAX_BATCH } });
    }
    const emails = body.emails.map((e, i) => checkAddress(e, `emails[${i}]`));
    const results = await validateBatch(resolverOf(ctxOf(req)), emails);
    return { success: true, data: { results, count: results.length } };
  }
}
