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
    // The first write of the position 'fails' fails, slowly (a transient database error).
    await db.raw('CREATE SEQUENCE test_fail_once');
    await db.raw(`CREATE FUNCTION test_fail_once() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF NEW.position = 'fails' AND nextval('test_fail_once') = 1 THEN PERFORM pg_sleep(0.3); RAISE EXCEPTION 'transient'; END IF;
        RETURN NEW;
      END $$`);
    await db.raw(`CREATE TRIGGER test_fail_once BEFORE INSERT OR UPDATE ON ${CHECKPOINTS} FOR EACH ROW EXECUTE FUNCTION test_fail_once()`);
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

  it('a timer write that fails while the follower drains: the follower\'s later write stands after flush on stop', async () => {
    const w = new CheckpointWriter(db, 'failed', logger, 100);
    await w.save('30');
    await w.save('fails'); // pending, timer armed
    await pause(150); // the timer's write is in flight, and fails
    await w.drain(); // a batch that writes with its own tables
    await db.transaction(async (trx) => w.write(trx, '32'));
    expect(await row('failed')).to.equal('32');
    await w.flush();
    expect(await row('failed')).to.equal('32');
  });
});
