import { streamName, type RecordedEvent } from '../../domain/eventStore';
import { asDomainEvent, type WebhookDeliveryAttempted, type WebhookEndpointDisabled } from '../../domain/events';
import { storableText } from '../../domain/storableJson';
import type { Clock } from '../../domain/ids';
import { SYSTEM_PLAN } from '../../domain/account/plan';
import { foldEndpoint } from '../../domain/webhooks/webhooks';
import { IDEMPOTENCY_WINDOW_MS } from '../../commands/send/sendMessage';
import { isPermanentSendFailure, sendSystemMail, type SystemMail, type SystemMailDeps } from '../../commands/auth/systemMail';
import { loadBlock } from '../../commands/blocks/grants';
import { followLogAlone } from '../../infra/eventstore/followerLease';
import type { Logger } from '../../infra/logger';
import type { Metrics } from '../../infra/metrics';
import { sleep } from '../../infra/sleep';
import { CheckpointWriter } from '../logEnqueuer';
import { WEBHOOK_PAUSE_NOTIFIER } from '../followers';

/**
 * Mails the account owner when the webhook worker pauses one of their endpoints for failing
 * (docs/WEBHOOKS.md "Failing endpoints"). A follower of its own, driven by the log: the worker only
 * appends WebhookEndpointDisabled, and this follower, from its checkpoint in
 * motor_workers.checkpoints, turns each one into one system mail (commands/auth/systemMail.ts).
 *
 * Not the dispatcher: it is on the path of every webhook (a batch every 50 ms), its checkpoint
 * gates block deletion, and a mail may take seconds (the system block's first provisioning) or
 * fail for minutes; here that holds back nothing but other pause notices.
 *
 * Once per pause: the send's Idempotency-Key is derived from the event's id, so an event handed
 * over again (a restart before the checkpoint moved) replays the message accepted the first time.
 * That replay holds for IDEMPOTENCY_WINDOW_MS (24 h) after the first acceptance; a restart
 * re-reads only what came after the checkpoint, written at most a second after a batch, so the
 * repeat comes seconds later. A pause older than NOTICE_MAX_AGE_MS when it is read (a follower down
 * for a day, a checkpoint reset) is not mailed at all: past that the key may have expired and a
 * second mail would go out, and a day late the endpoint's state (`disabledReason: "failing"`) has
 * long been on the API.
 *
 * A send that fails for a passing cause (event store or quota trouble: 502 email_send_failed,
 * `temporary`) is tried again after each of NOTICE_RETRY_DELAYS_MS, then logged and counted
 * (`failed`), and the follower moves on. One refused for good (the owner's address, or
 * SYSTEM_MAIL_FROM's domain or block unable to send: not `temporary`) is logged and counted at once:
 * the same mail would be refused on each try, and the tries would hold back the notices after it
 * for six minutes. Holding the checkpoint on a failure instead would stall every later notice
 * behind a fault that may last longer than they are worth sending; the pause itself is in the log,
 * the API and motor_webhook_endpoints_paused_total whatever happens to the mail.
 */

/** The follower's name, and so its lease and its row in motor_workers.checkpoints. */
export { WEBHOOK_PAUSE_NOTIFIER };
/** Under the send's replay window with an hour to spare for clocks that disagree. */
export const NOTICE_MAX_AGE_MS = IDEMPOTENCY_WINDOW_MS - 3600_000;
/**
 * The waits before the second to fifth try of a send: about six minutes in all, long enough for a
 * store failover or the system block's directory row, and holding back only other notices.
 */
export const NOTICE_RETRY_DELAYS_MS = [2_000, 10_000, 60_000, 300_000];

export type NoticeOutcome = 'sent' | 'skipped' | 'failed';

export interface PauseNotifierDeps extends SystemMailDeps {
  logger: Logger;
  metrics: Metrics;
  clock: Clock;
}

export interface PauseNotifierOptions {
  name?: string;
  retryDelaysMs?: readonly number[];
  /** The send (default sendSystemMail); tests make it fail. */
  send?: (deps: SystemMailDeps, mail: SystemMail, now: Date) => Promise<string>;
}

