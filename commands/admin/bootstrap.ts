import { randomBytes } from 'node:crypto';
import type { Knex } from 'knex';
import type { EventStore } from '../../domain/eventStore';
import { WrongExpectedRevisionError, streamName, type RecordedEvent } from '../../domain/eventStore';
import { decideOnBlock } from '../blocks/grants';
import type { MotorBlockCommand } from '../../domain/motorBlock/motorBlock';
import { generateApiKey, generateSmtpPassword } from '../../domain/credentials/apiKeys';
import { SCOPES } from '../../domain/credentials/scopes';
import { fail } from '../../domain/errors';
import {
  asDomainEvent, toEventData, type BootstrapCredentialsReserved, type DkimAlgorithm, type DomainEvent, type MotorBlockCreated, type RateLimits,
} from '../../domain/events';
import { newId } from '../../domain/ids';
import { isValidAddress } from '../../domain/message/sendRules';
import type { KeyStore } from '../../infra/keys/keyStore';
import { generateDkimKey } from '../../workers/delivery/dkim';
import { expectedRecords, type RecordInputs, type RecordPurpose } from '../../domain/sendingDomain/records';
import {
  SENDING_DOMAIN_EVENTS, domainIdFor, parseDomainName, evolve as evolveSendingDomain, fold as foldSendingDomain,
  type SendingDomain, type SendingDomainEvent, type SendingDomainState,
} from '../../domain/sendingDomain/sendingDomain';
import { ACCOUNT_PLAN_EVENTS, decideChangePlan, foldPlan, type AccountPlanEvent } from '../../domain/account/plan';
import { newAccountBlocks } from '../../domain/account/blocks';
import { conflictAfterRetries, decideOnStream, eventsOf } from '../decideOnStream';
import { systemIds } from '../auth/systemMail';
import { claimOwnerEmail } from '../auth/accountEmail';
import { accountEmailKey } from '../../domain/account/emailClaim';
import { findDomainOfAccountByName } from '../../projections/directory/queries';
import { revokeKeyAsOperator } from '../auth/credentials';
import { withTurn } from '../../infra/advisoryLock';

/**
 * Operator commands behind `npm run cli`. Each appends events; the directory projection makes
 * them visible (the CLI catches the projection up before it prints).
 */

export interface DnsRecord { type: 'TXT' | 'CNAME' | 'MX'; name: string; value: string; purpose: 'dkim' | 'spf' | 'dmarc' | 'ownership' }

export interface BootstrapInput {
  email: string;
  domain: string;
  trustDns: boolean;
  dkimAlgorithm: DkimAlgorithm;
  blockName?: string;
  plan: string;
  serviceDomain: string;
  now: Date;
}

export interface BootstrapResult {
  accountId: string;
  domainId: string;
  motorBlockId: string;
  apiKey: string;
  accountApiKey: string;
  /** SMTP submission credentials of the block; the password is shown once and stored hashed. */
  smtpUsername: string;
  smtpPassword: string;
  dnsRecords: DnsRecord[];
}

export const dkimSelectorFor = (now: Date): string => `motor${now.toISOString().slice(0, 10).replace(/-/g, '')}`;

/** The order the CLI has always printed the records in: DKIM, SPF, DMARC, then ownership (when the domain has a token). */
const CLI_RECORD_ORDER: RecordPurpose[] = ['dkim', 'spf', 'dmarc', 'ownership'];

/** The records to publish (the domain routes' own, domain/sendingDomain/records.ts), in the CLI's order (docs/DOMAINS.md). */
export function dnsRecordsFor(d: RecordInputs): DnsRecord[] {
  return expectedRecords(d).sort((a, b) => CLI_RECORD_ORDER.indexOf(a.purpose) - CLI_RECORD_ORDER.indexOf(b.purpose));
}

export const newSmtpUsername = (): string => `mb_${randomBytes(9).toString('base64url').replace(/[-_]/g, 'x')}`;

/** The answer to a bootstrap for an owner who has an account: manage that one instead. */
const accountExists = (email: string, accountId: string) => fail('account_exists', 409,
  `An account with email ${email} exists already: ${accountId}. bootstrap creates a new account for an owner who has none; `
  + `for new keys of that account (lost or rotated) use npm run cli -- key create --account ${accountId}, or key create --block <motorBlockId> (block list shows them), `
  + `then key revoke <old key or prefix>; its plan: account set-plan ${accountId} <plan>`,
{ details: { accountId } });

