import { expect } from 'chai';
import { ConfigError, loadConfig } from '../../infra/config.js';

/** BOUNCE_DOMAIN (docs/DOMAINS.md "Bounce domain"): normalised as tenants' domain names are, and kept out of the sandbox namespace. */
describe('BOUNCE_DOMAIN configuration (unit)', () => {
  it('is read as the domain code stores names: trimmed, lower case, no trailing dot; unset is null', () => {
    expect(loadConfig({ BOUNCE_DOMAIN: ' Bounces.Example.COM. ' }).inbound.bounceDomain).to.equal('bounces.example.com');
    expect(loadConfig({}).inbound.bounceDomain).to.equal(null);
  });

  it('refuses a bounce domain in the sandbox namespace, where a sandbox handle would be it or its parent', () => {
    for (const bad of ['sandbox.motor.test', 'x.sandbox.motor.test', 'bounces.x.sandbox.motor.test']) {
      expect(() => loadConfig({ SERVICE_DOMAIN: 'motor.test', BOUNCE_DOMAIN: bad }), bad).to.throw(ConfigError, /BOUNCE_DOMAIN must not be in the sandbox namespace sandbox\.motor\.test/);
    }
    for (const ok of ['bounces.motor.test', 'motor.test', 'notsandbox.motor.test', 'bounces.example.com']) {
      expect(loadConfig({ SERVICE_DOMAIN: 'motor.test', BOUNCE_DOMAIN: ok }).inbound.bounceDomain, ok).to.equal(ok);
    }
  });
});
