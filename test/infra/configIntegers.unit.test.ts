import { expect } from 'chai';
import { ConfigError, loadConfig } from '../../infra/config.js';

/** Integer settings are read in decimal digits, as an operator writes a count. */
describe('integer configuration variables (unit)', () => {
  it('takes decimal digits, surrounding spaces and leading zeros included', () => {
    expect(loadConfig({ DELIVERY_CONCURRENCY: '48' }).deliveryConcurrency).to.equal(48);
    expect(loadConfig({ DELIVERY_CONCURRENCY: ' 48 ' }).deliveryConcurrency).to.equal(48);
    expect(loadConfig({ DELIVERY_CONCURRENCY: '048' }).deliveryConcurrency).to.equal(48);
  });

  it('refuses exponent, sign, hexadecimal, fractional and separated forms that Number() would read', () => {
    for (const bad of ['1e2', '1E2', '+48', '0x30', '48.0', '48.', '4_8', '4 8', '４８']) {
      expect(() => loadConfig({ DELIVERY_CONCURRENCY: bad }), bad).to.throw(ConfigError, new RegExp(`DELIVERY_CONCURRENCY must be an integer between 1 and 1000 \\(got "${bad.replace(/[.+]/g, '\\$&')}"\\)`));
    }
  });
});

describe('DATABASE_POOL_SIZE (unit)', () => {
  it('defaults to 10 and takes 4 to 1000', () => {
    expect(loadConfig({}).databasePoolSize).to.equal(10);
    expect(loadConfig({ DATABASE_POOL_SIZE: '4' }).databasePoolSize).to.equal(4);
    expect(loadConfig({ DATABASE_POOL_SIZE: '1000' }).databasePoolSize).to.equal(1000);
    for (const bad of ['3', '1001', '0', 'ten']) {
      expect(() => loadConfig({ DATABASE_POOL_SIZE: bad }), bad).to.throw(ConfigError, /DATABASE_POOL_SIZE must be an integer between 4 and 1000/);
    }
  });
});