const systemAddress = (email: string, accountId: string) => fail('account_exists', 409,
  `${email} is the sender of the service's own mail (system account ${accountId}); bootstrap an account with another address`, { details: { accountId } });

/**
 * The input's address and domain as bootstrap stores them; refused before anything is claimed,
 * stored or appended. The domain is a tenant's like one added over HTTP, checked by the same
 * parseDomainName (docs/DOMAINS.md): 400 invalid_domain, or domain_reserved for SERVICE_DOMAIN
 * and, when `bounceDomain` is given, BOUNCE_DOMAIN (each with the names under it).
 */
function checkInput(input: BootstrapInput, bounceDomain: string | null): { email: string; domain: string } {
  const email = input.email.trim();
  if (!isValidAddress(email)) throw fail('invalid_email', 400, `Not a valid email address: ${input.email}`);
  return { email, domain: parseDomainName(input.domain, { serviceDomain: input.serviceDomain, bounceDomain }) };
}

/**
 * `npm run cli -- bootstrap`: a new account for an owner who has none, so that an operator who
 * reruns the quick start, or two operators at the same moment, do not give one owner a second
 * account. The owner's address is claimed first (commands/auth/accountEmail.ts): an address that
 * belongs to an account (an earlier bootstrap's, a dashboard sign-up's, one made by an older
 * release) is refused with 409 account_exists and that account's id (details.accountId), as is
 * SYSTEM_MAIL_FROM, the system account's, provisioned or not. A domain that the HTTP add refuses
 * (invalid, or SERVICE_DOMAIN or BOUNCE_DOMAIN or under one: 400 domain_reserved) is refused
 * before that. Of bootstraps racing for one address, the one whose AccountCreated lands on the
 * claimed account's stream makes it; the others are refused the same way. An older release's
 * accounts are looked up in the directory: the caller catches it up first.
 *
 * The one account that is not refused is one an earlier bootstrap made and did not finish (it
 * stopped after AccountCreated, before its BootstrapFinished): this bootstrap finishes it, and
 * revokes the credentials the earlier one made (see `finishBootstrap`).
 */
export async function bootstrapOwner(
  deps: BootstrapDeps & { db: Knex }, input: BootstrapInput & { systemMailFrom: string; bounceDomain: string | null },
): Promise<BootstrapResult> {
  const { email } = checkInput(input, input.bounceDomain);
  const accountId = await claimOwnerEmail(deps, { email, accountId: newId(), actor: 'cli', now: input.now }, input.systemMailFrom,
    () => systemAddress(accountEmailKey(email), systemIds(input.systemMailFrom).accountId));
  // The claimed account is made here unless it exists: when the claim is another bootstrap's (one
  // racing this, or one that stopped between its claim and its account), the first AccountCreated
  // on that account's stream wins and the other bootstrap is refused, or finishes the account when
  // the bootstrap that made it has not. One bootstrap at a time finishes an account: the revocations
  // of step 3 must not reach the keys of a bootstrap that is still running.
  // The account's bootstrap lock, not waited for (another bootstrap holding it may take as long as
  // its DKIM key and its directory wait take): refused at once. The lock is the transaction's: a
  // bootstrap killed midway releases it with its connection.
  return withTurn(deps.db, `motor:bootstrap:${accountId}`, { waitMs: 0, busy: () => accountExists(accountEmailKey(email), accountId), hash: 'hashtext' },
    () => finishBootstrap(deps, { ...input, accountId }));
}

export interface BootstrapDeps {
  store: EventStore;
  keys: KeyStore;
  db?: Knex;
  /**
   * Called with the credentials before the bootstrap records that it finished, e.g. the CLI's wait
   * for the directory to show them. A bootstrap stopped before its end (this included) counts as
   * unfinished: the next one revokes what it made.
   */
  beforeFinish?: (result: BootstrapResult) => Promise<void>;
}

/**
 * A new account with its domain, block and keys. It claims no address: tests and benchmarks rely
 * on making a new account each time (one email, many accounts); the CLI goes through
 * bootstrapOwner. It refuses SERVICE_DOMAIN but is not told BOUNCE_DOMAIN (tests make a domain a
 * tenant added before the operator set it this way). With `input.accountId` (the account the
 * owner's address was claimed for) an account that exists already is refused (409 account_exists)
 * before any key is stored or anything else appended, unless an unfinished bootstrap made it
 * (`unfinishedBootstrapBlock`): then this one finishes it.
 */
