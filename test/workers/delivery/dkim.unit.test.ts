import { createPublicKey } from 'node:crypto';
import { expect } from 'chai';
import { dkimVerify } from 'mailauth/lib/dkim/verify';
import { dkimPublicKeyDnsValue, generateDkimKey, headerNames, signMessage, type DkimAlgorithm } from '../../../workers/delivery/dkim.js';
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
