import type { Knex } from 'knex';
import * as q from '../projections/directory/queries';

/**
 * A short-lived in-process cache over the directory read model for the hot paths (every send
 * authenticates a key and reads its block and domain). Entries live `ttlMs` (default 2 s): a
 * revoked key or deactivated block stops working within that time on every process.
 *
 * Concurrent misses of one key share one query: when an entry expires under load, the requests
 * in flight (up to the HTTP connections) would otherwise each read the same row. A caller that
 * joins a load started before it sees data no older than the TTL allows. With `ttlMs` 0 every
 * call reads (no sharing); `clear()` also drops the loads in flight, whose results are then
 * returned to their callers but not cached.
 */
export class DirectoryCache {
  private readonly entries = new Map<string, { at: number; value: unknown }>();
  private readonly loading = new Map<string, Promise<unknown>>();
  private generation = 0;

  constructor(readonly db: Knex, private readonly ttlMs = 2000, private readonly now: () => number = Date.now) {}

  private cached<T>(key: string, load: () => Promise<T>): Promise<T> {
    const hit = this.entries.get(key);
    const t = this.now();
    if (hit && t - hit.at < this.ttlMs) return Promise.resolve(hit.value as T);
    if (this.ttlMs <= 0) return load();
    const inFlight = this.loading.get(key);
    if (inFlight) return inFlight as Promise<T>;
    const generation = this.generation;
    const loaded: Promise<T> = load()
      .then((value) => {
        if (generation === this.generation) {
          if (this.entries.size > 50_000) this.entries.clear();
          this.entries.set(key, { at: t, value });
        }
        return value;
      })
      .finally(() => {
        if (this.loading.get(key) === loaded) this.loading.delete(key);
      });
    this.loading.set(key, loaded);
    return loaded;
  }

  apiKeyByPrefix(prefix: string) { return this.cached(`k:${prefix}`, () => q.findApiKeyByPrefix(this.db, prefix)); }
  block(id: string) { return this.cached(`b:${id}`, () => q.getBlock(this.db, id)); }
  domain(id: string) { return this.cached(`d:${id}`, () => q.getDomain(this.db, id)); }
  blockBySmtpUsername(username: string) { return this.cached(`u:${username}`, () => q.findBlockBySmtpUsername(this.db, username)); }
  account(id: string) { return this.cached(`a:${id}`, () => q.getAccount(this.db, id)); }
  /** Sandbox and Free-plan recipient rules of the send path (docs/SANDBOX.md). */
  sandboxAllowlist(motorBlockId: string) { return this.cached(`sa:${motorBlockId}`, () => q.getSandboxAllowlist(this.db, motorBlockId)); }
  confirmedFreeRecipients(accountId: string) { return this.cached(`fr:${accountId}`, () => q.confirmedFreeRecipients(this.db, accountId)); }

  /** Forget everything (tests and the CLI call it after writing). */
  clear(): void {
    this.entries.clear();
    this.loading.clear();
    this.generation++;
  }
}
