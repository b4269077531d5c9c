import { randomBytes } from 'node:crypto';
import type { EventStore, RecordedEvent } from '../../domain/eventStore';
import { WrongExpectedRevisionError, streamName } from '../../domain/eventStore';
import { fail } from '../../domain/errors';
import { asDomainEvent, toEventData, type DomainAdded, type DomainEvent, type SandboxHandleClaimed, type SandboxProvisioned } from '../../domain/events';
import { isUuid, newId } from '../../domain/ids';
import {
  ACCOUNT_SANDBOX_EVENTS, SANDBOX_BLOCK_EVENTS, assertConvertible, checkAllowlist, checkChannel, checkHandle, decideClaimHandle, decideConvert, decideProvision,
  decideSetAllowlist, effectiveAllowlist, foldAccount, foldBlock, generatedHandle, sandboxBlockName, sandboxDomainName, MAX_ALLOWLIST, type ProductionType,
} from '../../domain/sandbox/sandbox';
import { refuseBounceDomainForBlock } from '../../domain/sendingDomain/sendingDomain';
import { planOf, type Config } from '../../infra/config';
import type { KeyStore } from '../../infra/keys/keyStore';
import {
  getAccount, getDomain, getSandboxAllowlist, getSandboxOfAccount, hasActiveProductionBlock,
} from '../../projections/directory/queries';
import { generateDkimKey } from '../../workers/delivery/dkim';
import { dkimSelectorFor, newSmtpUsername } from '../admin/bootstrap';
import { checkName } from '../auth/credentials';
import { blocksCountedByPlan, nameTaken } from '../../domain/account/blocks';
import { readAccountBlocks, withBlockNamesLock } from '../blocks/accountBlockList';
import { decideAndAppend, load, type Contention } from '../auth/streams';
import { conflictAfterRetries, decideOnStream, eventsOf } from '../decideOnStream';
import { awaitDirectoryRow, type ReadYourWritesDeps } from '../readYourWrites';

/**
 * The account sandbox (SPEC "Account sandbox", docs/SANDBOX.md), one handler module for both route
 * families: the public API (`/api/public/v1/account/sandbox*`, scope sandbox.manage) and the
 * dashboard (`/api/developer/sandbox*`). Decisions are taken on the streams (domain/sandbox);
 * answers are read from the directory once it reflects what was written.
 */

/** Every try lost to other changes of the sandbox's streams (docs/ERRORS.md "Any route: concurrent changes"). */
const SANDBOX_CONTENTION: Contention = { code: 'sandbox_conflict', subject: 'The sandbox' };

export interface SandboxDeps extends ReadYourWritesDeps {
  store: EventStore; keys: KeyStore;
  /** `inbound.bounceDomain`: no conversion onto a domain at or under BOUNCE_DOMAIN. */
  config: Pick<Config, 'serviceDomain' | 'plans' | 'defaultPlan' | 'accountFallback' | 'inbound'>;
}
export interface SandboxActor { accountId: string; /** Event metadata actor, e.g. `user:<id>` or `token:<id>`. */ actor: string }

export interface SandboxStatus {
  provisioned: boolean;
  handle: string | null;
  /** The service-owned sandbox domain (`sandbox` always true). */
  domain: { id: string; name: string; sandbox: true } | null;
  /** The sandbox block (after conversion: the production block it became); mint tokens for it at POST /api/public/token. */
  motorBlockId: string | null;
  channel: string | null;
  /** Effective outbound allowlist: the account owner's address, then the addresses set with PATCH outbound. Empty before provisioning, null once converted (no restriction). */
  allowlist: string[] | null;
  /** The addresses set with PATCH outbound (without the owner's). */
  outboundAddresses: string[];
  allowlistMax: number;
  allowlistLocked: boolean;
  hasActiveProductionBlock: boolean;
  converted: boolean;
  convertedAt: string | null;
  provisionedAt: string | null;
}

