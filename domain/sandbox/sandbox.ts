import { fail } from '../errors';
import type {
  AccountCreated, DomainEvent, MotorBlockCreated, SandboxConverted, SandboxHandleClaimed, SandboxProvisioned,
} from '../events';
import { isValidAddress } from '../message/sendRules';
import { errors as blockErrors } from '../motorBlock/motorBlock';

/**
 * The developer sandbox (SPEC "Account sandbox", docs/SANDBOX.md): a service-owned domain
 * `<handle>.sandbox.<SERVICE_DOMAIN>` and a locked Motor Block (type `sandbox`) whose recipients
 * are limited to an allowlist until it is converted, one way, onto a verified domain of the account.
 *
 * Three streams decide: `account-<id>` (one SandboxProvisioned per account), `sandboxHandle-<handle>`
 * (the first account to claim a handle holds it) and the block's `motorBlock-<id>` (allowlist,
 * conversion). Pure: ids, time and the generated names arrive as arguments.
 */

/** Most addresses PATCH outbound may set (the account owner's address is always allowed on top). */
export const MAX_ALLOWLIST = 25;
export const SANDBOX_CHANNELS = ['agent', 'dashboard', 'cli', 'api'] as const;

const LABEL_RE = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/;

/** A handle is one DNS label (RFC 1035: letters, digits, inner hyphens, 1 to 63), compared lower-case. */
export function checkHandle(handle: unknown): string {
  if (typeof handle !== 'string' || !LABEL_RE.test(handle.trim().toLowerCase())) {
    throw fail('invalid_handle', 400, 'handle must be a DNS label: 1 to 63 letters, digits or inner hyphens', {
      details: { field: 'handle' }, nextAction: 'Pick a handle like "acme-dev", or omit it to get a generated one',
    });
  }
  return handle.trim().toLowerCase();
}

export function checkChannel(channel: unknown): string {
  if (channel === undefined || channel === null) return 'agent';
  if (typeof channel !== 'string' || !(SANDBOX_CHANNELS as readonly string[]).includes(channel)) {
    throw fail('validation_error', 400, `channel must be one of ${SANDBOX_CHANNELS.join(', ')}`, { details: { field: 'channel' } });
  }
  return channel;
}

/** `sbx-` and ten base-32 characters drawn from `randomBytes` (given by the caller). */
export function generatedHandle(randomBytes: Uint8Array): string {
  const alphabet = 'abcdefghijklmnopqrstuvwxyz234567';
  let s = '';
  for (let i = 0; i < 10; i++) s += alphabet[randomBytes[i % randomBytes.length] % 32];
  return `sbx-${s}`;
}

export const sandboxDomainName = (handle: string, serviceDomain: string): string => `${handle}.sandbox.${serviceDomain}`;

/**
 * The sandbox block's name: `Sandbox <handle>`, unless another block of the account has that name
 * (compared as block names are, by `taken`); then the first free of `Sandbox <handle> (2)`, `(3)`...
 * The caller chose the handle, not the block's name, so a clash renames rather than refuses.
 */
export function sandboxBlockName(handle: string, taken: (name: string) => boolean): string {
  const base = `Sandbox ${handle}`;
  if (!taken(base)) return base;
  for (let n = 2; ; n++) if (!taken(`${base} (${n})`)) return `${base} (${n})`;
}

// ---------------------------------------------------------------- account-<id>
export interface AccountSandboxState {
  account: AccountCreated | null;
  sandbox: SandboxProvisioned | null;
}
export const ACCOUNT_SANDBOX_EVENTS = ['AccountCreated', 'SandboxProvisioned'] as const;
type AccountSandboxEvent = DomainEvent<'AccountCreated' | 'SandboxProvisioned'>;

export function evolveAccount(state: AccountSandboxState, e: AccountSandboxEvent): AccountSandboxState {
  switch (e.type) {
    case 'AccountCreated': return { ...state, account: e.data };
    case 'SandboxProvisioned': return state.sandbox ? state : { ...state, sandbox: e.data };
  }
}
export const foldAccount = (events: AccountSandboxEvent[]): AccountSandboxState => events.reduce(evolveAccount, { account: null, sandbox: null });

