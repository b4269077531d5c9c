import { expect } from 'chai';
import { DomainError } from '../../domain/errors';
import type { CampaignCreated } from '../../domain/events';
import {
  assertCampaignBlockType, campaignChanges, campaignFields, campaignMessageId, campaignOf, decideCancel, decideDelete, decideSchedule, decideScheduledStart,
  decideScheduledStartFailed, decideStart, decideUpdate, fold, mergeValues, scheduleTime, subjectValues, type CampaignEvent,
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

  describe('scheduling, editing, deleting', () => {
    const draft: CampaignEvent[] = [{ type: 'CampaignCreated', data: created }];
    const scheduled: CampaignEvent[] = [...draft, { type: 'CampaignScheduled', data: { campaignId: CAMPAIGN, tenantId: TENANT, scheduledAt: '2026-11-25T10:00:00.000Z', at: NOW.toISOString() } }];
    const sat = (v: unknown) => scheduleTime({ scheduled_at: v }, NOW);

    it('scheduled_at: absent is now; a future time with Z or an offset within 90 days; else 400 on scheduled_at', () => {
      expect(scheduleTime(undefined, NOW)).to.equal(null);
      expect(scheduleTime({}, NOW)).to.equal(null);
      expect(sat(null)).to.equal(null);
      // Exactly now (an offset naming the same instant) is not in the future.
      expect(codeOf(() => sat('2026-11-24T11:00:00+01:00'))).to.equal('validation_error');
      expect(sat('2026-11-24T12:00:00+01:00')?.toISOString()).to.equal('2026-11-24T11:00:00.000Z');
      expect(sat('2026-11-24T10:00:01Z')?.toISOString()).to.equal('2026-11-24T10:00:01.000Z');
      expect(sat('2027-02-22T10:00:00Z')?.toISOString()).to.equal('2027-02-22T10:00:00.000Z');
      for (const bad of ['2026-11-24T10:00:00Z', '2026-11-24T09:00:00Z', '2027-02-22T10:00:00.001Z', '2026-11-25T10:00:00', '2026-11-25', 'tomorrow', 42, '2027-02-30T10:00:00Z', '2026-11-25T24:00:00Z', '']) {
        expect(codeOf(() => sat(bad)), String(bad)).to.equal('validation_error');
        expect(fieldOf(() => sat(bad)), String(bad)).to.equal('scheduled_at');
      }
      expect(codeOf(() => scheduleTime('x', NOW))).to.equal('validation_error');
    });

    it('schedule: a draft, or a scheduled campaign moved or sent now; cancel; nothing once started', () => {
      const at = new Date('2026-11-25T10:00:00.000Z');
      expect(decideSchedule(fold(draft), { tenantId: TENANT, scheduledAt: at, now: NOW })).to.deep.equal(scheduled.slice(1));
      const s = fold(scheduled);
      expect(s).to.include({ status: 'scheduled', scheduledAt: at.toISOString() });
      const later = new Date('2026-11-26T10:00:00.000Z');
      const moved = decideSchedule(s, { tenantId: TENANT, scheduledAt: later, now: NOW });
      expect(moved.map((e) => e.type)).to.deep.equal(['CampaignScheduled']);
      expect(fold([...scheduled, ...moved])).to.include({ status: 'scheduled', scheduledAt: later.toISOString() });
      const now = decideStart(s, { tenantId: TENANT, template, identityName: 'x', now: NOW });
      expect(now.map((e) => e.type), 'sent now instead').to.deep.equal(['CampaignSendStarted']);
      const started = fold([...scheduled, ...now]);
      expect(codeOf(() => decideSchedule(started, { tenantId: TENANT, scheduledAt: later, now: NOW }))).to.equal('campaign_not_draft');
      expect(codeOf(() => decideStart(started, { tenantId: TENANT, template, identityName: 'x', now: NOW }))).to.equal('campaign_not_draft');
      expect(decideScheduledStart(started, { template, identityName: 'x', now: NOW }), 'its old due start does nothing').to.deep.equal([]);
      expect(codeOf(() => decideSchedule(fold(draft), { tenantId: OTHER, scheduledAt: at, now: NOW }))).to.equal('campaign_not_found');
      expect(decideCancel(s, { tenantId: TENANT, now: NOW })[0].type).to.equal('CampaignCancelled');
      // When due: the start, or the end when a check failed for good; nothing once it is no longer scheduled.
      expect(decideScheduledStart(s, { template, identityName: 'Acme', now: NOW })).to.deep.equal([
        { type: 'CampaignSendStarted', data: { campaignId: CAMPAIGN, tenantId: TENANT, template, identityName: 'Acme', startedAt: NOW.toISOString() } },
      ]);
      const failed = decideScheduledStartFailed(s, { code: 'template_not_found', now: NOW });
      expect(failed).to.deep.equal([{ type: 'CampaignScheduledStartFailed', data: { campaignId: CAMPAIGN, tenantId: TENANT, code: 'template_not_found', at: NOW.toISOString() } }]);
      expect(fold([...scheduled, ...failed]).status).to.equal('cancelled');
      expect(decideScheduledStart(fold(draft), { template, identityName: 'Acme', now: NOW })).to.deep.equal([]);
      const cancelled = fold([...scheduled, ...decideCancel(s, { tenantId: TENANT, now: NOW })]);
      expect(decideScheduledStart(cancelled, { template, identityName: 'Acme', now: NOW })).to.deep.equal([]);
    });

    it('edit: the fields given with the create rules; only real changes recorded; a draft only', () => {
      expect(campaignChanges({ name: ' New ', from_name: null, track_opens: false })).to.deep.equal({ name: 'New', fromName: null, trackOpens: false });
      expect(campaignChanges({ template_id: CAMPAIGN.toUpperCase() })).to.deep.equal({ templateId: CAMPAIGN });
      expect(codeOf(() => campaignChanges({}))).to.equal('validation_error');
      expect(codeOf(() => campaignChanges(null))).to.equal('validation_error');
      for (const [over, field] of [[{ name: '' }, 'name'], [{ name: null }, 'name'], [{ list_id: 'x' }, 'list_id'], [{ from: 'A <a@x.test>' }, 'from'], [{ from_name: 'a\nb' }, 'from_name'], [{ track_clicks: 'no' }, 'track_clicks']] as const) {
        expect(fieldOf(() => campaignChanges(over)), JSON.stringify(over)).to.equal(field);
      }
      const updated = decideUpdate(fold(draft), { tenantId: TENANT, changes: { name: 'New', trackOpens: true, fromName: 'Acme' }, now: NOW });
      expect(updated).to.deep.equal([{ type: 'CampaignUpdated', data: { campaignId: CAMPAIGN, tenantId: TENANT, changes: { name: 'New', fromName: 'Acme' }, at: NOW.toISOString() } }]);
      expect(fold([...draft, ...updated]).created).to.include({ name: 'New', fromName: 'Acme', trackOpens: true, listId: CAMPAIGN });
      expect(decideUpdate(fold(draft), { tenantId: TENANT, changes: { name: 'N' }, now: NOW })).to.deep.equal([]);
      expect(codeOf(() => decideUpdate(fold(scheduled), { tenantId: TENANT, changes: { name: 'x' }, now: NOW }))).to.equal('campaign_not_draft');
      expect(codeOf(() => decideUpdate(fold(draft), { tenantId: OTHER, changes: { name: 'x' }, now: NOW }))).to.equal('campaign_not_found');
    });

    it('delete: a draft, sent or cancelled one; not a scheduled or sending one; afterwards it is not found', () => {
      const deleted = [...draft, ...decideDelete(fold(draft), { tenantId: TENANT, now: NOW })];
      expect(deleted[1]).to.deep.equal({ type: 'CampaignDeleted', data: { campaignId: CAMPAIGN, tenantId: TENANT, at: NOW.toISOString() } });
      for (const fn of [
        () => campaignOf(fold(deleted), TENANT), () => decideDelete(fold(deleted), { tenantId: TENANT, now: NOW }),
        () => decideCancel(fold(deleted), { tenantId: TENANT, now: NOW }), () => decideStart(fold(deleted), { tenantId: TENANT, template, identityName: 'x', now: NOW }),
        () => decideUpdate(fold(deleted), { tenantId: TENANT, changes: { name: 'x' }, now: NOW }),
      ]) expect(codeOf(fn)).to.equal('campaign_not_found');
      const sending = [...draft, ...decideStart(fold(draft), { tenantId: TENANT, template, identityName: 'Acme', now: NOW })];
      expect(codeOf(() => decideDelete(fold(sending), { tenantId: TENANT, now: NOW }))).to.equal('campaign_not_deletable');
      expect(codeOf(() => decideDelete(fold(scheduled), { tenantId: TENANT, now: NOW }))).to.equal('campaign_not_deletable');
      const cancelled = [...scheduled, ...decideCancel(fold(scheduled), { tenantId: TENANT, now: NOW })];
      expect(decideDelete(fold(cancelled), { tenantId: TENANT, now: NOW })[0].type).to.equal('CampaignDeleted');
      const counts = { recipients: 0, accepted: 0, skippedSuppressed: 0, failed: 0 };
      const sent = [...sending, { type: 'CampaignSendCompleted', data: { campaignId: CAMPAIGN, tenantId: TENANT, lastContactId: null, counts, completedAt: NOW.toISOString() } }] as CampaignEvent[];
      expect(decideDelete(fold(sent), { tenantId: TENANT, now: NOW })[0].type).to.equal('CampaignDeleted');
    });
  });
});
