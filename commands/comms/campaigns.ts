import type { Knex } from 'knex';
import { streamName, WrongExpectedRevisionError, type EventStore, type RecordedEvent } from '../../domain/eventStore';
import { fail, isDomainError } from '../../domain/errors';
import { asDomainEvent, toEventData } from '../../domain/events';
import { isUuid, newId, uuidV5, type Clock } from '../../domain/ids';
import {
  assertCampaignBlockType, campaignChanges, campaignContent, campaignFields, decideCancel, decideDelete, decideSchedule, decideScheduledStart, decideScheduledStartFailed,
  decideStart, decideUpdate, draftOf, fold, isCampaignEvent, notStartedOf, scheduleTime, type CampaignEvent, type CampaignState,
} from '../../domain/comms/campaigns';
import { CAMPAIGNS_SCHEMA } from '../../projections/campaigns/projection';
import { findCampaign, type CampaignView } from '../../projections/campaigns/queries';
import { getContactList } from '../../projections/contactLists/queries';
import type { BlockRecord } from '../../projections/directory/queries';
import type { DirectoryCache } from '../directoryCache';
import { decideOnStream } from '../decideOnStream';
import { awaitRow, type ReadYourWritesDeps } from '../readYourWrites';
import { assertBlockActive, checkSenderDomain } from '../send/sendMessage';
import { getTemplate } from '../templates/templates';

/**
 * Campaign commands (docs/COMMUNICATIONS.md "Campaigns"): create a draft, edit it, start sending
 * (now or at a time), cancel, delete; and the start of a scheduled campaign when it is due (the
 * sender's, workers/campaigns.ts).
 * Each decides on the campaign's own stream `campaign-<id>` and appends at the revision it decided
 * on, then waits until the `campaigns` read model shows the change, so the caller's next GET does.
 * The sending itself is the worker's (workers/campaigns.ts), fed by CampaignSendStarted in the log.
 */

export interface CampaignDeps extends ReadYourWritesDeps { store: EventStore; clock: Clock; directory: DirectoryCache }

export const campaignStream = (id: string) => streamName('campaign', id);
const MAX_ATTEMPTS = 12;

/** The tenant's block (else 404, deleted ones too) of a campaign type (409). */
async function campaignBlock(deps: Pick<CampaignDeps, 'directory'>, tenantId: string, motorBlockId: string): Promise<BlockRecord> {
  const block = await deps.directory.block(motorBlockId);
  if (!block || block.accountId !== tenantId || block.status === 'deleted' || block.status === 'deletion_queued') {
    throw fail('motor_block_not_found', 404, 'No such Motor Block for this tenant');
  }
  assertCampaignBlockType(block.type);
  return block;
}

/** 404 list_not_found unless the list is the tenant's (create, edit, send and the due start alike). */
async function requireCampaignList(db: Knex, tenantId: string, listId: string): Promise<void> {
  if (!(await getContactList(db, tenantId, listId))) throw fail('list_not_found', 404, 'No such contact list for this tenant');
}

/** The block a campaign may use: the tenant's (else 404), of a campaign type (409), active (403), `from` on its DNS-complete domain (403). */
async function usableBlock(deps: CampaignDeps, tenantId: string, motorBlockId: string, from: string): Promise<BlockRecord> {
  const block = await campaignBlock(deps, tenantId, motorBlockId);
  assertBlockActive(block);
  await checkSenderDomain(deps.directory, block, from);
  return block;
}

