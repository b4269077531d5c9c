import { KeyStore } from '../../infra/keys/keyStore';
import type { HttpContext } from '../../read-api/http/context';
import type { AuthDeps } from './onboarding';

const cache = new WeakMap<HttpContext, AuthDeps>();

/** The account commands' dependencies, from the HTTP context (the key store is the runtime's table, one instance per context). */
export function authDepsOf(ctx: HttpContext): AuthDeps {
  let d = cache.get(ctx);
  if (!d) {
    d = { store: ctx.store, db: ctx.db, keys: new KeyStore(ctx.db, ctx.config.keyEncryptionKey), quota: ctx.quota, config: ctx.config, loginTurns: ctx.loginTurns,
      logger: ctx.logger, metrics: ctx.metrics };
    cache.set(ctx, d);
  }
  return d;
}
