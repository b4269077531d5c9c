/**
 * Operator CLI: `npm run cli -- <command>`. Uses DATABASE_URL (or the embedded PostgreSQL of
 * `npm start`) and EVENTSTORE_URL like the service. Every command prints JSON with --json; key
 * create (the key on a line of its own) and key list (a line per key) print a short human form
 * without it.
 *
 *   bootstrap --email <owner> --domain <domain> [--trust-dns] [--dkim rsa|ed25519] [--block-name <name>] [--json]
 *   block set-limits <motorBlockId> --burst N --hourly N --daily N [--json]
 *   block list [--json]
 *   block deactivate|reactivate <motorBlockId> [--json]
 *   account set-plan <accountId> <plan> [--json]
 *   oauth-client create --account <accountId> --name <name> --redirect-uri <uri> [--redirect-uri <uri> ...] [--json]
 *   oauth rotate-signing-key [--json]
 *   dns managed-dkim [--json]
 *   key create --block <motorBlockId> [--json]
 *   key create --account <accountId> [--scopes a,b,...] [--json]
 *   key revoke <apiKey | mk_live_<prefix> | prefix> [--json]
 *   key list (--account <accountId> | --block <motorBlockId>) [--include-revoked] [--json]
 *   status [--json]
 */
import { parseArgs } from 'node:util';
import type { Knex } from 'knex';
import type { EventStore } from '../domain/eventStore';
import { ConfigError, loadConfig, type Config } from '../infra/config';
import { KeyStore } from '../infra/keys/keyStore';
import { fail, isDomainError } from '../domain/errors';
import { isUuid } from '../domain/ids';
import { MAX_BLOCK_LIMIT, bootstrapOwner, setAccountPlan, setBlockActive, setBlockLimits } from '../commands/admin/bootstrap';
import { directoryProjection } from '../projections/directory/projection';
import { DIRECTORY_SCHEMA, findApiKeyByPrefix, getAccount, getBlock, managedDkimRecords } from '../projections/directory/queries';
import { zoneLines } from '../commands/domains/serviceZone';
import { parseApiKey } from '../domain/credentials/apiKeys';
import { catchUpUntil, openStorage } from './storage';
import { registerClient } from '../commands/oauth/clients';
import { createAccountKeyAsOperator, createBlockKeyAsOperator, listKeysAsOperator, revokeKeyAsOperator, type OperatorKey } from '../commands/auth/credentials';
import { accountsProjection } from '../projections/accounts/projection';
import { rotateAgentSigningKey } from '../commands/oauth/agentTokens';
import { streamName } from '../domain/eventStore';
import { isDatabaseTimeout, QUERY_TIMEOUT_MS, QueryTimeoutError } from '../infra/db';
import { unavailableCode } from '../infra/unavailable';
import { ProjectionRunner, migrateProjection } from '../projections/runner';
import { systemStatus } from './status';
import { findRedis } from '../infra/embedded';

