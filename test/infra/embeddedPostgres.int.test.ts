import { expect } from 'chai';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, createConnection } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { startEmbeddedPostgres } from '../../infra/embedded';
import { createLogger } from '../../infra/logger';

// `npm start` without DATABASE_URL (README "Two commands"): the embedded PostgreSQL under the data
// directory, started on a free port here (54329 is npm start's).

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });
}

const listening = (port: number): Promise<boolean> => new Promise((done) => {
  const s = createConnection({ host: '127.0.0.1', port });
  s.once('connect', () => { s.end(); done(true); });
  s.once('error', () => done(false));
});

async function until(what: string, check: () => Promise<boolean>, ms: number): Promise<void> {
  const end = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`${what}: not within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** The process group of a process (field 5 of /proc/<pid>/stat). */
const processGroup = (pid: number | 'self'): number => {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[2]);
};

describe('embedded PostgreSQL of npm start (int)', function () {
  this.timeout(120_000);
  let dataDir: string;
  before(() => { dataDir = mkdtempSync(join(tmpdir(), 'motor-embedded-')); });
  after(() => rmSync(dataDir, { recursive: true, force: true }));

  it('starts under the data directory, answers, runs outside the caller\'s process group (a Ctrl-C for Motor does not reach it), and stops', async () => {
    const port = await freePort();
    const embedded = await startEmbeddedPostgres(dataDir, createLogger('silent'), port);
    try {
      const client = new pg.Client({ connectionString: embedded.url });
      await client.connect();
      try {
        const { rows } = await client.query<{ db: string }>('select current_database() as db');
        expect(rows[0].db).to.equal('motor');
        // The postmaster (first line of postmaster.pid; backends make sessions of their own) is not
        // in this process's group.
        const postmaster = Number(readFileSync(join(dataDir, 'postgres', 'postmaster.pid'), 'utf8').split('\n')[0]);
        expect(processGroup(postmaster)).to.not.equal(processGroup('self'));
      } finally {
        await client.end();
      }
    } finally {
      await embedded.stop();
    }
    expect(await listening(port), 'stopped').to.equal(false);
  });

  it('stops when the process that started it is killed (SIGKILL: no shutdown code runs), on the data directory made before', async () => {
    const port = await freePort();
    const script = `
      const { startEmbeddedPostgres } = require(${JSON.stringify(join(__dirname, '../../infra/embedded.ts'))});
      const { createLogger } = require(${JSON.stringify(join(__dirname, '../../infra/logger.ts'))});
      startEmbeddedPostgres(${JSON.stringify(dataDir)}, createLogger('silent'), ${port}).then(() => { console.log('ready'); setInterval(() => {}, 1000); });`;
    const child = spawn(process.execPath, [...process.execArgv, '-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
    try {
      await new Promise<void>((ready, reject) => {
        child.stdout!.on('data', (b: Buffer) => { if (b.toString().includes('ready')) ready(); });
        child.once('exit', (code) => reject(new Error(`starter exited (${code})`)));
      });
      expect(await listening(port)).to.equal(true);
      child.kill('SIGKILL');
      await until('PostgreSQL stopped after its starter was killed', async () => !(await listening(port)), 30_000);
    } finally {
      child.kill('SIGKILL');
    }
  });
});
