import { randomBytes } from 'node:crypto';
import type { Knex } from 'knex';
import type { EventStore } from '../../domain/eventStore';
import { streamName } from '../../domain/eventStore';
import { decideOnBlock } from '../blocks/grants';
import type { MotorBlockCommand } from '../../domain/motorBlock/motorBlock';
import { generateApiKey, generateSmtpPassword } from '../../domain/credentials/apiKeys';
import { SCOPES } from '../../domain/credentials/scopes';
import { fail } from '../../domain/errors';
import { toEventData, type DkimAlgorithm, type DomainEvent, type RateLimits } from '../../domain/events';
import { newId } from '../../domain/ids';
import { isValidAddress } from '../../domain/message/sendRules';
import type { KeyStore } from '../../infra/keys/keyStore';
import { generateDkimKey } from '../../workers/delivery/dkim';
import { dkimRecordName, ownershipRecordName, ownershipRecordValue, spfInclude } from '../../domain/sendingDomain/records';
import { MAX_DOMAIN_NAME_LENGTH } from '../../domain/sendingDomain/sendingDomain';
import { ACCOUNT_PLAN_EVENTS, decideChangePlan, foldPlan, type AccountPlanEvent } from '../../domain/account/plan';
import { newAccountBlocks } from '../../domain/account/blocks';
import { conflictAfterRetries, decideOnStream, eventsOf } from '../decideOnStream';
import { findAccountByEmail } from '../../projections/directory/queries';
import { systemIds } from '../auth/systemMail';

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

const DOMAIN_RE = /^(?=.{1,253}$)(?!-)[a-z0-9-]{1,63}(?<!-)(\.(?!-)[a-z0-9-]{1,63}(?<!-))+$/;

export const dkimSelectorFor = (now: Date): string => `motor${now.toISOString().slice(0, 10).replace(/-/g, '')}`;

/**
 * The records to publish, in the order the CLI has always printed them (DKIM, SPF, DMARC), then
 * the ownership record when the domain has a token (docs/DOMAINS.md).
 */
export function dnsRecordsFor(domain: string, selector: string, dkimTxt: string, serviceDomain: string, ownershipToken?: string): DnsRecord[] {
  return [
    { type: 'TXT', name: dkimRecordName(selector, domain), value: dkimTxt, purpose: 'dkim' },
    { type: 'TXT', name: domain, value: `v=spf1 include:${spfInclude(serviceDomain)} ~all`, purpose: 'spf' },
    { type: 'TXT', name: `_dmarc.${domain}`, value: `v=DMARC1; p=none; rua=mailto:dmarc-reports@${domain}`, purpose: 'dmarc' },
    ...(ownershipToken ? [{ type: 'TXT' as const, name: ownershipRecordName(domain), value: ownershipRecordValue(ownershipToken), purpose: 'ownership' as const }] : []),
  ];
}

export const newSmtpUsername = (): string => `mb_${randomBytes(9).toString('base64url').replace(/[-_]/g, 'x')}`;

/**
 * bootstrap() makes a new account each time; tests and benchmarks rely on that (one email, many
 * fresh databases). The CLI calls this first, on a directory it has caught up, so that an operator
 * who reruns the quick start does not give one owner a second account: an email that has one
 * (from an earlier bootstrap, a dashboard sign-up, or SYSTEM_MAIL_FROM's system account, provisioned
 * or not yet) is refused with 409 account_exists and that account's id (details.accountId).
 * Two bootstraps of one email at the same moment can both pass: it guards against a rerun, not a race.
 */
export async function refuseSecondAccount(db: Knex, email: string, systemMailFrom: string): Promise<void> {
  const wanted = email.trim().toLowerCase();
  if (wanted === systemMailFrom.trim().toLowerCase()) {
    const accountId = systemIds(systemMailFrom).accountId;
    throw fail('account_exists', 409, `${wanted} is SYSTEM_MAIL_FROM, the sender of the service's own mail (system account ${accountId}); bootstrap an account with another address`, { details: { accountId } });
  }
  const existing = await findAccountByEmail(db, wanted);
  if (existing) {
    throw fail('account_exists', 409, `An account with email ${existing.email} exists already: ${existing.id}. bootstrap creates a new account each time; `
      + `for new keys of that account (lost or rotated) use npm run cli -- key create --account ${existing.id}, or key create --block <motorBlockId> (block list shows them), `
      + `then key revoke <old key or prefix>; its plan: account set-plan ${existing.id} <plan>`,
    { details: { accountId: existing.id } });
  }
}

