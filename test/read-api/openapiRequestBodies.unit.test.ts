import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'chai';

/* eslint-disable @typescript-eslint/no-explicit-any */

/**
 * Bodies and headers that their handlers check themselves (read-api/http/checkedByHandler.ts) are
 * described in the OpenAPI document as the SPEC defines them: required fields required, with their
 * types, formats, enums and bounds, so that a generated client knows what to send. (The answers to
 * a wrong one are the handlers', asserted by the routes' own tests.)
 */
describe('OpenAPI document: bodies checked by their handlers (unit)', () => {
  const doc = JSON.parse(readFileSync(join(__dirname, '../../read-api/generated/openapi.json'), 'utf8'));
  const resolve = (schema: any): any => (schema.$ref ? resolve(doc.components.schemas[schema.$ref.split('/').pop()]) : schema);
  const op = (path: string, method: string): any => doc.paths[path][method];
  const body = (path: string, method: string): any => resolve(op(path, method).requestBody.content['application/json'].schema);
  /** A property with its $ref (or a nullable's $ref) resolved into it. */
  const prop = (schema: any, name: string): any => {
    const p = schema.properties[name];
    const ref = p.$ref ?? p.anyOf?.find((s: any) => s.$ref)?.$ref ?? p.anyOf?.flatMap((s: any) => s.allOf ?? []).find((s: any) => s.$ref)?.$ref;
    return ref ? { ...p, ...resolve({ $ref: ref }) } : p;
  };
  const blocks = '/api/public/v1/account/motor-blocks';

  it('no request body of the API has an untyped field', () => {
    for (const [path, item] of Object.entries<any>(doc.paths)) {
      for (const [method, o] of Object.entries<any>(item)) {
        const schema = o.requestBody?.content?.['application/json']?.schema;
        if (!schema) continue;
        const b = resolve(schema);
        for (const [name, p] of Object.entries<any>(b.properties ?? {})) {
          const typed = p.type !== undefined || p.$ref !== undefined || p.anyOf !== undefined || p.oneOf !== undefined || p.allOf !== undefined || p.enum !== undefined;
          expect(typed, `${method.toUpperCase()} ${path}: ${name}`).to.equal(true);
        }
      }
    }
  });

  it('POST /account/motor-blocks: name and domainId required, Idempotency-Key a required UUID v4 (SPEC "Account Motor Blocks")', () => {
    const b = body(blocks, 'post');
    expect(b.required).to.have.members(['name', 'domainId']);
    expect(b.properties.name).to.include({ type: 'string', minLength: 1, maxLength: 100 });
    expect(b.properties.domainId).to.include({ type: 'string', format: 'uuid' });
    expect(prop(b, 'type').enum).to.have.members(['transactional', 'general_purpose']);
    expect(b.properties.description).to.include({ maxLength: 500 });
    const key = op(blocks, 'post').parameters.find((p: any) => p.name === 'Idempotency-Key');
    expect(key).to.include({ in: 'header', required: true });
    expect(key.schema.type).to.equal('string');
    expect(new RegExp(key.schema.pattern).test('7b0c0e1e-1111-4222-8333-444455556666')).to.equal(true);
    expect(new RegExp(key.schema.pattern).test('7b0c0e1e-1111-1222-8333-444455556666')).to.equal(false);
  });

  it('the other block routes: their fields required, confirm true, deleteHistory a boolean', () => {
    expect(body(`${blocks}/{id}/name`, 'patch')).to.deep.include({ required: ['name'] });
    const type = body(`${blocks}/{id}/type`, 'patch');
    expect(type.required).to.have.members(['type', 'confirm']);
    expect(type.properties.confirm).to.deep.include({ type: 'boolean', enum: [true] });
    const assign = body(`${blocks}/{id}/assign-domain`, 'post');
    expect(assign.required).to.have.members(['domainId', 'confirm']);
    expect(assign.properties.domainId).to.include({ type: 'string', format: 'uuid' });
    expect(body(`${blocks}/{id}/deactivate`, 'post').required).to.deep.equal(['confirm']);
    const del = body(`${blocks}/{id}`, 'delete');
    expect(del.required).to.have.members(['confirm', 'deleteHistory']);
    expect(del.properties.deleteHistory.type).to.equal('boolean');
  });

  it('sandbox: convert needs a uuid domainId; provision takes a handle and a channel (SPEC "Account sandbox")', () => {
    for (const base of ['/api/public/v1/account/sandbox', '/api/developer/sandbox']) {
      const convert = body(`${base}/convert`, 'post');
      expect(convert.required, base).to.deep.equal(['domainId']);
      expect(convert.properties.domainId, base).to.include({ type: 'string', format: 'uuid' });
      expect(prop(convert, 'type').enum, base).to.have.members(['transactional', 'general_purpose']);
      const provision = body(`${base}/provision`, 'post');
      expect(provision.required, base).to.equal(undefined);
      expect(prop(provision, 'channel').enum, base).to.have.members(['agent', 'dashboard', 'cli', 'api']);
      expect(provision.properties.handle.pattern, base).to.be.a('string');
    }
    const outbound = body('/api/developer/sandbox/outbound', 'patch');
    expect(outbound.required).to.deep.equal(['addresses']);
    expect(outbound.properties.addresses).to.include({ type: 'array', maxItems: 25 });
    expect(resolve(outbound.properties.addresses.items)).to.include({ type: 'string', format: 'email' });
  });

  it('webhooks: url required on create, a uri; events from the six names; the rotation window an integer (SPEC "Webhooks")', () => {
    const create = body('/api/public/v1/motor-blocks/{id}/webhooks', 'post');
    expect(create.required).to.deep.equal(['url']);
    expect(create.properties.url).to.include({ type: 'string', format: 'uri', maxLength: 2048 });
    const events = create.properties.events;
    expect(events).to.deep.include({ type: ['array', 'null'], minItems: 1 });
    expect(resolve(events.items).enum).to.have.lengthOf(6);
    const update = body('/api/public/v1/motor-blocks/{id}/webhooks/{webhookId}', 'put');
    expect(update.required).to.equal(undefined);
    expect(update.properties.enabled.type).to.equal('boolean');
    const rotate = body('/api/public/v1/motor-blocks/{id}/webhooks/{webhookId}/rotate-secret', 'post');
    expect(rotate.properties.previousSecretValidForSeconds).to.include({ type: 'integer', minimum: 0, maximum: 604800 });
  });

  it('free recipients: email required, an email address (SPEC "Free recipients")', () => {
    const b = body('/api/public/v1/account/free-recipients', 'post');
    expect(b.required).to.deep.equal(['email']);
    expect(b.properties.email).to.include({ type: 'string', format: 'email' });
  });

  it('templates: name, subject and type required on create and validate, none on edit (SPEC "Communications templates")', () => {
    for (const path of ['/comm-api/api/templates', '/comm-api/api/templates/validate']) {
      const b = body(path, 'post');
      expect(b.required, path).to.have.members(['name', 'subject', 'type']);
      expect(prop(b, 'type').enum, path).to.have.members(['html', 'text']);
    }
    expect(body('/comm-api/api/templates/{id}', 'patch').required).to.equal(undefined);
  });

  it('communications: lists, contacts, suppressions and campaigns with their required fields and formats', () => {
    expect(body('/comm-api/api/lists', 'post')).to.deep.include({ required: ['name'] });
    expect(body('/comm-api/api/lists', 'post').properties.name).to.include({ minLength: 1, maxLength: 100 });
    const contact = body('/comm-api/api/lists/{listId}/contacts', 'post');
    expect(contact.required).to.deep.equal(['email']);
    expect(contact.properties.email).to.include({ type: 'string', format: 'email' });
    const contacts = body('/comm-api/api/lists/{listId}/contacts/batch', 'post').properties.contacts;
    expect(contacts).to.include({ type: 'array', minItems: 1, maxItems: 1000 });
    expect(resolve(contacts.items).required).to.deep.equal(['email']);
    expect(body('/comm-api/api/suppressions', 'post').required).to.deep.equal(['email']);
    expect(body('/comm-api/api/suppressions/batch', 'post').required).to.deep.equal(['suppressions']);
    const campaign = body('/comm-api/api/campaigns', 'post');
    expect(campaign.required).to.have.members(['name', 'template_id', 'list_id', 'motor_block_id', 'from']);
    for (const id of ['template_id', 'list_id', 'motor_block_id']) expect(campaign.properties[id].format, id).to.equal('uuid');
    expect(body('/comm-api/api/campaigns/{id}', 'patch').required).to.equal(undefined);
    expect(body('/comm-api/api/campaigns/{id}/send', 'post').properties.scheduled_at.format).to.equal('date-time');
  });

  it('exports: jobType is logs', () => {
    expect(body('/api/public/v1/motor-blocks/{id}/exports', 'post').properties.jobType.enum).to.include('logs');
  });
});
