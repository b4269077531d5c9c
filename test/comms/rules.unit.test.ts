import { expect } from 'chai';
import { DomainError } from '../../domain/errors';
import { contactListFields, decideCreate, fold, LIST_LIMITS, nameKey, type ContactListEvent } from '../../domain/comms/contactLists';
import { suppressionFactOf } from '../../domain/comms/suppressions';

const TENANT = '11111111-1111-4111-8111-111111111111';
const NOW = new Date('2026-03-01T12:00:00Z');
const created = (listId: string, name: string): ContactListEvent => ({ type: 'ContactListCreated', data: { listId, tenantId: TENANT, name, description: null, createdAt: NOW.toISOString() } });
const codeOf = (fn: () => unknown): string => {
  try { fn(); } catch (e) { return (e as DomainError).code; }
  return 'no error';
};

/** The pure rules of the communications lists and suppressions (docs/COMMUNICATIONS.md). */
describe('communications rules (unit)', () => {
  describe('contact lists: given events, when create, then', () => {
    const create = (given: ContactListEvent[], name: string) => decideCreate(fold(given), { listId: 'new', tenantId: TENANT, name, description: 'd', now: NOW });

    it('a new name: ContactListCreated with the name as given', () => {
      expect(create([created('l1', 'Customers')], 'Beta')).to.deep.equal([
        { type: 'ContactListCreated', data: { listId: 'new', tenantId: TENANT, name: 'Beta', description: 'd', createdAt: NOW.toISOString() } },
      ]);
    });

    it('a name that differs only by case, width or spacing runs: list_name_taken', () => {
      expect(nameKey('  News \t Letter ')).to.equal(nameKey('news letter'));
      expect(nameKey('ＮＥＷＳ')).to.equal(nameKey('news'));
      expect(codeOf(() => create([created('l1', 'News Letter')], 'NEWS  letter'))).to.equal('list_name_taken');
      expect(create([created('l1', 'News Letter')], 'Newsletter')).to.have.length(1);
    });

    it(`a list past the cap of ${LIST_LIMITS.perTenant}: list_limit_reached`, () => {
      const full = Array.from({ length: LIST_LIMITS.perTenant }, (_, i) => created(`l${i}`, `List ${i}`));
      expect(codeOf(() => create(full, 'One more'))).to.equal('list_limit_reached');
      expect(create(full.slice(1), 'One more')).to.have.length(1);
    });

    it('fields: trimmed; empty description is null; wrong types and lengths are validation_error', () => {
      expect(contactListFields({ name: ' A ', description: '  ' })).to.deep.equal({ name: 'A', description: null });
      for (const body of [null, [], 'x', {}, { name: '' }, { name: 1 }, { name: 'a\u0085b' }, { name: 'x'.repeat(101) }, { name: 'a', description: {} }, { name: 'a', description: 'x'.repeat(501) }]) {
        expect(codeOf(() => contactListFields(body)), JSON.stringify(body)).to.equal('validation_error');
      }
    });
  });

  describe('suppressions', () => {
    const m = '22222222-2222-4222-8222-222222222222';
    const at = NOW.toISOString();
    it('a 5xx bounce is a hard bounce (address lower-cased); a complaint is a complaint', () => {
      expect(suppressionFactOf({ type: 'DeliveryBounced', data: { messageId: m, recipient: ' Ann@Example.TEST', at, smtpCode: '550', enhancedCode: '5.1.1' } }))
        .to.deep.equal({ messageId: m, email: 'ann@example.test', reason: 'hard_bounce', at: NOW, smtpCode: '550', enhancedCode: '5.1.1' });
      expect(suppressionFactOf({ type: 'ComplaintReceived', data: { messageId: m, recipient: 'a@b.test', at, feedbackType: 'abuse' } })?.reason).to.equal('complaint');
    });
    it('soft outcomes, other types and malformed events suppress nothing', () => {
      const none = [
        { type: 'DeliveryBounced', data: { messageId: m, recipient: 'a@b.test', at, smtpCode: '452' } },
        { type: 'DeliveryDeferred', data: { messageId: m, recipient: 'a@b.test', at, smtpCode: '451' } },
        { type: 'DeliveryFailed', data: { messageId: m, recipient: 'a@b.test', at, smtpCode: null, reason: 'no_mx' } },
        { type: 'DeliverySucceeded', data: { messageId: m, recipient: 'a@b.test', at, smtpCode: '250' } },
        { type: 'DeliveryBounced', data: { messageId: m, recipient: 'a@b.test', at: 'not a date', smtpCode: '550' } },
        { type: 'ComplaintReceived', data: null },
      ];
      for (const e of none) expect(suppressionFactOf(e), JSON.stringify(e)).to.equal(null);
    });
  });
});
