import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto';
import type { Knex } from 'knex';
import { withSetupLock } from '../db';

/**
 * Private key material (DKIM signing keys) lives here, never in the event log: events carry only
 * the key id and the public half. Keys are encrypted at rest with AES-256-GCM under
 * KEY_ENCRYPTION_KEY. This table is state, not a projection: back it up with the database.
 */

const SCHEMA = 'motor_keys';

export interface StoredPrivateKey { id: string; algorithm: string; privateKeyPem: string }
/** One version of a service signing key: the key and when it became the current one. */
export interface SigningKeyVersion extends StoredPrivateKey { createdAt: Date }

export class KeyStore {
  private readonly aesKey: Buffer;
  private readonly cache = new Map<string, StoredPrivateKey>();
  /** Reads in flight: a worker that starts with 32 jobs of one domain reads and decrypts its key once. */
  private readonly loading = new Map<string, Promise<StoredPrivateKey | null>>();

  constructor(private readonly db: Knex, keyEncryptionKey: string) {
    this.aesKey = createHash('sha256').update(keyEncryptionKey, 'utf8').digest();
  }

  async init(): Promise<void> {
    await withSetupLock(this.db, SCHEMA, async (trx) => {
      await trx.raw(`CREATE SCHEMA IF NOT EXISTS ${SCHEMA}`);
      await trx.raw(`
        CREATE TABLE IF NOT EXISTS ${SCHEMA}.private_keys (
          id uuid PRIMARY KEY,
          algorithm text NOT NULL,
          ciphertext bytea NOT NULL,
          created_at timestamptz NOT NULL DEFAULT now()
        )`);
      await trx.raw(`
        CREATE TABLE IF NOT EXISTS ${SCHEMA}.signing_key_versions (
          purpose text NOT NULL,
          key_id uuid NOT NULL REFERENCES ${SCHEMA}.private_keys(id),
          created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
          PRIMARY KEY (purpose, key_id)
        )`);
    });
  }

  /**
   * The service's signing keys for `purpose` (e.g. agent access tokens), newest (the current one)
   * first; the first is made by `generate` the first time any process asks. Creating and rotating
   * take a transaction-scoped advisory lock, so processes racing to make the first key agree on one.
   */
  async signingKeys(purpose: string, generate: () => StoredPrivateKey): Promise<SigningKeyVersion[]> {
    const versions = await this.versions(purpose);
    if (versions.length > 0) return versions;
    await this.addVersion(purpose, generate, true);
    return this.versions(purpose);
  }

  /** A new current key for `purpose`; the previous ones stay listed (callers decide how long they still count). */
  async rotateSigningKey(purpose: string, generate: () => StoredPrivateKey): Promise<SigningKeyVersion[]> {
    await this.addVersion(purpose, generate, false);
    return this.versions(purpose);
  }

  private async versions(purpose: string): Promise<SigningKeyVersion[]> {
    const rows = await this.db.withSchema(SCHEMA).table('signing_key_versions').where({ purpose }).orderBy('created_at', 'desc').select('key_id', 'created_at');
    const out: SigningKeyVersion[] = [];
    for (const r of rows as Array<{ key_id: string; created_at: Date }>) {
      const key = await this.get(r.key_id);
      if (!key) throw new Error(`signing key ${r.key_id} for ${purpose} is missing from the key store`);
      out.push({ ...key, createdAt: new Date(r.created_at) });
    }
    return out;
  }

  private async addVersion(purpose: string, generate: () => StoredPrivateKey, onlyIfNone: boolean): Promise<void> {
    const fresh = generate();
    await this.put(fresh.id, fresh.algorithm, fresh.privateKeyPem);
    const added = await this.db.transaction(async (trx) => {
      await trx.raw('SELECT pg_advisory_xact_lock(hashtextextended(?, 0))', [`motor.signing-key:${purpose}`]);
      if (onlyIfNone && (await trx.withSchema(SCHEMA).table('signing_key_versions').where({ purpose }).first('key_id'))) return false;
      await trx.withSchema(SCHEMA).table('signing_key_versions').insert({ purpose, key_id: fresh.id });
      return true;
    });
    if (!added) await this.remove(fresh.id);
  }

  async put(id: string, algorithm: string, privateKeyPem: string): Promise<void> {
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', this.aesKey, iv);
    const body = Buffer.concat([cipher.update(privateKeyPem, 'utf8'), cipher.final()]);
    const ciphertext = Buffer.concat([iv, cipher.getAuthTag(), body]);
    await this.db.withSchema(SCHEMA).table('private_keys').insert({ id, algorithm, ciphertext }).onConflict('id').ignore();
  }

  /** Forgets a key that nothing refers to (e.g. made for a resource whose creation was then refused). */
  async remove(id: string): Promise<void> {
    await this.db.withSchema(SCHEMA).table('private_keys').where({ id }).delete();
    this.cache.delete(id);
  }

  /** The key, decrypted; kept in memory once found (a key id never changes its key). Unknown ids are not kept. */
  get(id: string): Promise<StoredPrivateKey | null> {
    const hit = this.cache.get(id);
    if (hit) return Promise.resolve(hit);
    let loading = this.loading.get(id);
    if (!loading) {
      loading = this.load(id).finally(() => this.loading.delete(id));
      this.loading.set(id, loading);
    }
    return loading;
  }

  private async load(id: string): Promise<StoredPrivateKey | null> {
    const row = await this.db.withSchema(SCHEMA).table('private_keys').where({ id }).first();
    if (!row) return null;
    const buf: Buffer = row.ciphertext;
    const decipher = createDecipheriv('aes-256-gcm', this.aesKey, buf.subarray(0, 12));
    decipher.setAuthTag(buf.subarray(12, 28));
    const pem = Buffer.concat([decipher.update(buf.subarray(28)), decipher.final()]).toString('utf8');
    const key = { id, algorithm: row.algorithm, privateKeyPem: pem };
    this.cache.set(id, key);
    return key;
  }
}
