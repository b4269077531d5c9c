import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'chai';

/* eslint-disable @typescript-eslint/no-explicit-any */

/**
 * The OpenAPI document (the runtime authority, SPEC "Versioning") types fields as the SPEC does: a
 * field the SPEC calls an integer is `integer` (with the SPEC's bounds on a request), not any number.
 */
describe('OpenAPI document: field types of the SPEC (unit)', () => {
  const doc = JSON.parse(readFileSync(join(__dirname, '../../read-api/generated/openapi.json'), 'utf8'));
  const bodySchema = (path: string, method: string): any => {
    const schema = doc.paths[path][method].requestBody.content['application/json'].schema;
    return schema.$ref ? doc.components.schemas[schema.$ref.split('/').pop()] : schema;
  };
  const resolve = (schema: any): any => (schema.$ref ? resolve(doc.components.schemas[schema.$ref.split('/').pop()]) : schema);
  /** The 200 answer's members (one per member of a union). */
  const answers = (path: string, method: string): any[] => {
    const schema = resolve(doc.paths[path][method].responses['200'].content['application/json'].schema);
    return (schema.anyOf ?? schema.oneOf ?? [schema]).map(resolve);
  };

  it('token minting: ttlSeconds is an integer from 60 to 900, default 300, on both routes (SPEC "Token minting")', () => {
    for (const path of ['/api/public/token/account-key', '/api/public/token']) {
      expect(bodySchema(path, 'post').properties.ttlSeconds, path).to.include({ type: 'integer', minimum: 60, maximum: 900, default: 300 });
      expect(bodySchema(path, 'post').required, path).to.deep.equal(['motorBlockId']);
    }
  });

  it('POST /v1/test-email: port is an integer (SPEC "Send API")', () => {
    expect(bodySchema('/v1/test-email', 'post').properties.port).to.include({ type: 'integer' });
  });

  it('POST /v1/send dry run: bodySize and recipientCount are integers (SPEC "Send API")', () => {
    const dry = answers('/v1/send', 'post').find((a) => a.properties.dryRun);
    const data = resolve(dry.properties.data);
    expect(data.properties.bodySize).to.include({ type: 'integer' });
    expect(data.properties.recipientCount).to.include({ type: 'integer' });
  });

  it('POST /api/oauth2/token: expires_in is an integer (SPEC "OAuth token response")', () => {
    const members = answers('/api/oauth2/token', 'post');
    expect(members).to.not.have.length(0);
    for (const m of members) expect(m.properties.expires_in).to.include({ type: 'integer' });
  });
});
