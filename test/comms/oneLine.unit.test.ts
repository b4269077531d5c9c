import { expect } from 'chai';
import { campaignChanges } from '../../domain/comms/campaigns';
import { contactListFields } from '../../domain/comms/contactLists';
import { contactFields } from '../../domain/comms/contacts';
import { manualSuppressionFields } from '../../domain/comms/suppressions';
import { isDomainError } from '../../domain/errors';

/** One-line texts of the communications API refuse every line break, the Unicode separators included. */
describe('communications: one-line texts', () => {
  const refusals: Array<[string, (text: string) => unknown, string]> = [
    ['list name', (t) => contactListFields({ name: t }), 'name'],
    ['contact name', (t) => contactFields({ email: 'a@b.test', name: t }), 'name'],
    ['campaign name', (t) => campaignChanges({ name: t }), 'name'],
    ['suppression note', (t) => manualSuppressionFields({ email: 'a@b.test', note: t }), 'note'],
  ];
  for (const [what, parse, field] of refusals) {
    for (const breaker of ['\n', '\r', '\u0085', '\u2028', '\u2029', '\u0000', '\u007f']) {
      it(`${what} refuses U+${breaker.codePointAt(0)!.toString(16).padStart(4, '0').toUpperCase()}`, () => {
        let caught: unknown;
        try { parse(`one${breaker}two`); } catch (err) { caught = err; }
        expect(isDomainError(caught) && [caught.status, caught.code, (caught.details as { field?: string }).field]).to.deep.equal([400, 'validation_error', field]);
      });
    }
    it(`${what} keeps a one-line text with other non-ASCII characters`, () => {
      expect(() => parse('Café — “news” ✓')).not.to.throw();
    });
  }
});
