import type { Knex } from 'knex';
import * as q from '../projections/directory/queries';

/**
 * A short-lived in-process cache over the directory read model for the hot paths (every send
 * authenticates a key and reads its block and domain). Entries live `ttlMs` (default 2 s): a
 * revoked key or deactivated block stops working within that time on every process.
 */
export class DirectoryCache {
  private readonly entries = new Map<string, { at: number; value: unknown }>();

  constructor(readonly db: Knex, private readonly ttlMs = 2000, private readonly now: () => number = Date.now) {}

  private async cached<T>(key: string, load: () => Promise<T>): Promise<T> {
    const hit = this.entries.get(key);
    const t = this.now();
    if (hit && t - hit.at < this.ttlMs) return hit.value as T;
    const value = await load();
    if (this.entries.size > 50_000) this.entries.clear();
    this.entries.set(key, { at: t, value });
    return value;
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
  clear(): void { this.entries.clear(); }
}