export async function bootstrap(store: EventStore, keys: KeyStore, input: BootstrapInput & { accountId?: string }): Promise<BootstrapResult> {
  return finishBootstrap({ store, keys }, input);
}

/**
 * The steps, each safe to run again after a bootstrap that stopped anywhere, and beside another
 * bootstrap finishing the same account:
 *
 * 1. `account-<id>`: AccountCreated and its list of blocks naming the block to come (no_stream).
 *    On an account there already: the block its unfinished bootstrap named, or account_exists.
 * 2. `sendingDomain-<domainIdFor(account, name)>`: the domain, its DKIM key stored first. The id
 *    is the dashboard's, derived from the account and the name, so every bootstrap of the account
 *    and that name meets on one stream: the first DomainAdded wins and the others use it (their
 *    key, unused, is removed). --trust-dns marks what is not marked yet. When the unfinished
 *    bootstrap made the block already, the block's domain.
 * 3. `bootstrap-<account id>`: BootstrapCredentialsReserved, naming the two keys to come and the
 *    block, before any of them is made. The keys every earlier attempt named were shown to no one:
 *    they are revoked first (`ApiKeyRevoked`, the `key revoke` path; a key never made is skipped,
 *    one revoked already stays as it was). Keys made any other way (key create, the dashboard) are
 *    named by no reservation and stay.
 * 4. `apiKey-<new id>` twice: the block key and the account key, new each run (a secret is shown
 *    once: an earlier run's never was).
 * 5. `motorBlock-<the id named in step 1>` (no_stream): the block with its SMTP password. Of two
 *    bootstraps finishing one account without the lock (`bootstrap`), one append lands; the other
 *    revokes the keys it made and is refused with account_exists. A block the unfinished bootstrap
 *    made gets a new SmtpPasswordSet instead: the password it set, shown to no one, stops working.
 * 6. `beforeFinish`, then BootstrapFinished on `bootstrap-<account id>`: what "finished" means.
 *    From then on a bootstrap of the account is account_exists. An account whose block exists
 *    and that has no reservation was finished by a release before this one.
 */
async function finishBootstrap(deps: BootstrapDeps, input: BootstrapInput & { accountId?: string }): Promise<BootstrapResult> {
  const { store, keys } = deps;
  const { email, domain: given } = checkInput(input, null);
  const at = input.now.toISOString();
  const accountId = input.accountId ?? newId();

  const opened = await openAccount(store, { accountId, email, plan: input.plan, now: input.now });
  const { motorBlockId, block } = opened;
  const domain = block ? await domainNameOf(store, block.domainId) : given;
  const sending = await bootstrapDomain(deps, { accountId, domain, trustDns: input.trustDns, dkimAlgorithm: input.dkimAlgorithm, now: input.now });

  for (const earlier of opened.reserved) {
    for (const keyId of [earlier.blockKeyId, earlier.accountKeyId]) await revokeIfMade(store, keyId, input.now);
  }
  const blockKeyId = newId();
  const accountKeyId = newId();
  const bootstrapStream = streamName('bootstrap', accountId);
  await appendTo(store, bootstrapStream, [{ type: 'BootstrapCredentialsReserved', data: { accountId, motorBlockId, blockKeyId, accountKeyId, reservedAt: at } }], 'any');

  const blockKey = generateApiKey('block');
  const accountKey = generateApiKey('account');
  await appendNew(store, streamName('apiKey', blockKeyId), [{
    type: 'ApiKeyCreated',
    data: { keyId: blockKeyId, kind: 'block', accountId, motorBlockId, prefix: blockKey.prefix, secretHash: blockKey.secretHash, scopes: [], createdAt: at },
  }]);
  await appendNew(store, streamName('apiKey', accountKeyId), [{
    type: 'ApiKeyCreated',
    data: { keyId: accountKeyId, kind: 'account', accountId, prefix: accountKey.prefix, secretHash: accountKey.secretHash, scopes: [...SCOPES], createdAt: at },
  }]);

  const smtpUsername = block?.smtpUsername ?? newSmtpUsername();
  const smtp = generateSmtpPassword();
  const password: DomainEvent = { type: 'SmtpPasswordSet', data: { motorBlockId, passwordHash: smtp.passwordHash, setAt: at } };
  try {
    await appendTo(store, streamName('motorBlock', motorBlockId), block ? [password] : [
      {
        type: 'MotorBlockCreated',
        data: { motorBlockId, accountId, name: input.blockName ?? domain, type: 'general_purpose', domainId: sending.domainId, smtpUsername, authMethod: 'smtp_password', createdAt: at },
      },
      password,
    ], block ? 'any' : 'no_stream');
  } catch (err) {
    if (!(err instanceof WrongExpectedRevisionError)) throw err;
    // Another bootstrap finished the account first: its keys are the ones printed, these two are
    // shown to no one.
    for (const keyId of [blockKeyId, accountKeyId]) await revokeKeyAsOperator(store, keyId, input.now);
    throw accountExists(accountEmailKey(email), accountId);
  }

  const result: BootstrapResult = {
    accountId, domainId: sending.domainId, motorBlockId, apiKey: blockKey.key, accountApiKey: accountKey.key, smtpUsername, smtpPassword: smtp.password,
    dnsRecords: dnsRecordsFor({
      domainId: sending.domainId, name: sending.name, serviceDomain: input.serviceDomain, ownershipToken: sending.ownershipToken, dkimMode: sending.dkimMode, dkim: sending.dkim,
    }),
  };
  await deps.beforeFinish?.(result);
  await appendTo(store, bootstrapStream, [{ type: 'BootstrapFinished', data: { accountId, motorBlockId, blockKeyId, accountKeyId, finishedAt: at } }], 'any');
  return result;
}

