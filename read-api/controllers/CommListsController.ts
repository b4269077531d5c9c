import type { Request as ExpressRequest } from 'express';
import { Body, Controller, Delete, Get, Header, Patch, Path, Request, Response, Route, Security, Tags } from 'tsoa';
import type { ErrorResponse } from '../../commands/http/SendController';
import { deleteContactList, readContactList, updateContactList } from '../../commands/comms/contactLists';
import type { ContactListView } from '../../projections/contactLists/queries';
import { tenantOf } from '../http/tenant';

/** Checked by the handler (400 validation_error with its field); read-api/http/checkedByHandler.ts. */
export interface ContactListUpdateBody {
  /**
   * The create's rules: trimmed, 1 to 100 characters, unique in the tenant regardless of case (its own name in another case is allowed).
   * @minLength 1
   * @maxLength 100
   */
  name?: string;
  /**
   * Trimmed, at most 500 characters; null or "" clears it.
   * @maxLength 500
   */
  description?: string | null;
}
export interface ContactListRecordResponse { success: true; data: ContactListView }
export interface ContactListDeletedResponse { success: true; data: { id: string; deleted: true } }

/**
 * One contact list: read, rename, delete (docs/COMMUNICATIONS.md "Lists"), base
 * {auth_url}/comm-api/api. Same rule as the other list routes: a dashboard JWT authorizes,
 * `X-Tenant-Id` must be the signed-in user's account; another tenant's list is 404 list_not_found.
 */
@Route('comm-api/api')
@Tags('Communications')
@Security('dashboardJwt')
@Response<ErrorResponse>(400, 'tenant_required, validation_error')
@Response<ErrorResponse>(401, 'Dashboard token missing, invalid or expired')
@Response<ErrorResponse>(403, 'tenant_forbidden: X-Tenant-Id is not the signed-in account')
@Response<ErrorResponse>(404, 'list_not_found: never created, deleted, or another tenant\'s')
export class CommListsController extends Controller {
  @Get('lists/{listId}')
  public async list(@Request() req: ExpressRequest, @Header('X-Tenant-Id') tenant: string | undefined, @Path() listId: string): Promise<ContactListRecordResponse> {
    const t = tenantOf(req, tenant);
    return { success: true, data: await readContactList(t.deps.db, t.tenantId, listId) };
  }

  /** Renames the list or changes its description; a change that changes nothing is answered with the list as it is. */
  @Patch('lists/{listId}')
  @Response<ErrorResponse>(409, 'list_name_taken (with listId), list_conflict')
  public async updateList(
    @Request() req: ExpressRequest, @Header('X-Tenant-Id') tenant: string | undefined, @Path() listId: string, @Body() body: ContactListUpdateBody,
  ): Promise<ContactListRecordResponse> {
    const t = tenantOf(req, tenant);
    return { success: true, data: await updateContactList(t.deps, t.tenantId, t.actor, listId, body) };
  }

  /**
   * Deletes the list and, with it, its contacts (their unsubscribes stay suppressions of the
   * tenant). The name is free again. Refused while a campaign is scheduled or sending to the list.
   */
  @Delete('lists/{listId}')
  @Response<ErrorResponse>(409, 'list_in_use (with campaignIds), list_conflict')
  public async deleteList(@Request() req: ExpressRequest, @Header('X-Tenant-Id') tenant: string | undefined, @Path() listId: string): Promise<ContactListDeletedResponse> {
    const t = tenantOf(req, tenant);
    return { success: true, data: await deleteContactList(t.deps, t.tenantId, t.actor, listId) };
  }
}