/**
 * `npm run cli -- bootstrap`: a new account for an owner who has none (refuseSecondAccount), on a
 * directory the caller has caught up.
 */
export async function bootstrapOwner(
  deps: { store: EventStore; keys: KeyStore; db: Knex }, input: BootstrapInput & { systemMailFrom: string },
): Promise<BootstrapResult> {
  await refuseSecondAccount(deps.db, input.email, input.systemMailFrom);
  return bootstrap(deps.store, deps.keys, input);
}

export async function bootstrap(store: EventStore, keys: KeyStore, input: BootstrapInput): Promise<BootstrapResult> {
  const email = input.email.trim();
  const domain = input.domain.trim().toLowerCase().replace(/\.$/, '');
  if (!isValidAddress(email)) throw fail('invalid_email', 400, `Not a valid email address: ${input.email}`);
  if (!DOMAIN_RE.test(domain) || domain.length > MAX_DOMAIN_NAME_LENGTH) throw fail('invalid_domain', 400, `Not a valid domain name of at most ${MAX_DOMAIN_NAME_LENGTH} characters: ${input.domain}`);

  const at = input.now.toISOString();
  const accountId = newId();
  const domainId = newId();
  const motorBlockId = newId();
  const dkim = await generateDkimKey(input.dkimAlgorithm);
  const dkimKeyId = newId();
  await keys.put(dkimKeyId, input.dkimAlgorithm, dkim.privateKeyPem);
  const selector = dkimSelectorFor(input.now);
  const ownershipToken = randomBytes(16).toString('hex');
  const blockKey = generateApiKey('block');
  const accountKey = generateApiKey('account');
  const blockKeyId = newId();
  const accountKeyId = newId();

  const append = (stream: string, events: DomainEvent[]) =>
    store.append(stream, events.map((e) => toEventData(newId(), e, { actor: 'cli' })), { expectedRevision: 'no_stream' });

  // The account's list of its blocks starts with it, the block made below on it (docs/BLOCKS.md "Plan limit").
  await append(streamName('account', accountId), [
    { type: 'AccountCreated', data: { accountId, email, plan: input.plan, createdAt: at } }, ...newAccountBlocks(accountId, [motorBlockId], input.now),
  ]);
  const domainEvents: DomainEvent[] = [{
    type: 'DomainAdded',
    data: {
      domainId, accountId, name: domain, dkimSelector: selector, dkimAlgorithm: input.dkimAlgorithm, dkimPublicKey: dkim.publicKeyDnsValue, dkimKeyId,
      ownershipToken, dkimMode: 'txt', addedAt: at,
    },
  }];
  if (input.trustDns) {
    domainEvents.push(
      { type: 'DomainOwnershipVerified', data: { domainId, method: 'trusted', verifiedAt: at } },
      { type: 'DomainDnsChecked', data: { domainId, method: 'trusted', spfConfigured: true, dkimConfigured: true, dmarcConfigured: true, checkedAt: at } },
    );
  }
  await append(streamName('sendingDomain', domainId), domainEvents);
  const smtpUsername = newSmtpUsername();
  const smtp = generateSmtpPassword();
  await append(streamName('motorBlock', motorBlockId), [
    {
      type: 'MotorBlockCreated',
      data: { motorBlockId, accountId, name: input.blockName ?? domain, type: 'general_purpose', domainId, smtpUsername, authMethod: 'smtp_password', createdAt: at },
    },
    { type: 'SmtpPasswordSet', data: { motorBlockId, passwordHash: smtp.passwordHash, setAt: at } },
  ]);
  await append(streamName('apiKey', blockKeyId), [{
    type: 'ApiKeyCreated',
    data: { keyId: blockKeyId, kind: 'block', accountId, motorBlockId, prefix: blockKey.prefix, secretHash: blockKey.secretHash, scopes: [], createdAt: at },
  }]);
  await append(streamName('apiKey', accountKeyId), [{
    type: 'ApiKeyCreated',
    data: { keyId: accountKeyId, kind: 'account', accountId, prefix: accountKey.prefix, secretHash: accountKey.secretHash, scopes: [...SCOPES], createdAt: at },
  }]);

  return {
    accountId, domainId, motorBlockId, apiKey: blockKey.key, accountApiKey: accountKey.key, smtpUsername, smtpPassword: smtp.password,
    dnsRecords: dnsRecordsFor(domain, selector, dkim.dnsTxtValue, input.serviceDomain, ownershipToken),
  };
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