/** What the mail tells, read from the log when the pause is handled. */
export interface PauseFacts {
  webhookId: string; url: string; motorBlockId: string; blockName: string; ownerEmail: string;
  since: string; disabledAt: string; deliveryId: string;
  lastAttempt: Pick<WebhookDeliveryAttempted, 'attempt' | 'httpStatus' | 'error' | 'responseBody' | 'attemptedAt'> | null;
}

/** `s` on one line, cut at `max` UTF-16 units by storableText (a block name's emoji is not split in half). */
const oneLine = (s: string, max: number) => {
  const flat = s.replace(/[\u0000-\u001f\u007f]+/g, ' ').trim();
  return flat.length > max ? `${storableText(flat, max)}…` : flat;
};

/** The notice (pure): subject naming block and URL, since when it failed, the last error, how to check and resume. */
export function pauseNoticeMail(f: PauseFacts, publicBaseUrl: string): Pick<SystemMail, 'subject' | 'text'> {
  const base = `${publicBaseUrl.replace(/\/+$/, '')}/api/public/v1/motor-blocks/${f.motorBlockId}/webhooks/${f.webhookId}`;
  const a = f.lastAttempt;
  const lastError = a === null
    ? 'Last error: not known (the delivery record is gone).'
    : `Last error (attempt ${a.attempt}, ${a.attemptedAt}): ${[a.httpStatus === null ? null : `HTTP ${a.httpStatus}`, a.error].filter(Boolean).join(', ') || 'failed'}` +
      (a.responseBody ? `\nResponse: ${oneLine(a.responseBody, 200)}` : '');
  return {
    subject: `Webhook endpoint paused on Motor Block "${oneLine(f.blockName, 80)}": ${oneLine(f.url, 200)}`,
    text: [
      `Motor paused a webhook endpoint of your Motor Block "${f.blockName}" (${f.motorBlockId}) because its deliveries kept failing:`,
      '',
      `  ${f.url}`,
      `  webhook ${f.webhookId}`,
      '',
      `No delivery to it has succeeded since ${f.since}. Delivery ${f.deliveryId} failed for good at ${f.disabledAt}, and the endpoint was paused then.`,
      lastError,
      '',
      'While it is paused nothing is queued for it: the events of that time are not sent to it later.',
      '',
      'To check and resume it (a token with the webhooks.manage scope):',
      `- Send a test delivery (paused endpoints get them too): POST ${base}/test`,
      `- If the receiver lost its secret, issue a new one: POST ${base}/rotate-secret`,
      `- Resume it: PUT ${base} with {"enabled": true}`,
      '',
      'Deliveries and their errors: GET ' + `${base}/deliveries`,
    ].join('\n'),
  };
}

export class WebhookPauseNotifier {
  private checkpoint!: CheckpointWriter;

  constructor(private readonly deps: PauseNotifierDeps, private readonly options: PauseNotifierOptions = {}) {}

  private get name(): string { return this.options.name ?? WEBHOOK_PAUSE_NOTIFIER; }

  async run(signal: AbortSignal): Promise<void> {
    this.checkpoint = new CheckpointWriter(this.deps.db, this.name, this.deps.logger);
    // One process at a time (infra/eventstore/followerLease.ts): one notice per pause, from one place.
    await followLogAlone(this.deps, {
      name: this.name,
      types: ['WebhookEndpointDisabled'],
      start: () => this.checkpoint.restart(),
      handle: async (batch) => {
        for (const e of batch.events) await this.notify(e, signal);
        await this.checkpoint.save(batch.position);
      },
      stopped: () => this.checkpoint.flush(),
    }, signal);
  }

  /** One pause: mailed, skipped (nothing to tell, or too old), or failed (after its tries, or at once when refused for good). */
  async notify(e: RecordedEvent, signal?: AbortSignal): Promise<NoticeOutcome> {
    const event = asDomainEvent(e);
    if (event?.type !== 'WebhookEndpointDisabled') return 'skipped';
    const d = event.data as WebhookEndpointDisabled;
    const log = { webhookId: d.webhookId, motorBlockId: d.motorBlockId, eventId: e.id };
    const delays = this.options.retryDelaysMs ?? NOTICE_RETRY_DELAYS_MS;
    for (let tries = 1; ; tries++) {
      try {
        const outcome = await this.tryNotify(e, d);
        this.deps.metrics.webhookPauseNotices.inc({ outcome });
        return outcome;
      } catch (err) {
        if (signal?.aborted) throw err;
        const permanent = isPermanentSendFailure(err);
        if (permanent || tries > delays.length) {
          this.deps.logger.error({ err, ...log, tries, permanent }, permanent
            ? 'could not mail the owner of a paused webhook endpoint: the mail was refused, trying again cannot help; giving up on this notice'
            : 'could not mail the owner of a paused webhook endpoint; giving up on this notice');
          this.deps.metrics.webhookPauseNotices.inc({ outcome: 'failed' });
          return 'failed';
        }
        this.deps.logger.warn({ err, ...log, tries }, 'could not mail the owner of a paused webhook endpoint; trying again');
        await sleep(delays[tries - 1], signal);
        if (signal?.aborted) throw err;
      }
    }
  }

