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
  // One cache per kind of entry, keyed by the id itself: a key built per look-up ("b:" + id) is a
  // new string to hash on every hit, and every send looks up five entries.
  private readonly caches: Array<TtlCache<unknown>> = [];
  readonly apiKeyByPrefix: (prefix: string) => Promise<q.ApiKeyRecord | null>;
  readonly apiKey: (id: string) => Promise<q.ApiKeyRecord | null>;
  readonly block: (id: string) => Promise<q.BlockRecord | null>;
  readonly domain: (id: string) => Promise<q.DomainRecord | null>;
  readonly blockBySmtpUsername: (username: string) => Promise<q.BlockRecord | null>;
  readonly account: (id: string) => Promise<Awaited<ReturnType<typeof q.getAccount>>>;
  /** Sandbox and Free-plan recipient rules of the send path (docs/SANDBOX.md). */
  readonly sandboxAllowlist: (motorBlockId: string) => Promise<string[] | null>;
  readonly confirmedFreeRecipients: (accountId: string) => Promise<string[]>;

  constructor(readonly db: Knex, readonly ttlMs = DIRECTORY_CACHE_TTL_MS, now: () => number = Date.now) {
    const cached = <T>(load: (key: string) => Promise<T>): ((key: string) => Promise<T>) => {
      const cache = new TtlCache<T>(ttlMs, now);
      this.caches.push(cache as TtlCache<unknown>);
      return (key) => cache.get(key, load);
    };
    this.apiKeyByPrefix = cached((prefix) => q.findApiKeyByPrefix(db, prefix));
    this.apiKey = cached((id) => q.getApiKey(db, id));
    this.block = cached((id) => q.getBlock(db, id));
    this.domain = cached((id) => q.getDomain(db, id));
    this.blockBySmtpUsername = cached((username) => q.findBlockBySmtpUsername(db, username));
    this.account = cached((id) => q.getAccount(db, id));
    this.sandboxAllowlist = cached((motorBlockId) => q.getSandboxAllowlist(db, motorBlockId));
    this.confirmedFreeRecipients = cached((accountId) => q.confirmedFreeRecipients(db, accountId));
  }

  /** Forget everything (tests and the CLI call it after writing). */
  clear(): void { for (const cache of this.caches) cache.clear(); }
}
