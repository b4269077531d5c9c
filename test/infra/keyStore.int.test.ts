import { expect } from 'chai';
import type { Knex } from 'knex';
import { generateKeyPairSync, randomUUID } from 'node:crypto';
import { createDb } from '../../infra/db.js';
import { KeyStore } from '../../infra/keys/keyStore.js';
import { createTestDatabase } from '../support/db.js';

/** DKIM private keys at rest: encrypted in PostgreSQL, decrypted once per process. */
describe('KeyStore (PostgreSQL)', function () {
  this.timeout(60_000);
  let dbh: { url: string; drop: () => Promise<void> };
  let db: Knex;
  let reads = 0;
  const pem = generateKeyPairSync('ed25519').privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();

  before(async () => {
    dbh = await createTestDatabase('keystore');
    db = createDb(dbh.url);
    db.on('query', (q: { sql: string }) => {
      if (/^select .*private_keys/i.test(q.sql)) reads++;
    });
  });
  after(async () => {
    await db?.destroy();
    await dbh?.drop();
  });
  beforeEach(() => { reads = 0; });

  it('stores the key encrypted and gives it back decrypted', async () => {
    const store = new KeyStore(db, 'k'.repeat(32));
    await store.init();
    const id = randomUUID();
    await store.put(id, 'ed25519', pem);
    const row = await db.withSchema('motor_keys').table('private_keys').where({ id }).first();
    expect(Buffer.from(row.ciphertext).toString('latin1')).not.to.include('PRIVATE KEY');
    expect(await new KeyStore(db, 'k'.repeat(32)).get(id)).to.deep.equal({ id, algorithm: 'ed25519', privateKeyPem: pem });
  });

  it('answers 32 concurrent first reads of one key with one query, then from memory', async () => {
    const writer = new KeyStore(db, 'k'.repeat(32));
    await writer.init();
    const id = randomUUID();
    await writer.put(id, 'ed25519', pem);
    const store = new KeyStore(db, 'k'.repeat(32));
    reads = 0;
    const keys = await Promise.all(Array.from({ length: 32 }, () => store.get(id)));
    expect(keys.every((k) => k?.privateKeyPem === pem)).to.equal(true);
    expect(reads).to.equal(1);
    await store.get(id);
    expect(reads, 'kept in memory').to.equal(1);
  });

  it('does not keep an unknown id: a key stored later is found', async () => {
    const store = new KeyStore(db, 'k'.repeat(32));
    await store.init();
    const id = randomUUID();
    expect(await Promise.all([store.get(id), store.get(id)])).to.deep.equal([null, null]);
    expect(reads).to.equal(1);
    await store.put(id, 'ed25519', pem);
    expect((await store.get(id))?.privateKeyPem).to.equal(pem);
  });

  it('refuses to decrypt under another encryption key', async () => {
    const store = new KeyStore(db, 'k'.repeat(32));
    await store.init();
    const id = randomUUID();
    await store.put(id, 'ed25519', pem);
    let err: unknown;
    try {
      await new KeyStore(db, 'x'.repeat(32)).get(id);
    } catch (e) {
      err = e;
    }
    expect(err).to.be.instanceOf(Error);
  });
});