const USAGE = `Usage: npm run cli -- <command>

  bootstrap --email <owner> --domain <domain> [--trust-dns] [--dkim rsa|ed25519] [--block-name <name>] [--json]
      Creates an account, its sending domain (with a DKIM key), a Motor Block, a block API key and an
      account API key. --trust-dns marks ownership, SPF and DKIM as configured without a DNS check.
      --domain is checked as POST /domains checks it: exit 1, invalid_domain, or domain_reserved for
      SERVICE_DOMAIN, BOUNCE_DOMAIN or a name under one.
      Once per owner: an email that has an account already (any case; a dashboard account, one
      being bootstrapped at the same moment, or SYSTEM_MAIL_FROM too) is refused with exit 1,
      account_exists and that accountId (new keys for it: key create). The owner signs in to the
      dashboard by signing up with the same email. A bootstrap cut off before it printed is
      finished by running it again: the same account, the --domain given now, new keys; the keys
      and SMTP password the cut run made are revoked (keys from key create stay).
  block set-limits <motorBlockId> --burst N --hourly N --daily N [--json]
      Sets the block's configured send limits (per minute, hour, UTC day).
  block list [--json]
      Lists every Motor Block with its account, domain and status.
  block deactivate <motorBlockId> [--json]
  block reactivate <motorBlockId> [--json]
      Stops (sends refused with 403 motor_block_inactive, campaigns pause) or restarts a block's
      sending, whatever its type, e.g. on abuse. A block the operator stopped cannot be reactivated
      from the account (403 motor_block_suspended). Prints the status and whether it changed.
  account set-plan <accountId> <plan> [--json]
      Moves an account to another plan tier (free, starter, pro, enterprise or the default plan,
      PLAN_DEFAULT_NAME), e.g. after an upgrade: its account-wide and block ceilings, retention,
      maxBlocks and the Free-plan recipient rule follow (running API and SMTP processes within
      their 2 s directory cache). Prints the plan, the previous plan and whether it changed (the
      plan it is on already changes nothing). An unknown plan: exit 1, unknown_plan.
  oauth-client create --account <accountId> --name <name> --redirect-uri <uri> [--redirect-uri <uri> ...] [--json]
      Registers an OAuth 2.0 client of the SMTP authorization server (docs/OAUTH.md); prints its
      client_id and its client_secret, shown this once (only a hash is stored).
  oauth rotate-signing-key [--json]
      Makes a new signing key for agent access tokens (docs/OAUTH.md "Signing keys"). Tokens signed
      with the previous key keep working until they expire: it stays in the JWKS for 65 minutes.
  dns managed-dkim [--json]
      Prints the DKIM TXT records the service's own DNS must serve for cname_managed domains
      (docs/DOMAINS.md), as records and as zone-file lines. Re-run after every key rotation.
  key create --block <motorBlockId> [--json]
  key create --account <accountId> [--scopes a,b,...] [--json]
      Issues a new Motor Block API key (mk_live_..., for POST /v1/send) or account API key
      (ak_live_..., for minting public bearer tokens), e.g. to replace a key lost after bootstrap
      or to rotate one: create, move the app over, then key revoke the old one. --scopes: the
      scopes the account key may grant (default all, as bootstrap gives). The key is printed this
      once (only its hash is stored). An unknown or deleted block: exit 1, motor_block_not_found;
      an unknown account: exit 1, not_found; an unknown scope: exit 1, validation_error.
  key revoke <apiKey | mk_live_<prefix> | ak_live_<prefix> | prefix> [--json]
      Revokes an API key of any account (e.g. one reported leaked), named by the whole key or its
      prefix. Requests with it are refused (401) from then on. Prints the key's id, account and block.
  key list (--account <accountId> | --block <motorBlockId>) [--include-revoked] [--json]
      Lists an account's API keys (its account keys and the block keys of each of its blocks) or one
      block's, oldest first, to find the one to key revoke: e.g. the keys of a bootstrap cut off
      before it printed them, or every key of an account after a leak. One line per key: its public
      part (mk_live_<prefix> or ak_live_<prefix>, as key revoke takes it), kind, block, created,
      active or revoked. Revoked keys only with --include-revoked. Never a secret or its hash.
      --json: {"keys": [{keyId, kind, prefix, name, accountId, motorBlockId, scopes (account keys),
      createdAt, revoked, revokedAt}]}. An unknown account: exit 1, not_found; an unknown or
      deleted block: exit 1, motor_block_not_found.
  status [--json]
      Whether the event store and Redis answer, how far behind the log each read model is, the
      jobs of each queue by state, and which process holds each log follower's and each
      projection's lease (leases: its backend pid, application_name motor-<roles>@<host>:<pid>,
      client address, session start; held false when no process runs that work). Exits 1 when
      the store or Redis cannot be reached or a read model cannot be read.
`;

class UsageError extends Error {}

/** A result with a short human form, printed when --json is not given (other results print as JSON either way). */
class Described {
  constructor(readonly value: unknown, readonly text: string) {}
}

async function withServices<T>(config: Config, fn: (s: Services) => Promise<T>): Promise<T> {
  const { db, store, close } = await openStorage(config, 'motor-cli');
  const keys = new KeyStore(db, config.keyEncryptionKey);
  try {
    await keys.init();
    await migrateProjection(db, directoryProjection);
    const runner = new ProjectionRunner(db, store, directoryProjection);
    return await fn({ db, store, keys, catchUp: () => runner.catchUp(), until: (done) => catchUpUntil(runner, done) });
  } finally {
    await close();
  }
}
interface Services {
  db: Knex;
  store: EventStore;
  keys: KeyStore;
  catchUp: () => Promise<number>;
  /** Catches the directory up until `done` holds (read-your-writes). */
  until: (done: () => Promise<boolean>) => Promise<void>;
}

