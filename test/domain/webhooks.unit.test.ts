import { expect } from 'chai';
import { webhookUrl } from '../../domain/webhooks/webhooks';

const codeOf = (f: () => unknown): string | null => {
  try {
    f();
    return null;
  } catch (e) {
    return (e as { code?: string }).code ?? String(e);
  }
};

describe('webhook endpoint URL (unit)', () => {
  it('refuses a fragment, an empty one (a bare "#") included', () => {
    // WHATWG URL gives an empty fragment no `hash`: "https://x.test/a#" passed and was stored as such.
    for (const url of ['https://x.test/a#frag', 'https://x.test/a#', 'https://x.test/#', 'http://x.test#', 'https://x.test/a?b=c#']) {
      expect(codeOf(() => webhookUrl(url)), url).to.equal('invalid_webhook_url');
    }
  });

  it('takes an http(s) URL without credentials or fragment, as the URL parser writes it', () => {
    expect(webhookUrl('https://x.test/hook?a=%23')).to.equal('https://x.test/hook?a=%23');
    expect(webhookUrl(' HTTP://X.test ')).to.equal('http://x.test/');
  });
});
