import { fail } from '../errors';
import type { DomainEvent } from '../events';
import { isValidAddress } from '../message/sendRules';

/**
 * Free recipients (SPEC "Free recipient", docs/SANDBOX.md): a Free-plan account may send test mail
 * only to its own address and to addresses that confirmed by opening an emailed link. One stream
 * per account, `freeRecipients-<accountId>`, so the limit and duplicates are decided on one
 * consistent state. Pure: ids, token hashes and time arrive as arguments.
 *
 *   absent ──POST──▶ pending ──link opened──▶ confirmed
 *   pending|confirmed ──DELETE──▶ (absent)
 *   pending ──mail could not be handed over (502)──▶ (absent)
 */

export type FreeRecipientStatus = 'pending' | 'confirmed';
export interface FreeRecipient {
  recipientId: string; email: string; status: FreeRecipientStatus;
  /** SHA-256 of the latest link's token (a confirmed entry keeps the one that confirmed it, to say "already used"). */
  tokenHash: string; expiresAt: string; lastMailAt: string;
}
export interface FreeRecipientsState { recipients: FreeRecipient[] }

export const FREE_RECIPIENT_EVENTS = ['FreeRecipientRequested', 'FreeRecipientConfirmed', 'FreeRecipientRemoved', 'FreeRecipientMailFailed'] as const;
export type FreeRecipientEvent = DomainEvent<(typeof FREE_RECIPIENT_EVENTS)[number]>;

export function evolve(state: FreeRecipientsState, e: FreeRecipientEvent): FreeRecipientsState {
  const others = (id: string) => state.recipients.filter((r) => r.recipientId !== id);
  switch (e.type) {
    case 'FreeRecipientRequested': {
      const d = e.data;
      const prev = state.recipients.find((r) => r.recipientId === d.recipientId);
      if (prev?.status === 'confirmed') return state;
      return { recipients: [...others(d.recipientId), { recipientId: d.recipientId, email: d.email, status: 'pending', tokenHash: d.tokenHash, expiresAt: d.expiresAt, lastMailAt: d.requestedAt }] };
    }
    case 'FreeRecipientConfirmed': {
      const prev = state.recipients.find((r) => r.recipientId === e.data.recipientId);
      return prev ? { recipients: [...others(prev.recipientId), { ...prev, status: 'confirmed' }] } : state;
    }
    case 'FreeRecipientRemoved':
      return { recipients: others(e.data.recipientId) };
    case 'FreeRecipientMailFailed': {
      const prev = state.recipients.find((r) => r.recipientId === e.data.recipientId);
      return prev && prev.status === 'pending' && prev.tokenHash === e.data.tokenHash ? { recipients: others(prev.recipientId) } : state;
    }
  }
}
export const fold = (events: FreeRecipientEvent[]): FreeRecipientsState => events.reduce(evolve, { recipients: [] });

/** Addresses are compared and stored lower-case, trimmed. */
export function normalizeEmail(email: unknown): string {
  if (typeof email !== 'string' || !isValidAddress(email.trim())) {
    throw fail('invalid_email', 400, 'email must be a valid email address', { details: { field: 'email' } });
  }
  return email.trim().toLowerCase();
}

export interface RequestCommand {
  accountId: string; ownEmail: string; email: string; limit: number; cooldownMs: number; linkTtlMs: number;
  /** Used when the address is new. */
  newRecipientId: string;
  /** SHA-256 of the fresh link token, used when a mail is due. */
  tokenHash: string;
  now: Date;
}

/**
 * POST: a new address becomes pending and a link is mailed; a pending address is mailed again
 * once the cooldown has passed (or its link expired), with a new link that voids the old one;
 * otherwise nothing is mailed. The caller answers the same in every case (`mail` is not shown).
 */
export function decideRequest(state: FreeRecipientsState, cmd: RequestCommand): { events: FreeRecipientEvent[]; recipient: FreeRecipient; mail: boolean } {
  const email = normalizeEmail(cmd.email);
  if (email === cmd.ownEmail.trim().toLowerCase()) {
    throw fail('own_address', 400, 'Your own address is always allowed; it needs no confirmation', { details: { field: 'email' } });
  }
  const existing = state.recipients.find((r) => r.email === email);
  const now = cmd.now.getTime();
  if (existing) {
    const fresh = now - Date.parse(existing.lastMailAt) < cmd.cooldownMs && now < Date.parse(existing.expiresAt);
    if (existing.status === 'confirmed' || fresh) return { events: [], recipient: existing, mail: false };
  } else if (state.recipients.length >= cmd.limit) {
    throw fail('recipient_limit', 409, `The free-recipient list is full (${state.recipients.length}/${cmd.limit})`, {
      details: { limit: cmd.limit, usage: state.recipients.length },
      nextAction: 'Remove an address: DELETE /api/public/v1/account/free-recipients/{id}',
    });
  }
  const recipientId = existing?.recipientId ?? cmd.newRecipientId;
  const expiresAt = new Date(now + cmd.linkTtlMs).toISOString();
  const event: FreeRecipientEvent = {
    type: 'FreeRecipientRequested',
    data: { accountId: cmd.accountId, recipientId, email, tokenHash: cmd.tokenHash, expiresAt, requestedAt: cmd.now.toISOString() },
  };
  return { events: [event], recipient: evolve(state, event).recipients.find((r) => r.recipientId === recipientId)!, mail: true };
}

export type ConfirmOutcome =
  | { kind: 'confirmed'; recipient: FreeRecipient; events: FreeRecipientEvent[] }
  | { kind: 'already_used'; recipient: FreeRecipient }
  | { kind: 'expired' | 'invalid' };

/** The emailed link: only the latest link of a pending address confirms it, once, before it expires. */
export function decideConfirm(state: FreeRecipientsState, cmd: { accountId: string; tokenHash: string; now: Date }): ConfirmOutcome {
  const r = state.recipients.find((x) => x.tokenHash === cmd.tokenHash);
  if (!r) return { kind: 'invalid' };
  if (r.status === 'confirmed') return { kind: 'already_used', recipient: r };
  if (cmd.now.getTime() >= Date.parse(r.expiresAt)) return { kind: 'expired' };
  return {
    kind: 'confirmed', recipient: { ...r, status: 'confirmed' },
    events: [{ type: 'FreeRecipientConfirmed', data: { accountId: cmd.accountId, recipientId: r.recipientId, email: r.email, confirmedAt: cmd.now.toISOString() } }],
  };
}

export function decideRemove(state: FreeRecipientsState, cmd: { accountId: string; recipientId: string; now: Date }): FreeRecipientEvent[] {
  const r = state.recipients.find((x) => x.recipientId === cmd.recipientId);
  if (!r) throw fail('not_found', 404, 'No such free recipient on this account', { nextAction: 'List them: GET /api/public/v1/account/free-recipients' });
  return [{ type: 'FreeRecipientRemoved', data: { accountId: cmd.accountId, recipientId: r.recipientId, email: r.email, removedAt: cmd.now.toISOString() } }];
}

export function mailFailed(state: FreeRecipientsState, cmd: { accountId: string; recipientId: string; tokenHash: string; now: Date }): FreeRecipientEvent[] {
  const r = state.recipients.find((x) => x.recipientId === cmd.recipientId);
  if (!r || r.status !== 'pending' || r.tokenHash !== cmd.tokenHash) return [];
  return [{ type: 'FreeRecipientMailFailed', data: { accountId: cmd.accountId, recipientId: r.recipientId, tokenHash: r.tokenHash, at: cmd.now.toISOString() } }];
}
