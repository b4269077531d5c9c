import { fail } from '../errors';
import type { CampaignCounts, CampaignCreated, CampaignSendStarted, CampaignUpdated, DomainEvent, MotorBlockType, TemplateContentData } from '../events';
import { isUuid, uuidV5 } from '../ids';
import { isValidAddress, MAX_FROM_NAME } from '../message/sendRules';
import { NOT_ONE_LINE } from '../oneLine';

/**
 * Campaigns of the communications product (docs/COMMUNICATIONS.md "Campaigns"): one template sent
 * to the subscribed contacts of one list through one Motor Block. Stream `campaign-<id>`: created as
 * a draft (edited while a draft), started once (now, or scheduled and started by the sender when
 * due), checkpointed by the sender after every page of contacts, then completed or cancelled; a
 * campaign not under way can be deleted. Pure: the clock, the ids and what the stores said come in
 * as arguments.
 */

export type CampaignStatus = 'draft' | 'scheduled' | 'sending' | 'sent' | 'cancelled';
export const CAMPAIGN_STATUSES: readonly CampaignStatus[] = ['draft', 'scheduled', 'sending', 'sent', 'cancelled'];

export const CAMPAIGN_EVENT_TYPES = [
  'CampaignCreated', 'CampaignSendStarted', 'CampaignProgressed', 'CampaignSendCompleted', 'CampaignCancelled',
  'CampaignScheduled', 'CampaignUpdated', 'CampaignScheduledStartFailed', 'CampaignDeleted',
] as const;
export type CampaignEvent = DomainEvent<(typeof CAMPAIGN_EVENT_TYPES)[number]>;

export const CAMPAIGN_LIMITS = { nameMax: 200, scheduleMaxDays: 90 } as const;

/**
 * Block types a campaign may send through **(decision)**: marketing mail must not spend the
 * reputation of a transactional stream, a sandbox block only reaches its allowlist, a portal block
 * is the service's own.
 */
export const CAMPAIGN_BLOCK_TYPES: readonly MotorBlockType[] = ['marketing', 'general_purpose'];

export function assertCampaignBlockType(type: string): void {
  if (!(CAMPAIGN_BLOCK_TYPES as readonly string[]).includes(type)) {
    throw fail('campaign_block_type_not_allowed', 409, `A campaign sends through a marketing or general_purpose block, not a ${type} block`, {
      details: { blockType: type, allowed: CAMPAIGN_BLOCK_TYPES },
      nextAction: 'Choose a marketing or general_purpose Motor Block',
    });
  }
}

export interface CampaignFields {
  name: string; templateId: string; listId: string; motorBlockId: string;
  from: string; fromName: string | null; trackOpens: boolean; trackClicks: boolean;
}

const invalid = (field: string, message: string) => fail('validation_error', 400, message, { details: { field } });

type Body = Record<string, unknown>;
const objectBody = (body: unknown): Body => {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) throw fail('validation_error', 400, 'The body must be a JSON object');
  return body as Body;
};
const uuidField = (field: 'template_id' | 'list_id' | 'motor_block_id') => (v: unknown): string => {
  if (typeof v !== 'string' || !isUuid(v.trim())) throw invalid(field, `${field} is required (a uuid)`);
  return v.trim().toLowerCase();
};
const flagField = (field: 'track_opens' | 'track_clicks') => (v: unknown): boolean => {
  if (v === undefined || v === null) return true;
  if (typeof v !== 'boolean') throw invalid(field, `${field} must be a boolean`);
  return v;
};

/** One parser per body field, shared by the create and the edit: a field means the same in both. */
const FIELDS = {
  name: (v: unknown): string => {
    if (typeof v !== 'string') throw invalid('name', 'name is required (a string)');
    const name = v.trim();
    if (name === '') throw invalid('name', 'name must not be empty');
    if ([...name].length > CAMPAIGN_LIMITS.nameMax) throw invalid('name', `name must be at most ${CAMPAIGN_LIMITS.nameMax} characters`);
    if (NOT_ONE_LINE.test(name)) throw invalid('name', 'name must not contain control characters or line breaks');
    return name;
  },
  template_id: uuidField('template_id'),
  list_id: uuidField('list_id'),
  motor_block_id: uuidField('motor_block_id'),
  from: (v: unknown): string => {
    if (typeof v !== 'string' || v.trim() === '') throw invalid('from', 'from is required');
    const from = v.trim();
    if (/[<>]/.test(from) || !isValidAddress(from)) throw invalid('from', 'from must be a bare email address without a display name (use from_name)');
    return from;
  },
  from_name: (v: unknown): string | null => {
    if (v === undefined || v === null) return null;
    if (typeof v !== 'string') throw invalid('from_name', 'from_name must be a string');
    if ([...v].length > MAX_FROM_NAME) throw invalid('from_name', `from_name must be at most ${MAX_FROM_NAME} characters`);
    if (/[\r\n]/.test(v)) throw invalid('from_name', 'from_name must not contain line breaks');
    return v.trim() === '' ? null : v.trim();
  },
  track_opens: flagField('track_opens'),
  track_clicks: flagField('track_clicks'),
} as const;
type BodyField = keyof typeof FIELDS;
const FIELD_KEYS: Record<BodyField, keyof CampaignFields> = {
  name: 'name', template_id: 'templateId', list_id: 'listId', motor_block_id: 'motorBlockId', from: 'from', from_name: 'fromName', track_opens: 'trackOpens', track_clicks: 'trackClicks',
};