/** An earlier attempt's key, revoked; one it never made (it stopped before) is skipped. */
async function revokeIfMade(store: EventStore, keyId: string, now: Date): Promise<void> {
  if ((await store.readStream(streamName('apiKey', keyId), { maxCount: 1 })).length === 0) return;
  await revokeKeyAsOperator(store, keyId, now);
}

async function domainNameOf(store: EventStore, domainId: string): Promise<string> {
  const state = foldSendingDomain(eventsOf<SendingDomainEvent>(await store.readStream(streamName('sendingDomain', domainId)), SENDING_DOMAIN_EVENTS));
  if (!state.exists) throw new Error(`sendingDomain-${domainId} of a bootstrap's block has no DomainAdded`);
  return state.name;
}

const appendTo = (store: EventStore, stream: string, events: DomainEvent[], expectedRevision: 'no_stream' | 'any') =>
  store.append(stream, events.map((e) => toEventData(newId(), e, { actor: 'cli' })), { expectedRevision });
const appendNew = (store: EventStore, stream: string, events: DomainEvent[]) => appendTo(store, stream, events, 'no_stream');

/**
 * Step 1: the account, or the one an unfinished bootstrap made. Answers the id of the block to
 * make (or that the unfinished bootstrap made) and what the earlier attempts reserved. The
 * account's list of its blocks starts with it (docs/BLOCKS.md "Plan limit").
 */
async function openAccount(
  store: EventStore, cmd: { accountId: string; email: string; plan: string; now: Date },
): Promise<{ motorBlockId: string; block: MotorBlockCreated | null; reserved: BootstrapCredentialsReserved[] }> {
  const { accountId, email, now } = cmd;
  const motorBlockId = newId();
  try {
    await appendNew(store, streamName('account', accountId), [
      { type: 'AccountCreated', data: { accountId, email, plan: cmd.plan, createdAt: now.toISOString() } }, ...newAccountBlocks(accountId, [motorBlockId], now),
    ]);
    return { motorBlockId, block: null, reserved: [] };
  } catch (err) {
    if (!(err instanceof WrongExpectedRevisionError)) throw err;
  }
  const unfinished = bootstrapBlockOf(await store.readStream(streamName('account', accountId), { maxCount: 3 }));
  if (unfinished) {
    const attempts = (await store.readStream(streamName('bootstrap', accountId))).map(asDomainEvent);
    const [first] = (await store.readStream(streamName('motorBlock', unfinished), { maxCount: 1 })).map(asDomainEvent);
    const block = first?.type === 'MotorBlockCreated' ? first.data : null;
    const finished = attempts.some((e) => e?.type === 'BootstrapFinished') || (first !== undefined && attempts.length === 0);
    if (!finished) {
      return { motorBlockId: unfinished, block, reserved: attempts.flatMap((e) => (e?.type === 'BootstrapCredentialsReserved' ? [e.data] : [])) };
    }
  }
  throw accountExists(accountEmailKey(email), accountId);
}

