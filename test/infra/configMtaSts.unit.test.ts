import { expect } from 'chai';
import { ConfigError, loadConfig } from '../../infra/config.js';

/** MTA_STS, MTA_STS_PORT, DELIVERY_TLS_CA_FILE (docs/DELIVERY.md "MTA-STS"). */
describe('MTA-STS configuration (unit)', () => {
  it('is on, with policy hosts on 443 and the default trust store, unless told otherwise', () => {
    const c = loadConfig({});
    expect(c.mtaSts).to.deep.equal({ enabled: true, port: 443 });
    expect(c.deliveryTlsCaFile).to.equal(null);
    expect(loadConfig({ MTA_STS: 'off', MTA_STS_PORT: '8443' }).mtaSts).to.deep.equal({ enabled: false, port: 8443 });
    expect(loadConfig({ MTA_STS: 'ON' }).mtaSts.enabled).to.equal(true);
  });

  it('refuses another MTA_STS value, a port out of range, a CA file that does not exist', () => {
    expect(() => loadConfig({ MTA_STS: 'enforce' })).to.throw(ConfigError, /MTA_STS must be on or off/);
    expect(() => loadConfig({ MTA_STS_PORT: '0' })).to.throw(ConfigError, /MTA_STS_PORT/);
    expect(() => loadConfig({ DELIVERY_TLS_CA_FILE: '/nonexistent/ca.pem' })).to.throw(ConfigError, /DELIVERY_TLS_CA_FILE names a file that does not exist/);
  });
});