/** The fields of POST /campaigns, or 400 validation_error with the `field` at fault. */
export function campaignFields(body: unknown): CampaignFields {
  const b = objectBody(body);
  return {
    name: FIELDS.name(b.name), templateId: FIELDS.template_id(b.template_id), listId: FIELDS.list_id(b.list_id), motorBlockId: FIELDS.motor_block_id(b.motor_block_id),
    from: FIELDS.from(b.from), fromName: FIELDS.from_name(b.from_name), trackOpens: FIELDS.track_opens(b.track_opens), trackClicks: FIELDS.track_clicks(b.track_clicks),
  };
}

export type CampaignChanges = CampaignUpdated['changes'];

/**
 * The fields of PATCH /campaigns/{id}: those given, each with the create's rule and meaning (a null
 * `from_name` clears it, a null tracking flag is the default, true). No field: 400 validation_error.
 */
export function campaignChanges(body: unknown): CampaignChanges {
  const b = objectBody(body);
  const given = (Object.keys(FIELDS) as BodyField[]).filter((f) => b[f] !== undefined);
  if (given.length === 0) throw fail('validation_error', 400, `Give at least one of ${Object.keys(FIELDS).join(', ')}`);
  return Object.fromEntries(given.map((f) => [FIELD_KEYS[f], FIELDS[f](b[f])])) as CampaignChanges;
}

/**
 * The time of POST /campaigns/{id}/send: null (send now) without a body or a `scheduled_at`; else an
 * ISO 8601 time with `Z` or an offset, strictly after `now` and at most 90 days after it (400
 * validation_error, field `scheduled_at`, otherwise).
 */
export function scheduleTime(body: unknown, now: Date): Date | null {
  if (body === undefined || body === null) return null;
  const v = objectBody(body).scheduled_at;
  if (v === undefined || v === null) return null;
  const bad = (message: string) => invalid('scheduled_at', message);
  const m = typeof v === 'string' ? ISO_WITH_OFFSET.exec(v) : null;
  if (!m) throw bad('scheduled_at must be an ISO 8601 time with Z or an offset, e.g. 2026-12-01T09:00:00Z');
  const [, y, mo, d, h, mi, sec] = m.map(Number);
  // Date.parse rolls 2026-02-30 over to March: the fields must name a real time.
  if (mo < 1 || mo > 12 || d < 1 || d > new Date(Date.UTC(y, mo, 0)).getUTCDate() || h > 23 || mi > 59 || (sec || 0) > 59) throw bad('scheduled_at is not a valid time');
  const at = new Date(Date.parse(v as string));
  if (Number.isNaN(at.getTime())) throw bad('scheduled_at is not a valid time');
  if (at.getTime() <= now.getTime()) throw bad('scheduled_at must be in the future');
  if (at.getTime() > now.getTime() + CAMPAIGN_LIMITS.scheduleMaxDays * 86_400_000) throw bad(`scheduled_at must be at most ${CAMPAIGN_LIMITS.scheduleMaxDays} days ahead`);
  return at;
}
const ISO_WITH_OFFSET = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})(?::(\d{2})(?:\.\d{1,9})?)?(?:Z|[+-](?:[01]\d|2[0-3]):[0-5]\d)$/;

export const zeroCounts = (): CampaignCounts => ({ recipients: 0, accepted: 0, skippedSuppressed: 0, failed: 0 });

export interface CampaignState {
  status: CampaignStatus | 'none';
  created: CampaignCreated | null;
  started: CampaignSendStarted | null;
  /** The sender's checkpoint: contacts up to this one (contactId order) are done. */
  lastContactId: string | null;
  counts: CampaignCounts;
  /** Paused by the block's quota until then (ISO); null when not paused. */
  resumeAt: string | null;
  /** When a scheduled send is due (ISO); null when never scheduled. */
  scheduledAt: string | null;
  /** Deleted: gone from the API, as if it never was. */
  deleted: boolean;
}

