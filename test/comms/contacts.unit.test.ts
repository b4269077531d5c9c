import { expect } from 'chai';
import { DomainError } from '../../domain/errors';
import { CONTACT_LIMITS, contactFields, contactIdOf, contactUpdate, decideAdd, decideRemove, decideUnsubscribe, decideUpdate, fold, type ContactEvent } from '../../domain/comms/contacts';
import { listUnsubscribeHeaders, unsubscribeSecret, unsubscribeToken, unsubscribeUrl, verifyUnsubscribeToken } from '../../domain/comms/unsubscribe';

/** Contact rules and unsubscribe tokens (docs/COMMUNICATIONS.md "Contacts", "Unsubscribe"): pure, given events → decision. */
describe('communications contacts and unsubscribe tokens (unit)', () => {
  const tenantId = '0193a5f0-0000-7000-8000-000000000001';
  const listId = '0193a5f0-0000-7000-8000-000000000002';
  const now = new Date('2026-11-24T10:00:00Z');
  const codeOf = (fn: () => unknown): [string, number, unknown] | null => {
    try { fn(); return null; } catch (e) { const d = e as DomainError; return [d.code, d.status, (d.details as { field?: string } | undefined)?.field]; }
  };

  describe('contactFields', () => {
    it('normalises the address and keeps name and fields', () => {
      expect(contactFields({ email: '  Ann@Example.COM ', name: '  Ann  ', fields: { plan: 'pro', first_name: 'Ann' } }))
        .to.deep.equal({ email: 'ann@example.com', name: 'Ann', fields: { plan: 'pro', first_name: 'Ann' } });
      expect(contactFields({ email: 'b@example.com', name: '   ' })).to.deep.equal({ email: 'b@example.com', name: null, fields: {} });
    });
    it('refuses bad input with 400 validation_error and the field', () => {
      const cases: Array<[unknown, string]> = [
        [{}, 'email'], [{ email: 7 }, 'email'], [{ email: 'not an address' }, 'email'], [{ email: 'a@b' }, 'email'],
        [{ email: 'a@example.com', name: 5 }, 'name'], [{ email: 'a@example.com', name: 'n'.repeat(CONTACT_LIMITS.nameMax + 1) }, 'name'],
        [{ email: 'a@example.com', name: 'a\nb' }, 'name'],
        [{ email: 'a@example.com', fields: [] }, 'fields'], [{ email: 'a@example.com', fields: 'x' }, 'fields'],
        [{ email: 'a@example.com', fields: { Plan: 'x' } }, 'fields'], [{ email: 'a@example.com', fields: { '1a': 'x' } }, 'fields'],
        [{ email: 'a@example.com', fields: { ['a'.repeat(41)]: 'x' } }, 'fields'],
        [{ email: 'a@example.com', fields: { name: 'x' } }, 'fields'], [{ email: 'a@example.com', fields: { unsubscribe_url: 'x' } }, 'fields'],
        [{ email: 'a@example.com', fields: { identity_name: 'x' } }, 'fields'],
        [{ email: 'a@example.com', fields: { n: 1 } }, 'fields'], [{ email: 'a@example.com', fields: { n: 'v'.repeat(CONTACT_LIMITS.fieldValueMax + 1) } }, 'fields'],
        [{ email: 'a@example.com', fields: Object.fromEntries(Array.from({ length: CONTACT_LIMITS.fieldsMax + 1 }, (_, i) => [`f${i}`, 'v'])) }, 'fields'],
      ];
      for (const [body, field] of cases) expect(codeOf(() => contactFields(body)), JSON.stringify(body).slice(0, 80)).to.deep.equal(['validation_error', 400, field]);
      expect(codeOf(() => contactFields(null))?.slice(0, 2)).to.deep.equal(['validation_error', 400]);
      expect(codeOf(() => contactFields({ email: 'a@example.com', fields: Object.fromEntries(Array.from({ length: CONTACT_LIMITS.fieldsMax }, (_, i) => [`f${i}`, 'v'])) }))).to.equal(null);
    });
  });

  describe('the contact stream', () => {
    const contactId = contactIdOf(tenantId, listId, 'ann@example.com');
    const add = (): ContactEvent[] => decideAdd(fold([]), { contactId, tenantId, listId, email: 'ann@example.com', name: null, fields: {}, now });

    it('the id is one per (tenant, list, address), whatever the case', () => {
      expect(contactIdOf(tenantId, listId, ' ANN@example.com')).to.equal(contactId);
      expect(contactIdOf(tenantId, '0193a5f0-0000-7000-8000-000000000003', 'ann@example.com')).not.to.equal(contactId);
    });
    it('given an add, another add is 409 contact_exists with the id; after a removal it is allowed again', () => {
      const added = add();
      expect(added[0].type).to.equal('ContactAdded');
      try { decideAdd(fold(added), { contactId, tenantId, listId, email: 'ann@example.com', name: null, fields: {}, now }); expect.fail('no conflict'); } catch (e) {
        expect([(e as DomainError).code, (e as DomainError).details]).to.deep.equal(['contact_exists', { contactId }]);
      }
      const removed = decideRemove(fold(added), { contactId, tenantId, listId, now });
      expect(removed.map((e) => e.type)).to.deep.equal(['ContactRemoved']);
      expect(decideAdd(fold([...added, ...removed]), { contactId, tenantId, listId, email: 'ann@example.com', name: null, fields: {}, now })[0].type).to.equal('ContactAdded');
      expect(codeOf(() => decideRemove(fold([...added, ...removed]), { contactId, tenantId, listId, now }))?.slice(0, 2)).to.deep.equal(['contact_not_found', 404]);
      expect(codeOf(() => decideRemove(fold(added), { contactId, tenantId: listId, listId, now }))?.slice(0, 2), 'another tenant').to.deep.equal(['contact_not_found', 404]);
    });
    it('unsubscribe: once; a second time records nothing; a removed contact can still unsubscribe; an unknown stream is null', () => {
      const added = add();
      const u = decideUnsubscribe(fold(added), { contactId, tenantId, listId, via: 'page', now })!;
      expect(u.map((e) => [e.type, (e.data as { email: string }).email])).to.deep.equal([['ContactUnsubscribed', 'ann@example.com']]);
      expect(decideUnsubscribe(fold([...added, ...u]), { contactId, tenantId, listId, via: 'one_click', now })).to.deep.equal([]);
      const removed = decideRemove(fold(added), { contactId, tenantId, listId, now });
      expect(decideUnsubscribe(fold([...added, ...removed]), { contactId, tenantId, listId, via: 'page', now })).to.have.length(1);
      expect(decideUnsubscribe(fold([]), { contactId, tenantId, listId, via: 'page', now })).to.equal(null);
    });
  });

  describe('updating a contact', () => {
    const contactId = contactIdOf(tenantId, listId, 'ann@example.com');
    const added = decideAdd(fold([]), { contactId, tenantId, listId, email: 'ann@example.com', name: 'Ann', fields: { plan: 'pro', city: 'Oslo' }, now });
    const update = (events: ContactEvent[], body: unknown, who = tenantId) => decideUpdate(fold(events), { ...contactUpdate(body), contactId, tenantId: who, listId, now });

    it('contactUpdate: name and fields checked like an add; null clears the name and removes a field; email, fields: null and nothing at all refused', () => {
      expect(contactUpdate({ name: '  Bo ' })).to.deep.equal({ name: 'Bo' });
      expect(contactUpdate({ name: null })).to.deep.equal({ name: null });
      expect(contactUpdate({ name: '' })).to.deep.equal({ name: null });
      expect(contactUpdate({ fields: { plan: 'free', city: null } })).to.deep.equal({ fields: { plan: 'free', city: null } });
      const cases: Array<[unknown, string]> = [
        [{ email: 'b@example.com' }, 'email'], [{}, 'name'], [{ name: 5 }, 'name'], [{ name: 'a\rb' }, 'name'], [{ fields: null }, 'fields'],
        [{ fields: [] }, 'fields'], [{ fields: { Plan: 'x' } }, 'fields'], [{ fields: { name: 'x' } }, 'fields'], [{ fields: { n: 1 } }, 'fields'],
        [{ fields: { n: 'v'.repeat(CONTACT_LIMITS.fieldValueMax + 1) } }, 'fields'],
      ];
      for (const [body, field] of cases) expect(codeOf(() => contactUpdate(body)), JSON.stringify(body)).to.deep.equal(['validation_error', 400, field]);
      expect(codeOf(() => contactUpdate(null))?.slice(0, 2)).to.deep.equal(['validation_error', 400]);
    });
    it('decideUpdate: merges the fields (RFC 7396), carries the whole result, records nothing when nothing changes', () => {
      const [e] = update(added, { fields: { plan: 'free', city: null, lang: 'nb' } });
      expect(e.type).to.equal('ContactUpdated');
      expect(e.data).to.deep.equal({ contactId, tenantId, listId, name: 'Ann', fields: { plan: 'free', lang: 'nb' }, updatedAt: now.toISOString() });
      const after = [...added, e];
      expect(fold(after)).to.include({ name: 'Ann' });
      expect(fold(after).fields).to.deep.equal({ plan: 'free', lang: 'nb' });
      expect(update(after, { name: 'Ann', fields: { plan: 'free' } }), 'no change').to.deep.equal([]);
      expect(update(after, { fields: { gone: null } }), 'removing a field it does not have').to.deep.equal([]);
      expect((update(after, { name: null })[0].data as { name: string | null }).name).to.equal(null);
      // A re-add starts from its own name and fields, not the updated ones.
      const removed = decideRemove(fold(after), { contactId, tenantId, listId, now });
      const readded = decideAdd(fold([...after, ...removed]), { contactId, tenantId, listId, email: 'ann@example.com', name: null, fields: {}, now });
      expect(fold([...after, ...removed, ...readded])).to.deep.include({ name: null, fields: {} });
    });
    it('decideUpdate: at most fieldsMax fields after the merge; a contact not on the list, or another tenant\'s, is 404', () => {
      const full = Object.fromEntries(Array.from({ length: CONTACT_LIMITS.fieldsMax - 2 }, (_, i) => [`f${i}`, 'v']));
      const [filled] = update(added, { fields: full });
      expect(Object.keys(fold([...added, filled]).fields)).to.have.length(CONTACT_LIMITS.fieldsMax);
      expect(codeOf(() => update([...added, filled], { fields: { extra: 'x' } }))).to.deep.equal(['validation_error', 400, 'fields']);
      expect(update([...added, filled], { fields: { extra: 'x', plan: null } }), 'one in, one out').to.have.length(1);
      const removed = decideRemove(fold(added), { contactId, tenantId, listId, now });
      expect(codeOf(() => update([...added, ...removed], { name: 'X' }))?.slice(0, 2)).to.deep.equal(['contact_not_found', 404]);
      expect(codeOf(() => update([], { name: 'X' }))?.slice(0, 2)).to.deep.equal(['contact_not_found', 404]);
      expect(codeOf(() => update(added, { name: 'X' }, listId))?.slice(0, 2), 'another tenant').to.deep.equal(['contact_not_found', 404]);
    });
  });

  describe('unsubscribe tokens', () => {
    const secret = unsubscribeSecret('test-token-secret-0123456789abcdef0123');
    const t = { tenantId, listId, contactId: contactIdOf(tenantId, listId, 'ann@example.com') };

    it('round-trips, and the URL and RFC 8058 headers carry it', () => {
      const token = unsubscribeToken(secret, t);
      expect(token).to.match(/^[A-Za-z0-9_-]{64}\.[A-Za-z0-9_-]{43}$/);
      expect(verifyUnsubscribeToken(secret, token)).to.deep.equal(t);
      const url = unsubscribeUrl('https://auth.example.test/', secret, t);
      expect(url).to.equal(`https://auth.example.test/comm-api/u/${token}`);
      expect(listUnsubscribeHeaders(url)).to.deep.equal({ 'List-Unsubscribe': `<${url}>`, 'List-Unsubscribe-Post': 'List-Unsubscribe=One-Click' });
    });
    it('the key is derived (not the token secret itself) and another secret does not verify', () => {
      expect(secret.equals(Buffer.from('test-token-secret-0123456789abcdef0123'))).to.equal(false);
      expect(verifyUnsubscribeToken(unsubscribeSecret('another-secret-0123456789abcdef012345'), unsubscribeToken(secret, t))).to.equal(null);
      expect(verifyUnsubscribeToken('test-token-secret-0123456789abcdef0123', unsubscribeToken(secret, t)), 'the raw token secret').to.equal(null);
    });
    it('forged, altered, truncated or junk tokens are null, never a throw', () => {
      const token = unsubscribeToken(secret, t);
      const [payload, mac] = token.split('.');
      const other = unsubscribeToken(secret, { ...t, contactId: contactIdOf(tenantId, listId, 'bob@example.com') });
      const flip = (s: string, i: number) => s.slice(0, i) + (s[i] === 'A' ? 'B' : 'A') + s.slice(i + 1);
      for (const bad of [
        `${flip(payload, 10)}.${mac}`, `${payload}.${flip(mac, 5)}`, `${other.split('.')[0]}.${mac}`, token.slice(0, -1), `${token}A`, '', 'x', '.', `${payload}.`,
        `${payload}.${mac}.${mac}`, 'a'.repeat(3000), token.replace('.', '%2E'), `${payload}=.${mac}`,
      ]) expect(verifyUnsubscribeToken(secret, bad), bad.slice(0, 40)).to.equal(null);
    });
  });
});
