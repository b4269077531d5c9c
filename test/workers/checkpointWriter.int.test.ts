import { expect } from 'chai';
import type { Knex } from 'knex';
import { createDb } from '../../infra/db';
import { createLogger } from '../../infra/logger';
import { CHECKPOINTS, CheckpointWriter, initCheckpoints } from '../../workers/logEnqueuer';
import { createTestDatabase } from '../support/db';

describe('CheckpointWriter (a log follower\'s checkpoint row, written at most once an interval)', () => {
  let drop: () => Promise<void>;
  let db: Knex;
  const logger = createLogger('silent');
  const INTERVAL = 300;
  const row = async (name: string) => (await db.table(CHECKPOINTS).where({ name }).first('position'))?.position as string | undefined;
  const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

  before(async () => {
    const t = await createTestDatabase('checkpoint_writer');
    drop = t.drop;
    db = createDb(t.url);
    await initCheckpoints(db);
  });
  after(async () => {
    await db.destroy();
    await drop();
  });

  it('writes the first position at once, holds the next ones, and writes the latest when the interval is up', async () => {
    const w = new CheckpointWriter(db, 'held', logger, INTERVAL);
    await w.save('1');
    expect(await row('held')).to.equal('1');
    await w.save('2');
    await w.save('3');
    expect(await row('held'), 'inside the interval').to.equal('1');
    await pause(INTERVAL + 200);
    expect(await row('held'), 'the timer wrote the latest').to.equal('3');
  });

  it('writes what is pending on flush (a follower stopping)', async () => {
    const w = new CheckpointWriter(db, 'flushed', logger, 60_000);
    await w.save('10');
    await w.save('11');
    expect(await row('flushed')).to.equal('10');
    await w.flush();
    expect(await row('flushed')).to.equal('11');
  });

  it('never lets the timer overwrite a later position written in the follower\'s own transaction', async () => {
    const w = new CheckpointWriter(db, 'own', logger, INTERVAL);
    await w.save('20');
    await w.save('21'); // pending, timer armed
    await w.drain();
    await db.transaction(async (trx) => w.write(trx, '25'));
    await pause(INTERVAL + 200);
    expect(await row('own')).to.equal('25');
  });
});
