import { expect } from 'chai';
import { simpleParser } from 'mailparser';
import { fromAndSubject } from '../../smtp/headerValues';
import { splitMessage } from '../../smtp/message';

/** Each case: a From field and maybe a Subject field, as a client could send them (UTF-8 text). */
const CASES: Array<[string, string | null]> = [
  ['From: app@example.com', 'Subject: plain'],
  ['From: "Zoë Ops" <app@example.com>', 'Subject: =?UTF-8?Q?Gr=C3=BC=C3=9Fe?= and more'],
  ['From: =?UTF-8?B?WsO2ZSBPcHM=?= <app@example.com>', 'Subject: =?iso-8859-1?Q?caf=E9?='],
  ['From: "Last, First" <first.last@example.com>', 'Subject: folded\r\n  over two lines'],
  ['From: undisclosed:;', null],
  ['From: team: a@example.com, b@example.com;', 'Subject: group'],
  ['From: a@example.com, b@example.com', 'Subject: two mailboxes'],
  ['From: =?utf-8?B?PGV2aWxAYXR0YWNrZXIudGVzdD4=?= <app@example.com>', 'Subject: encoded word hiding an address'],
  ['From: =?utf-8?B?YXR0YWNrZXJAZXZpbC50ZXN0?=', 'Subject: encoded word that is a bare address'],
  ['From: Someone <app@xn--bcher-kva.example>', 'Subject: punycode domain'],
  ['From: <app@example.com> (comment)', 'Subject: =?UTF-8?B?8J+agA==?= rocket'],
  ['From:app@example.com', 'Subject:'],
  ['From: "Broken =?UTF-8?Q?=ZZ?=" <app@example.com>', 'Subject: =?unknown-charset?Q?x?='],
  ['From: Ωmega <omega@example.com>', 'Subject: raw UTF-8 ✓ text'],
];

describe('From and Subject decoding (smtp/headerValues.ts)', () => {
  for (const [fromLine, subjectLine] of CASES) {
    it(`decodes as mailparser does: ${JSON.stringify(fromLine).slice(0, 60)}`, async () => {
      const section = `${fromLine}\r\n${subjectLine ? `${subjectLine}\r\n` : ''}To: x@example.org\r\n`;
      const expected = await simpleParser(`${section}\r\n`, { skipHtmlToText: true, skipTextToHtml: true, skipImageLinks: true });
      const { fields } = splitMessage(`${section}\r\nbody\r\n`);
      const got = fromAndSubject(fields.find((f) => f.name === 'from')!.raw, fields.find((f) => f.name === 'subject')?.raw ?? null);
      expect(got.from?.value).to.deep.equal(expected.from?.value);
      expect(got.subject).to.equal(expected.subject);
    });
  }

  it('is called with what it needs only: no Subject gives undefined', () => {
    const got = fromAndSubject('From: a@example.com\r\n', null);
    expect(got.subject).to.equal(undefined);
    expect(got.from?.value).to.deep.equal([{ address: 'a@example.com', name: '' }]);
  });
});
