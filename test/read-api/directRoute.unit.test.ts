import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import { expect } from 'chai';
import express, { type ErrorRequestHandler, type Express } from 'express';
import { directRoute, inSequence } from '../../read-api/app';

/**
 * directRoute (read-api/app.ts): POST /v1/send's exact URL skips the router's walk to its route;
 * every other spelling takes the router to the same route, and errors end in the same middleware.
 */
describe('directRoute: the hot route straight from the request checks to its handlers', () => {
  let server: Server;
  let base: string;
  let routerDispatches = 0;

  before(async () => {
    const app: Express = express();
    const direct = directRoute('post', '/hot');
    app.use(inSequence([express.json(), direct.handler]));
    app.get('/other', (_req, res) => { res.json({ other: true }); });
    app.post('/hot',
      (req, _res, next) => { if (req.body?.fail === 'sync') throw Object.assign(new Error('refused'), { status: 422 }); next(); },
      async (req, res, next) => {
        if (req.body?.fail === 'async') throw Object.assign(new Error('refused later'), { status: 409 });
        if (req.body?.fail === 'pass') { next(); return; }
        res.json({ route: req.route?.path, params: req.params, body: req.body });
      });
    direct.resolve(app);
    // Counts the requests that reached the route through the router's layer.
    const layer = (app.router as unknown as { stack: { route?: { path: string }; handle: (...a: unknown[]) => unknown }[] }).stack.find((l) => l.route?.path === '/hot')!;
    const viaRouter = layer.handle;
    layer.handle = (...a: unknown[]) => { routerDispatches++; return viaRouter(...a); };
    app.use((_req, res) => { res.status(404).json({ error: 'not_found' }); });
    app.use(((err: { status?: number; message: string }, _req, res, _next) => { res.status(err.status ?? 500).json({ error: err.message }); }) as ErrorRequestHandler);
    server = app.listen(0, '127.0.0.1');
    await new Promise((r) => server.once('listening', r));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(() => { server.close(); });

  const post = async (path: string, body: unknown) => {
    const r = await fetch(`${base}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
    return { status: r.status, body: await r.json() as Record<string, unknown> };
  };

  it('the exact method and URL reach the route without the router, with req.route and req.params set', async () => {
    routerDispatches = 0;
    expect(await post('/hot', { a: 1 })).to.deep.equal({ status: 200, body: { route: '/hot', params: {}, body: { a: 1 } } });
    expect(routerDispatches).to.equal(0);
  });

  it('other spellings of the same route (query, trailing slash, case) take the router to the same handlers', async () => {
    routerDispatches = 0;
    for (const path of ['/hot?x=1', '/hot/', '/HOT']) {
      expect(await post(path, { a: 2 })).to.deep.equal({ status: 200, body: { route: '/hot', params: {}, body: { a: 2 } } });
    }
    expect(routerDispatches).to.equal(3);
  });

  it('other requests pass by: another route, another method on the path (404)', async () => {
    expect(await (await fetch(`${base}/other`)).json()).to.deep.equal({ other: true });
    expect((await fetch(`${base}/hot`)).status).to.equal(404);
  });

  it('errors thrown or rejected by the route\'s handlers end in the error middleware, as through the router', async () => {
    expect(await post('/hot', { fail: 'sync' })).to.deep.equal({ status: 422, body: { error: 'refused' } });
    expect(await post('/hot', { fail: 'async' })).to.deep.equal({ status: 409, body: { error: 'refused later' } });
    expect(await post('/hot/', { fail: 'async' })).to.deep.equal({ status: 409, body: { error: 'refused later' } });
  });

  it('a handler that passes the request on without answering is a 500, never a second dispatch', async () => {
    routerDispatches = 0;
    expect(await post('/hot', { fail: 'pass' })).to.deep.equal({ status: 500, body: { error: 'POST /hot passed the request on without answering' } });
    expect(routerDispatches).to.equal(0);
  });

  it('a route that was never registered is a start-up error', () => {
    expect(() => directRoute('post', '/missing').resolve(express())).to.throw(/No POST \/missing route/);
  });
});