export async function sandboxStatus(deps: Pick<SandboxDeps, 'db' | 'config'>, accountId: string): Promise<SandboxStatus> {
  const [sandbox, account, production] = await Promise.all([
    getSandboxOfAccount(deps.db, accountId), getAccount(deps.db, accountId), hasActiveProductionBlock(deps.db, accountId),
  ]);
  if (!sandbox) {
    return {
      provisioned: false, handle: null, domain: null, motorBlockId: null, channel: null, allowlist: [], outboundAddresses: [], allowlistMax: MAX_ALLOWLIST,
      allowlistLocked: false, hasActiveProductionBlock: production, converted: false, convertedAt: null, provisionedAt: null,
    };
  }
  const [domain, addresses] = await Promise.all([getDomain(deps.db, sandbox.domainId), getSandboxAllowlist(deps.db, sandbox.motorBlockId)]);
  const converted = sandbox.convertedAt !== null;
  const outbound = addresses ?? [];
  return {
    provisioned: true,
    handle: sandbox.handle,
    domain: { id: sandbox.domainId, name: domain?.name ?? sandboxDomainName(sandbox.handle, deps.config.serviceDomain), sandbox: true },
    motorBlockId: sandbox.motorBlockId,
    channel: sandbox.channel,
    allowlist: converted ? null : effectiveAllowlist(account?.email ?? null, outbound),
    outboundAddresses: outbound,
    allowlistMax: MAX_ALLOWLIST,
    allowlistLocked: !converted,
    hasActiveProductionBlock: production,
    converted,
    convertedAt: sandbox.convertedAt ? new Date(sandbox.convertedAt).toISOString() : null,
    provisionedAt: new Date(sandbox.provisionedAt).toISOString(),
  };
}

const accountStream = (accountId: string) => streamName('account', accountId);

async function loadAccount(store: EventStore, accountId: string) {
  const recorded = await store.readStream(accountStream(accountId));
  return { state: accountOf(recorded), expected: recorded.length === 0 ? 'no_stream' as const : recorded[recorded.length - 1].revision };
}

/** The account's sandbox facts from its stream (404 when there is no account). */
function accountOf(recorded: readonly RecordedEvent[]) {
  const state = foldAccount(eventsOf(recorded, ACCOUNT_SANDBOX_EVENTS));
  if (!state.account) throw fail('not_found', 404, 'No such account');
  return state;
}

const handleStream = (handle: string) => streamName('sandboxHandle', handle);
const foldClaim = (events: DomainEvent<'SandboxHandleClaimed'>[]): SandboxHandleClaimed | null => events[0]?.data ?? null;

async function claimHandle(store: EventStore, a: SandboxActor, handle: string, now: Date): Promise<void> {
  await decideAndAppend(store, handleStream(handle), ['SandboxHandleClaimed'], foldClaim,
    (holder) => ({ events: decideClaimHandle(holder, { handle, accountId: a.accountId, now }), result: undefined }), a.actor, SANDBOX_CONTENTION);
}

/** Appends `events` to a new stream; when the stream exists already (a concurrent provision), keeps it. Returns the stream's last revision. */
async function createStreamOnce(store: EventStore, stream: string, events: () => Promise<DomainEvent[]>, actor: string): Promise<bigint> {
  const existing = await store.readStream(stream);
  if (existing.length > 0) return existing[existing.length - 1].revision;
  try {
    const r = await store.append(stream, (await events()).map((e) => toEventData(newId(), e, { actor })), { expectedRevision: 'no_stream' });
    return r.nextExpectedRevision;
  } catch (err) {
    if (!(err instanceof WrongExpectedRevisionError)) throw err;
    const now = await store.readStream(stream);
    return now[now.length - 1].revision;
  }
}

/**
 * The sandbox's domain and block, created from SandboxProvisioned. Every provision call runs it
 * (the first one creates, the others find them), so a provision interrupted between the account
 * append and these completes on the next call.
 */
