import { expect } from 'chai';
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { EventStoreUnavailableError } from '../../../domain/eventStore.js';
import { createEventStore } from '../../../infra/eventstore/index.js';
import { createTestDatabase } from '../../support/db.js';

const run = promisify(execFile);
const ROOT = join(__dirname, '..', '..', '..');

/** createEventStore: PostgreSQL by default, the KurrentDB adapter (and its gRPC client) only when configured. */
describe('createEventStore', function () {
  this.timeout(60_000);

  it('opens the PostgreSQL store without loading the KurrentDB client (a fresh process)', async () => {
    const db = await createTestDatabase('factory');
    try {
      const script = `
        const { createEventStore } = require('./infra/eventstore/index.ts');
        createEventStore({ databaseUrl: process.env.URL, eventstoreUrl: null }).then(async (store) => {
          const loaded = Object.keys(require.cache).some((k) => k.includes('kurrentdb-client'));
          console.log(JSON.stringify({ kind: store.constructor.name, kurrentLoaded: loaded }));
          await store.close();
        });`;
      const { stdout } = await run(process.execPath, ['--import', 'tsx', '-e', script], { cwd: ROOT, env: { ...process.env, URL: db.url } });
      expect(JSON.parse(stdout.trim().split('\n').pop()!)).to.deep.equal({ kind: 'PostgresEventStore', kurrentLoaded: false });
    } finally {
      await db.drop();
    }
  });

  it('with EVENTSTORE_URL, loads the KurrentDB adapter and fails clearly when no server answers', async () => {
    let err: unknown;
    try {
      await createEventStore({ databaseUrl: '', eventstoreUrl: 'kurrentdb://127.0.0.1:1?tls=false' });
    } catch (e) {
      err = e;
    }
    expect(err).to.be.instanceOf(EventStoreUnavailableError);
    expect((err as Error).message).to.match(/KurrentDB event store unavailable/);
  });
});
