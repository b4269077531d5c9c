import { expect } from 'chai';
import { queryBounds, toOpenApi31 } from '../../read-api/openapi31';

describe('OpenAPI 3.0 → 3.1 conversion (unit)', () => {
  const spec30 = () => ({
    openapi: '3.0.0',
    info: { title: 'x', version: '0', license: { name: 'Apache-2.0' }, contact: {} },
    paths: {
      '/api/public/v1/motor-blocks': { get: { operationId: 'List', tags: ['Motor Blocks'], description: 'The blocks. Any scope.', responses: {} } },
      '/api/account/api-keys': { get: { operationId: 'List', tags: ['Credentials'], responses: {} } },
      '/api/motor-blocks/{id}/api-keys': { get: { operationId: 'List', tags: ['Credentials'], description: 'Keys of a block: all of them', responses: {} } },
      '/v1/send': { post: { operationId: 'Send', summary: 'Kept', responses: {} } },
    },
    components: { schemas: { A: { type: 'string', nullable: true, example: 'a' }, B: { allOf: [{ $ref: '#/components/schemas/A' }], nullable: true } } },
  });

  it('declares 3.1.0 and API version 1.2.0 with an SPDX license and no empty contact', () => {
    const s = toOpenApi31(spec30());
    expect(s.openapi).to.equal('3.1.0');
    expect(s.info.version).to.equal('1.2.0');
    expect(s.info.license).to.deep.equal({ identifier: 'Apache-2.0', name: 'Apache-2.0' });
    expect(s.info).to.not.have.property('contact');
  });

  it('declares the uuid path ids as format uuid, and leaves the verbatim ones (tokens, addresses) plain strings', async () => {
    const { readFileSync } = await import('node:fs');
    const { join } = await import('node:path');
    const spec = JSON.parse(readFileSync(join(__dirname, '../../read-api/generated/openapi.json'), 'utf8'));
    const seen = new Map<string, Set<string>>();
    for (const ops of Object.values(spec.paths as Record<string, Record<string, { parameters?: Array<{ in: string; name: string; schema: { type: string; format?: string } }> }>>)) {
      for (const op of Object.values(ops)) {
        for (const p of op.parameters ?? []) if (p.in === 'path') seen.set(p.name, (seen.get(p.name) ?? new Set()).add(`${p.schema.type}/${p.schema.format ?? ''}`));
      }
    }
    for (const name of ['id', 'keyId', 'jobId', 'webhookId', 'listId', 'contactId']) expect([...(seen.get(name) ?? [])], name).to.deep.equal(['string/uuid']);
    for (const name of ['token', 'address']) expect([...(seen.get(name) ?? [])], name).to.deep.equal(['string/']);
  });

  it('states the bounds an integer query parameter\'s description gives: every one of the API has a minimum, and a maximum where the description names one', async () => {
    expect(queryBounds('1 to 1000, default 100')).to.deep.equal({ minimum: 1, maximum: 1000 });
    expect(queryBounds('1 to 168 and within the plan\'s retention, default 24')).to.deep.equal({ minimum: 1, maximum: 168 });
    expect(queryBounds('1 up to the plan\'s retention in days')).to.deep.equal({ minimum: 1 });
    expect(queryBounds('0 to 604,800')).to.deep.equal({ minimum: 0, maximum: 604800 });
    expect(queryBounds('The page size')).to.deep.equal({});
    const { readFileSync } = await import('node:fs');
    const { join } = await import('node:path');
    const spec = JSON.parse(readFileSync(join(__dirname, '../../read-api/generated/openapi.json'), 'utf8'));
    const ints: Array<{ where: string; schema: { minimum?: number; maximum?: number }; description: string }> = [];
    for (const [path, ops] of Object.entries(spec.paths as Record<string, Record<string, { parameters?: Array<{ in: string; name: string; description?: string; schema: { type: string; minimum?: number; maximum?: number } }> }>>)) {
      for (const [method, op] of Object.entries(ops)) {
        for (const p of op.parameters ?? []) if (p.in === 'query' && p.schema.type === 'integer') ints.push({ where: `${method} ${path} ${p.name}`, schema: p.schema, description: p.description ?? '' });
      }
    }
    expect(ints.length).to.be.above(10);
    for (const q of ints) {
      expect(q.schema.minimum, q.where).to.be.a('number');
      if (/^\d[\d,]* to /.test(q.description)) expect(q.schema.maximum, q.where).to.be.a('number').and.to.be.above(q.schema.minimum!);
    }
    const logs = ints.find((q) => q.where === 'get /api/public/v1/motor-blocks/{id}/logs limit')!;
    expect(logs.schema).to.include({ minimum: 1, maximum: 1000 });
  });

  it('rewrites nullable and example the 3.1 way', () => {
    const s = toOpenApi31(spec30());
    expect(s.components.schemas.A).to.deep.equal({ type: ['string', 'null'], examples: ['a'] });
    expect(s.components.schemas.B).to.deep.equal({ anyOf: [{ allOf: [{ $ref: '#/components/schemas/A' }] }, { type: 'null' }] });
  });

  it('gives every operation a summary and a unique operationId', () => {
    const s = toOpenApi31(spec30());
    expect(s.paths['/api/public/v1/motor-blocks'].get.summary).to.equal('The blocks');
    expect(s.paths['/api/motor-blocks/{id}/api-keys'].get.summary).to.equal('Keys of a block');
    expect(s.paths['/api/account/api-keys'].get.summary).to.equal('List');
    expect(s.paths['/v1/send'].post.summary).to.equal('Kept');
    const ids = ['/api/public/v1/motor-blocks', '/api/account/api-keys', '/api/motor-blocks/{id}/api-keys'].map((p) => s.paths[p].get.operationId);
    expect(ids).to.deep.equal(['MotorBlocksList', 'AccountApiKeysList', 'MotorBlocksApiKeysList']);
    expect(s.paths['/v1/send'].post.operationId).to.equal('Send');
  });
});
