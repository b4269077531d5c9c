import { expect } from 'chai';
import { generateApiKey, maskApiKey, parseApiKey, secretMatches } from '../../domain/credentials/apiKeys';
import { expandScopes, hasScopes } from '../../domain/credentials/scopes';
import { grantScopes, signPublicToken, validateMintRequest, verifyPublicToken } from '../../commands/tokens/publicTokens';
import { isDomainError } from '../../domain/errors';

const settings = { secret: 'x'.repeat(40), issuer: 'https://motor.test', audience: 'https://motor.test/api/public/v1' };
const codeOf = (fn: () => unknown): string => {
  try { fn(); } catch (e) { if (isDomainError(e)) return `${e.status} ${e.code}`; throw e; }
  return 'ok';
};

describe('credentials (unit)', () => {
  it('API keys: mk_live_/ak_live_ shape, only the hash is kept, parse refuses masked and truncated keys', () => {
    const k = generateApiKey('block');
    expect(k.key).to.match(/^mk_live_[0-9A-Za-z]{12}_[0-9A-Za-z]{40}$/);
    expect(k.secretHash).to.match(/^[0-9a-f]{64}$/);
    expect(k.key).to.not.include(k.secretHash);
    const parsed = parseApiKey(k.key)!;
    expect(parsed.kind).to.equal('block');
    expect(secretMatches(parsed.secret, k.secretHash)).to.equal(true);
    expect(secretMatches(parsed.secret.replace(/.$/, (c) => (c === 'a' ? 'b' : 'a')), k.secretHash)).to.equal(false);
    expect(parseApiKey(maskApiKey('block', parsed.prefix))).to.equal(null);
    expect(parseApiKey(k.key.slice(0, -1))).to.equal(null);
    expect(parseApiKey(generateApiKey('account').key)!.kind).to.equal('account');
  });

  it('scopes: config.manage implies config.read, webhooks.manage implies webhooks.read, nothing else', () => {
    expect([...expandScopes(['config.manage'])].sort()).to.deep.equal(['config.manage', 'config.read']);
    expect(hasScopes(['webhooks.manage'], ['webhooks.read'])).to.equal(true);
    expect(hasScopes(['logs.read'], ['logs.pii'])).to.equal(false);
    expect(hasScopes(['analytics.read'], ['analytics.read', 'usage.read'])).to.equal(false);
  });

  it('minting: requested scopes are intersected with the key allowance; body rules are 422', () => {
    expect(grantScopes(['logs.read', 'logs.pii'], ['logs.read', 'analytics.read'])).to.deep.equal(['logs.read']);
    expect(grantScopes(null, ['config.manage'])).to.deep.equal(['config.manage', 'config.read']);
    const id = '3f1e2d4c-5b6a-4978-8a9b-0c1d2e3f4a5b';
    expect(codeOf(() => validateMintRequest({ motorBlockId: 'nope' }))).to.equal('422 validation_error');
    expect(codeOf(() => validateMintRequest({ motorBlockId: id, ttlSeconds: 59 }))).to.equal('422 validation_error');
    expect(codeOf(() => validateMintRequest({ motorBlockId: id, ttlSeconds: 901 }))).to.equal('422 validation_error');
    expect(codeOf(() => validateMintRequest({ motorBlockId: id, scopes: ['logs.write'] }))).to.equal('422 validation_error');
    expect(validateMintRequest({ motorBlockId: id }).ttlSeconds).to.equal(300);
  });

  it('public tokens: HS256 with iss/aud, bound to one block, expire; other keys and algorithms are refused', () => {
    const now = new Date('2026-11-22T10:00:00Z');
    const c = { motorBlockId: '3f1e2d4c-5b6a-4978-8a9b-0c1d2e3f4a5b', accountId: 'a', scopes: ['logs.read' as const], userId: 'u', clientId: 'c' };
    const { token } = signPublicToken(settings, c, 60, now);
    const header = JSON.parse(Buffer.from(token.split('.')[0], 'base64url').toString());
    expect(header.alg).to.equal('HS256');
    const claims = verifyPublicToken(settings, token, new Date(now.getTime() + 59_000));
    expect(claims.motorBlockId).to.equal(c.motorBlockId);
    expect(claims.scopes).to.deep.equal(['logs.read']);
    expect(codeOf(() => verifyPublicToken(settings, token, new Date(now.getTime() + 61_000)))).to.equal('401 token_expired');
    expect(codeOf(() => verifyPublicToken({ ...settings, secret: 'y'.repeat(40) }, token, now))).to.equal('401 invalid_token');
    expect(codeOf(() => verifyPublicToken({ ...settings, audience: 'other' }, token, now))).to.equal('401 invalid_token');
    const none = `${Buffer.from('{"alg":"none","typ":"JWT"}').toString('base64url')}.${token.split('.')[1]}.`;
    expect(codeOf(() => verifyPublicToken(settings, none, now))).to.equal('401 invalid_token');
  });
});
