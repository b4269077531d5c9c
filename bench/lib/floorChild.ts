/**
 * The floor of bench:send: a bare Express 5 route that parses the same JSON body and does one
 * INSERT (uuid + jsonb) into the same PostgreSQL, synchronous_commit on, autocommit (one
 * transaction and one WAL flush per request, no batching). FLOOR_CHILD = JSON {databaseUrl, pool,
 * processes}: with processes > 1 the route runs in that many node:cluster children sharing the
 * port, each with its own pool, as Motor's API_PROCESSES does.
 */
import cluster from 'node:cluster';
import { randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import express from 'express';
import pg from 'pg';
import { childMain } from './common';

childMain(async () => {
  const spec = JSON.parse(process.env.FLOOR_CHILD ?? '{}') as { databaseUrl: string; pool: number; processes?: number };
  const processes = spec.processes ?? 1;
  if (cluster.isPrimary) {
    const pool = new pg.Pool({ connectionString: spec.databaseUrl, max: 1, application_name: 'bench-floor' });
    await pool.query('CREATE TABLE IF NOT EXISTS floor_sends (id uuid PRIMARY KEY, body jsonb NOT NULL, created_at timestamptz NOT NULL DEFAULT now())');
    const sc = await pool.query<{ synchronous_commit: string }>('SHOW synchronous_commit');
    await pool.end();
    if (sc.rows[0].synchronous_commit !== 'on') throw new Error(`synchronous_commit is ${sc.rows[0].synchronous_commit}, the floor needs it on`);
    if (processes > 1) {
      const workers = Array.from({ length: processes }, () => cluster.fork());
      const ports = await Promise.all(workers.map((w) => new Promise<number>((resolve, reject) => {
        w.on('message', (m: { type?: string; port?: number }) => { if (m.type === 'listening') resolve(m.port!); });
        w.once('exit', (code) => reject(new Error(`floor process exited (${code})`)));
      })));
      process.on('message', (m: { type?: string }) => {
        if (m.type !== 'stop') return;
        for (const w of workers) w.send({ type: 'stop' });
        void Promise.all(workers.map((w) => new Promise((r) => (w.isDead() ? r(null) : w.once('exit', r))))).then(() => process.exit(0));
      });
      process.send!({ type: 'ready', port: ports[0] });
      return;
    }
  }

  const pool = new pg.Pool({ connectionString: spec.databaseUrl, max: spec.pool, application_name: 'bench-floor' });
  const app = express();
  app.disable('x-powered-by');
  app.use(express.json({ limit: '12mb' }));
  app.post('/v1/send', async (req, res) => {
    try {
      const id = randomUUID();
      await pool.query({ name: 'floor_insert', text: 'INSERT INTO floor_sends (id, body) VALUES ($1, $2)', values: [id, JSON.stringify(req.body)] });
      res.json({ success: true, data: { id } });
    } catch (err) {
      res.status(503).json({ success: false, error: (err as Error).message });
    }
  });
  const server = createServer(app);
  server.keepAliveTimeout = 65_000;
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  process.on('message', async (m: { type?: string }) => {
    if (m.type !== 'stop') return;
    server.closeAllConnections();
    server.close();
    await pool.end();
    process.exit(0);
  });
  const port = (server.address() as AddressInfo).port;
  process.send!(cluster.isWorker ? { type: 'listening', port } : { type: 'ready', port });
});
