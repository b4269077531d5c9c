import { expect } from 'chai';
import knex from 'knex';
import type { NextFunction, Request, Response } from 'express';
import { QueryTimeoutError } from '../../infra/db';
import { errorMiddleware, unavailableCode } from '../../read-api/http/errors';
import { EventStoreUnavailableError } from '../../domain/eventStore';
import { toolErrorOf } from '../../read-api/mcp/server';
import type { ToolEnv } from '../../read-api/mcp/tool';

/**
 * The waits for PostgreSQL that Motor gives up (docs/OPERATIONS.md "Database deadlines"): a
 * statement past its deadline, no pooled connection in time, a new connection that did not
 * connect in time. Each is 503 on both edges, `event_store_unavailable` when that database is the
 * event store and `database_unavailable` when EVENTSTORE_URL puts the store elsewhere; never 500.
 */
describe('a database that did not answer in time, at the edges (unit)', () => {
  const waits: Array<[string, () => Error]> = [
    ['a statement past its deadline', () => new QueryTimeoutError(10_000)],
    ['a statement not sent on a dropped connection', () => new QueryTimeoutError(10_000, true)],
    ['no pooled connection in time', () => new knex.KnexTimeoutError('Knex: Timeout acquiring a connection. The pool is probably full.')],
    ['a new connection not made in time', () => new Error('timeout expired')],
  ];
  const http = (err: Error, eventstoreUrl: string | null) => {
    let status = 0;
    let body: Record<string, unknown> = {};
    const headers: Record<string, string> = {};
    const res = {
      headersSent: false,
      setHeader: (k: string, v: string) => { headers[k.toLowerCase()] = v; return res; },
      status: (s: number) => { status = s; return res; },
      json: (b: Record<string, unknown>) => { body = b; return res; },
    } as unknown as Response;
    const req = { method: 'GET', path: '/api/public/v1/messages/x', id: 'r1', app: { locals: { ctx: { config: { eventstoreUrl } } } } } as unknown as Request;
    errorMiddleware(err, req, res, (() => undefined) as NextFunction);
    return { status, body, headers };
  };

  for (const [what, make] of waits) {
    it(`${what}: HTTP 503 with Retry-After, the code naming what is down`, () => {
      const same = http(make(), null);
      expect(same.status).to.equal(503);
      expect(same.body).to.include({ success: false, code: 'event_store_unavailable' });
      expect(same.headers['retry-after']).to.equal('5');
      expect(http(make(), 'kurrentdb://store:2113').body).to.include({ code: 'database_unavailable' });
    });

    it(`${what}: the code the send refusal counters count (motor_sends_refused_total), not internal_error`, () => {
      expect(unavailableCode(make(), null)).to.equal('event_store_unavailable');
      expect(unavailableCode(make(), 'kurrentdb://store:2113')).to.equal('database_unavailable');
    });

    it(`${what}: the agent-tool result says 503`, () => {
      const env = (eventstoreUrl: string | null) => ({ ctx: { config: { eventstoreUrl } } }) as unknown as ToolEnv;
      expect(toolErrorOf(make(), env(null))).to.include({ error: 'event_store_unavailable', status: 503 });
      expect(toolErrorOf(make(), env('kurrentdb://store:2113'))).to.include({ error: 'database_unavailable', status: 503 });
    });
  }

  it('the store unavailable is the store whatever EVENTSTORE_URL says; any other error is none of these', () => {
    expect(unavailableCode(new EventStoreUnavailableError('down'), 'kurrentdb://store:2113')).to.equal('event_store_unavailable');
    expect(unavailableCode(new Error('syntax error at or near "x"'), null)).to.equal(null);
    expect(unavailableCode(new TypeError('x is undefined'), 'kurrentdb://store:2113')).to.equal(null);
  });
});
