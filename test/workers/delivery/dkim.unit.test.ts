import { createHash, createPublicKey } from 'node:crypto';
import { expect } from 'chai';
import { dkimVerify } from 'mailauth/lib/dkim/verify';
import { dkimPublicKeyDnsValue, generateDkimKey, headerNames, relaxedBodyHash, signMessage, type DkimAlgorithm } from '../../../workers/delivery/dkim.js';
import { buildMime } from '../../../workers/delivery/mime.js';

/** A resolver answering only the one DKIM record, the way mailauth's injectable resolver expects. */
const txtResolver = (name: string, value: string) => async (qname: string, rrtype: string) => {
  if (rrtype === 'TXT' && qname === name) return [[value]];
  throw Object.assign(new Error(`no ${rrtype} for ${qname}`), { code: 'ENOTFOUND' });
};

describe('dkim', () => {
  it('generates an RSA 2048 key whose p= is the SPKI public key', async () => {
    const key = await generateDkimKey('rsa-sha256');
    const pub = createPublicKey({ key: Buffer.from(key.publicKeyDnsValue, 'base64'), format: 'der', type: 'spki' });
    expect(pub.asymmetricKeyType).to.equal('rsa');
    expect(pub.asymmetricKeyDetails?.modulusLength).to.equal(2048);
    expect(key.dnsTxtValue).to.equal(`v=DKIM1; k=rsa; p=${key.publicKeyDnsValue}`);
    expect(key.privateKeyPem).to.match(/^-----BEGIN PRIVATE KEY-----/);
    expect(dkimPublicKeyDnsValue(key.privateKeyPem)).to.equal(key.publicKeyDnsValue);
  });

  it('generates an Ed25519 key whose p= is the raw 32-byte key (RFC 8463)', async () => {
    const key = await generateDkimKey('ed25519-sha256');
    expect(Buffer.from(key.publicKeyDnsValue, 'base64')).to.have.length(32);
    expect(key.dnsTxtValue).to.equal(`v=DKIM1; k=ed25519; p=${key.publicKeyDnsValue}`);
    expect(dkimPublicKeyDnsValue(key.privateKeyPem)).to.equal(key.publicKeyDnsValue);
  });

  for (const algorithm of ['rsa-sha256', 'ed25519-sha256'] as DkimAlgorithm[]) {
    it(`signs with ${algorithm}, covering standard and custom headers, and the signature verifies`, async () => {
      const key = await generateDkimKey(algorithm);
      const raw = await buildMime({
        from: 'news@sender.example',
        fromName: 'Sender',
        to: ['rcpt@example.org'],
        subject: 'Signed',
        text: 'body',
        html: null,
        headers: { 'X-Campaign': 'c-1', 'List-Unsubscribe': '<mailto:u@sender.example>' },
        messageId: 'id1@sender.example',
        date: new Date('2026-01-01T00:00:00Z'),
      });
      const signed = await signMessage(raw, { domain: 'sender.example', selector: 's1', privateKeyPem: key.privateKeyPem, algorithm });
      expect(headerNames(signed)[0]).to.equal('dkim-signature');
      expect(signed.subarray(signed.length - raw.length).equals(raw)).to.equal(true);

      const header = signed.toString().split(/\r\n(?=\S)/)[0].replace(/\r\n\s+/g, ' ');
      expect(header).to.include(`a=${algorithm}`).and.include('d=sender.example').and.include('s=s1');
      const h = /\bh=([^;]+)/.exec(header)![1].split(':').map((s) => s.trim().toLowerCase());
      expect(h).to.include.members(['from', 'to', 'subject', 'date', 'message-id', 'mime-version', 'content-type', 'x-campaign', 'list-unsubscribe']);

      const result = await dkimVerify(signed, { resolver: txtResolver('s1._domainkey.sender.example', key.dnsTxtValue) as never });
      expect(result.results.map((r) => r.status.result)).to.deep.equal(['pass']);
    });
  }

  it('a field whose name holds \';\' (legal in RFC 5322, impossible to list in h=) goes unsigned, and the signature verifies', async () => {
    const key = await generateDkimKey('ed25519-sha256');
    const raw = Buffer.from('From: a@sender.example\r\nTo: b@example.org\r\nSubject: x\r\nX-Tag;l=0: 1\r\nX-Ok: 2\r\n\r\nbody\r\n');
    const signed = await signMessage(raw, { domain: 'sender.example', selector: 's1', privateKeyPem: key.privateKeyPem, algorithm: 'ed25519-sha256' });
    const header = signed.toString().split(/\r\n(?=\S)/)[0].replace(/\r\n\s+/g, ' ');
    const h = /\bh=([^;]+)/.exec(header)![1].split(':').map((x) => x.trim().toLowerCase());
    expect(h).to.include('x-ok').and.not.include('x-tag;l=0');
    const result = await dkimVerify(signed, { resolver: txtResolver('s1._domainkey.sender.example', key.dnsTxtValue) as never });
    expect(result.results.map((r) => r.status.result)).to.deep.equal(['pass']);
  });

  it('a header changed after signing fails verification (the custom header is really covered)', async () => {
    const key = await generateDkimKey('ed25519-sha256');
    const raw = Buffer.from('From: a@sender.example\r\nTo: b@example.org\r\nSubject: x\r\nX-Campaign: one\r\n\r\nbody\r\n');
    const signed = await signMessage(raw, { domain: 'sender.example', selector: 's1', privateKeyPem: key.privateKeyPem, algorithm: 'ed25519-sha256' });
    const tampered = Buffer.from(signed.toString().replace('X-Campaign: one', 'X-Campaign: two'));
    const result = await dkimVerify(tampered, { resolver: txtResolver('s1._domainkey.sender.example', key.dnsTxtValue) as never });
    expect(result.results[0].status.result).to.equal('fail');
  });

  it('throws when the key does not match the algorithm', async () => {
    const key = await generateDkimKey('ed25519-sha256');
    let error: unknown = null;
    await signMessage(Buffer.from('From: a@b.c\r\n\r\nx\r\n'), { domain: 'b.c', selector: 's', privateKeyPem: key.privateKeyPem, algorithm: 'rsa-sha256' }).catch((e) => (error = e));
    expect(error).to.be.instanceOf(Error);
    expect((error as Error).message).to.match(/DKIM signing failed/);
  });
});

