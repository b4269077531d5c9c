import type { Knex } from 'knex';
import { streamName, type EventStore, type RecordedEvent } from '../../domain/eventStore';
import { fail } from '../../domain/errors';
import type { DomainEvent, TemplateContentData } from '../../domain/events';
import { isUuid, newId, type Clock } from '../../domain/ids';
import { sampleDataOf, templateFields, validateTemplate, type TemplateIssue, type TemplateValidation } from '../../domain/templates/templates';
import { TEMPLATES_SCHEMA } from '../../projections/templates/projection';
import { appendAndAwaitRow, type ReadYourWritesDeps } from '../readYourWrites';

/**
 * Communications templates (SPEC "Communications templates", docs/TEMPLATES.md): create, read,
 * update, delete and a non-destructive validate, all scoped to one tenant. Commands decide on the
 * template's own stream; a template with errors is refused whole (422 template_invalid, with every
 * error), warnings are returned with the stored template.
 */

export interface TemplateDeps extends ReadYourWritesDeps { store: EventStore; clock: Clock }
export interface TemplateView extends TemplateContentData { id: string; created_at: string; updated_at: string }

const stream = (id: string) => streamName('template', id);
const notFound = () => fail('template_not_found', 404, 'No such template for this tenant');

function refuseInvalid(v: TemplateValidation): never {
  throw fail('template_invalid', 422, `The template has ${v.errors.length} error${v.errors.length === 1 ? '' : 's'}: ${v.errors.map((e) => e.message).join('; ')}`, {
    details: { errors: v.errors, warnings: v.warnings },
  });
}

function fold(events: RecordedEvent[]): { tenantId: string; content: TemplateContentData; deleted: boolean } | null {
  let s: { tenantId: string; content: TemplateContentData; deleted: boolean } | null = null;
  for (const e of events) {
    const event = e as unknown as DomainEvent;
    if (event.type === 'TemplateCreated') s = { tenantId: event.data.tenantId, content: event.data.content, deleted: false };
    else if (s !== null && event.type === 'TemplateUpdated') s.content = event.data.content;
    else if (s !== null && event.type === 'TemplateDeleted') s.deleted = true;
  }
  return s;
}

/**
 * The tenant's live template with the revision it was read at. A uuid written in capitals arrives
 * here in lower case, as its stream is named (read-api/http/params.ts).
 */
async function loadOwn(deps: TemplateDeps, tenantId: string, id: string) {
  if (!isUuid(id)) throw fail('invalid_id', 400, 'Template id must be a uuid');
  const events = await deps.store.readStream(stream(id));
  const state = fold(events);
  if (!state || state.deleted || state.tenantId !== tenantId) throw notFound();
  return { state, revision: events[events.length - 1].revision };
}

const appendAndAwait = (deps: { store: EventStore } & ReadYourWritesDeps, wait: string, id: string, event: DomainEvent, expected: bigint | 'no_stream', actor: string) =>
  appendAndAwaitRow(deps, { streamId: stream(id), schema: TEMPLATES_SCHEMA, table: 'templates', id: id, what: 'template', wait }, event, expected, actor);

const contentOf = (f: Partial<TemplateContentData>): TemplateContentData => ({
  name: f.name ?? '', subject: f.subject ?? '', type: f.type as TemplateContentData['type'], body_html: f.body_html ?? null, body_text: f.body_text ?? null,
});

/** Validation only: nothing is stored, sent or logged. */
export function validateTemplateRequest(body: unknown): TemplateValidation {
  const fields = templateFields(body, false);
  return validateTemplate(fields, sampleDataOf((body as Record<string, unknown>).sampleData));
}

export async function createTemplate(deps: TemplateDeps, tenantId: string, actor: string, body: unknown): Promise<{ template: TemplateView; warnings: TemplateIssue[] }> {
  const content = contentOf(templateFields(body, false));
  const v = validateTemplate(content);
  if (!v.valid) refuseInvalid(v);
  const id = newId();
  const now = deps.clock.now().toISOString();
  await appendAndAwait(deps, 'template.create', id, { type: 'TemplateCreated', data: { templateId: id, tenantId, content, createdAt: now } }, 'no_stream', actor);
  return { template: { id, ...content, created_at: now, updated_at: now }, warnings: v.warnings };
}

export async function updateTemplate(deps: TemplateDeps, tenantId: string, actor: string, id: string, body: unknown): Promise<{ template: TemplateView; warnings: TemplateIssue[] }> {
  const changes = templateFields(body, true);
  const { state, revision } = await loadOwn(deps, tenantId, id);
  const content = { ...state.content, ...changes };
  const v = validateTemplate(content);
  if (!v.valid) refuseInvalid(v);
  await appendAndAwait(deps, 'template.update', id, { type: 'TemplateUpdated', data: { templateId: id, tenantId, content, updatedAt: deps.clock.now().toISOString() } }, revision, actor);
  return { template: await getTemplate(deps.db, tenantId, id), warnings: v.warnings };
}

export async function deleteTemplate(deps: TemplateDeps, tenantId: string, actor: string, id: string): Promise<{ id: string; deleted: true }> {
  const { revision } = await loadOwn(deps, tenantId, id);
  await appendAndAwait(deps, 'template.delete', id, { type: 'TemplateDeleted', data: { templateId: id, tenantId, deletedAt: deps.clock.now().toISOString() } }, revision, actor);
  return { id, deleted: true };
}

interface Row extends TemplateContentData { id: string; created_at: Date; updated_at: Date }
const viewOf = (r: Row): TemplateView => ({
  id: r.id, name: r.name, subject: r.subject, type: r.type, body_html: r.body_html, body_text: r.body_text,
  created_at: r.created_at.toISOString(), updated_at: r.updated_at.toISOString(),
});
const COLUMNS = ['id', 'name', 'subject', 'type', 'body_html', 'body_text', 'created_at', 'updated_at'];

/** The tenant's templates, newest first, without their bodies (GET /templates/{id} has them). */
export async function listTemplates(db: Knex, tenantId: string): Promise<Array<Omit<TemplateView, 'body_html' | 'body_text'>>> {
  const rows = await db.withSchema(TEMPLATES_SCHEMA).table('templates').where({ tenant_id: tenantId }).whereNull('deleted_at')
    .orderBy([{ column: 'created_at', order: 'desc' }, { column: 'id', order: 'desc' }]).select('id', 'name', 'subject', 'type', 'created_at', 'updated_at') as Row[];
  return rows.map((r) => ({ id: r.id, name: r.name, subject: r.subject, type: r.type, created_at: r.created_at.toISOString(), updated_at: r.updated_at.toISOString() }));
}

export async function getTemplate(db: Knex, tenantId: string, id: string): Promise<TemplateView> {
  if (!isUuid(id)) throw fail('invalid_id', 400, 'Template id must be a uuid');
  const row = await db.withSchema(TEMPLATES_SCHEMA).table('templates').where({ id, tenant_id: tenantId }).whereNull('deleted_at').first(COLUMNS) as Row | undefined;
  if (!row) throw notFound();
  return viewOf(row);
}