/** Provision: one sandbox per account; the repeat call gets the existing one (`created: false`). */
export function decideProvision(
  state: AccountSandboxState,
  cmd: { accountId: string; handle: string; domainId: string; motorBlockId: string; channel: string; now: Date },
): { events: DomainEvent<'SandboxProvisioned'>[]; sandbox: SandboxProvisioned; created: boolean } {
  if (state.sandbox) return { events: [], sandbox: state.sandbox, created: false };
  const sandbox: SandboxProvisioned = {
    accountId: cmd.accountId, handle: cmd.handle, domainId: cmd.domainId, motorBlockId: cmd.motorBlockId, channel: cmd.channel, provisionedAt: cmd.now.toISOString(),
  };
  return { events: [{ type: 'SandboxProvisioned', data: sandbox }], sandbox, created: true };
}

// ---------------------------------------------------------------- sandboxHandle-<handle>
/** The claim is the stream's first event; later claims by the same account are no-ops, by others 409. */
export function decideClaimHandle(holder: SandboxHandleClaimed | null, cmd: { handle: string; accountId: string; now: Date }): DomainEvent<'SandboxHandleClaimed'>[] {
  if (holder) {
    if (holder.accountId === cmd.accountId) return [];
    throw fail('sandbox_handle_taken', 409, `The sandbox handle "${cmd.handle}" is taken`, {
      details: { field: 'handle' }, nextAction: 'Choose another handle, or omit it to get a generated one',
    });
  }
  return [{ type: 'SandboxHandleClaimed', data: { handle: cmd.handle, accountId: cmd.accountId, claimedAt: cmd.now.toISOString() } }];
}

// ---------------------------------------------------------------- motorBlock-<id> (the sandbox block)
export interface SandboxBlockState {
  created: MotorBlockCreated | null;
  smtpUsername: string | null;
  allowlist: string[];
  converted: SandboxConverted | null;
}
export const SANDBOX_BLOCK_EVENTS = ['MotorBlockCreated', 'SandboxAllowlistUpdated', 'SandboxConverted'] as const;
type SandboxBlockEvent = DomainEvent<'MotorBlockCreated' | 'SandboxAllowlistUpdated' | 'SandboxConverted'>;

export function evolveBlock(state: SandboxBlockState, e: SandboxBlockEvent): SandboxBlockState {
  switch (e.type) {
    case 'MotorBlockCreated': return { ...state, created: e.data, smtpUsername: e.data.smtpUsername };
    case 'SandboxAllowlistUpdated': return { ...state, allowlist: e.data.addresses };
    case 'SandboxConverted': return { ...state, converted: e.data, smtpUsername: e.data.smtpUsername };
  }
}
export const foldBlock = (events: SandboxBlockEvent[]): SandboxBlockState =>
  events.reduce(evolveBlock, { created: null, smtpUsername: null, allowlist: [], converted: null });

const notProvisioned = () => fail('sandbox_not_provisioned', 404, 'This account has no sandbox', {
  nextAction: 'Provision one: POST /api/public/v1/account/sandbox/provision (or POST /api/developer/sandbox/provision)',
});
const alreadyConverted = (c: SandboxConverted) => fail('sandbox_already_converted', 409, 'The sandbox was already converted to a production block; conversion is one-way', {
  details: { motorBlockId: c.motorBlockId, convertedAt: c.convertedAt },
  nextAction: 'Manage the block through /api/public/v1/account/motor-blocks',
});