export const initialCampaign = (): CampaignState => ({
  status: 'none', created: null, started: null, lastContactId: null, counts: zeroCounts(), resumeAt: null, scheduledAt: null, deleted: false,
});

export function evolve(state: CampaignState, event: CampaignEvent): CampaignState {
  switch (event.type) {
    case 'CampaignCreated':
      return { ...state, status: 'draft', created: event.data };
    case 'CampaignSendStarted':
      return { ...state, status: 'sending', started: event.data };
    case 'CampaignProgressed':
      return { ...state, lastContactId: event.data.lastContactId, counts: event.data.counts, resumeAt: event.data.resumeAt ?? null };
    case 'CampaignSendCompleted':
      return { ...state, status: 'sent', lastContactId: event.data.lastContactId, counts: event.data.counts, resumeAt: null };
    case 'CampaignCancelled':
      return { ...state, status: 'cancelled', resumeAt: null };
    case 'CampaignScheduled':
      return { ...state, status: 'scheduled', scheduledAt: event.data.scheduledAt };
    case 'CampaignUpdated':
      return state.created === null ? state : { ...state, created: { ...state.created, ...event.data.changes } };
    case 'CampaignScheduledStartFailed':
      return { ...state, status: 'cancelled' };
    case 'CampaignDeleted':
      return { ...state, deleted: true };
  }
}

export const isCampaignEvent = (e: DomainEvent | null): e is CampaignEvent => e !== null && (CAMPAIGN_EVENT_TYPES as readonly string[]).includes(e.type);

export function fold(events: Iterable<CampaignEvent>): CampaignState {
  let s = initialCampaign();
  for (const e of events) s = evolve(s, e);
  return s;
}

const notFound = () => fail('campaign_not_found', 404, 'No such campaign for this tenant');

/** The campaign of `tenantId`, or 404 campaign_not_found (another tenant's campaign, or a deleted one, is not told apart from none). */
export function campaignOf(state: CampaignState, tenantId: string): CampaignState & { created: CampaignCreated } {
  if (state.created === null || state.created.tenantId !== tenantId || state.deleted) throw notFound();
  return state as CampaignState & { created: CampaignCreated };
}

/** The tenant's campaign when its status is one of `statuses`; else 404 campaign_not_found or 409 campaign_not_draft. */
function campaignIn(state: CampaignState, tenantId: string, statuses: readonly CampaignStatus[], doing: string): CampaignState & { created: CampaignCreated } {
  const c = campaignOf(state, tenantId);
  if (!(statuses as readonly string[]).includes(c.status)) {
    throw fail('campaign_not_draft', 409, `Only a ${statuses.join(' or ')} campaign can be ${doing}; this one is ${c.status}`, { details: { status: c.status } });
  }
  return c;
}

/** The tenant's campaign when it is a draft; else 404 campaign_not_found or 409 campaign_not_draft. */
export const draftOf = (state: CampaignState, tenantId: string, doing: string) => campaignIn(state, tenantId, ['draft'], doing);

/**
 * The tenant's campaign when it has not started: a draft, or a scheduled one (sent now, or
 * scheduled again for another time: **decision**, so a schedule can be moved or brought forward
 * without a cancel and a new campaign). Else 404 or 409 campaign_not_draft.
 */
export const notStartedOf = (state: CampaignState, tenantId: string, doing: string) => campaignIn(state, tenantId, ['draft', 'scheduled'], doing);

export function decideStart(
  state: CampaignState, cmd: { tenantId: string; template: CampaignSendStarted['template']; identityName: string; now: Date },
): CampaignEvent[] {
  const c = notStartedOf(state, cmd.tenantId, 'sent');
  return [{ type: 'CampaignSendStarted', data: { campaignId: c.created.campaignId, tenantId: cmd.tenantId, template: cmd.template, identityName: cmd.identityName, startedAt: cmd.now.toISOString() } }];
}

/**
 * The start of a scheduled campaign when it is due (the sender's; `revision`-guarded by its caller).
 * Nothing when it is no longer scheduled (cancelled meanwhile).
 */
export function decideScheduledStart(
  state: CampaignState, cmd: { template: CampaignSendStarted['template']; identityName: string; now: Date },
): CampaignEvent[] {
  if (state.status !== 'scheduled' || state.created === null || state.deleted) return [];
  const c = state.created;
  return [{ type: 'CampaignSendStarted', data: { campaignId: c.campaignId, tenantId: c.tenantId, template: cmd.template, identityName: cmd.identityName, startedAt: cmd.now.toISOString() } }];
}

