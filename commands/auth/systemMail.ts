import type { Knex } from 'knex';
import type { EventStore } from '../../domain/eventStore';
import { InvalidEventDataError, WrongExpectedRevisionError, streamName } from '../../domain/eventStore';
import { fail, isDomainError, type DomainError } from '../../domain/errors';
import { toEventData, type DomainEvent } from '../../domain/events';
import { newId, uuidV5 } from '../../domain/ids';
import type { Config } from '../../infra/config';
import type { KeyStore } from '../../infra/keys/keyStore';
import { getBlock, getDomain } from '../../projections/directory/queries';
import { generateDkimKey } from '../../workers/delivery/dkim';
import { DirectoryCache } from '../directoryCache';
import type { SendQuota } from '../quota/sendQuota';
import { sendMessage } from '../send/sendMessage';
import { SYSTEM_PLAN } from '../../domain/account/plan';
import { newAccountBlocks } from '../../domain/account/blocks';

/**
 * The service's own mail (verification codes, links) goes through the normal pipeline: a
 * MessageAccepted on the service's own Motor Block, DKIM-signed and delivered by the workers like
 * any customer's mail, visible in its logs, counted by its quota.
 *
 * That block is provisioned on first use, as events, with ids derived from SYSTEM_MAIL_FROM's
 * domain (so every process derives the same ids and concurrent first uses converge: each stream
 * is created with expectedRevision no_stream, and "already exists" is success):
 *   account-<v5("motor.system.account")>           AccountCreated (plan "system")
 *   sendingDomain-<v5("motor.system.domain:<d>")>  DomainAdded + ownership and DNS marked trusted
 *   motorBlock-<v5("motor.system.block:<d>")>      MotorBlockCreated (transactional, api_key)
 * The operator publishes the DKIM record of that domain (the public key is in DomainAdded) and
 * the SPF include, as for any domain. See docs/AUTH.md.
 */

export interface SystemMailDeps {
  store: EventStore;
  db: Knex;
  keys: KeyStore;
  quota: SendQuota;
  config: Config;
}

export const systemIds = (from: string) => {
  const domain = from.slice(from.lastIndexOf('@') + 1).toLowerCase();
  return {
    domain,
    accountId: uuidV5('motor.system.account'),
    domainId: uuidV5(`motor.system.domain:${domain}`),
    motorBlockId: uuidV5(`motor.system.block:${domain}`),
  };
};

async function appendIfAbsent(store: EventStore, stream: string, events: DomainEvent[]): Promise<void> {
  try {
    await store.append(stream, events.map((e) => toEventData(newId(), e, { actor: 'system' })), { expectedRevision: 'no_stream' });
  } catch (err) {
    if (!(err instanceof WrongExpectedRevisionError)) throw err;
  }
}

export async function provisionSystemBlock(deps: SystemMailDeps, now: Date): Promise<string> {
  const ids = systemIds(deps.config.systemMailFrom);
  const at = now.toISOString();
  await appendIfAbsent(deps.store, streamName('account', ids.accountId), [
    { type: 'AccountCreated', data: { accountId: ids.accountId, email: deps.config.systemMailFrom, plan: SYSTEM_PLAN, createdAt: at } },
    ...newAccountBlocks(ids.accountId, [ids.motorBlockId], now),
  ]);
  if ((await deps.store.readStream(streamName('sendingDomain', ids.domainId), { maxCount: 1 })).length === 0) {
    const dkim = await generateDkimKey('rsa-sha256');
    const dkimKeyId = newId();
    await deps.keys.put(dkimKeyId, 'rsa-sha256', dkim.privateKeyPem);
    await appendIfAbsent(deps.store, streamName('sendingDomain', ids.domainId), [
      { type: 'DomainAdded', data: { domainId: ids.domainId, accountId: ids.accountId, name: ids.domain, dkimSelector: 'motor', dkimAlgorithm: 'rsa-sha256', dkimPublicKey: dkim.publicKeyDnsValue, dkimKeyId, addedAt: at } },
      { type: 'DomainOwnershipVerified', data: { domainId: ids.domainId, method: 'trusted', verifiedAt: at } },
      { type: 'DomainDnsChecked', data: { domainId: ids.domainId, method: 'trusted', spfConfigured: true, dkimConfigured: true, dmarcConfigured: true, checkedAt: at } },
    ]);
  }
  await appendIfAbsent(deps.store, streamName('motorBlock', ids.motorBlockId), [
    { type: 'MotorBlockCreated', data: {
      motorBlockId: ids.motorBlockId, accountId: ids.accountId, name: 'Motor system mail', type: 'transactional', domainId: ids.domainId,
      smtpUsername: `mb_system_${ids.motorBlockId.slice(0, 8)}`, authMethod: 'api_key', createdAt: at,
    } },
  ]);
  return ids.motorBlockId;
}

