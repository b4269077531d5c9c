import type { HttpContext } from '../../read-api/http/context';
import type { Principal } from '../../read-api/http/principal';
import { fail } from '../../domain/errors';
import type { DomainActor } from './handlers';
import type { HealthDeps } from './health';

/** What the domain handlers need, taken from the HTTP context. */
export const domainDeps = (ctx: HttpContext): HealthDeps => ({
  store: ctx.store, db: ctx.db, keys: ctx.keys, resolver: ctx.resolver, clock: ctx.clock, config: ctx.config, logger: ctx.logger, metrics: ctx.metrics,
});

/** Public bearer tokens act on their account (whatever block they are bound to); dashboard users on theirs. */
export function domainActor(p: Principal): DomainActor {
  switch (p.kind) {
    case 'publicBearer': return { accountId: p.accountId, actor: `token:${p.tokenId}` };
    case 'dashboard': return { accountId: p.accountId, actor: `user:${p.userId}` };
    default: throw fail('invalid_token', 401, 'This route needs a public bearer token or a dashboard session');
  }
}