export async function createCampaign(deps: CampaignDeps, tenantId: string, actor: string, body: unknown): Promise<CampaignView> {
  const f = campaignFields(body);
  await getTemplate(deps.db, tenantId, f.templateId);
  await requireCampaignList(deps.db, tenantId, f.listId);
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
  await awaitRow(deps, 'campaign.create', { schema: CAMPAIGNS_SCHEMA, table: 'campaigns', id: campaignId, revision: r.nextExpectedRevision });
  return (await findCampaign(deps.db, tenantId, campaignId)) ?? {
    id: campaignId, name: f.name, status: 'draft', template_id: f.templateId, list_id: f.listId, motor_block_id: f.motorBlockId, from: f.from,
    from_name: f.fromName, track_opens: f.trackOpens, track_clicks: f.trackClicks, counts: { recipients: 0, accepted: 0, skipped_suppressed: 0, failed: 0 },
    tracking: { opens: 0, unique_opens: 0, clicks: 0, unique_clicks: 0 }, paused_until: null, scheduled_at: null, cancel_reason: null,
    created_at: now, updated_at: now, started_at: null, completed_at: null,
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
  return { state: campaignOf(events), revision: events.length === 0 ? null : events[events.length - 1].revision, events };
}

const campaignOf = (recorded: readonly RecordedEvent[]): CampaignState => fold(recorded.map(asDomainEvent).filter(isCampaignEvent));

const notFound = () => fail('campaign_not_found', 404, 'No such campaign for this tenant');

/**
 * Decides on the current stream and appends at its revision; a concurrent append (the worker's
 * checkpoint, another request) makes the decision be taken again on the new state. Nothing decided:
 * nothing appended. Returns the campaign's (lower-case) id once the read model shows the append.
 */
async function decideAndAppend(
  deps: CampaignDeps, wait: string, actor: string, id: string,
  decide: (state: CampaignState) => Promise<CampaignEvent[]>,
): Promise<string> {
  if (!isUuid(id)) throw fail('invalid_id', 400, 'Campaign id must be a uuid');
  // The stream is named by the lower-case id (as the GET's uuid column compares): a uuid in capitals is the same campaign.
  const campaignId = id.toLowerCase();
  const d = await decideOnStream(deps.store, campaignStream(campaignId), {
    actor, attempts: MAX_ATTEMPTS,
    exhausted: () => fail('campaign_conflict', 409, 'The campaign changed too often while this request was handled', { nextAction: 'Retry the request' }),
  }, (recorded) => {
    if (recorded.length === 0) throw notFound();
    return decide(campaignOf(recorded));
  });
  if (d.appended.length > 0) await awaitRow(deps, wait, { schema: CAMPAIGNS_SCHEMA, table: 'campaigns', id: campaignId, revision: d.revision! });
  return campaignId;
}

/** The campaign as the read model shows it after a command (404 if it is gone meanwhile). */
async function viewAfter(db: Knex, tenantId: string, campaignId: string): Promise<CampaignView> {
  const view = await findCampaign(db, tenantId, campaignId);
  if (!view) throw notFound();
  return view;
}

/**
 * Starts sending a draft, now or (with `scheduled_at` in the body) at a time. The checks of the
 * create run again either way (the template may have been deleted, the block deactivated since).
 * Now: the template's content is recorded on the stream, and every message renders that content,
 * whatever happens to the template afterwards. Scheduled: the sender starts it when due, with the
 * checks and the template's content of that moment (`startDueCampaign`).
 */
export async function sendCampaign(deps: CampaignDeps, tenantId: string, actor: string, campaignId: string, body?: unknown): Promise<CampaignView> {
  const scheduledAt = scheduleTime(body, deps.clock.now());
  const id = await decideAndAppend(deps, 'campaign.send', actor, campaignId, async (state) => {
    const c = notStartedOf(state, tenantId, scheduledAt ? 'scheduled' : 'sent').created;
    const template = await getTemplate(deps.db, tenantId, c.templateId);
    await requireCampaignList(deps.db, tenantId, c.listId);
    const block = await usableBlock(deps, tenantId, c.motorBlockId, c.from);
    if (scheduledAt) return decideSchedule(state, { tenantId, scheduledAt, now: deps.clock.now() });
    return decideStart(state, {
      tenantId, template: campaignContent(template),
      identityName: c.fromName ?? block.name, now: deps.clock.now(),
    });
  });
  return viewAfter(deps.db, tenantId, id);
}

/** Cancels a draft, a scheduled or a sending campaign; the sender stops before its next message, a scheduled one never starts. */
export async function cancelCampaign(deps: CampaignDeps, tenantId: string, actor: string, campaignId: string): Promise<CampaignView> {
  const id = await decideAndAppend(deps, 'campaign.cancel', actor, campaignId, async (state) => decideCancel(state, { tenantId, now: deps.clock.now() }));
  return viewAfter(deps.db, tenantId, id);
}

/**
 * Edits a draft: the fields given, with the create's checks for them. A new template or list must
 * be the tenant's; a new block or `from` must make a usable pair (the block's type, its being
 * active, `from` on its DNS-complete domain), checked on the pair the campaign would then have.
 */
export async function updateCampaign(deps: CampaignDeps, tenantId: string, actor: string, campaignId: string, body: unknown): Promise<CampaignView> {
  const changes = campaignChanges(body);
  const id = await decideAndAppend(deps, 'campaign.update', actor, campaignId, async (state) => {
    const c = draftOf(state, tenantId, 'edited').created;
    if (changes.templateId !== undefined) await getTemplate(deps.db, tenantId, changes.templateId);
    if (changes.listId !== undefined) await requireCampaignList(deps.db, tenantId, changes.listId);
    if (changes.motorBlockId !== undefined || changes.from !== undefined) {
      await usableBlock(deps, tenantId, changes.motorBlockId ?? c.motorBlockId, changes.from ?? c.from);
    }
    return decideUpdate(state, { tenantId, changes, now: deps.clock.now() });
  });
  return viewAfter(deps.db, tenantId, id);
}

/** Deletes a draft, sent or cancelled campaign; afterwards every route answers 404 for it. The messages it sent stay. */
export async function deleteCampaign(deps: CampaignDeps, tenantId: string, actor: string, campaignId: string): Promise<{ id: string; deleted: true }> {
  const id = await decideAndAppend(deps, 'campaign.delete', actor, campaignId, async (state) => decideDelete(state, { tenantId, now: deps.clock.now() }));
  return { id, deleted: true };
}

/**
 * Codes of the due-time checks that cannot pass later (the template, the list or the block is gone,
 * or the block is no longer of a campaign type): the scheduled campaign ends, never sent. An
 * inactive block or a sender domain out of order is not checked here: the send starts and its first
 * page pauses on it like any campaign's ("an unusable block").
 */
const DUE_START_FATAL = new Set(['template_not_found', 'list_not_found', 'motor_block_not_found', 'campaign_block_type_not_allowed']);

/**
 * Starts a scheduled campaign when it is due (the sender's job of its CampaignScheduled event): the
 * checks of an immediate send, then CampaignSendStarted with the template's content of now, or
 * CampaignScheduledStartFailed when a check fails for good. Appended at `revision` (the event the
 * job came from) under a stable event id, so a second run of the job appends nothing twice.
 */
export async function startDueCampaign(deps: Pick<CampaignDeps, 'store' | 'db' | 'clock' | 'directory'>, state: CampaignState, revision: bigint): Promise<'started' | 'failed' | 'stale'> {
  const c = state.created;
  if (state.status !== 'scheduled' || c === null) return 'stale';
  const now = deps.clock.now();
  let decided: CampaignEvent[];
  try {
    const template = await getTemplate(deps.db, c.tenantId, c.templateId);
    await requireCampaignList(deps.db, c.tenantId, c.listId);
    const block = await campaignBlock(deps, c.tenantId, c.motorBlockId);
    decided = decideScheduledStart(state, {
      template: campaignContent(template), identityName: c.fromName ?? block.name, now,
    });
  } catch (err) {
    if (!isDomainError(err) || !DUE_START_FATAL.has(err.code)) throw err;
    decided = decideScheduledStartFailed(state, { code: err.code, now });
  }
  if (decided.length === 0) return 'stale';
  try {
    await deps.store.append(campaignStream(c.campaignId), decided.map((e) => toEventData(uuidV5(`campaign:${c.campaignId}:due:${revision}`), e, { actor: 'worker:campaigns' })), {
      expectedRevision: revision,
    });
  } catch (err) {
    // Cancelled meanwhile (or started by another run of this job): nothing more to do.
    if (err instanceof WrongExpectedRevisionError) return 'stale';
    throw err;
  }
  return decided[0]?.type === 'CampaignSendStarted' ? 'started' : 'failed';
}
