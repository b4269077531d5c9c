import type { Knex } from 'knex';
import jwt from 'jsonwebtoken';
import { streamName, type EventStore } from '../../domain/eventStore';
import { fail } from '../../domain/errors';
import { isUuid, newId, type Clock } from '../../domain/ids';
import { searchLogs } from '../../projections/messages';
import { EXPORTS_SCHEMA } from '../../projections/exports/projection';
import { maskEmailsInText } from '../../projections/messages/pii';
import { appendAndAwaitRow, type ReadYourWritesDeps } from '../readYourWrites';
import { assertBlockTakesWrites } from '../blocks/deletionGuard';
import { withSetupLock } from '../../infra/db';

/**
 * Exports (SPEC "Exports", docs/EXPORTS.md). A job is asked for on its own stream `export-<id>`
 * (ExportRequested, with the window and filters already resolved), built by the export worker
 * (workers/exports.ts), and read from the `rm_exports` read model. A completed job's file is
 * fetched with a 15-minute download token, never with the bearer token itself.
 */

export interface ExportDeps extends ReadYourWritesDeps { store: EventStore; clock: Clock }
export interface ExportCaller { accountId: string; motorBlockId: string; actor: string }
export interface ExportRequest { from: Date; to: Date | null; query: string | null; status: string | null; includePII: boolean }
export interface DownloadTokenSettings { secret: string; issuer: string; publicBaseUrl: string }

export type ExportStatus = 'queued' | 'completed' | 'failed' | 'expired';
export interface ExportJobView {
  id: string; motorBlockId: string; jobType: 'logs'; status: ExportStatus;
  filters: { from: string; to: string; query: string | null; status: string | null; includePII: boolean };
  rows: number | null; bytes: number | null; truncated: boolean | null; error: string | null;
  requestedAt: string; completedAt: string | null; expiresAt: string | null;
}

/** Most recent jobs the list route shows (SPEC "Up to 50 recent jobs"). */
export const EXPORT_LIST_LIMIT = 50;
export const DOWNLOAD_TOKEN_SECONDS = 15 * 60;
const DOWNLOAD_AUDIENCE = 'motor:export-download';

/** jobType: only `logs` (the value the spec shows); absent means logs. */
export function exportJobType(value: unknown): 'logs' {
  if (value === undefined || value === null || value === 'logs') return 'logs';
  throw fail('invalid_job_type', 400, 'jobType must be "logs"', { details: { field: 'jobType', allowed: ['logs'] } });
}

export async function requestExport(deps: ExportDeps, caller: ExportCaller, request: ExportRequest): Promise<{ jobId: string; status: 'queued' }> {
  // Filters are checked now, by the same parser the worker will use, so a bad query is a 400 here and not a failed job later.
  await searchLogs(deps.db, { motorBlockId: caller.motorBlockId, from: request.from, to: request.to, query: request.query, status: request.status, limit: 1 });
  // Not for a block deleted (404) or being deleted (409): the job's stream would outlive its history.
  await assertBlockTakesWrites(deps.store, caller.motorBlockId);
  const jobId = newId();
  const now = deps.clock.now();
  await appendAndAwaitRow(deps, { streamId: streamName('export', jobId), schema: EXPORTS_SCHEMA, table: 'jobs', id: jobId, what: 'export', wait: 'export.request' }, {
    type: 'ExportRequested',
    data: {
      jobId, motorBlockId: caller.motorBlockId, accountId: caller.accountId, jobType: 'logs',
      from: request.from.toISOString(), to: (request.to ?? now).toISOString(), query: request.query, status: request.status,
      includePII: request.includePII, requestedAt: now.toISOString(),
    },
  }, 'no_stream', caller.actor);
  return { jobId, status: 'queued' };
}

interface JobRow {
  id: string; motor_block_id: string; status: string; window_from: Date; window_to: Date; query: string | null; status_filter: string | null; include_pii: boolean;
  rows: number | null; bytes: string | null; truncated: boolean | null; error: string | null; requested_at: Date; completed_at: Date | null; expires_at: Date | null;
}

/** A job as the caller sees it; without logs.pii (`pii` false) addresses in its query are masked, as on the logs route. */
function view(r: JobRow, now: Date, pii: boolean): ExportJobView {
  const expired = r.status === 'completed' && r.expires_at !== null && r.expires_at <= now;
  const query = r.query !== null && !pii ? maskEmailsInText(r.query) : r.query;
  return {
    id: r.id, motorBlockId: r.motor_block_id, jobType: 'logs', status: expired ? 'expired' : r.status as ExportStatus,
    filters: { from: r.window_from.toISOString(), to: r.window_to.toISOString(), query, status: r.status_filter, includePII: r.include_pii },
    rows: r.rows, bytes: r.bytes === null ? null : Number(r.bytes), truncated: r.truncated, error: r.error,
    requestedAt: r.requested_at.toISOString(), completedAt: r.completed_at?.toISOString() ?? null, expiresAt: r.expires_at?.toISOString() ?? null,
  };
}

