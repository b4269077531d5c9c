import type { Request as ExpressRequest } from 'express';
import { Body, Controller, Get, Post, Request, Response, Route, Security, SuccessResponse, Tags } from 'tsoa';
import { ctxOf, principalOf } from '../../read-api/http/context';
import type { PrincipalOf } from '../../read-api/http/principal';
import { registerClient, type RegisteredClient } from '../oauth/clients';
import { listOAuthClients, type OAuthClientListItem } from '../../projections/oauthClients/queries';
import type { ErrorResponse } from './SendController';

export interface RegisterOAuthClientRequest {
  /** Shown on the consent page, 1 to 100 characters. */
  name: string;
  /** 1 to 10 exact redirect URIs: absolute https, or http on localhost / 127.0.0.1 / [::1]; no fragment. */
  redirectUris: string[];
}
/** `clientSecret` is in this answer only (stored as a SHA-256). */
export interface RegisteredOAuthClientResponse { success: true; data: RegisteredClient }

export interface OAuthClientListResponse { success: true; data: OAuthClientListItem[] }

/** OAuth 2.0 clients of the SMTP authorization server, registered by a dashboard user. docs/OAUTH.md. */
@Route('api/oauth2/clients')
@Tags('OAuth 2.0 (SMTP)')
@Security('dashboardJwt')
@Response<ErrorResponse>(401, 'Dashboard token missing, invalid or expired')
export class OAuthClientsController extends Controller {
  /** The account's clients (read model `oauthclients`: a client just registered appears a moment later). Never the secret. */
  @Get()
  public async list(@Request() req: ExpressRequest): Promise<OAuthClientListResponse> {
    const ctx = ctxOf(req);
    return { success: true, data: await listOAuthClients(ctx.db, principalOf<PrincipalOf<'dashboard'>>(req).accountId) };
  }

  /** Registers a client of the caller's account; the secret is shown once. */
  @Post()
  @SuccessResponse(201, 'Created')
  @Response<ErrorResponse>(400, 'validation_error')
  public async register(@Request() req: ExpressRequest, @Body() body: RegisterOAuthClientRequest): Promise<RegisteredOAuthClientResponse> {
    const ctx = ctxOf(req);
    const p = principalOf<PrincipalOf<'dashboard'>>(req);
    const data = await registerClient(ctx.store, { accountId: p.accountId, name: body.name, redirectUris: body.redirectUris }, `user:${p.userId}`, ctx.clock.now());
    this.setStatus(201);
    return { success: true, data };
  }
}