async function ensureSandboxResources(deps: SandboxDeps, s: SandboxProvisioned, actor: string, now: Date): Promise<{ domainRevision: bigint; blockRevision: bigint }> {
  const at = s.provisionedAt;
  const name = sandboxDomainName(s.handle, deps.config.serviceDomain);
  const domainRevision = await createStreamOnce(deps.store, streamName('sendingDomain', s.domainId), async () => {
    // A DKIM key like any domain's (the service publishes its record under its own zone).
    const dkim = await generateDkimKey('rsa-sha256');
    const dkimKeyId = newId();
    await deps.keys.put(dkimKeyId, 'rsa-sha256', dkim.privateKeyPem);
    const added: DomainAdded = {
      domainId: s.domainId, accountId: s.accountId, name, dkimSelector: dkimSelectorFor(new Date(at)), dkimAlgorithm: 'rsa-sha256',
      dkimPublicKey: dkim.publicKeyDnsValue, dkimKeyId, sandbox: true, addedAt: at,
    };
    return [
      { type: 'DomainAdded', data: added },
      // The sandbox namespace is the service's zone: ownership and DNS are the service's, no lookup.
      { type: 'DomainOwnershipVerified', data: { domainId: s.domainId, method: 'trusted', verifiedAt: at } },
      { type: 'DomainDnsChecked', data: { domainId: s.domainId, method: 'trusted', spfConfigured: true, dkimConfigured: true, dmarcConfigured: true, checkedAt: at } },
    ];
  }, actor);
  return { domainRevision, blockRevision: await ensureSandboxBlock(deps, s, actor, now) };
}

/**
 * The sandbox block is named under the account's block-names lock, on the account's and its
 * blocks' streams, as creates, renames and conversions name theirs (commands/blocks/accountBlockList.ts):
 * a create racing with the provision either sees the sandbox block's name taken or has its own
 * name seen here. The block is on the account's list already (SandboxProvisioned). Once the block
 * exists, nothing is named and no lock is taken.
 */
async function ensureSandboxBlock(deps: SandboxDeps, s: SandboxProvisioned, actor: string, now: Date): Promise<bigint> {
  const stream = streamName('motorBlock', s.motorBlockId);
  const existing = await deps.store.readStream(stream);
  if (existing.length > 0) return existing[existing.length - 1].revision;
  return withBlockNamesLock(deps.db, s.accountId, async (db) => {
    const { blocks } = await readAccountBlocks({ ...deps, db }, s.accountId, actor, now);
    return createStreamOnce(deps.store, stream, async () => [{
      type: 'MotorBlockCreated',
      data: {
        motorBlockId: s.motorBlockId, accountId: s.accountId, name: sandboxBlockName(s.handle, (n) => nameTaken(blocks, n)), type: 'sandbox', domainId: s.domainId,
        smtpUsername: newSmtpUsername(), authMethod: 'smtp_password', grantId: `account:${s.accountId}`, createdAt: s.provisionedAt,
      },
    }], actor);
  });
}

export interface ProvisionBody { handle?: unknown; channel?: unknown }

/** 201 the first time (`created: true`), the existing sandbox with 200 after, also under concurrency. Never returns a credential. */
export async function provisionSandbox(deps: SandboxDeps, a: SandboxActor, body: ProvisionBody, now: Date): Promise<{ created: boolean; status: SandboxStatus }> {
  const given = body.handle === undefined || body.handle === null ? null : checkHandle(body.handle);
  const channel = checkChannel(body.channel);
  const loaded = await loadAccount(deps.store, a.accountId);
  let sandbox = loaded.state.sandbox;
  let created = false;
  // The account row must reflect SandboxProvisioned before the status is read from the directory.
  let accountRevision = loaded.expected;
  if (!sandbox) {
    let handle = given;
    for (let attempt = 0; handle === null; attempt++) {
      const candidate = generatedHandle(randomBytes(10));
      try {
        await claimHandle(deps.store, a, candidate, now);
        handle = candidate;
      } catch (err) {
        if (attempt >= 4) throw err;
      }
    }
    if (given !== null) await claimHandle(deps.store, a, handle, now);
    const domainId = newId();
    const motorBlockId = newId();
    const d = await decideOnStream(deps.store, accountStream(a.accountId), {
      actor: a.actor, attempts: 8, exhausted: conflictAfterRetries(SANDBOX_CONTENTION.code, SANDBOX_CONTENTION.subject),
    }, (recorded) => {
      const decision = decideProvision(accountOf(recorded), { accountId: a.accountId, handle, domainId, motorBlockId, channel, now });
      sandbox = decision.sandbox;
      return decision.events;
    });
    accountRevision = d.revision ?? 'no_stream';
    created = d.appended.length > 0;
  }
  const revisions = await ensureSandboxResources(deps, sandbox!, a.actor, now);
  await Promise.all([
    awaitDirectoryRow(deps, 'sandbox.provision', 'domains', sandbox!.domainId, revisions.domainRevision),
    awaitDirectoryRow(deps, 'sandbox.provision', 'motor_blocks', sandbox!.motorBlockId, revisions.blockRevision),
    typeof accountRevision === 'bigint' ? awaitDirectoryRow(deps, 'sandbox.provision', 'accounts', a.accountId, accountRevision) : Promise.resolve(true),
  ]);
  return { created, status: await sandboxStatus(deps, a.accountId) };
}