/**
 * The block a bootstrap named when it made this account, or null when a bootstrap did not make
 * it. A bootstrap's account stream begins with the one append of step 1, by the CLI:
 * AccountCreated, AccountBlocksListed with no blocks, AccountBlockAdded, all three at the same
 * instant (this release and the ones before it wrote the same). A dashboard account begins with
 * AccountCreated and an empty list appended by `user:<id>`, and its blocks are added later by
 * other actors; the system account's is appended by `system`; an account of an older release has
 * no list. None of those is taken for a bootstrap's, whatever blocks were added since.
 */
export function bootstrapBlockOf(recorded: readonly RecordedEvent[]): string | null {
  const [created, listed, added] = recorded.map(asDomainEvent);
  if (recorded.length < 3 || recorded.slice(0, 3).some((e) => e.metadata?.actor !== 'cli')) return null;
  if (created?.type !== 'AccountCreated' || listed?.type !== 'AccountBlocksListed' || added?.type !== 'AccountBlockAdded') return null;
  const at = created.data.createdAt;
  if (listed.data.motorBlockIds.length > 0 || listed.data.listedAt !== at || added.data.addedAt !== at) return null;
  return added.data.motorBlockId;
}

/**
 * Step 2: the account's domain of that name, added unless it is there. An account made by a
 * release that gave bootstrap domains random ids may have it under another id: the directory
 * (caught up by the CLI before) names it.
 */
async function bootstrapDomain(
  deps: { store: EventStore; keys: KeyStore; db?: Knex }, cmd: { accountId: string; domain: string; trustDns: boolean; dkimAlgorithm: DkimAlgorithm; now: Date },
): Promise<SendingDomain> {
  const { store, keys } = deps;
  const at = cmd.now.toISOString();
  const older = deps.db ? await findDomainOfAccountByName(deps.db, cmd.accountId, cmd.domain) : null;
  const domainId = older?.id ?? domainIdFor(cmd.accountId, cmd.domain);
  const stream = streamName('sendingDomain', domainId);
  const foldDomain = (recorded: readonly RecordedEvent[]) => foldSendingDomain(eventsOf<SendingDomainEvent>(recorded, SENDING_DOMAIN_EVENTS));

  // The key is stored before the domain that names it, so that a DomainAdded never names a missing key.
  let fresh: { keyId: string; publicKey: string } | null = null;
  if (!foldDomain(await store.readStream(stream)).exists) {
    const dkim = await generateDkimKey(cmd.dkimAlgorithm);
    fresh = { keyId: newId(), publicKey: dkim.publicKeyDnsValue };
    await keys.put(fresh.keyId, cmd.dkimAlgorithm, dkim.privateKeyPem);
  }
  const { recorded, appended } = await decideOnStream<SendingDomainEvent>(store, stream, {
    actor: 'cli', attempts: 5, exhausted: conflictAfterRetries('domain_conflict', `The domain ${cmd.domain}`),
  }, (recorded) => {
    const state = foldDomain(recorded);
    const events: SendingDomainEvent[] = [];
    if (!state.exists) {
      // Seen without its DomainAdded above (a stream does not lose one), so a key was stored for it.
      if (!fresh) throw new Error(`sendingDomain-${domainId} lost its DomainAdded`);
      events.push({
        type: 'DomainAdded',
        data: {
          domainId, accountId: cmd.accountId, name: cmd.domain, dkimSelector: dkimSelectorFor(cmd.now), dkimAlgorithm: cmd.dkimAlgorithm,
          dkimPublicKey: fresh.publicKey, dkimKeyId: fresh.keyId, ownershipToken: randomBytes(16).toString('hex'), dkimMode: 'txt', addedAt: at,
        },
      });
    }
    if (cmd.trustDns && !(state.exists && state.ownershipVerified)) events.push({ type: 'DomainOwnershipVerified', data: { domainId, method: 'trusted', verifiedAt: at } });
    if (cmd.trustDns && !(state.exists && state.spfConfigured && state.dkimConfigured && state.dmarcConfigured)) {
      events.push({ type: 'DomainDnsChecked', data: { domainId, method: 'trusted', spfConfigured: true, dkimConfigured: true, dmarcConfigured: true, checkedAt: at } });
    }
    return events;
  });
  const state = [...eventsOf<SendingDomainEvent>(recorded, SENDING_DOMAIN_EVENTS), ...appended].reduce(evolveSendingDomain, { exists: false } as SendingDomainState);
  if (!state.exists || state.accountId !== cmd.accountId) throw new Error(`sendingDomain-${domainId} is not a domain of account ${cmd.accountId}`);
  // Another bootstrap added the domain first: the key stored here is named by nothing.
  if (fresh && state.dkim.keyId !== fresh.keyId) await keys.remove(fresh.keyId);
  return state;
}

