import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'chai';
import type { NextFunction, Request, Response } from 'express';
import { lowerCaseUuidParam, UUID_PATH_PARAMS, VERBATIM_PATH_PARAMS } from '../../read-api/http/params';

describe('path parameters (unit)', () => {
  it('every path parameter of the API is either a uuid (put in lower case) or kept verbatim', () => {
    const spec = JSON.parse(readFileSync(join(__dirname, '../../read-api/generated/openapi.json'), 'utf8'));
    const names = new Set<string>();
    for (const ops of Object.values(spec.paths as Record<string, Record<string, { parameters?: Array<{ in: string; name: string }> }>>)) {
      for (const op of Object.values(ops)) for (const p of op.parameters ?? []) if (p.in === 'path') names.add(p.name);
    }
    const decided = new Set<string>([...UUID_PATH_PARAMS, ...VERBATIM_PATH_PARAMS]);
    expect([...names].filter((n) => !decided.has(n)), 'path parameters in neither list of read-api/http/params.ts').to.deep.equal([]);
    expect(UUID_PATH_PARAMS.filter((n) => (VERBATIM_PATH_PARAMS as readonly string[]).includes(n))).to.deep.equal([]);
  });

  it('a uuid in capitals becomes lower case; anything else is left as sent', () => {
    const run = (name: string, value: string): string => {
      const req = { params: { [name]: value } } as unknown as Request;
      let nexted = false;
      lowerCaseUuidParam(req, {} as Response, (() => { nexted = true; }) as NextFunction, value, name);
      expect(nexted).to.equal(true);
      return req.params[name] as string;
    };
    expect(run('id', '01A21167-2244-7C63-8406-6B1A18E5D5E9')).to.equal('01a21167-2244-7c63-8406-6b1a18e5d5e9');
    expect(run('webhookId', '01a21167-2244-7C63-8406-6b1a18e5d5e9')).to.equal('01a21167-2244-7c63-8406-6b1a18e5d5e9');
    // Not a uuid: the route refuses it (invalid_id) or looks it up as it is.
    for (const v of ['Not-A-Uuid', 'ABC', '01A21167-2244-7C63-8406-6B1A18E5D5E9X', '01A211672244-7C63-8406-6B1A18E5D5E9']) expect(run('id', v)).to.equal(v);
  });
});
