import type { Request as ExpressRequest } from 'express';
import { Body, Controller, Delete, Get, Header, Patch, Path, Post, Query, Request, Response, Route, Security, SuccessResponse, Tags } from 'tsoa';
import type { ErrorResponse } from '../../commands/http/SendController';
import { addContact, addContactsBatch, removeContact, requireList, updateContact, type ContactBatchResult } from '../../commands/comms/contacts';
import { getContact, listContacts, type ContactPage, type ContactStatus, type ContactView } from '../../projections/contacts/queries';
import { tenantOf } from '../http/tenant';

// The handlers (domain/comms/contacts.ts) check these bodies, so every rule answers 400 validation_error with its
// field; tsoa leaves them to it (read-api/http/checkedByHandler.ts). The types are for the document.
export interface ContactBody {
  /**
   * A valid address, kept trimmed and lower-cased (unique on the list).
   * @format email
   */
  email: string;
  /**
   * Trimmed, at most 200 characters.
   * @maxLength 200
   */
  name?: string | null;
  /** Merge values: at most 20 string values of at most 256 characters, keys `^[a-z][a-z0-9_]{0,39}$` other than name, identity_name, unsubscribe_url. */
  fields?: { [key: string]: string } | null;
}
export interface ContactUpdateBody {
  /**
   * A string (trimmed, at most 200 characters, one line), or null / "" to clear it.
   * @maxLength 200
   */
  name?: string | null;
  /** A JSON merge patch of the merge values: a string sets a field, null removes it, fields not named stay. At most 20 fields after the change. */
  fields?: { [key: string]: string | null };
  /** Cannot change: any value is 400 validation_error (remove the contact and add the new address). */
  email?: string;
}
export interface ContactBatchBody {
  /**
   * 1 to 1,000 contacts, each checked as a single add (an invalid one is that item's outcome, not the call's).
   * @minItems 1
   * @maxItems 1000
   */
  contacts: ContactBody[];
}
export interface ContactBatchResponse { success: true; data: ContactBatchResult }
export interface ContactResponse { success: true; data: ContactView }
export interface ContactPageResponse { success: true; data: ContactPage }
export interface ContactDeletedResponse { success: true; data: { id: string; deleted: true } }

/**
 * Contacts of a list (docs/COMMUNICATIONS.md "Contacts"), base {auth_url}/comm-api/api. Same rule
 * as the lists: a dashboard JWT authorizes, `X-Tenant-Id` must be the signed-in user's account;
 * another tenant's list is 404 list_not_found.
 */
@Route('comm-api/api')
@Tags('Communications')
@Security('dashboardJwt')
@Response<ErrorResponse>(400, 'tenant_required, invalid_query, invalid_cursor, validation_error')
@Response<ErrorResponse>(401, 'Dashboard token missing, invalid or expired')
@Response<ErrorResponse>(403, 'tenant_forbidden: X-Tenant-Id is not the signed-in account')
@Response<ErrorResponse>(404, 'list_not_found')
export class CommContactsController extends Controller {
  /** Puts an address on the list (subscribed). */
  @Post('lists/{listId}/contacts')
  @SuccessResponse(201, 'Created')
  @Response<ErrorResponse>(409, 'contact_exists (with contactId), contact_limit_reached, contact_conflict')
  public async addContact(
    @Request() req: ExpressRequest, @Header('X-Tenant-Id') tenant: string | undefined, @Path() listId: string, @Body() body: ContactBody,
  ): Promise<ContactResponse> {
    const t = tenantOf(req, tenant);
    const contact = await addContact(t.deps, t.tenantId, t.actor, listId, body);
    this.setStatus(201);
    return { success: true, data: contact };
  }

  /**
   * Puts up to 1,000 addresses on the list in one call, with an outcome per item (added, exists,
   * invalid, duplicate) rather than all or nothing. Safe to retry: what was added answers `exists`.
   */
  @Post('lists/{listId}/contacts/batch')
  @Response<ErrorResponse>(409, 'contact_limit_reached (with limit and remaining; nothing written), contact_conflict')
  public async addContactsBatch(
    @Request() req: ExpressRequest, @Header('X-Tenant-Id') tenant: string | undefined, @Path() listId: string, @Body() body: ContactBatchBody,
  ): Promise<ContactBatchResponse> {
    const t = tenantOf(req, tenant);
    return { success: true, data: await addContactsBatch(t.deps, t.tenantId, t.actor, listId, body) };
  }

  /**
   * The list's contacts, newest first.
   * @param limit 1 to 500, default 100
   * @param cursor `next_cursor` of the previous page
   * @param email exact address, case-insensitive
   * @param status `subscribed` or `unsubscribed`
   * @isInt limit
   */
  @Get('lists/{listId}/contacts')
  public async contacts(
    @Request() req: ExpressRequest, @Header('X-Tenant-Id') tenant: string | undefined, @Path() listId: string,
    @Query() limit?: number, @Query() cursor?: string, @Query() email?: string, @Query() status?: ContactStatus,
  ): Promise<ContactPageResponse> {
    const t = tenantOf(req, tenant);
    const list = await requireList(t.deps.store, t.tenantId, listId);
    return { success: true, data: await listContacts(t.deps.db, t.tenantId, list, { limit, cursor, email, status }) };
  }

  @Get('lists/{listId}/contacts/{contactId}')
  @Response<ErrorResponse>(404, 'list_not_found, contact_not_found')
  public async contact(@Request() req: ExpressRequest, @Header('X-Tenant-Id') tenant: string | undefined, @Path() listId: string, @Path() contactId: string): Promise<ContactResponse> {
    const t = tenantOf(req, tenant);
    const list = await requireList(t.deps.store, t.tenantId, listId);
    return { success: true, data: await getContact(t.deps.db, t.tenantId, list, contactId) };
  }

  /**
   * Changes the contact's name or merge fields. `status` is not changed here: only the contact
   * unsubscribes (its link), and an unsubscribed address is not put back by the sender.
   */
  @Patch('lists/{listId}/contacts/{contactId}')
  @Response<ErrorResponse>(404, 'list_not_found, contact_not_found')
  @Response<ErrorResponse>(409, 'contact_conflict')
  public async updateContact(
    @Request() req: ExpressRequest, @Header('X-Tenant-Id') tenant: string | undefined, @Path() listId: string, @Path() contactId: string, @Body() body: ContactUpdateBody,
  ): Promise<ContactResponse> {
    const t = tenantOf(req, tenant);
    return { success: true, data: await updateContact(t.deps, t.tenantId, t.actor, listId, contactId, body) };
  }

  /** Takes the contact off the list; the address can be added again. An unsubscribe it made stays a suppression. */
  @Delete('lists/{listId}/contacts/{contactId}')
  @Response<ErrorResponse>(404, 'list_not_found, contact_not_found')
  @Response<ErrorResponse>(409, 'contact_conflict')
  public async removeContact(
    @Request() req: ExpressRequest, @Header('X-Tenant-Id') tenant: string | undefined, @Path() listId: string, @Path() contactId: string,
  ): Promise<ContactDeletedResponse> {
    const t = tenantOf(req, tenant);
    return { success: true, data: await removeContact(t.deps, t.tenantId, t.actor, listId, contactId) };
  }
}
