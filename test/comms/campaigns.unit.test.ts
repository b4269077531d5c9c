import { expect } from 'chai';
import { DomainError } from '../../domain/errors';
import type { CampaignCreated } from '../../domain/events';
import {
  assertCampaignBlockType, campaignFields, campaignMessageId, decideCancel, decideStart, fold, mergeValues, subjectValues, type CampaignEvent,
} from '../../domain/comms/campaigns';
import { renderTemplate, validateTemplate } from '../../domain/templates/templates';

const TENANT = '0190f0a0-0000-7000-8000-000000000001';
const OTHER = '0190f0a0-0000-7000-8000-000000000002';
const CAMPAIGN = '0190f0a0-0000-7000-8000-0000000000c1';
const NOW = new Date('2026-11-24T10:00:00.000Z');
const created: CampaignCreated = {
  campaignId: CAMPAIGN, tenantId: TENANT, name: 'N', templateId: CAMPAIGN, listId: CAMPAIGN, motorBlockId: CAMPAIGN,
  from: 'a@x.test', fromName: null, trackOpens: true, trackClicks: true, createdAt: NOW.toISOString(),
};
const template = { subject: 'S', body_html: null, body_text: 'T' };
const codeOf = (fn: () => unknown): string | null => {
  try { fn(); return null; } catch (e) { return e instanceof DomainError ? e.code : `not a DomainError: ${String(e)}`; }
};
const fieldOf = (fn: () => unknown): unknown => {
  try { fn(); return null; } catch (e) { return (e as DomainError).details?.field; }
};

