import type { Knex } from 'knex';
import { streamName, WrongExpectedRevisionError, type EventStore, type RecordedEvent } from '../../domain/eventStore';
import { fail } from '../../domain/errors';
import { asDomainEvent, toEventData } from '../../domain/events';
import { isUuid, newId, type Clock } from '../../domain/ids';
import {
  assertCampaignBlockType, campaignFields, decideCancel, decideStart, draftOf, fold, isCampaignEvent, type CampaignEvent, type CampaignState,
} from '../../domain/comms/campaigns';
import { CAMPAIGNS_SCHEMA } from '../../projections/campaigns/projection';
import { findCampaign, type CampaignView } from '../../projections/campaigns/queries';
import { getContactList } from '../../projections/contactLists/queries';
import type { BlockRecord } from '../../projections/directory/queries';
import type { DirectoryCache } from '../directoryCache';
import { awaitRow } from '../readYourWrites';
import { assertBlockActive, checkSenderDomain } from '../send/sendMessage';
import { getTemplate } from '../templates/templates';

/**
 * Campaign commands (docs/COMMUNICATIONS.md "Campaigns"): create a draft, start sending, cancel.
 * Each decides on the campaign's own stream `campaign-<id>` and appends at the revision it decided
 * on, then waits until the `campaigns` read model shows the change, so the caller's next GET does.
 * The sending itself is the worker's (workers/campaigns.ts), fed by CampaignSendStarted in the log.
 */

export interface CampaignDeps { store: EventStore; db: Knex; clock: Clock; directory: DirectoryCache }

export const campaignStream = (id: string) => streamName('campaign', id);
const MAX_ATTEMPTS = 12;

/** The block a campaign may use: the tenant's (else 404), of a campaign type (409), active (403), `from` on its DNS-complete domain (403). */
async function usableBlock(deps: CampaignDeps, tenantId: string, motorBlockId: string, from: string): Promise<BlockRecord> {
  const block = await deps.directory.block(motorBlockId);
  if (!block || block.accountId !== tenantId || block.status === 'deleted' || block.status === 'deletion_queued') {
    throw fail('motor_block_not_found', 404, 'No such Motor Block for this tenant');
  }
  assertCampaignBlockType(block.type);
  assertBlockActive(block);
  await checkSenderDomain(deps.directory, block, from);
  return block;
}

export async function createCampaign(deps: CampaignDeps, tenantId: string, actor: string, body: unknown): Promise<CampaignView> {
  const f = campaignFields(body);
  await getTemplate(deps.db, tenantId, f.templateId);
  if (!(await getContactList(deps.db, tenantId, f.listId))) throw fail('list_not_found', 404, 'No such contact list for this tenant');
  await usableBlock(deps, tenantId, f.motorBlockId, f.from);
  const campaignId = newId();
  const now = deps.clock.now().toISOString();
  const r = await deps.store.append(campaignStream(campaignId), [toEventData(newId(), {
    type: 'CampaignCreated',
    data: {
      campaignId, tenantId, name: f.name, templateId: f.templateId, listId: f.listId, motorBlockId: f.motorBlockId,
      from: f.from, fromName: f.fromName, trackOpens: f.trackOpens, trackClicks: f.trackClicks, createdAt: now,
    },
  }, { actor })], { expectedRevision: 'no_stream' });
  await awaitRow(deps.db, CAMPAIGNS_SCHEMA, 'campaigns', campaignId, r.nextExpectedRevision);
  return (await findCampaign(deps.db, tenantId, campaignId)) ?? {
    id: campaignId, name: f.name, status: 'draft', template_id: f.templateId, list_id: f.listId, motor_block_id: f.motorBlockId, from: f.from,
    from_name: f.fromName, track_opens: f.trackOpens, track_clicks: f.trackClicks, counts: { recipients: 0, accepted: 0, skipped_suppressed: 0, failed: 0 },
    tracking: { opens: 0, unique_opens: 0, clicks: 0, unique_clicks: 0 }, paused_until: null, created_at: now, updated_at: now, started_at: null, completed_at: null,
  };
}

