import { expect } from 'chai';
import { processApplicationName } from '../../infra/db';
import { roleApplicationName } from '../../scripts/runtime';

/** The application_name that tells an operator which process a PostgreSQL session (and a lease on it) is. */
describe('processApplicationName (unit)', () => {
  it('is <label>@<host>:<pid>', () => {
    expect(processApplicationName('motor-projector', 'db-2', 4711)).to.equal('motor-projector@db-2:4711');
  });

  it('shortens a long host name to PostgreSQL\'s 63 bytes, never the pid', () => {
    const name = processApplicationName('motor-api,projector,worker', 'motor-7d9f8c6b5-x2x4z.projector.motor.svc.cluster.local', 1234567);
    expect(Buffer.byteLength(name)).to.equal(63);
    expect(name).to.match(/^motor-api,projector,worker@motor-7d9f8c6b5-x2x4z\..*:1234567$/);
  });

  it('by default names this process: its host and pid; a runtime\'s names its roles, or all of them', () => {
    expect(processApplicationName('motor')).to.match(new RegExp(`^motor@.+:${process.pid}$`));
    expect(roleApplicationName(['projector'])).to.match(new RegExp(`^motor-projector@.+:${process.pid}$`));
    expect(roleApplicationName(['api', 'projector', 'worker', 'smtp', 'inbound'])).to.match(/^motor-all@/);
  });
});
