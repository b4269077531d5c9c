import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'chai';

/* eslint-disable @typescript-eslint/no-explicit-any */

/**
 * The OpenAPI document (the runtime authority, SPEC "Versioning") types request fields as the SPEC
 * does: a field the SPEC calls an integer is `integer` with the SPEC's bounds, not any number.
 */
describe('OpenAPI document: request field types of the SPEC (unit)', () => {
  const doc = JSON.parse(readFileSync(join(__dirname, '../../read-api/generated/openapi.json'), 'utf8'));
  const bodySchema = (path: string, method: string): any => {
    const schema = doc.paths[path][method].requestBody.content['application/json'].schema;
    return schema.$ref ? doc.components.schemas[schema.$ref.split('/').pop()] : schema;
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
});
