import { pipeline } from 'node:stream/promises';
import { Readable } from 'node:stream';
import { createGunzip } from 'node:zlib';
import type { Request as ExpressRequest } from 'express';
import { Body, Controller, Get, Path, Post, Produces, Query, Request, Response, Route, Security, SuccessResponse, Tags } from 'tsoa';
import type { ErrorResponse } from '../../commands/http/SendController';
import {
  exportFile, exportJobType, getExport, listExports, requestExport, verifyDownloadToken, type ExportJobView,
} from '../../commands/exports/exports';
import { searchLogs } from '../../projections/messages';
import { applyClientIpLimit } from '../http/authentication';
import { hasPiiScope, piiAllowed, requireBlock } from '../http/authorize';
import { ctxOf, principalOf, type HttpContext } from '../http/context';
import { intParam } from '../http/params';
import { retentionDaysOfAccount } from '../http/plan';
import type { PrincipalOf } from '../http/principal';
import { retentionRange } from '../http/retention';
import { messageDto, type MessageDto } from '../messages/present';

export interface ExportBody {
  /** `logs` (the default); checked by the handler (400 invalid_job_type), read-api/http/checkedByHandler.ts. */
  jobType?: 'logs' | null;
  /** ISO 8601; inside the plan's retention window (default: the window's start). */
  from?: string;
  /** ISO 8601 (default: now). */
  to?: string;
  /** The logs route's query language (recipient:, domain:, status:, metadata.<key>:). */
  query?: string;
  /** Outcome filter, as on the logs route. */
  status?: string;
  /** Addresses in clear: needs logs.pii. */
  includePII?: boolean;
}
export interface ExportPreviewResponse { success: true; data: { items: MessageDto[]; limit: number; pii_masked: boolean } }
export interface ExportQueuedResponse { success: true; data: { jobId: string; status: 'queued' }; message: string }
export interface ExportListResponse { success: true; data: ExportJobView[] }
export interface ExportJobResponse { success: true; data: ExportJobView & { download_url?: string; download_url_expires_at?: string } }

const tokenSettings = (ctx: HttpContext) => ({ secret: ctx.config.tokenSecret, issuer: ctx.config.tokenIssuer, publicBaseUrl: ctx.config.publicBaseUrl });

/** Exports of a block's logs as NDJSON files (SPEC "Exports", docs/EXPORTS.md). */
@Route('api/public/v1')
@Tags('Exports')
@Response<ErrorResponse>(401, 'Token missing, invalid or expired')
@Response<ErrorResponse>(403, 'Scope missing or token bound to another block; includePII without logs.pii')
export class ExportsController extends Controller {
  /**
   * What an export of the whole retention window would hold, newest first, without creating a job.
   * @param limit 1 to 500, default 100
   * @isInt limit
   */
  @Get('motor-blocks/{id}/exports/preview')
  @Security('publicBearer', ['analytics.read', 'logs.read'])
  @Response<ErrorResponse>(400, 'validation_error')
  public async preview(@Request() req: ExpressRequest, @Path() id: string, @Query() limit?: number, @Query() includePII?: boolean): Promise<ExportPreviewResponse> {
    const ctx = ctxOf(req);
    const p = principalOf<PrincipalOf<'publicBearer'>>(req);
    requireBlock(p, id);
    const unmasked = piiAllowed(p, includePII);
    const n = intParam('limit', limit, 1, 500, 100);
    const range = retentionRange({}, await retentionDaysOfAccount(ctx, p.accountId), ctx.clock.now());
    const page = await searchLogs(ctx.db, { motorBlockId: id, from: range.from, limit: n });
    return { success: true, data: { items: page.items.map((m) => messageDto(m, unmasked)), limit: n, pii_masked: !unmasked } };
  }