function positiveInt(name: string, v: string | undefined): number {
  const n = Number(v);
  if (v === undefined || !Number.isInteger(n) || n < 1 || n > MAX_BLOCK_LIMIT) throw new UsageError(`--${name} must be an integer from 1 to ${MAX_BLOCK_LIMIT}`);
  return n;
}

async function run(argv: string[], config: Config): Promise<unknown> {
  const [command, sub, ...rest] = argv;
  if (command === 'bootstrap') {
    const { values } = parseArgs({
      args: argv.slice(1),
      options: {
        email: { type: 'string' }, domain: { type: 'string' }, 'trust-dns': { type: 'boolean', default: false },
        dkim: { type: 'string', default: 'rsa' }, 'block-name': { type: 'string' }, json: { type: 'boolean', default: false },
      },
      strict: true,
    });
    if (!values.email || !values.domain) throw new UsageError('bootstrap needs --email and --domain');
    if (values.dkim !== 'rsa' && values.dkim !== 'ed25519') throw new UsageError('--dkim is rsa or ed25519');
    return withServices(config, async (s) => {
      // Before anything is stored: the directory must show every account made so far.
      await s.catchUp();
      // Until the directory shows the keys, the bootstrap is unfinished: cut off here, nothing was
      // printed, and the rerun revokes these keys and this SMTP password.
      const shown = async (result: { accountApiKey: string }) => {
        const prefix = parseApiKey(result.accountApiKey)!.prefix;
        await s.until(async () => (await findApiKeyByPrefix(s.db, prefix)) !== null);
      };
      return bootstrapOwner({ ...s, beforeFinish: shown }, {
        email: values.email!, domain: values.domain!, trustDns: values['trust-dns']!, dkimAlgorithm: values.dkim === 'ed25519' ? 'ed25519-sha256' : 'rsa-sha256',
        blockName: values['block-name'], plan: config.defaultPlan.name, serviceDomain: config.serviceDomain, systemMailFrom: config.systemMailFrom,
        bounceDomain: config.inbound.bounceDomain, now: new Date(),
      });
    });
  }
  if (command === 'block' && sub === 'set-limits') {
    const { values, positionals } = parseArgs({
      args: rest,
      options: { burst: { type: 'string' }, hourly: { type: 'string' }, daily: { type: 'string' }, json: { type: 'boolean', default: false } },
      allowPositionals: true,
      strict: true,
    });
    if (!isUuid(positionals[0])) throw new UsageError('block set-limits needs a Motor Block id (uuid)');
    const id = positionals[0].toLowerCase();
    const limits = { burst: positiveInt('burst', values.burst), hourly: positiveInt('hourly', values.hourly), daily: positiveInt('daily', values.daily) };
    return withServices(config, async (s) => {
      await setBlockLimits(s.store, id, limits, new Date());
      await s.until(async () => (await getBlock(s.db, id))?.limits.daily === limits.daily);
      return { motorBlockId: id, limits };
    });
  }
  if (command === 'block' && (sub === 'deactivate' || sub === 'reactivate')) {
    const { positionals } = parseArgs({ args: rest, options: { json: { type: 'boolean', default: false } }, allowPositionals: true, strict: true });
    const id = positionals[0];
    if (!isUuid(id)) throw new UsageError(`block ${sub} needs a Motor Block id (uuid)`);
    return withServices(config, async (s) => {
      const r = await setBlockActive(s.store, id.toLowerCase(), sub === 'reactivate', new Date());
      await s.until(async () => (await getBlock(s.db, r.motorBlockId))?.status === r.status);
      return r;
    });
  }
  if (command === 'account' && sub === 'set-plan') {
    const { positionals } = parseArgs({ args: rest, options: { json: { type: 'boolean', default: false } }, allowPositionals: true, strict: true });
    const [id, plan] = positionals;
    if (!isUuid(id)) throw new UsageError('account set-plan needs an account id (uuid)');
    if (!plan || positionals.length > 2) throw new UsageError('account set-plan needs an account id and a plan name');
    return withServices(config, async (s) => {
      const r = await setAccountPlan(s.store, id.toLowerCase(), plan, Object.keys(config.plans), new Date());
      await s.until(async () => (await getAccount(s.db, r.accountId))?.plan === r.plan);
      return r;
    });
  }
  if (command === 'block' && sub === 'list') {
    return withServices(config, async (s) => {
      await s.catchUp();
      const rows = await s.db.withSchema(DIRECTORY_SCHEMA).table('motor_blocks as b')
        .join(s.db.raw('?? as d', [`${DIRECTORY_SCHEMA}.domains`]), 'd.id', 'b.domain_id')
        .select('b.id', 'b.account_id', 'b.name', 'b.type', 'b.status', 'd.name as domain', 'b.limit_burst', 'b.limit_hourly', 'b.limit_daily')
        .orderBy('b.created_at');
      return rows.map((r) => ({
        motorBlockId: r.id, accountId: r.account_id, name: r.name, type: r.type, status: r.status, domain: r.domain,
        limits: { burst: r.limit_burst ?? config.defaultPlan.burst, hourly: r.limit_hourly ?? config.defaultPlan.hourly, daily: r.limit_daily ?? config.defaultPlan.daily },
      }));
    });
  }
  if (command === 'oauth-client' && sub === 'create') {
    const { values } = parseArgs({
      args: rest,
      options: { account: { type: 'string' }, name: { type: 'string' }, 'redirect-uri': { type: 'string', multiple: true }, json: { type: 'boolean', default: false } },
      strict: true,
    });
    if (!isUuid(values.account)) throw new UsageError('oauth-client create needs --account <accountId> (uuid)');
    if (!values.name) throw new UsageError('oauth-client create needs --name');
    if (!values['redirect-uri']?.length) throw new UsageError('oauth-client create needs at least one --redirect-uri');
    return withServices(config, async (s) => {
      const accountId = values.account!.toLowerCase();
      const account = await s.store.readStream(streamName('account', accountId));
      // Every operator command answers an unknown id with the CLI's own not_found (exit 1), not a usage error.
      if (account[0]?.type !== 'AccountCreated') throw fail('not_found', 404, `No account ${values.account}`);
      const c = await registerClient(s.store, { accountId, name: values.name, redirectUris: values['redirect-uri'] }, 'cli', new Date());
      return { client_id: c.clientId, client_secret: c.clientSecret, account_id: c.accountId, name: c.name, redirect_uris: c.redirectUris, created_at: c.createdAt };
    });
  }
  if (command === 'oauth' && sub === 'rotate-signing-key') {
    parseArgs({ args: rest, options: { json: { type: 'boolean', default: false } }, strict: true });
    return withServices(config, (s) => rotateAgentSigningKey(s.keys));
  }
  if (command === 'dns' && sub === 'managed-dkim') {
    parseArgs({ args: rest, options: { json: { type: 'boolean', default: false } }, strict: true });
    return withServices(config, async (s) => {
      await migrateProjection(s.db, directoryProjection);
      await s.catchUp();
      const records = await managedDkimRecords(s.db, config.serviceDomain);
      return { records: records.map((r) => ({ type: 'TXT', name: r.name, value: r.value })), zone: zoneLines(records) };
    });
  }
  if (command === 'key' && sub === 'create') {
    const { values } = parseArgs({
      args: rest,
      options: { block: { type: 'string' }, account: { type: 'string' }, scopes: { type: 'string' }, json: { type: 'boolean', default: false } },
      strict: true,
    });
    if ((values.block === undefined) === (values.account === undefined)) throw new UsageError('key create needs either --block <motorBlockId> or --account <accountId>');
    if (values.block !== undefined && !isUuid(values.block)) throw new UsageError('key create --block needs a Motor Block id (uuid)');
    if (values.account !== undefined && !isUuid(values.account)) throw new UsageError('key create --account needs an account id (uuid)');
    if (values.block !== undefined && values.scopes !== undefined) throw new UsageError('--scopes is for account keys: a block key sends, it grants no scopes');
    // An empty list reaches the route's check and is refused there, as an empty scopes array is.
    const scopes = values.scopes?.split(',').map((x) => x.trim()).filter(Boolean);
    return withServices(config, async (s) => {
      const now = new Date();
      // The block's and the account's streams decide (no directory lag); the directory is waited for
      // after, so that the API and key revoke know the key once it is printed.
      const key: OperatorKey = values.block !== undefined
        ? await createBlockKeyAsOperator(s.store, values.block.toLowerCase(), now)
        : await createAccountKeyAsOperator(s.store, values.account!.toLowerCase(), scopes === undefined ? {} : { scopes }, now);
      await s.until(async () => (await findApiKeyByPrefix(s.db, key.prefix)) !== null);
      const { accountId } = key;
      const out = key.kind === 'block'
        ? { keyId: key.id, apiKey: key.key, kind: key.kind, motorBlockId: key.motorBlockId, accountId }
        : { keyId: key.id, apiKey: key.key, kind: key.kind, accountId, scopes: key.scopes };
      const of = key.kind === 'block' ? `Motor Block ${key.motorBlockId} (account ${accountId})` : `account ${accountId}, scopes ${key.scopes.join(',')}`;
      return new Described(out, `New ${key.kind} API key ${key.id} for ${of}; shown this once, only its hash is stored:\n${key.key}`);
    });
  }
  if (command === 'key' && sub === 'revoke') {
    const { positionals } = parseArgs({ args: rest, options: { json: { type: 'boolean', default: false } }, allowPositionals: true, strict: true });
    const given = positionals[0] ?? '';
    // The whole key, its public part (mk_live_<prefix>, as the dashboard masks it) or the bare prefix.
    const prefix = parseApiKey(given)?.prefix ?? /^(?:(?:mk|ak)_live_)?([0-9A-Za-z]{12})(?:_.*)?$/.exec(given)?.[1];
    if (!prefix) throw new UsageError('key revoke needs an API key or its prefix (12 letters and digits)');
    return withServices(config, async (s) => {
      await s.catchUp();
      const key = await findApiKeyByPrefix(s.db, prefix);
      if (!key) throw fail('not_found', 404, `No API key with prefix ${prefix}`);
      const r = await revokeKeyAsOperator(s.store, key.id, new Date());
      await s.until(async () => (await findApiKeyByPrefix(s.db, prefix))?.revokedAt != null);
      return { ...r, prefix };
    });
  }
  if (command === 'key' && sub === 'list') {
    const { values } = parseArgs({
      args: rest,
      options: { block: { type: 'string' }, account: { type: 'string' }, 'include-revoked': { type: 'boolean', default: false }, json: { type: 'boolean', default: false } },
      strict: true,
    });
    if ((values.block === undefined) === (values.account === undefined)) throw new UsageError('key list needs either --account <accountId> or --block <motorBlockId>');
    if (values.block !== undefined && !isUuid(values.block)) throw new UsageError('key list --block needs a Motor Block id (uuid)');
    if (values.account !== undefined && !isUuid(values.account)) throw new UsageError('key list --account needs an account id (uuid)');
    return withServices(config, async (s) => {
      // The lists are read models: caught up first, as block list and key revoke do, so that keys
      // created just before (key create, a bootstrap cut off) are in them.
      await s.catchUp();
      await migrateProjection(s.db, accountsProjection);
      await new ProjectionRunner(s.db, s.store, accountsProjection).catchUp();
      const of = values.block !== undefined ? { motorBlockId: values.block.toLowerCase() } : { accountId: values.account!.toLowerCase() };
      const all = await listKeysAsOperator(s.store, s.db, of);
      const keys = values['include-revoked'] ? all : all.filter((k) => !k.revoked);
      const owner = 'motorBlockId' in of ? `Motor Block ${of.motorBlockId}` : `account ${of.accountId}`;
      const lines = keys.map((k) => [
        k.prefix, k.kind.padEnd(7), k.motorBlockId ? `block ${k.motorBlockId}` : 'no block'.padEnd(42), `created ${k.createdAt}`, k.revokedAt ? `revoked ${k.revokedAt}` : 'active',
      ].join('  '));
      const hidden = all.length - keys.length;
      const none = `No${values['include-revoked'] ? '' : ' active'} API keys for ${owner}`;
      const note = hidden > 0 ? `\n(${hidden} revoked not shown: --include-revoked)` : '';
      return new Described({ keys }, `${lines.length ? lines.join('\n') : none}${note}`);
    });
  }
  if (command === 'status') {
    const { values } = parseArgs({ args: argv.slice(1), options: { json: { type: 'boolean', default: false }, 'queue-prefix': { type: 'string', default: 'motor' } }, strict: true });
    const { db, store, close } = await openStorage(config, 'motor-cli');
    try {
      const status = await systemStatus({ db, store, redisUrl: await findRedis(config.redisUrl), queuePrefix: values['queue-prefix']! });
      if (!status.ok) process.exitCode = 1;
      return status;
    } finally {
      await close();
    }
  }
  throw new UsageError(command ? `Unknown command: ${[command, sub].filter(Boolean).join(' ')}` : 'No command given');
}