/** The largest configured limit: the directory stores limits as PostgreSQL integers. */
export const MAX_BLOCK_LIMIT = 2_147_483_647;

export async function setBlockLimits(store: EventStore, motorBlockId: string, limits: RateLimits, now: Date): Promise<void> {
  for (const [k, v] of Object.entries(limits)) {
    // A larger value would be appended, then stop the directory projection on every retry.
    if (!Number.isInteger(v) || v < 1 || v > MAX_BLOCK_LIMIT) throw fail('validation_error', 422, `--${k} must be an integer from 1 to ${MAX_BLOCK_LIMIT}`);
  }
  if (limits.burst > limits.hourly || limits.hourly > limits.daily) throw fail('validation_error', 422, 'limits must satisfy burst <= hourly <= daily');
  const stream = streamName('motorBlock', motorBlockId);
  const existing = await store.readStream(stream);
  if (existing.length === 0 || existing[0].type !== 'MotorBlockCreated') throw fail('not_found', 404, `No Motor Block ${motorBlockId}`);
  await store.append(stream, [toEventData(newId(), { type: 'MotorBlockLimitsSet', data: { motorBlockId, limits, setAt: now.toISOString() } }, { actor: 'cli' })], {
    expectedRevision: existing[existing.length - 1].revision,
  });
}

/**
 * An operator stops or restarts a block's sending (`npm run cli -- block deactivate|reactivate`),
 * e.g. on abuse: `MotorBlockDeactivated` / `MotorBlockReactivated` with `byOperator`, for any block
 * type, without the account's confirmation or grant. A block the operator stopped is `suspended`:
 * the account's own reactivate is refused (403 motor_block_suspended) until the operator
 * reactivates it. A reactivation does not check the domain: a send still does. `changed` is false
 * when the block was already in that state.
 */
export async function setBlockActive(store: EventStore, motorBlockId: string, active: boolean, now: Date): Promise<{ motorBlockId: string; status: 'active' | 'inactive'; changed: boolean }> {
  const command: MotorBlockCommand = active ? { type: 'LiftMotorBlockSuspension', data: { now } } : { type: 'SuspendMotorBlock', data: { now } };
  const { appended } = await decideOnBlock(store, 'cli', motorBlockId, async (state) => {
    // Every operator command answers an unknown id with the CLI's own not_found.
    if (state === null || state.status === 'deleted') throw fail('not_found', 404, `No Motor Block ${motorBlockId}`);
    return command;
  });
  return { motorBlockId, status: active ? 'active' : 'inactive', changed: appended };
}

/**
 * An operator moves an account to another plan tier (`npm run cli -- account set-plan`), e.g. after
 * an upgrade: `AccountPlanChanged` on `account-<id>`, decided on the stream and appended at the
 * revision read (a concurrent append, such as a sandbox provision, makes it decide again).
 * `knownPlans`: the names of config.plans. `changed` is false when the account was on that plan
 * already (nothing appended). The directory applies it; readers follow within their cache's TTL.
 */
export async function setAccountPlan(
  store: EventStore, accountId: string, plan: string, knownPlans: readonly string[], now: Date,
): Promise<{ accountId: string; plan: string; previousPlan: string; changed: boolean }> {
  let previousPlan = '';
  const { appended } = await decideOnStream(store, streamName('account', accountId), {
    actor: 'cli', attempts: 5, exhausted: conflictAfterRetries('account_conflict', 'The account'),
  }, (recorded) => {
    const state = foldPlan(eventsOf<AccountPlanEvent>(recorded, ACCOUNT_PLAN_EVENTS));
    // Every operator command answers an unknown id with the CLI's own not_found.
    if (state === null) throw fail('not_found', 404, `No account ${accountId}`);
    previousPlan = state.plan;
    return decideChangePlan(state, { plan, knownPlans, now });
  });
  return { accountId, plan, previousPlan, changed: appended.length > 0 };
}