/** Addresses as given: a list of valid, distinct (case-insensitive) addresses, at most MAX_ALLOWLIST. */
export function checkAllowlist(addresses: unknown): string[] {
  if (!Array.isArray(addresses)) throw fail('validation_error', 400, 'addresses must be an array of email addresses', { details: { field: 'addresses' } });
  if (addresses.length > MAX_ALLOWLIST) {
    throw fail('allowlist_too_large', 400, `The allowlist holds at most ${MAX_ALLOWLIST} addresses (got ${addresses.length})`, { details: { field: 'addresses', max: MAX_ALLOWLIST } });
  }
  const invalid = addresses.filter((a) => typeof a !== 'string' || !isValidAddress(a.trim()));
  if (invalid.length > 0) {
    // JSON for what is not a string: String() of an object from JSON may throw ({"toString": 1}).
    const shown = invalid.map((a) => (typeof a === 'string' ? a : JSON.stringify(a)));
    throw fail('invalid_email', 400, 'Not valid email addresses: ' + shown.join(', ').slice(0, 300), { details: { field: 'addresses', invalid } });
  }
  return [...new Set((addresses as string[]).map((a) => a.trim().toLowerCase()))];
}

export function decideSetAllowlist(state: SandboxBlockState, cmd: { accountId: string; addresses: string[]; now: Date }): DomainEvent<'SandboxAllowlistUpdated'>[] {
  if (!state.created || state.created.accountId !== cmd.accountId) throw notProvisioned();
  if (state.converted) throw alreadyConverted(state.converted);
  return [{ type: 'SandboxAllowlistUpdated', data: { motorBlockId: state.created.motorBlockId, accountId: cmd.accountId, addresses: cmd.addresses, updatedAt: cmd.now.toISOString() } }];
}

/** The sandbox block of this account, not converted yet; returns its current SMTP username. */
export function assertConvertible(state: SandboxBlockState, accountId: string): string {
  if (!state.created || state.created.accountId !== accountId || !state.smtpUsername) throw notProvisioned();
  if (state.converted) throw alreadyConverted(state.converted);
  return state.smtpUsername;
}

export type ProductionType = 'transactional' | 'general_purpose';

/**
 * Convert: the target is a domain of the account, verified and not a sandbox domain (checked by
 * the caller on the domain's stream and passed as `target`). The block keeps its id, password, API
 * keys, auth method and grant; its name, type, domain and SMTP username change. The block becomes
 * a production block, which the plan's `maxBlocks` counts (the sandbox block does not): as for a
 * create, `liveBlocks` (the account's blocks the limit counts) must be under `maxBlocks`. The name
 * (given, or the domain's) must be free in the account, as for a created or renamed block:
 * `nameTaken` says whether another block of the account has it.
 */
export function decideConvert(
  state: SandboxBlockState,
  cmd: {
    accountId: string; target: { domainId: string; name: string }; name: string | undefined; type: ProductionType | undefined; newSmtpUsername: string; now: Date;
    liveBlocks: number; maxBlocks: number; nameTaken: (name: string) => boolean;
  },
): DomainEvent<'SandboxConverted'>[] {
  const smtpUsername = assertConvertible(state, cmd.accountId);
  if (cmd.liveBlocks >= cmd.maxBlocks) throw blockErrors.limitReached(cmd.maxBlocks);
  const name = cmd.name ?? cmd.target.name;
  if (cmd.nameTaken(name)) throw blockErrors.nameConflict(name);
  return [{
    type: 'SandboxConverted',
    data: {
      motorBlockId: state.created!.motorBlockId, accountId: cmd.accountId, domainId: cmd.target.domainId,
      name, type: cmd.type ?? 'general_purpose',
      previousSmtpUsername: smtpUsername, smtpUsername: cmd.newSmtpUsername, convertedAt: cmd.now.toISOString(),
    },
  }];
}

/** The effective allowlist: the account owner's address, then the addresses set with PATCH outbound. */
export function effectiveAllowlist(ownerEmail: string | null, addresses: readonly string[]): string[] {
  const out = ownerEmail ? [ownerEmail.toLowerCase()] : [];
  for (const a of addresses) if (!out.includes(a.toLowerCase())) out.push(a.toLowerCase());
  return out;
}

/** Recipients a send may not reach: those not on `allowed` (compared case-insensitively). */
export function refusedRecipients(to: readonly string[], allowed: Iterable<string>): string[] {
  const set = new Set([...allowed].map((a) => a.toLowerCase()));
  return to.filter((r) => !set.has(r.trim().toLowerCase()));
}