/**
 * What failed, and what an operator can check, for a database or store that is away. A statement
 * past DATABASE_QUERY_TIMEOUT_MS (knex puts the statement's SQL before the message: left out) or
 * a wait for a connection as long says the server is there but not answering; anything else is
 * the store's or the driver's own words (connection refused, host not found, read deadline).
 */
function unavailableMessage(err: unknown, config: Config | undefined): string {
  const ms = config?.databaseQueryTimeoutMs ?? QUERY_TIMEOUT_MS;
  if (err instanceof QueryTimeoutError) {
    return `PostgreSQL did not answer a statement within ${err.timeoutMs} ms (DATABASE_QUERY_TIMEOUT_MS): is the database server frozen or overloaded?`;
  }
  if (isDatabaseTimeout(err)) {
    return `No connection to PostgreSQL came free or was made within ${ms} ms (DATABASE_QUERY_TIMEOUT_MS): is the database server frozen or overloaded?`;
  }
  return `${(err as Error).message} (check DATABASE_URL / EVENTSTORE_URL and that the server is up; it has DATABASE_QUERY_TIMEOUT_MS, ${ms} ms, to answer)`;
}

/**
 * PostgreSQL answered but refused the session: a role or password it does not accept (SQLSTATE
 * class 28), a database that does not exist (3D000). A setting to correct, not a server away.
 */
