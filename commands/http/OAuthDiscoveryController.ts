import type { Request as ExpressRequest } from 'express';
import { Controller, Get, Request, Route, Tags } from 'tsoa';
import { AGENT_SCOPES } from '../../domain/oauth/agent';
import { OAUTH_SCOPES } from '../../domain/oauth/grant';
import { ctxOf } from '../../read-api/http/context';
import { agentJwks } from '../oauth/agentTokens';

/** RFC 8414 authorization server metadata (the fields Motor's server has). */
export interface AuthorizationServerMetadata {
  issuer: string;
  authorization_endpoint: string;
  token_endpoint: string;
  revocation_endpoint: string;
  jwks_uri: string;
  response_types_supported: string[];
  grant_types_supported: string[];
  code_challenge_methods_supported: string[];
  token_endpoint_auth_methods_supported: string[];
  revocation_endpoint_auth_methods_supported: string[];
  scopes_supported: string[];
  /** Clients are identified by the https URL of their metadata document; no dynamic registration. */
  client_id_metadata_document_supported: boolean;
  service_documentation: string;
}

/** RFC 7517 JSON Web Key (public RSA signing key). */
export interface Jwk { kty: string; n?: string; e?: string; kid: string; use: string; alg: string }
export interface JwkSet { keys: Jwk[] }

/**
 * Discovery documents of the authorization server on {auth_url} (SPEC "OAuth 2.1 for agent
 * clients", docs/OAUTH.md): where to authorize and get tokens, and the public key that checks agent
 * access tokens.
 */
@Route('.well-known')
@Tags('OAuth 2.1 (agents)')
export class OAuthDiscoveryController extends Controller {
  /** RFC 8414 metadata; `issuer` is AUTH_PUBLIC_URL. */
  @Get('oauth-authorization-server')
  public async metadata(@Request() req: ExpressRequest): Promise<AuthorizationServerMetadata> {
    const { authPublicUrl: base, publicBaseUrl } = ctxOf(req).config;
    this.setHeader('Cache-Control', 'public, max-age=3600');
    return {
      issuer: base,
      authorization_endpoint: `${base}/api/oauth2/authorize`,
      token_endpoint: `${base}/api/oauth2/token`,
      revocation_endpoint: `${base}/api/oauth2/revoke`,
      jwks_uri: `${base}/.well-known/jwks.json`,
      response_types_supported: ['code'],
      grant_types_supported: ['authorization_code', 'refresh_token'],
      code_challenge_methods_supported: ['S256'],
      token_endpoint_auth_methods_supported: ['none', 'client_secret_post'],
      revocation_endpoint_auth_methods_supported: ['none', 'client_secret_post'],
      scopes_supported: [...AGENT_SCOPES, ...OAUTH_SCOPES],
      client_id_metadata_document_supported: true,
      // The API reference lives on {base_url} (SPEC "Versioning"), not on the authorization server's host.
      service_documentation: `${publicBaseUrl.replace(/\/+$/, '')}/api/public/docs`,
    };
  }

  /** The public key(s) agent access tokens are signed with (RS256; `kid` in the token header). */
  @Get('jwks.json')
  public async jwks(@Request() req: ExpressRequest): Promise<JwkSet> {
    this.setHeader('Cache-Control', 'public, max-age=300');
    return agentJwks(ctxOf(req).keys) as Promise<JwkSet>;
  }
}
