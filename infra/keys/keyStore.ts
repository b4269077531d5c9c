import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto';
import type { Knex } from 'knex';

/**
 * Private key material (DKIM signing keys) lives here, never in the event log: events carry only
 * the key id and the public half. Keys are encrypted at rest with AES-256-GCM under
 * KEY_ENCRYPTION_KEY. This table is state, not a projection: back it up with the database.
 */

const SCHEMA = 'motor_keys';

export interface StoredPrivateKey { id: string; algorithm: string; privateKeyPem: string }

export class KeyStore {
  private readonly aesKey: Buffer;
  private readonly cache = new Map<string, StoredPrivateKey>();
  /** Reads in flight: a worker that starts with 32 jobs of one domain reads and decrypts its key once. */
  private readonly loading = new Map<string, Promise<StoredPrivateKey | null>>();

  constructor(private readonly db: Knex, keyEncryptionKey: string) {
    this.aesKey = createHash('sha256').update(keyEncryptionKey, 'utf8').digest();
  }

  async init(): Promise<void> {
    await this.db.raw(`CREATE SCHEMA IF NOT EXISTS ${SCHEMA}`);
    await this.db.raw(`
      CREATE TABLE IF NOT EXISTS ${SCHEMA}.private_keys (
        id uuid PRIMARY KEY,
        algorithm text NOT NULL,
        ciphertext bytea NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now()
      )`);
    await this.db.raw(`
      CREATE TABLE IF NOT EXISTS ${SCHEMA}.signing_keys (
        purpose text PRIMARY KEY,
        key_id uuid NOT NULL REFERENCES ${SCHEMA}.private_keys(id),
        created_at timestamptz NOT NULL DEFAULT now()
      )`);
  }

  /**
   * The service's current signing key for `purpose` (e.g. agent access tokens), made by `generate`
   * the first time any process asks. Processes racing to make it agree on one: the first row in
   * `signing_keys` wins and the losers' keys are removed.
   */
  async signingKey(purpose: string, generate: () => { id: string; algorithm: string; privateKeyPem: string }): Promise<StoredPrivateKey> {
    const current = () => this.db.withSchema(SCHEMA).table('signing_keys').where({ purpose }).first('key_id');
    let row = await current();
    if (!row) {
      const fresh = generate();
      await this.put(fresh.id, fresh.algorithm, fresh.privateKeyPem);
      await this.db.withSchema(SCHEMA).table('signing_keys').insert({ purpose, key_id: fresh.id }).onConflict('purpose').ignore();
      row = await current();
      if (row.key_id !== fresh.id) await this.db.withSchema(SCHEMA).table('private_keys').where({ id: fresh.id }).delete();
    }
    const key = await this.get(row.key_id);
    if (!key) throw new Error(`signing key ${row.key_id} for ${purpose} is missing from the key store`);
    return key;
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