function refusedSession(err: unknown): string | null {
  const code = (err as { code?: unknown }).code;
  if (typeof code !== 'string' || !/^(28[0-9A-Z]{3}|3D000)$/.test(code)) return null;
  return `PostgreSQL refused the session: ${(err as Error).message} (SQLSTATE ${code}; check the user, password and database in DATABASE_URL)`;
}

async function main(): Promise<void> {
  const argv = process.argv.slice(2);
  if (argv.length === 0 || argv[0] === 'help' || argv.includes('--help')) {
    process.stdout.write(USAGE);
    return;
  }
  const json = argv.includes('--json');
  let config: Config | undefined;
  try {
    config = loadConfig(process.env);
    const result = await run(argv, config);
    // Output is JSON either way but for a Described result; --json is accepted so scripts can say what they rely on.
    if (result instanceof Described && !json) process.stdout.write(`${result.text}\n`);
    else process.stdout.write(`${JSON.stringify(result instanceof Described ? result.value : result, null, 2)}\n`);
  } catch (e) {
    const err = e as Error;
    const unavailable = unavailableCode(e, config?.eventstoreUrl);
    const refused = refusedSession(e);
    /**
     * A refusal: `{error, message, nextAction?, ...fields}` on stdout with --json, else one line
     * `<code>: <message>` (and ` (next: <nextAction>)` when it has one) on stderr; exit 1.
     */
    const refusal = (code: string, message: string, fields: Record<string, unknown> = {}, nextAction?: string) => {
      if (json) process.stdout.write(`${JSON.stringify({ error: code, message, ...(nextAction ? { nextAction } : {}), ...fields })}\n`);
      else process.stderr.write(`${code}: ${message}${nextAction ? ` (next: ${nextAction})` : ''}\n`);
      process.exitCode = 1;
    };
    // parseArgs' own refusals (unknown option, missing value, stray argument) are usage errors too.
    if (e instanceof UsageError || String((err as { code?: unknown }).code).startsWith('ERR_PARSE_ARGS_')) {
      process.stderr.write(`${err.message}\n\n${USAGE}`);
      process.exitCode = 2;
    } else if (e instanceof ConfigError) {
      process.stderr.write(`${err.message}\n`);
      process.exitCode = 2;
    } else if (isDomainError(e)) {
      // The fields a refusal names (account_exists: the accountId) come after the code and the message.
      refusal(e.code, e.message, e.details, e.nextAction);
    } else if (unavailable !== null) {
      // The database (or EventStoreDB) cannot be reached or did not answer in time: one line, not a stack.
      refusal(unavailable, unavailableMessage(e, config));
    } else if (refused !== null) {
      refusal('database_refused', refused);
    } else {
      process.stderr.write(`${err.stack ?? err.message}\n`);
      process.exitCode = 1;
    }
  }
}

void main();