/** GET /campaigns/{id}: 400 invalid_id, 404 campaign_not_found (none, or another tenant's). */
export async function getCampaign(db: Knex, tenantId: string, campaignId: string): Promise<CampaignView> {
  if (!isUuid(campaignId)) throw fail('invalid_id', 400, 'Campaign id must be a uuid');
  const view = await findCampaign(db, tenantId, campaignId);
  if (!view) throw fail('campaign_not_found', 404, 'No such campaign for this tenant');
  return view;
}

/** The campaign's state folded from its stream, with the revision it was read at (null: no stream). */
export async function loadCampaign(store: EventStore, campaignId: string): Promise<{ state: CampaignState; revision: bigint | null; events: RecordedEvent[] }> {
  const events = await store.readStream(campaignStream(campaignId));
  const typed = events.map(asDomainEvent).filter(isCampaignEvent);
  return { state: fold(typed), revision: events.length === 0 ? null : events[events.length - 1].revision, events };
}

/**
 * Decides on the current stream and appends at its revision; a concurrent append (the worker's
 * checkpoint, another request) makes the decision be taken again on the new state.
 */
async function decideAndAppend(
  deps: CampaignDeps, tenantId: string, actor: string, id: string,
  decide: (state: CampaignState) => Promise<CampaignEvent[]>,
): Promise<CampaignView> {
  const notFound = () => fail('campaign_not_found', 404, 'No such campaign for this tenant');
  if (!isUuid(id)) throw fail('invalid_id', 400, 'Campaign id must be a uuid');
  // The stream is named by the lower-case id (as the GET's uuid column compares): a uuid in capitals is the same campaign.
  const campaignId = id.toLowerCase();
  for (let attempt = 1; ; attempt++) {
    const { state, revision } = await loadCampaign(deps.store, campaignId);
    if (revision === null) throw notFound();
    const decided = await decide(state);
    try {
      const r = await deps.store.append(campaignStream(campaignId), decided.map((e) => toEventData(newId(), e, { actor })), { expectedRevision: revision });
      await awaitRow(deps.db, CAMPAIGNS_SCHEMA, 'campaigns', campaignId, r.nextExpectedRevision);
      const view = await findCampaign(deps.db, tenantId, campaignId);
      if (!view) throw notFound();
      return view;
    } catch (err) {
      if (!(err instanceof WrongExpectedRevisionError)) throw err;
      if (attempt >= MAX_ATTEMPTS) throw fail('campaign_conflict', 409, 'The campaign changed too often while this request was handled', { nextAction: 'Retry the request' });
    }
  }
}

/**
 * Starts sending a draft. The checks of the create run again (the template may have been deleted,
 * the block deactivated since), and the template's content is recorded on the stream: every
 * message renders that content, whatever happens to the template afterwards.
 */
export function sendCampaign(deps: CampaignDeps, tenantId: string, actor: string, campaignId: string): Promise<CampaignView> {
  return decideAndAppend(deps, tenantId, actor, campaignId, async (state) => {
    const c = draftOf(state, tenantId).created;
    const template = await getTemplate(deps.db, tenantId, c.templateId);
    if (!(await getContactList(deps.db, tenantId, c.listId))) throw fail('list_not_found', 404, 'No such contact list for this tenant');
    const block = await usableBlock(deps, tenantId, c.motorBlockId, c.from);
    return decideStart(state, {
      tenantId, template: { subject: template.subject, body_html: template.body_html, body_text: template.body_text },
      identityName: c.fromName ?? block.name, now: deps.clock.now(),
    });
  });
}

/** Cancels a draft or a sending campaign; the sender stops before its next message. */
export function cancelCampaign(deps: CampaignDeps, tenantId: string, actor: string, campaignId: string): Promise<CampaignView> {
  return decideAndAppend(deps, tenantId, actor, campaignId, async (state) => decideCancel(state, { tenantId, now: deps.clock.now() }));
}