const ready = new WeakMap<object, Promise<string>>();

/** Provisions once per process (per store), then waits until the directory read model has the block. */
async function systemBlock(deps: SystemMailDeps, now: Date): Promise<string> {
  let p = ready.get(deps.store);
  if (!p) {
    p = (async () => {
      const id = await provisionSystemBlock(deps, now);
      const ids = systemIds(deps.config.systemMailFrom);
      const deadline = Date.now() + 15_000;
      while (!(await getBlock(deps.db, id)) || !(await getDomain(deps.db, ids.domainId))) {
        if (Date.now() > deadline) throw new Error('the directory projection does not show the system block yet');
        await new Promise((r) => setTimeout(r, 50));
      }
      return id;
    })();
    p.catch(() => ready.delete(deps.store));
    ready.set(deps.store, p);
  }
  return p;
}

export interface SystemMail { to: string; subject: string; text: string; purpose: string; idempotencyKey: string }

/**
 * Whether a failed system mail can be accepted if tried again later: the split of the SMTP edge
 * (smtp/replies.ts). Anything not a DomainError is the machinery (the event store, the directory
 * projection not showing the system block yet, a bug) and may pass later; so may a 429 (the system
 * block's quota) and any 5xx. A 4xx DomainError refuses this mail or its sender (a recipient that
 * is not an address, SYSTEM_MAIL_FROM's domain or block unable to send), and text the store cannot
 * keep is refused the same way on every try.
 */
export function isTemporarySendFailure(err: unknown): boolean {
  if (err instanceof InvalidEventDataError) return false;
  if (!isDomainError(err)) return true;
  return err.status === 429 || err.status >= 500;
}

/**
 * A failed send as its callers see it: 502 email_send_failed whatever the cause (the status and
 * code docs/AUTH.md and SPEC name for register and free recipients), with `temporary` saying whether
 * trying again can help, so a caller that retries (the pause notices) stops at a permanent one.
 */
function sendFailure(err: unknown): DomainError {
  const cause = isDomainError(err) ? err.code : err instanceof InvalidEventDataError ? 'invalid_event_data' : 'internal';
  const temporary = isTemporarySendFailure(err);
  return temporary
    ? fail('email_send_failed', 502, `The mail could not be accepted for delivery (${cause})`, { nextAction: 'Retry shortly', details: { temporary } })
    : fail('email_send_failed', 502, `The mail was refused (${cause}); trying again will not help`, {
      nextAction: 'Check the address; if it is right, contact the service\'s operator', details: { temporary },
    });
}

/** A failure of sendSystemMail that no later try can get past. */
export const isPermanentSendFailure = (err: unknown): boolean =>
  isDomainError(err) && err.code === 'email_send_failed' && err.details?.temporary === false;

/** Accepts a system mail for delivery; 502 email_send_failed (sendFailure) when it cannot be accepted. */
export async function sendSystemMail(deps: SystemMailDeps, mail: SystemMail, now: Date): Promise<string> {
  try {
    const motorBlockId = await systemBlock(deps, now);
    const result = await sendMessage(
      { store: deps.store, directory: new DirectoryCache(deps.db, 0), quota: deps.quota, config: deps.config },
      {
        motorBlockId, idempotencyKey: mail.idempotencyKey, source: 'http', now,
        body: { from: deps.config.systemMailFrom, fromName: 'Motor', to: mail.to, subject: mail.subject, text: mail.text, metadata: { purpose: mail.purpose } },
      },
    );
    if (result.kind === 'validated') throw new Error('unexpected dry run');
    return result.messageId;
  } catch (err) {
    throw sendFailure(err);
  }
}
