import type { Request } from 'express';
import { authDepsOf } from '../auth/deps';
import { ctxOf, principalOf } from '../../read-api/http/context';
import type { Principal } from '../../read-api/http/principal';
import type { SandboxActor, SandboxDeps } from './sandbox';

/** The sandbox handlers' dependencies and caller, for both route families (public bearer and dashboard JWT). */
export function sandboxCaller(req: Request): { deps: SandboxDeps; actor: SandboxActor; now: Date } {
  const ctx = ctxOf(req);
  const p = principalOf<Principal>(req);
  const actor = p.kind === 'dashboard' ? `user:${p.userId}` : p.kind === 'publicBearer' ? `token:${p.tokenId}` : `key:${p.keyId}`;
  return { deps: authDepsOf(ctx), actor: { accountId: p.accountId, actor }, now: ctx.clock.now() };
}