describe('dkim: direct relaxed/relaxed signer against mailauth', () => {
  const cases: Record<string, string> = {
    'folded headers, WSP runs, trailing WSP, empty lines at the end':
      'From: "A  B" <a@sender.example>\r\nTo: b@example.org,\r\n\t c@example.org  \r\nSubject:   lots   of\t space \r\nX-Custom:v  \r\n\r\nline  one \t\r\n\r\n  indented\tline\r\n\r\n\r\n',
    'repeated header instances are all signed': 'From: a@sender.example\r\nX-Tag: one\r\nTo: b@example.org\r\nX-Tag: two\r\nSubject: s\r\n\r\nbody\r\n',
    'empty body': 'From: a@sender.example\r\nTo: b@example.org\r\nSubject: s\r\n\r\n',
    'body without a final CRLF': 'From: a@sender.example\r\nSubject: s\r\n\r\nno newline at the end',
    '8-bit body and header bytes': 'From: a@sender.example\r\nSubject: =?UTF-8?Q?caf=C3=A9?=\r\nContent-Type: text/plain; charset=utf-8\r\n\r\ncafé – naïve\r\n',
  };
  for (const algorithm of ['rsa-sha256', 'ed25519-sha256'] as DkimAlgorithm[]) {
    for (const [name, text] of Object.entries(cases)) {
      it(`${algorithm}: ${name} verifies, with the same bh= and h= as mailauth's signer`, async () => {
        const key = await generateDkimKey(algorithm);
        const raw = Buffer.from(text, 'utf8');
        const signed = await signMessage(raw, { domain: 'sender.example', selector: 's1', privateKeyPem: key.privateKeyPem, algorithm });
        const result = await dkimVerify(signed, { resolver: txtResolver('s1._domainkey.sender.example', key.dnsTxtValue) as never });
        expect(result.results.map((r) => r.status.result)).to.deep.equal(['pass']);
        // The same message with bare LF line ends takes mailauth's path: compare the tags.
        const viaMailauth = await signMessage(Buffer.from(text.replace(/\r\n/g, '\n'), 'utf8'), { domain: 'sender.example', selector: 's1', privateKeyPem: key.privateKeyPem, algorithm });
        const tags = (b: Buffer) => {
          const header = b.toString('latin1').split(/\r?\n(?=\S)/)[0].replace(/\r?\n[ \t]+/g, ' ');
          const tag = (t: string) => new RegExp(`\\b${t}=([^;]+)`).exec(header)![1].replace(/\s+/g, '').toLowerCase();
          return { bh: tag('bh'), h: tag('h') };
        };
        expect(tags(signed)).to.deep.equal(tags(viaMailauth));
      });
    }
  }

  it('a body changed after signing fails verification', async () => {
    const key = await generateDkimKey('rsa-sha256');
    const signed = await signMessage(Buffer.from('From: a@sender.example\r\n\r\nbody one\r\n'), { domain: 'sender.example', selector: 's1', privateKeyPem: key.privateKeyPem, algorithm: 'rsa-sha256' });
    const tampered = Buffer.from(signed.toString().replace('body one', 'body two'));
    const result = await dkimVerify(tampered, { resolver: txtResolver('s1._domainkey.sender.example', key.dnsTxtValue) as never });
    // mailauth reports a body hash mismatch as neutral ("body hash did not verify").
    expect(result.results[0].status.result).to.not.equal('pass');
    expect(JSON.stringify(result.results[0].status)).to.match(/body hash/);
  });
});

describe('relaxedBodyHash against the canonicalization written as regular expressions (RFC 6376 §3.4.4)', () => {
  const reference = (body: string): string => {
    let c = body.replace(/[ \t]+(?=\r\n|$)/g, '').replace(/[ \t]+/g, ' ').replace(/(\r\n)+$/, '');
    if (c.length > 0) c += '\r\n';
    return createHash('sha256').update(c, 'latin1').digest('base64');
  };
  let seed = 777;
  const random = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
  const alphabet = ['a', 'b', ' ', ' ', '\t', '\r\n', '\r\n', '\r\n\r\n', '=', '\u00e9', '\u00ff', '.'];

  it('gives the same bh= on 2,000 random bodies, from any offset', () => {
    for (let n = 0; n < 2000; n++) {
      let body = '';
      const length = Math.floor(random() * 200);
      for (let i = 0; i < length; i++) body += alphabet[Math.floor(random() * alphabet.length)];
      const head = 'Subject: x\r\n\r\n';
      const raw = Buffer.from(head + body, 'latin1');
      expect(relaxedBodyHash(raw, head.length), JSON.stringify(body)).to.equal(reference(body));
    }
  });

  it('refuses a bare CR or LF in the body (the message then goes through mailauth)', () => {
    expect(relaxedBodyHash(Buffer.from('one\ntwo\r\n'), 0)).to.equal(null);
    expect(relaxedBodyHash(Buffer.from('one\rtwo\r\n'), 0)).to.equal(null);
    expect(relaxedBodyHash(Buffer.from('ends with CR\r'), 0)).to.equal(null);
    expect(relaxedBodyHash(Buffer.from(''), 0)).to.equal(reference(''));
  });
});