async function requireSandbox(store: EventStore, accountId: string): Promise<SandboxProvisioned> {
  const { state } = await loadAccount(store, accountId);
  if (!state.sandbox) {
    throw fail('sandbox_not_provisioned', 404, 'This account has no sandbox', {
      nextAction: 'Provision one: POST /api/public/v1/account/sandbox/provision (or POST /api/developer/sandbox/provision)',
    });
  }
  return state.sandbox;
}

/** PATCH /api/developer/sandbox/outbound: replaces the addresses of the allowlist (the owner's address stays on it). */
export async function setOutboundAllowlist(deps: SandboxDeps, a: SandboxActor, body: { addresses?: unknown }, now: Date): Promise<SandboxStatus> {
  const addresses = checkAllowlist(body.addresses);
  const sandbox = await requireSandbox(deps.store, a.accountId);
  const stream = streamName('motorBlock', sandbox.motorBlockId);
  await decideAndAppend(deps.store, stream, SANDBOX_BLOCK_EVENTS, foldBlock,
    (s) => ({ events: decideSetAllowlist(s, { accountId: a.accountId, addresses, now }), result: undefined }), a.actor, SANDBOX_CONTENTION);
  const last = await deps.store.readStream(stream);
  await awaitDirectoryRow(deps, 'sandbox.set_allowlist', 'motor_blocks', sandbox.motorBlockId, last[last.length - 1].revision);
  return sandboxStatus(deps, a.accountId);
}

export interface ConvertBody { domainId?: unknown; name?: unknown; type?: unknown }
export interface ConvertResult {
  motorBlockId: string;
  name: string;
  type: ProductionType;
  domain: { id: string; name: string };
  previousSmtpUsername: string;
  smtpUsername: string;
  credentialChanges: { smtpUsernameChanged: true; smtpPasswordChanged: false; apiKeysChanged: false; authMethodChanged: false; grantChanged: false };
  integrationActionRequired: string;
  allowlistLocked: false;
  convertedAt: string;
}

const PRODUCTION_TYPES: readonly ProductionType[] = ['transactional', 'general_purpose'];

/**
 * The target: a domain of the account, not at or under the bounce domain (the block becomes a
 * production block on it, as a created one would: docs/BLOCKS.md), ownership verified, not a
 * sandbox domain.
 */
async function conversionTarget(store: EventStore, accountId: string, domainId: string, bounceDomain: string | null): Promise<{ domainId: string; name: string }> {
  const events = (await store.readStream(streamName('sendingDomain', domainId))).map(asDomainEvent);
  const added = events[0]?.type === 'DomainAdded' ? events[0].data : null;
  if (!added || added.accountId !== accountId) {
    throw fail('domain_not_found', 404, 'No such domain on this account', { nextAction: 'Add it first: POST /api/public/v1/domains' });
  }
  refuseBounceDomainForBlock({ id: domainId, name: added.name }, bounceDomain);
  if (added.sandbox) {
    throw fail('domain_not_verified', 409, `${added.name} is a sandbox domain; convert onto a verified domain of your own`, {
      details: { domainId, reason: 'sandbox_domain' }, nextAction: 'Add and verify your domain: POST /api/public/v1/domains, then POST /api/public/v1/domains/{id}/verify',
    });
  }
  if (!events.some((e) => e?.type === 'DomainOwnershipVerified')) {
    throw fail('domain_not_verified', 409, `${added.name} is not verified yet`, {
      details: { domainId, reason: 'not_verified' }, nextAction: `Publish the ownership record, then POST /api/public/v1/domains/${domainId}/verify`,
    });
  }
  return { domainId, name: added.name };
}

