import type { Knex } from 'knex';
import * as q from '../projections/directory/queries';
import { TtlCache } from '../infra/ttlCache';

/**
 * A short-lived in-process cache over the directory read model for the hot paths (every send
 * authenticates a key and reads its block and domain). Entries live `ttlMs` (default 2 s): a
 * revoked key or deactivated block stops working within that time on every process. Concurrent
 * misses of one key share one query (infra/ttlCache.ts); with `ttlMs` 0 every call reads.
 */
/** How long an entry lives by default; the block deletion job waits this long for stale entries to go (workers/blockDeletion.ts). */
export const DIRECTORY_CACHE_TTL_MS = 2000;

export class DirectoryCache {
  private readonly entries: TtlCache<unknown>;

  constructor(readonly db: Knex, readonly ttlMs = DIRECTORY_CACHE_TTL_MS, now: () => number = Date.now) {
    this.entries = new TtlCache(ttlMs, now);
  }

  private cached<T>(key: string, load: () => Promise<T>): Promise<T> {
    return this.entries.get(key, load) as Promise<T>;
  }

  apiKeyByPrefix(prefix: string) { return this.cached(`k:${prefix}`, () => q.findApiKeyByPrefix(this.db, prefix)); }
  apiKey(id: string) { return this.cached(`ki:${id}`, () => q.getApiKey(this.db, id)); }
  block(id: string) { return this.cached(`b:${id}`, () => q.getBlock(this.db, id)); }
  domain(id: string) { return this.cached(`d:${id}`, () => q.getDomain(this.db, id)); }
  blockBySmtpUsername(username: string) { return this.cached(`u:${username}`, () => q.findBlockBySmtpUsername(this.db, username)); }
  account(id: string) { return this.cached(`a:${id}`, () => q.getAccount(this.db, id)); }
  /** Sandbox and Free-plan recipient rules of the send path (docs/SANDBOX.md). */
  sandboxAllowlist(motorBlockId: string) { return this.cached(`sa:${motorBlockId}`, () => q.getSandboxAllowlist(this.db, motorBlockId)); }
  confirmedFreeRecipients(accountId: string) { return this.cached(`fr:${accountId}`, () => q.confirmedFreeRecipients(this.db, accountId)); }

  /** Forget everything (tests and the CLI call it after writing). */
  clear(): void { this.entries.clear(); }
}
