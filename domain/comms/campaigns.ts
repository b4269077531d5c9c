import { fail } from '../errors';
import type { CampaignCounts, CampaignCreated, CampaignSendStarted, DomainEvent, MotorBlockType } from '../events';
import { isUuid, uuidV5 } from '../ids';
import { isValidAddress, MAX_FROM_NAME } from '../message/sendRules';

/**
 * Campaigns of the communications product (docs/COMMUNICATIONS.md "Campaigns"): one template sent
 * to the subscribed contacts of one list through one Motor Block. Stream `campaign-<id>`: created as
 * a draft, started once, checkpointed by the sender after every page of contacts, then completed or
 * cancelled. Pure: the clock, the ids and what the stores said come in as arguments.
 */

export type CampaignStatus = 'draft' | 'sending' | 'sent' | 'cancelled';
export const CAMPAIGN_STATUSES: readonly CampaignStatus[] = ['draft', 'sending', 'sent', 'cancelled'];

export const CAMPAIGN_EVENT_TYPES = ['CampaignCreated', 'CampaignSendStarted', 'CampaignProgressed', 'CampaignSendCompleted', 'CampaignCancelled'] as const;
export type CampaignEvent = DomainEvent<(typeof CAMPAIGN_EVENT_TYPES)[number]>;

export const CAMPAIGN_LIMITS = { nameMax: 200 } as const;

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
// C0 and C1 controls, DEL: a name is shown in lists and UIs, one line.
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;

/** The fields of POST /campaigns, or 400 validation_error with the `field` at fault. */
export function campaignFields(body: unknown): CampaignFields {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) throw fail('validation_error', 400, 'The body must be a JSON object');
  const b = body as Record<string, unknown>;
  if (typeof b.name !== 'string') throw invalid('name', 'name is required (a string)');
  const name = b.name.trim();
  if (name === '') throw invalid('name', 'name must not be empty');
  if ([...name].length > CAMPAIGN_LIMITS.nameMax) throw invalid('name', `name must be at most ${CAMPAIGN_LIMITS.nameMax} characters`);
  if (CONTROL.test(name)) throw invalid('name', 'name must not contain control characters or line breaks');
  const id = (field: 'template_id' | 'list_id' | 'motor_block_id'): string => {
    const v = b[field];
    if (typeof v !== 'string' || !isUuid(v.trim())) throw invalid(field, `${field} is required (a uuid)`);
    return v.trim().toLowerCase();
  };
  const templateId = id('template_id');
  const listId = id('list_id');
  const motorBlockId = id('motor_block_id');
  if (typeof b.from !== 'string' || b.from.trim() === '') throw invalid('from', 'from is required');
  const from = b.from.trim();
  if (/[<>]/.test(from) || !isValidAddress(from)) throw invalid('from', 'from must be a bare email address without a display name (use from_name)');
  let fromName: string | null = null;
  if (b.from_name !== undefined && b.from_name !== null) {
    if (typeof b.from_name !== 'string') throw invalid('from_name', 'from_name must be a string');
    if ([...b.from_name].length > MAX_FROM_NAME) throw invalid('from_name', `from_name must be at most ${MAX_FROM_NAME} characters`);
    if (/[\r\n]/.test(b.from_name)) throw invalid('from_name', 'from_name must not contain line breaks');
    fromName = b.from_name.trim() === '' ? null : b.from_name.trim();
  }
  const flag = (field: 'track_opens' | 'track_clicks'): boolean => {
    const v = b[field];
    if (v === undefined || v === null) return true;
    if (typeof v !== 'boolean') throw invalid(field, `${field} must be a boolean`);
    return v;
  };
  return { name, templateId, listId, motorBlockId, from, fromName, trackOpens: flag('track_opens'), trackClicks: flag('track_clicks') };
}

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
}

export const initialCampaign = (): CampaignState => ({ status: 'none', created: null, started: null, lastContactId: null, counts: zeroCounts(), resumeAt: null });

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
  }
}

export const isCampaignEvent = (e: DomainEvent | null): e is CampaignEvent => e !== null && (CAMPAIGN_EVENT_TYPES as readonly string[]).includes(e.type);

export function fold(events: Iterable<CampaignEvent>): CampaignState {
  let s = initialCampaign();
  for (const e of events) s = evolve(s, e);
  return s;
}

const notFound = () => fail('campaign_not_found', 404, 'No such campaign for this tenant');

/** The campaign of `tenantId`, or 404 campaign_not_found (another tenant's campaign is not told apart from none). */
export function campaignOf(state: CampaignState, tenantId: string): CampaignState & { created: CampaignCreated } {
  if (state.created === null || state.created.tenantId !== tenantId) throw notFound();
  return state as CampaignState & { created: CampaignCreated };
}

/** The tenant's campaign when it is a draft; else 404 campaign_not_found or 409 campaign_not_draft. */
export function draftOf(state: CampaignState, tenantId: string): CampaignState & { created: CampaignCreated } {
  const c = campaignOf(state, tenantId);
  if (c.status !== 'draft') {
    throw fail('campaign_not_draft', 409, `Only a draft campaign can be sent; this one is ${c.status}`, { details: { status: c.status } });
  }
  return c;
}

export function decideStart(
  state: CampaignState, cmd: { tenantId: string; template: CampaignSendStarted['template']; identityName: string; now: Date },
): CampaignEvent[] {
  const c = draftOf(state, cmd.tenantId);
  return [{ type: 'CampaignSendStarted', data: { campaignId: c.created.campaignId, tenantId: cmd.tenantId, template: cmd.template, identityName: cmd.identityName, startedAt: cmd.now.toISOString() } }];
}

/** A draft or a sending campaign can be cancelled **(decision: a draft too, so it can never be sent)**. */
export function decideCancel(state: CampaignState, cmd: { tenantId: string; now: Date }): CampaignEvent[] {
  const c = campaignOf(state, cmd.tenantId);
  if (c.status !== 'draft' && c.status !== 'sending') {
    throw fail('campaign_not_cancellable', 409, `A ${c.status} campaign cannot be cancelled`, { details: { status: c.status } });
  }
  return [{ type: 'CampaignCancelled', data: { campaignId: c.created.campaignId, tenantId: cmd.tenantId, cancelledAt: cmd.now.toISOString() } }];
}

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
