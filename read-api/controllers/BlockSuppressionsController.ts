import type { Request as ExpressRequest } from 'express';
import { Controller, Delete, Get, Path, Query, Request, Response, Route, Security, Tags } from 'tsoa';
import type { ErrorResponse } from '../../commands/http/SendController';
import { liftBlockSuppression } from '../../commands/blocks/suppressions';
import { maskEmail } from '../../projections/messages/pii';
import { listBlockSuppressions, type BlockSuppressionRecord } from '../../projections/blockSuppressions/queries';
import { piiAllowed, requireBlock } from '../http/authorize';
import { ctxOf, principalOf } from '../http/context';
import type { PrincipalOf } from '../http/principal';

/** A suppressed address as the routes show it: the read model's record, its address masked unless asked with logs.pii. */
export interface BlockSuppression extends BlockSuppressionRecord {
  /** Lower-cased; masked (`j***@e***.com`) unless includePII=true with logs.pii. */
  address: string;
}
export interface BlockSuppressionsPage { items: BlockSuppression[]; nextCursor: string | null; limit: number; pii_masked: boolean }
export interface BlockSuppressionsResponse { success: true; data: BlockSuppressionsPage }
export interface BlockSuppressionLiftedResponse { success: true; data: BlockSuppression & { lifted: true } }

const shown = (r: BlockSuppressionRecord, unmasked: boolean): BlockSuppression => ({ ...r, address: unmasked ? r.address : maskEmail(r.address) });

/**
 * A Motor Block's suppression list (docs/DELIVERY.md "Suppressions"): the addresses its
 * transactional mail is no longer attempted to, after a hard bounce or a complaint, until the
 * block's owner lifts them. Sends to them are still accepted; their outcome is `failed`.
 */
@Route('api/public/v1/motor-blocks')
@Tags('Motor Blocks')
@Response<ErrorResponse>(401, 'Token missing, invalid or expired')
@Response<ErrorResponse>(403, 'Scope missing or token bound to another block; includePII without logs.pii')
@Response<ErrorResponse>(429, 'rate_limited: API request limit of this token exceeded')
export class BlockSuppressionsController extends Controller {
  /**
   * The block's suppressed addresses, most recently suppressed first, keyset-paginated. Addresses
   * are masked unless `includePII=true` with the logs.pii scope.
   * @param limit 1 to 1000, default 100
   * @isInt limit
   */
  @Get('{id}/suppressions')
  @Security('publicBearer', ['logs.read'])
  @Response<ErrorResponse>(400, 'invalid_query (limit), invalid_cursor')
  public async list(
    @Request() req: ExpressRequest, @Path() id: string, @Query() limit?: number, @Query() cursor?: string, @Query() includePII?: boolean,
  ): Promise<BlockSuppressionsResponse> {
    const ctx = ctxOf(req);
    const p = principalOf(req);
    requireBlock(p, id);
    const unmasked = piiAllowed(p, includePII);
    const page = await listBlockSuppressions(ctx.db, id, { limit, cursor });
    return { success: true, data: { items: page.items.map((r) => shown(r, unmasked)), nextCursor: page.nextCursor, limit: limit ?? 100, pii_masked: !unmasked } };
  }

  /**
   * Lifts the address (any case) from the block's suppression list: the next message to it is
   * attempted again. A hard bounce or complaint recorded after the lift suppresses it again. Only
   * hard bounces are lifted: an address the recipient complained about stays (409).
   * Answers the record lifted, the address as the caller wrote it in lower case. Once answered,
   * the list no longer shows the address.
   */
  @Delete('{id}/suppressions/{address}')
  @Security('publicBearer', ['config.manage'])
  @Response<ErrorResponse>(404, 'suppression_not_found: the address is not on the block\'s suppression list')
  @Response<ErrorResponse>(409, 'suppression_not_liftable: the recipient complained; only hard bounces are lifted')
  public async lift(@Request() req: ExpressRequest, @Path() id: string, @Path() address: string): Promise<BlockSuppressionLiftedResponse> {
    const ctx = ctxOf(req);
    const p = principalOf<PrincipalOf<'publicBearer'>>(req);
    requireBlock(p, id);
    const lifted = await liftBlockSuppression(ctx, id, `token:${p.tokenId}`, address);
    return { success: true, data: { ...shown(lifted, true), lifted: true } };
  }
}