describe('campaigns: rules and decisions (unit)', () => {
  const body = { name: ' Spring ', template_id: CAMPAIGN, list_id: CAMPAIGN, motor_block_id: CAMPAIGN, from: ' a@x.test ' };

  it('fields: trimmed, defaults true for tracking, from_name empty is null', () => {
    expect(campaignFields({ ...body, from_name: '  ' })).to.deep.equal({
      name: 'Spring', templateId: CAMPAIGN, listId: CAMPAIGN, motorBlockId: CAMPAIGN, from: 'a@x.test', fromName: null, trackOpens: true, trackClicks: true,
    });
    expect(campaignFields({ ...body, track_opens: false, track_clicks: false })).to.include({ trackOpens: false, trackClicks: false });
  });

  it('fields: each bad value is 400 validation_error naming the field', () => {
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ name: undefined }, 'name'], [{ name: '   ' }, 'name'], [{ name: 'x'.repeat(201) }, 'name'], [{ name: 'a\u0007b' }, 'name'],
      [{ template_id: 'x' }, 'template_id'], [{ list_id: 5 }, 'list_id'], [{ motor_block_id: null }, 'motor_block_id'],
      [{ from: '' }, 'from'], [{ from: 'A <a@x.test>' }, 'from'], [{ from: 'nope' }, 'from'],
      [{ from_name: 3 }, 'from_name'], [{ from_name: 'x'.repeat(79) }, 'from_name'], [{ from_name: 'a\rb' }, 'from_name'],
      [{ track_opens: 'true' }, 'track_opens'], [{ track_clicks: 1 }, 'track_clicks'],
    ];
    for (const [over, field] of cases) {
      expect(codeOf(() => campaignFields({ ...body, ...over })), JSON.stringify(over)).to.equal('validation_error');
      expect(fieldOf(() => campaignFields({ ...body, ...over })), JSON.stringify(over)).to.equal(field);
    }
    expect(codeOf(() => campaignFields([]))).to.equal('validation_error');
  });

  it('block types: marketing and general_purpose only', () => {
    expect(codeOf(() => assertCampaignBlockType('marketing'))).to.equal(null);
    expect(codeOf(() => assertCampaignBlockType('general_purpose'))).to.equal(null);
    for (const t of ['transactional', 'sandbox', 'portal']) expect(codeOf(() => assertCampaignBlockType(t))).to.equal('campaign_block_type_not_allowed');
  });

  it('start: only a draft of the tenant; cancel: a draft or sending one', () => {
    const draft: CampaignEvent[] = [{ type: 'CampaignCreated', data: created }];
    const started = decideStart(fold(draft), { tenantId: TENANT, template, identityName: 'Acme', now: NOW });
    expect(started).to.deep.equal([{ type: 'CampaignSendStarted', data: { campaignId: CAMPAIGN, tenantId: TENANT, template, identityName: 'Acme', startedAt: NOW.toISOString() } }]);
    expect(codeOf(() => decideStart(fold(draft), { tenantId: OTHER, template, identityName: 'x', now: NOW }))).to.equal('campaign_not_found');
    expect(codeOf(() => decideStart(fold([]), { tenantId: TENANT, template, identityName: 'x', now: NOW }))).to.equal('campaign_not_found');
    const sending = [...draft, ...started];
    expect(fold(sending).status).to.equal('sending');
    expect(codeOf(() => decideStart(fold(sending), { tenantId: TENANT, template, identityName: 'x', now: NOW }))).to.equal('campaign_not_draft');
    expect(decideCancel(fold(sending), { tenantId: TENANT, now: NOW })[0].type).to.equal('CampaignCancelled');
    expect(decideCancel(fold(draft), { tenantId: TENANT, now: NOW })[0].type).to.equal('CampaignCancelled');
    const counts = { recipients: 2, accepted: 1, skippedSuppressed: 1, failed: 0 };
    const progressed = fold([...sending, { type: 'CampaignProgressed', data: { campaignId: CAMPAIGN, tenantId: TENANT, lastContactId: CAMPAIGN, counts, resumeAt: NOW.toISOString(), at: NOW.toISOString() } }]);
    expect(progressed).to.include({ status: 'sending', lastContactId: CAMPAIGN, resumeAt: NOW.toISOString() });
    const sent = [...sending, { type: 'CampaignSendCompleted', data: { campaignId: CAMPAIGN, tenantId: TENANT, lastContactId: CAMPAIGN, counts, completedAt: NOW.toISOString() } }] as CampaignEvent[];
    expect(fold(sent).status).to.equal('sent');
    expect(codeOf(() => decideCancel(fold(sent), { tenantId: TENANT, now: NOW }))).to.equal('campaign_not_cancellable');
    expect(codeOf(() => decideCancel(fold([...draft, { type: 'CampaignCancelled', data: { campaignId: CAMPAIGN, tenantId: TENANT, cancelledAt: NOW.toISOString() } }]), { tenantId: TENANT, now: NOW }))).to.equal('campaign_not_cancellable');
  });

  it('message ids: stable per (campaign, contact), distinct otherwise', () => {
    expect(campaignMessageId(CAMPAIGN, TENANT)).to.equal(campaignMessageId(CAMPAIGN, TENANT));
    expect(campaignMessageId(CAMPAIGN, TENANT)).to.not.equal(campaignMessageId(CAMPAIGN, OTHER));
    expect(campaignMessageId(CAMPAIGN, TENANT)).to.match(/^[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  });

  it('merge values: built-ins win over custom fields; HTML escaped; the subject stays one line', () => {
    const v = mergeValues({ name: null, fields: { code: '<b>', unsubscribe_url: 'evil' } }, 'Acme & Co', 'https://u.test/x?a=1&b=2');
    expect(v).to.deep.equal({ code: '<b>', name: '', identity_name: 'Acme & Co', unsubscribe_url: 'https://u.test/x?a=1&b=2' });
    const r = renderTemplate({ subject: 'Hi {{name}} {{code}}', body_html: '<a href="{{unsubscribe_url}}">{{identity_name}}</a> {{code}} {{missing}}', body_text: '{{code}}' }, v);
    expect(r).to.deep.equal({ subject: 'Hi  <b>', body_html: '<a href="https://u.test/x?a=1&amp;b=2">Acme &amp; Co</a> &lt;b&gt; ', body_text: '<b>' });
    expect(subjectValues({ a: 'x\r\ny\nz' })).to.deep.equal({ a: 'x y z' });
    // The preview of a validation is the same rendering.
    expect(validateTemplate({ name: 'n', subject: '{{code}}', type: 'text', body_text: '{{code}}' }, { code: '<i>' }).preview).to.deep.equal({ subject: '<i>', body_html: null, body_text: '<i>' });
  });
});
