import type { EventStore, RecordedEvent } from '../../domain/eventStore';
import { WrongExpectedRevisionError, streamName } from '../../domain/eventStore';
import { toEventData, type DomainEvent } from '../../domain/events';
import { uuidV5 } from '../../domain/ids';
import { evolve, fold, type MessageEvent, type MessageState } from '../../domain/message/message';
import { recordBounceReport, recordComplaint } from '../../domain/message/reports';
import type { InboundReport } from './reports';

/**
 * Turns a report received for a message into its events: reads the message's stream, folds it,
 * asks the deciders (domain/message/reports.ts) and appends at the revision it read.
 *
 * Idempotent: an event's id is derived from (type, message, recipient) alone, so the same report
 * delivered twice, or a second DSN for a recipient, yields ids the stream already holds, and
 * nothing is appended; two reports for one message at once meet at the expected revision, and the
 * loser reads again.
 */

export interface ReportNote {
  recipient: string | null;
  /** What became of this part of the report: recorded, or why not. */
  result: string;
}

export interface ReportOutcome {
  /** recorded: events appended; ignored: nothing to record (see notes); no_message: the stream does not exist (retention deleted it). */
  result: 'recorded' | 'ignored' | 'no_message';
  events: number;
  notes: ReportNote[];
}

const TRIES = 5;

/** One id per (event type, message, recipient): a bounce or a complaint is recorded once per recipient. */
export const reportEventId = (type: string, messageId: string, recipient: string): string =>
  uuidV5(`${type}:report:${messageId}:${recipient.toLowerCase()}`);

function decide(state: MessageState, report: InboundReport, now: Date): { events: DomainEvent<'DeliveryBounced' | 'ComplaintReceived'>[]; notes: ReportNote[] } {
  const events: DomainEvent<'DeliveryBounced' | 'ComplaintReceived'>[] = [];
  const notes: ReportNote[] = [];
  if (report.kind === 'dsn') {
    for (const r of report.recipients) {
      const named = r.originalRecipient ?? r.finalRecipient;
      if (r.action !== 'failed') {
        notes.push({ recipient: named, result: `action_${r.action ?? 'missing'}` });
        continue;
      }
      const verdict = recordBounceReport(state, {
        addresses: [r.originalRecipient, r.finalRecipient], smtpCode: r.smtpCode, enhancedCode: r.enhancedCode, smtpResponse: r.smtpResponse,
        remoteMta: r.remoteMta, now,
      });
      if (verdict.kind === 'ignore') {
        notes.push({ recipient: named, result: verdict.reason });
        continue;
      }
      notes.push({ recipient: verdict.event.data.recipient, result: 'bounced' });
      events.push(verdict.event);
      // Two blocks naming one recipient give one bounce.
      state = evolve(state, verdict.event as MessageEvent);
    }
  } else if (report.kind === 'arf') {
    const verdict = recordComplaint(state, { originalRcptTo: report.originalRcptTo, feedbackType: report.feedbackType, now });
    if (verdict.kind === 'ignore') notes.push({ recipient: report.originalRcptTo[0] ?? null, result: verdict.reason });
    else {
      notes.push({ recipient: verdict.event.data.recipient, result: 'complained' });
      events.push(verdict.event);
    }
  }
  return { events, notes };
}

export async function recordReport(deps: { store: EventStore; now: () => Date }, messageId: string, report: InboundReport): Promise<ReportOutcome> {
  const stream = streamName('message', messageId);
  for (let tries = 1; ; tries++) {
    const recorded: RecordedEvent[] = await deps.store.readStream(stream);
    if (recorded.length === 0) return { result: 'no_message', events: 0, notes: [] };
    const state = fold(recorded.map((e) => ({ type: e.type, data: e.data }) as MessageEvent));
    const { events, notes } = decide(state, report, deps.now());
    const held = new Set(recorded.map((e) => e.id.toLowerCase()));
    const fresh = events
      .map((e) => toEventData(reportEventId(e.type, messageId, e.data.recipient), e, { actor: 'inbound' }))
      .filter((e) => !held.has(e.id));
    if (fresh.length === 0) return { result: 'ignored', events: 0, notes };
    try {
      await deps.store.append(stream, fresh, { expectedRevision: recorded[recorded.length - 1].revision });
      return { result: 'recorded', events: fresh.length, notes };
    } catch (err) {
      // A delivery round or another report appended meanwhile: decide again on what is there now.
      if (!(err instanceof WrongExpectedRevisionError) || tries >= TRIES) throw err;
    }
  }
}
