import type { Request } from 'express';
import { fail } from '../../domain/errors';
import { ctxOf, principalOf, type HttpContext } from './context';
import type { PrincipalOf } from './principal';

/** A communications request's tenant and what its handler may use. */
export interface Tenant {
  deps: Pick<HttpContext, 'store' | 'db' | 'clock' | 'logger' | 'metrics'>;
  tenantId: string;
  /** `user:<id>`: the actor recorded on the events the request appends. */
  actor: string;
}

/**
 * The tenant of a communications request (routes under /comm-api/api): the `X-Tenant-Id` header,
 * which must name the signed-in user's own account (docs/TEMPLATES.md "Who may call it": the
 * header selects, the dashboard JWT authorizes). Missing: 400 tenant_required; another account:
 * 403 tenant_forbidden. The JWT itself was checked by the dashboardJwt security scheme (401).
 */
export function tenantOf(req: Request, header: string | undefined): Tenant {
  const ctx = ctxOf(req);
  const p = principalOf<PrincipalOf<'dashboard'>>(req);
  if (header === undefined || header.trim() === '') throw fail('tenant_required', 400, 'The X-Tenant-Id header is required', { nextAction: 'Send X-Tenant-Id: <your account id>' });
  // An account id is a uuid: written in capitals it names the same account (as every id of these routes).
  if (header.trim().toLowerCase() !== p.accountId.toLowerCase()) throw fail('tenant_forbidden', 403, 'This credential does not act for that tenant');
  return { deps: { store: ctx.store, db: ctx.db, clock: ctx.clock, logger: ctx.logger, metrics: ctx.metrics }, tenantId: p.accountId, actor: `user:${p.userId}` };
}