  /**
   * Queues an export of the block's logs (window and filters as on the logs route); 202 with the job
   * id. Every field is optional, and so is the body: none exports the whole window, masked.
   */
  @Post('motor-blocks/{id}/exports')
  @Security('publicBearer', ['analytics.read'])
  @SuccessResponse(202, 'Queued')
  @Response<ErrorResponse>(400, 'invalid_job_type, invalid_query (filters or times), outside_retention_window')
  @Response<ErrorResponse>(404, 'motor_block_not_found: the block is deleted')
  @Response<ErrorResponse>(409, 'motor_block_delete_in_progress')
  @Response<ErrorResponse>(422, 'validation_error: a body that is not a JSON object, or has an unknown field or one of the wrong type')
  public async create(@Request() req: ExpressRequest, @Path() id: string, @Body() body?: ExportBody): Promise<ExportQueuedResponse> {
    const ctx = ctxOf(req);
    const p = principalOf<PrincipalOf<'publicBearer'>>(req);
    requireBlock(p, id);
    exportJobType(body?.jobType);
    const includePII = piiAllowed(p, body?.includePII);
    const range = retentionRange({ from: body?.from, to: body?.to }, await retentionDaysOfAccount(ctx, p.accountId), ctx.clock.now());
    const queued = await requestExport(
      { store: ctx.store, db: ctx.db, clock: ctx.clock, logger: ctx.logger, metrics: ctx.metrics },
      { accountId: p.accountId, motorBlockId: id, actor: `token:${p.tokenId}` },
      { from: range.from, to: range.to, query: body?.query ?? null, status: body?.status ?? null, includePII },
    );
    this.setStatus(202);
    return { success: true, data: queued, message: 'Export queued; read its status with GET /api/public/v1/exports/{jobId}' };
  }

  /** The block's 50 most recent export jobs, newest first. */
  @Get('motor-blocks/{id}/exports')
  @Security('publicBearer', ['analytics.read'])
  public async list(@Request() req: ExpressRequest, @Path() id: string): Promise<ExportListResponse> {
    const ctx = ctxOf(req);
    const p = principalOf(req);
    requireBlock(p, id);
    return { success: true, data: await listExports(ctx.db, id, ctx.clock.now(), hasPiiScope(p)) };
  }

  /** A job's status; once completed, `download_url` carries a download token valid 15 minutes. */
  @Get('exports/{jobId}')
  @Security('publicBearer', ['analytics.read'])
  @Response<ErrorResponse>(400, 'invalid_id')
  @Response<ErrorResponse>(404, 'export_not_found (also another block\'s job)')
  public async get(@Request() req: ExpressRequest, @Path() jobId: string): Promise<ExportJobResponse> {
    const ctx = ctxOf(req);
    const p = principalOf<PrincipalOf<'publicBearer'>>(req);
    return { success: true, data: await getExport(ctx.db, tokenSettings(ctx), p.motorBlockId, jobId, ctx.clock.now(), hasPiiScope(p)) };
  }

  /** The file, NDJSON (one message per line, as the logs route shows it). No bearer: the `token` of download_url. */
  @Get('exports/{jobId}/download')
  @Produces('application/x-ndjson')
  @SuccessResponse(200, 'application/x-ndjson')
  @Response<ErrorResponse>(401, 'invalid_token, token_expired: the download token')
  @Response<ErrorResponse>(404, 'export_not_found')
  @Response<ErrorResponse>(410, 'export_expired')
  @Response<ErrorResponse>(429, 'rate_limited')
  public async download(@Request() req: ExpressRequest, @Path() jobId: string, @Query() token?: string): Promise<void> {
    await applyClientIpLimit(req);
    const ctx = ctxOf(req);
    const now = ctx.clock.now();
    verifyDownloadToken(tokenSettings(ctx), jobId, token, now);
    const { chunks, row } = await exportFile(ctx.db, jobId, now);
    const res = req.res!;
    res.writeHead(200, {
      'Content-Type': 'application/x-ndjson; charset=utf-8',
      'Content-Disposition': `attachment; filename="motor-logs-${jobId}.ndjson"`,
      'Cache-Control': 'private, no-store',
      'X-Export-Rows': String(row.rows ?? 0),
    });
    await pipeline(Readable.from(chunks), createGunzip(), res).catch((err: Error) => {
      // Headers are out: a broken download can only be cut short (the client sees it incomplete).
      ctx.logger.warn({ err: err.message, jobId }, 'export download interrupted');
      res.destroy();
    });
  }
}