/** A scheduled campaign that came due but cannot start for good: it ends, never sent, with the failed check's code. */
export function decideScheduledStartFailed(state: CampaignState, cmd: { code: string; now: Date }): CampaignEvent[] {
  if (state.status !== 'scheduled' || state.created === null || state.deleted) return [];
  return [{ type: 'CampaignScheduledStartFailed', data: { campaignId: state.created.campaignId, tenantId: state.created.tenantId, code: cmd.code, at: cmd.now.toISOString() } }];
}

/** Schedules a draft's send, or moves a scheduled one; `scheduledAt` passed `scheduleTime` (future, within 90 days). */
export function decideSchedule(state: CampaignState, cmd: { tenantId: string; scheduledAt: Date; now: Date }): CampaignEvent[] {
  const c = notStartedOf(state, cmd.tenantId, 'scheduled');
  return [{ type: 'CampaignScheduled', data: { campaignId: c.created.campaignId, tenantId: cmd.tenantId, scheduledAt: cmd.scheduledAt.toISOString(), at: cmd.now.toISOString() } }];
}

/**
 * Edits a draft. Only the fields that differ from the campaign's are recorded; when none does,
 * nothing is appended **(decision: an edit that changes nothing is no event)**.
 */
export function decideUpdate(state: CampaignState, cmd: { tenantId: string; changes: CampaignChanges; now: Date }): CampaignEvent[] {
  const c = draftOf(state, cmd.tenantId, 'edited');
  const changed = Object.fromEntries(Object.entries(cmd.changes).filter(([k, v]) => c.created[k as keyof CampaignChanges] !== v)) as CampaignChanges;
  if (Object.keys(changed).length === 0) return [];
  return [{ type: 'CampaignUpdated', data: { campaignId: c.created.campaignId, tenantId: cmd.tenantId, changes: changed, at: cmd.now.toISOString() } }];
}

/** Deletes a campaign not under way: a draft, a sent or a cancelled one (a scheduled or sending one: cancel it first). */
export function decideDelete(state: CampaignState, cmd: { tenantId: string; now: Date }): CampaignEvent[] {
  const c = campaignOf(state, cmd.tenantId);
  if (c.status === 'scheduled' || c.status === 'sending') {
    throw fail('campaign_not_deletable', 409, `A ${c.status} campaign cannot be deleted; cancel it first`, {
      details: { status: c.status }, nextAction: 'Cancel the campaign (POST /campaigns/{id}/cancel), then delete it',
    });
  }
  return [{ type: 'CampaignDeleted', data: { campaignId: c.created.campaignId, tenantId: cmd.tenantId, at: cmd.now.toISOString() } }];
}

/** A draft, a scheduled or a sending campaign can be cancelled **(decision: a draft too, so it can never be sent)**. */
export function decideCancel(state: CampaignState, cmd: { tenantId: string; now: Date }): CampaignEvent[] {
  const c = campaignOf(state, cmd.tenantId);
  if (c.status !== 'draft' && c.status !== 'scheduled' && c.status !== 'sending') {
    throw fail('campaign_not_cancellable', 409, `A ${c.status} campaign cannot be cancelled`, { details: { status: c.status } });
  }
  return [{ type: 'CampaignCancelled', data: { campaignId: c.created.campaignId, tenantId: cmd.tenantId, cancelledAt: cmd.now.toISOString() } }];
}

/**
 * What a campaign records and sends of a template: its subject and bodies, with no HTML part for a
 * `text` template. Its `body_html`, if it has one (left from when it was an html template, or
 * given anyway), is not its body and passed none of the HTML checks, which run for html templates
 * only.
 */
export const campaignContent = (t: Pick<TemplateContentData, 'type' | 'subject' | 'body_html' | 'body_text'>): CampaignSendStarted['template'] =>
  ({ subject: t.subject, body_html: t.type === 'html' ? t.body_html : null, body_text: t.body_text });

/** The message id of a campaign's mail to one contact: the same on every run, so a re-run after a crash accepts nothing twice. */
export const campaignMessageId = (campaignId: string, contactId: string): string => uuidV5(`campaign:${campaignId}:${contactId}`);

/**
 * The merge values of one contact's message: the contact's custom fields, then the built-in ones,
 * which win over a custom field of the same name (a field called `unsubscribe_url` must not replace
 * the real link) **(decision)**. `name` is the contact's name, else empty.
 */
export function mergeValues(contact: { name: string | null; fields: Record<string, string> }, identityName: string, unsubscribeUrl: string): Record<string, string> {
  return { ...contact.fields, name: contact.name ?? '', identity_name: identityName, unsubscribe_url: unsubscribeUrl };
}

/** A subject is one line: line breaks in merge values become spaces there (the bodies keep them). */
export const subjectValues = (values: Record<string, string>): Record<string, string> =>
  Object.fromEntries(Object.entries(values).map(([k, v]) => [k, v.replace(/[\r\n]+/g, ' ')]));