/** `pii`: the caller has logs.pii. */
export async function listExports(db: Knex, motorBlockId: string, now: Date, pii: boolean): Promise<ExportJobView[]> {
  const rows = await db.withSchema(EXPORTS_SCHEMA).table('jobs').where({ motor_block_id: motorBlockId })
    .orderBy([{ column: 'requested_at', order: 'desc' }, { column: 'id', order: 'desc' }]).limit(EXPORT_LIST_LIMIT) as JobRow[];
  return rows.map((r) => view(r, now, pii));
}

const notFound = () => fail('export_not_found', 404, 'No such export job', { nextAction: 'List the block\'s exports with GET /motor-blocks/{id}/exports' });

/**
 * A job of the caller's block (another block's is 404), with `download_url` once completed and not
 * expired. A job that asked for addresses in clear (includePII) is the caller's only with logs.pii
 * (`pii`), as asking for it was: its file holds them, and its URL needs no other credential.
 */
export async function getExport(db: Knex, settings: DownloadTokenSettings, motorBlockId: string, jobId: string, now: Date, pii: boolean): Promise<ExportJobView & { download_url?: string; download_url_expires_at?: string }> {
  if (!isUuid(jobId)) throw fail('invalid_id', 400, 'jobId must be a uuid');
  const row = await db.withSchema(EXPORTS_SCHEMA).table('jobs').where({ id: jobId, motor_block_id: motorBlockId }).first() as JobRow | undefined;
  if (!row) throw notFound();
  if (row.include_pii && !pii) {
    throw fail('insufficient_scope', 403, 'This export holds recipient addresses in clear (includePII): reading it needs the logs.pii scope', { details: { requiredScopes: ['logs.pii'] } });
  }
  const v = view(row, now, pii);
  if (v.status !== 'completed') return v;
  const expiresAt = new Date(Math.min(now.getTime() + DOWNLOAD_TOKEN_SECONDS * 1000, row.expires_at!.getTime()));
  const token = jwt.sign({ sub: jobId, mbid: motorBlockId, iat: Math.floor(now.getTime() / 1000), exp: Math.floor(expiresAt.getTime() / 1000) }, settings.secret, {
    algorithm: 'HS256', issuer: settings.issuer, audience: DOWNLOAD_AUDIENCE,
  });
  return { ...v, download_url: `${settings.publicBaseUrl}/api/public/v1/exports/${jobId}/download?token=${encodeURIComponent(token)}`, download_url_expires_at: expiresAt.toISOString() };
}

/** The job a download token is for; 401 when it is missing, forged, expired or for another job. */
export function verifyDownloadToken(settings: DownloadTokenSettings, jobId: string, token: unknown, now: Date): void {
  const refuse = (expired = false) => fail(expired ? 'token_expired' : 'invalid_token', 401, expired ? 'Download token expired: read the job again for a new download_url' : 'Download token missing or invalid');
  if (typeof token !== 'string' || token === '') throw refuse();
  let claims: jwt.JwtPayload;
  try {
    claims = jwt.verify(token, settings.secret, { algorithms: ['HS256'], issuer: settings.issuer, audience: DOWNLOAD_AUDIENCE, clockTimestamp: Math.floor(now.getTime() / 1000) }) as jwt.JwtPayload;
  } catch (e) {
    throw refuse(e instanceof jwt.TokenExpiredError);
  }
  if (claims.sub !== jobId) throw refuse();
}

/** A completed, unexpired job's stored file, in order (gzip chunks); 404 otherwise. */
export async function exportFile(db: Knex, jobId: string, now: Date): Promise<{ chunks: AsyncIterable<Buffer>; row: JobRow }> {
  if (!isUuid(jobId)) throw fail('invalid_id', 400, 'jobId must be a uuid');
  const row = await db.withSchema(EXPORTS_SCHEMA).table('jobs').where({ id: jobId }).first() as JobRow | undefined;
  if (!row || row.status !== 'completed') throw notFound();
  if (row.expires_at && row.expires_at <= now) throw fail('export_expired', 410, 'This export has expired', { nextAction: 'Ask for a new export' });
  async function* chunks(): AsyncIterable<Buffer> {
    for (let seq = 0; ; seq++) {
      const c = await db.table(`${EXPORT_FILES}`).where({ job_id: jobId, seq }).first('data') as { data: Buffer } | undefined;
      if (!c) return;
      yield c.data;
    }
  }
  return { chunks: chunks(), row };
}

/** Where the worker stores the files: state, not a read model (a replay does not rebuild files). */
export const EXPORT_FILES = 'motor_exports.files';

export async function initExportFiles(db: Knex): Promise<void> {
  await withSetupLock(db, 'motor_exports', async (trx) => {
    await trx.raw('CREATE SCHEMA IF NOT EXISTS motor_exports');
    await trx.raw(`CREATE TABLE IF NOT EXISTS ${EXPORT_FILES} (
      job_id uuid NOT NULL, seq integer NOT NULL, data bytea NOT NULL, created_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (job_id, seq))`);
  });
}
