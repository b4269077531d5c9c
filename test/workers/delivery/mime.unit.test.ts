import { expect } from 'chai';
import { simpleParser } from 'mailparser';
import { buildMime, type MimeInput } from '../../../workers/delivery/mime.js';

const base: MimeInput = {
  from: 'sender@example.com',
  fromName: null,
  to: ['a@example.org', 'b@example.org'],
  subject: 'Hello',
  text: 'Plain body',
  html: '<p>HTML body</p>',
  headers: {},
  messageId: 'abc123@example.com',
  date: new Date('2026-01-02T03:04:05Z'),
};

const headerBlock = (raw: Buffer): string => raw.toString('utf8').split('\r\n\r\n')[0];

describe('buildMime', () => {
  it('builds multipart/alternative with both bodies, CRLF line ends and the given ids', async () => {
    const raw = await buildMime(base);
    expect(raw.toString('latin1')).to.not.match(/[^\r]\n/);
    const parsed = await simpleParser(raw);
    expect(parsed.headers.get('content-type')).to.have.property('value', 'multipart/alternative');
    expect(parsed.text?.trim()).to.equal('Plain body');
    expect(parsed.html).to.include('<p>HTML body</p>');
    expect(parsed.messageId).to.equal('<abc123@example.com>');
    expect(parsed.date?.toISOString()).to.equal('2026-01-02T03:04:05.000Z');
    expect(parsed.to && !Array.isArray(parsed.to) ? parsed.to.value.map((v) => v.address) : null).to.deep.equal(['a@example.org', 'b@example.org']);
  });

  it('sends text only (or html only) as a single part', async () => {
    const textOnly = await simpleParser(await buildMime({ ...base, html: null }));
    expect(textOnly.headers.get('content-type')).to.have.property('value', 'text/plain');
    const htmlOnly = await simpleParser(await buildMime({ ...base, text: null }));
    expect(htmlOnly.headers.get('content-type')).to.have.property('value', 'text/html');
  });

  it('RFC 2047-encodes a non-ASCII display name', async () => {
    const raw = await buildMime({ ...base, fromName: 'Jürgen Müller' });
    expect(headerBlock(raw)).to.match(/^From: =\?UTF-8\?[QB]\?[^?]+\?= <sender@example\.com>$/m);
    const parsed = await simpleParser(raw);
    expect(parsed.from?.value[0]).to.deep.include({ name: 'Jürgen Müller', address: 'sender@example.com' });
  });

  it('quotes a display name with specials and leaves a plain one bare', async () => {
    expect(headerBlock(await buildMime({ ...base, fromName: 'Doe, John' }))).to.match(/^From: "Doe, John" <sender@example\.com>$/m);
    expect(headerBlock(await buildMime({ ...base, fromName: 'Acme Support' }))).to.match(/^From: Acme Support <sender@example\.com>$/m);
    expect(headerBlock(await buildMime(base))).to.match(/^From: sender@example\.com$/m);
  });

  it('keeps ASCII custom headers verbatim (name spelling and value) and encodes non-ASCII values', async () => {
    const raw = await buildMime({
      ...base,
      headers: { 'x-campaign-ID': 'spring  2026; tier=gold', 'List-Unsubscribe': '<https://example.com/u/1>', 'X-Note': 'café' },
    });
    const block = headerBlock(raw);
    expect(block).to.match(/^x-campaign-ID: spring  2026; tier=gold$/m);
    expect(block).to.match(/^List-Unsubscribe: <https:\/\/example\.com\/u\/1>$/m);
    // "café" as an RFC 2047 encoded-word (=C3=A9 is é in UTF-8).
    expect(block).to.match(/^X-Note: =\?UTF-8\?Q\?caf=C3=A9\?=$/m);
  });

  it('refuses header injection and headers the composer owns', async () => {
    let error: unknown = null;
    await buildMime({ ...base, headers: { 'X-Evil': 'a\r\nBcc: victim@example.net' } }).catch((e) => (error = e));
    expect(error).to.be.instanceOf(TypeError);
    error = null;
    await buildMime({ ...base, headers: { From: 'other@example.net' } }).catch((e) => (error = e));
    expect(error).to.be.instanceOf(TypeError);
  });
});