/** One-way conversion onto a verified domain: same block (id, password, API keys, auth method, grant), new SMTP username. Never returns a credential. */
export async function convertSandbox(deps: SandboxDeps, a: SandboxActor, body: ConvertBody, now: Date): Promise<ConvertResult> {
  if (body.domainId === undefined || body.domainId === null) throw fail('validation_error', 400, 'domainId is required', { details: { field: 'domainId' } });
  if (!isUuid(body.domainId)) throw fail('invalid_id', 400, 'domainId must be a uuid', { details: { field: 'domainId' } });
  const name = checkName(body.name);
  if (body.type !== undefined && !PRODUCTION_TYPES.includes(body.type as ProductionType)) {
    throw fail('validation_error', 400, 'type must be transactional or general_purpose', { details: { field: 'type' } });
  }
  const type = body.type as ProductionType | undefined;
  const sandbox = await requireSandbox(deps.store, a.accountId);
  const stream = streamName('motorBlock', sandbox.motorBlockId);
  // A converted sandbox answers 409 whatever the target (one-way), before the target is looked at.
  assertConvertible((await load(deps.store, stream, SANDBOX_BLOCK_EVENTS, foldBlock)).state, a.accountId);
  // An id in capitals is the same id (docs/ARCHITECTURE.md "Ids in paths"): streams are named by the lower-case spelling.
  const target = await conversionTarget(deps.store, a.accountId, body.domainId.toLowerCase(), deps.config.inbound.bounceDomain);
  // The block becomes a production block with a production name: the plan limit and the name are
  // checked under the account's block-names lock on the account's and the blocks' streams, as
  // creates (and renames) check them, so a create and a conversion racing cannot both take the last
  // slot or the same name, however far behind the directory is.
  const event = await withBlockNamesLock(deps.db, a.accountId, async (db) => {
    const { plan, blocks } = await readAccountBlocks({ ...deps, db }, a.accountId, a.actor, now);
    const maxBlocks = planOf(deps.config, plan).plan.maxBlocks;
    return decideAndAppend(deps.store, stream, SANDBOX_BLOCK_EVENTS, foldBlock, (s) => {
      const events = decideConvert(s, {
        accountId: a.accountId, target, name, type, newSmtpUsername: newSmtpUsername(), now,
        liveBlocks: blocksCountedByPlan(blocks), maxBlocks, nameTaken: (n) => nameTaken(blocks, n, sandbox.motorBlockId),
      });
      return { events, result: events[0].data };
    }, a.actor, SANDBOX_CONTENTION);
  });
  const last = await deps.store.readStream(stream);
  await awaitDirectoryRow(deps, 'sandbox.convert', 'motor_blocks', sandbox.motorBlockId, last[last.length - 1].revision);
  return {
    motorBlockId: event.motorBlockId, name: event.name, type: event.type, domain: { id: target.domainId, name: target.name },
    previousSmtpUsername: event.previousSmtpUsername, smtpUsername: event.smtpUsername,
    credentialChanges: { smtpUsernameChanged: true, smtpPasswordChanged: false, apiKeysChanged: false, authMethodChanged: false, grantChanged: false },
    integrationActionRequired:
      `Update the SMTP username in your integrations from ${event.previousSmtpUsername} to ${event.smtpUsername}; the old username no longer authenticates. ` +
      'The SMTP password, API keys, auth method and grant are unchanged. Send from an address @' + target.name + '.',
    allowlistLocked: false,
    convertedAt: event.convertedAt,
  };
}