  private async tryNotify(e: RecordedEvent, d: WebhookEndpointDisabled): Promise<NoticeOutcome> {
    const eventId = e.id;
    const now = this.deps.clock.now();
    const skip = (why: string): NoticeOutcome => {
      this.deps.logger.info({ webhookId: d.webhookId, motorBlockId: d.motorBlockId, eventId, why }, 'paused webhook endpoint: no mail to its owner');
      return 'skipped';
    };
    if (now.getTime() - Date.parse(d.disabledAt) > NOTICE_MAX_AGE_MS) {
      // Not the owner's doing but the follower's lateness: a notice lost, which the operator should hear of.
      this.deps.logger.warn({ webhookId: d.webhookId, motorBlockId: d.motorBlockId, eventId, disabledAt: d.disabledAt }, 'paused webhook endpoint: the pause is too old to mail once only; its owner is not mailed');
      return 'skipped';
    }
    const facts = await this.factsOf(e.revision, d);
    if (typeof facts === 'string') return skip(facts);
    const mail = pauseNoticeMail(facts, this.deps.config.publicBaseUrl);
    await (this.options.send ?? sendSystemMail)(this.deps, {
      to: facts.ownerEmail, ...mail, purpose: 'webhook_endpoint_paused', idempotencyKey: `webhook-paused:${eventId}`,
    }, now);
    this.deps.logger.info({ webhookId: d.webhookId, motorBlockId: d.motorBlockId, eventId }, 'paused webhook endpoint: its owner was mailed');
    return 'sent';
  }

  /** The facts of the mail, or why there is none to send. */
  private async factsOf(revision: bigint, d: WebhookEndpointDisabled): Promise<PauseFacts | string> {
    const { store } = this.deps;
    const [events, { state: block }, attempts] = await Promise.all([
      store.readStream(streamName('webhook', d.webhookId)),
      loadBlock(store, d.motorBlockId),
      store.readStream(streamName('webhookDelivery', d.deliveryId)),
    ]);
    const endpoint = foldEndpoint(events);
    if (!endpoint || endpoint.deleted) return 'the endpoint is deleted';
    // The owner answered first (a PUT resumed it): nothing to tell. Paused again after that, the
    // later pause tells of it with its own mail.
    const resumed = events.some((x) => x.revision > revision && x.type === 'WebhookUpdated' && (x.data as { enabled: boolean }).enabled);
    if (resumed) return 'the endpoint was resumed';
    if (!block || block.status === 'deleted' || block.status === 'deletion_queued') return 'the block is deleted';
    const account = (await store.readStream(streamName('account', endpoint.accountId), { maxCount: 1 })).map(asDomainEvent)[0];
    if (account?.type !== 'AccountCreated' || !account.data.email) return 'the account has no owner address';
    if (account.data.plan === SYSTEM_PLAN || account.data.email.toLowerCase() === this.deps.config.systemMailFrom) return 'the system account';
    const last = attempts.map(asDomainEvent).filter((x) => x?.type === 'WebhookDeliveryAttempted').pop();
    const a = last?.data as WebhookDeliveryAttempted | undefined;
    return {
      webhookId: d.webhookId, url: endpoint.url, motorBlockId: d.motorBlockId, blockName: block.name, ownerEmail: account.data.email,
      since: d.since, disabledAt: d.disabledAt, deliveryId: d.deliveryId,
      lastAttempt: a ? { attempt: a.attempt, httpStatus: a.httpStatus, error: a.error, responseBody: a.responseBody, attemptedAt: a.attemptedAt } : null,
    };
  }
}
