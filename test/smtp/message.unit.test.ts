import { expect } from 'chai';
import { DomainError } from '../../domain/errors';
import { decodeMessage, normalizeLineEndings, prepareMessage, refuseLongLines, splitMessage } from '../../smtp/message';

describe('smtp/message (unit)', () => {
  const now = new Date('2026-11-22T04:00:00Z');
  const prepare = (raw: string) => prepareMessage(raw, { now, newMessageId: () => 'assigned-1@example.test' });
  const codeOf = (fn: () => unknown): string | null => {
    try {
      fn();
      return null;
    } catch (e) {
      return e instanceof DomainError ? e.code : 'not-a-domain-error';
    }
  };

  describe('normalizeLineEndings', () => {
    it('turns bare LF and bare CR into CRLF and leaves CRLF alone', () => {
      expect(normalizeLineEndings(Buffer.from('a\nb\rc\r\nd\n\n')).toString()).to.equal('a\r\nb\r\nc\r\nd\r\n\r\n');
      expect(normalizeLineEndings(Buffer.from('\nx')).toString()).to.equal('\r\nx');
    });
    it('agrees with a byte-by-byte reference on random mixes of CR, LF and text (ends included)', () => {
      const reference = (input: Buffer): string => {
        let out = '';
        for (let i = 0; i < input.length; i++) {
          const c = String.fromCharCode(input[i]);
          if (c === '\n' && input[i - 1] !== 0x0d) out += '\r\n';
          else if (c === '\r' && input[i + 1] !== 0x0a) out += '\r\n';
          else out += c;
        }
        return out;
      };
      expect(normalizeLineEndings(Buffer.from('x\r')).toString()).to.equal('x\r\n');
      expect(normalizeLineEndings(Buffer.from('a\r\r\nb')).toString()).to.equal('a\r\n\r\nb');
      const alphabet = ['\r', '\n', 'a', '.'];
      for (let n = 0; n < 2000; n++) {
        const len = n % 17;
        const b = Buffer.from(Array.from({ length: len }, () => alphabet[Math.floor(Math.random() * alphabet.length)]).join(''), 'latin1');
        expect(normalizeLineEndings(b).toString('latin1'), JSON.stringify(b.toString('latin1'))).to.equal(reference(b));
      }
    });
    it('returns the same buffer when there is nothing to change', () => {
      const b = Buffer.from('a\r\nb\r\n');
      expect(normalizeLineEndings(b)).to.equal(b);
    });
  });

  describe('decodeMessage', () => {
    it('accepts 7-bit and UTF-8, refuses other 8-bit content and NUL (invalid_message)', () => {
      expect(decodeMessage(Buffer.from('Subject: é\r\n\r\nü'))).to.equal('Subject: é\r\n\r\nü');
      expect(codeOf(() => decodeMessage(Buffer.from([0x41, 0xe9, 0x42])))).to.equal('invalid_message');
      expect(codeOf(() => decodeMessage(Buffer.from('a\0b')))).to.equal('invalid_message');
    });
  });

  describe('refuseLongLines', () => {
    it('refuses a line over 998 octets, CRLF excluded, anywhere: first, last, without a final CRLF; counts bytes, not characters', () => {
      const ok = (s: string) => codeOf(() => refuseLongLines(Buffer.from(s)));
      expect(ok(`${'a'.repeat(998)}\r\n${'b'.repeat(998)}\r\n\r\n${'c'.repeat(998)}`)).to.equal(null);
      expect(ok('')).to.equal(null);
      expect(ok('\r\n\r\n')).to.equal(null);
      expect(ok(`${'a'.repeat(999)}\r\nx\r\n`)).to.equal('invalid_message');
      expect(ok(`x\r\n${'a'.repeat(999)}\r\n`)).to.equal('invalid_message');
      expect(ok(`x\r\n${'a'.repeat(999)}`)).to.equal('invalid_message');
      expect(ok(`${'a'.repeat(996)}é\r\n`)).to.equal(null);
      expect(ok(`${'a'.repeat(997)}é\r\n`)).to.equal('invalid_message');
    });
    it('names the line in its message', () => {
      expect(() => refuseLongLines(Buffer.from(`a\r\nb\r\n${'c'.repeat(1000)}\r\n`))).to.throw(/Line 3 .* 998 octets/);
    });
  });

  describe('splitMessage', () => {
    it('keeps folded fields whole and unfolds their value', () => {
      const { fields, body } = splitMessage('Subject: a\r\n b\r\nFrom: x@y.test\r\n\r\nbody\r\n');
      expect(fields.map((f) => [f.name, f.value])).to.deep.equal([['subject', 'a b'], ['from', 'x@y.test']]);
      expect(fields[0].raw).to.equal('Subject: a\r\n b\r\n');
      expect(body).to.equal('\r\nbody\r\n');
    });
    it('starts the body at the first line that is not a field, and handles a message without body', () => {
      expect(splitMessage('From: x@y.test\r\nnot a header\r\n').body).to.equal('\r\nnot a header\r\n');
      expect(splitMessage('From: x@y.test').fields[0].raw).to.equal('From: x@y.test\r\n');
    });
  });

  describe('prepareMessage', () => {
    const base = 'From: App <app@ex.test>\r\nTo: u@rcpt.test\r\nSubject: Hi\r\n';

    it('keeps a valid Message-ID and the fields the client owns byte for byte', () => {
      const p = prepare(`${base}Message-ID: <abc.1@client.test>\r\nDate: Sun, 22 Nov 2026 03:00:00 +0000\r\nX-Custom: v\r\n\r\nbody\r\n`);
      expect(p.messageId).to.equal('abc.1@client.test');
      expect(p.messageIdAssigned).to.equal(false);
      expect(p.raw).to.equal(`${base}Message-ID: <abc.1@client.test>\r\nDate: Sun, 22 Nov 2026 03:00:00 +0000\r\nX-Custom: v\r\n\r\nbody\r\n`);
    });

    it('assigns a Message-ID when there is none or it is malformed, and a Date when there is none', () => {
      for (const mid of ['', 'Message-ID: not-an-id\r\n', 'Message-ID: <two words@x>\r\n']) {
        const p = prepare(`${base}${mid}\r\nbody`);
        expect(p.messageId).to.equal('assigned-1@example.test');
        expect(p.raw.match(/^Message-ID:/gim)).to.have.length(1);
        expect(p.raw).to.include('Message-ID: <assigned-1@example.test>\r\n');
        expect(p.raw).to.include('Date: Sun, 22 Nov 2026 04:00:00 +0000\r\n');
      }
    });

    it('removes the fields the service owns, folded continuation lines included', () => {
      const owned = ['Bcc: secret@x.test', 'Return-Path: <a@b>', 'Received: from a\r\n\tby b', 'DKIM-Signature: v=1;\r\n b=xyz', 'Authentication-Results: x; spf=pass',
        'ARC-Seal: i=1', 'X-Service-Anything: 1', 'Sender: other@elsewhere.test', 'Delivered-To: z@z.test'];
      const p = prepare(`${base}Message-ID: <a@b>\r\n${owned.join('\r\n')}\r\nX-Keep: yes\r\n\r\nbody`);
      expect(p.removed).to.have.members(['bcc', 'return-path', 'received', 'dkim-signature', 'authentication-results', 'arc-seal', 'x-service-anything', 'sender', 'delivered-to']);
      expect(p.raw).to.not.match(/secret@x\.test|\tby b|b=xyz|spf=pass|elsewhere/);
      expect(p.raw).to.include('X-Keep: yes\r\n');
    });

    it('requires exactly one From and at most one Subject/To/Message-ID (invalid_message)', () => {
      expect(codeOf(() => prepare('To: u@rcpt.test\r\n\r\nx'))).to.equal('invalid_message');
      expect(codeOf(() => prepare(`${base}From: b@ex.test\r\n\r\nx`))).to.equal('invalid_message');
      expect(codeOf(() => prepare(`${base}Subject: again\r\n\r\nx`))).to.equal('invalid_message');
    });

    it('refuses, before decoding anything, a header section past its limits: size (552), fields, a long From or Subject', () => {
      const timed = (raw: string) => {
        const started = performance.now();
        const code = codeOf(() => prepare(raw));
        return { code, ms: performance.now() - started };
      };
      // A From naming millions of mailboxes took mailparser seconds per megabyte, on the event loop.
      const hugeFrom = timed(`From: a@ex.test,${'a,'.repeat(2_000_000)}\r\nTo: u@rcpt.test\r\n\r\nx`);
      expect(hugeFrom.code).to.equal('message_too_big');
      expect(hugeFrom.ms, 'refused at once').to.be.below(500);
      expect(codeOf(() => prepare(`${base}${`X-Pad: ${'y'.repeat(400)}\r\n`.repeat(700)}\r\nx`))).to.equal('message_too_big');
      expect(codeOf(() => prepare(`${base}${'a:\r\n'.repeat(1000)}\r\nx`))).to.equal('invalid_message');
      expect(codeOf(() => prepare(`From: a@ex.test,${'a,'.repeat(9000)}\r\n\r\nx`))).to.equal('invalid_message');
      expect(codeOf(() => prepare(`${base}Subject: ${'s'.repeat(17_000)}\r\n\r\nx`))).to.equal('invalid_message');
      // Within them, a message with many ordinary fields passes.
      expect(prepare(`${base}${'X-Trace: hop\r\n'.repeat(900)}\r\nx`).removed).to.deep.equal([]);
    });

    it('applies the section size and the field count to the last field too, with or without a body', () => {
      const folded = (kb: number) => `X-Big: ${Array.from({ length: kb * 1024 / 80 }, () => 'b'.repeat(78)).join('\r\n ')}\r\n`;
      expect(codeOf(() => prepare(`${base}${folded(400)}\r\nbody`))).to.equal('message_too_big');
      expect(codeOf(() => prepare(`${base}${folded(400)}`))).to.equal('message_too_big');
      expect(codeOf(() => prepare(`${base}X-Big: ${'a'.repeat(400 * 1024)}`))).to.equal('message_too_big');
      expect(codeOf(() => prepare(`${base}X-A: ${'a'.repeat(150 * 1024)}\r\nX-B: ${'a'.repeat(150 * 1024)}\r\n\r\nx`))).to.equal('message_too_big');
      // Counted in bytes: 100 Ki characters of 3 bytes each are 300 KiB.
      expect(codeOf(() => prepare(`${base}X-Utf8: ${'€'.repeat(100 * 1024)}\r\n\r\nx`))).to.equal('message_too_big');
      expect(codeOf(() => prepare(`${base}X-Fits: ${'a'.repeat(200 * 1024)}\r\n\r\nx`))).to.equal(null);
      // base holds 3 fields: 1,000 pass, a 1,001st refused even as the last field, and a body
      // line after the 1,000th field is no field.
      const fields = (n: number) => Array.from({ length: n - 3 }, (_, i) => `X-H${i}: v\r\n`).join('');
      expect(codeOf(() => prepare(`${base}${fields(1000)}\r\nx`))).to.equal(null);
      expect(codeOf(() => prepare(`${base}${fields(1001)}`))).to.equal('invalid_message');
      expect(codeOf(() => prepare(`${base}${fields(1000)}not a field\r\n`))).to.equal(null);
    });
  });
});
