import { expect } from 'chai';
import type { NextFunction, Request, Response } from 'express';
import { WrongExpectedRevisionError } from '../../domain/eventStore';
import { errorMiddleware } from '../../read-api/http/errors';
import { toolErrorOf } from '../../read-api/mcp/server';
import type { ToolEnv } from '../../read-api/mcp/tool';

/**
 * The last resort for a lost optimistic-concurrency race that no command turned into its own
 * 409 `<what>_conflict` (docs/ERRORS.md "Any route: concurrent changes"): 409 concurrent_update on both
 * edges, never 500 internal_error.
 */
describe('a WrongExpectedRevisionError that escapes a route or a tool', () => {
  const conflict = () => new WrongExpectedRevisionError('sendingDomain-x', 3n, 4n);

  it('HTTP: 409 concurrent_update with a nextAction, nothing logged as unhandled', () => {
    let status = 0;
    let body: Record<string, unknown> = {};
    const res = {
      headersSent: false,
      setHeader: () => res,
      status: (s: number) => { status = s; return res; },
      json: (b: Record<string, unknown>) => { body = b; return res; },
    } as unknown as Response;
    const req = { method: 'POST', path: '/api/public/v1/domains/x/verify', id: 'r1' } as unknown as Request;
    errorMiddleware(conflict(), req, res, (() => undefined) as NextFunction);
    expect(status).to.equal(409);
    expect(body).to.include({ success: false, code: 'concurrent_update', error: 'Conflict' });
    expect(body.nextAction).to.be.a('string');
  });

  it('MCP: the tool result says 409 concurrent_update', () => {
    const r = toolErrorOf(conflict(), {} as ToolEnv);
    expect(r).to.include({ error: 'concurrent_update', status: 409 });
    expect(r?.nextAction).to.be.a('string');
  });
});
