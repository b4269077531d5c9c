/**
 * `npm run replay -- <projection> [--batch-size=N]`: rebuilds a read model from the whole event
 * log into rm_<name>__next and swaps it in (projections/runner.ts rebuild()). The API keeps
 * answering from the current schema until the swap. Progress on stderr, one summary line on stdout.
 */
import { ConfigError, loadConfig } from '../infra/config.js';
import { allProjections } from '../projections/index.js';
import { rebuild, schemaFor, type RebuildProgress } from '../projections/runner.js';
import { openStorage } from './storage.js';

function usage(message: string): never {
  const names = allProjections().map((p) => p.name);
  process.stderr.write(`${message}\nusage: npm run replay -- <projection> [--batch-size=N]\nknown projections: ${names.join(', ')}\n`);
  process.exit(2);
}

const fmtInt = (n: number) => Math.round(n).toLocaleString('en-US');
function fmtDuration(seconds: number): string {
  if (!Number.isFinite(seconds)) return '--:--';
  const s = Math.max(0, Math.round(seconds));
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  const ss = String(s % 60).padStart(2, '0');
  return h > 0 ? `${h}:${String(m).padStart(2, '0')}:${ss}` : `${m}:${ss}`;
}

/** One status line: a bar with done/total, %, events/s and ETA when the total is known. */
export function progressLine(name: string, p: RebuildProgress, width = 30): string {
  const rate = `${fmtInt(p.eventsPerSecond)} ev/s`;
  const elapsed = fmtDuration(p.elapsedMs / 1000);
  if (p.total === null || p.total === 0) return `${name} [${p.phase}] ${fmtInt(p.done)} events  ${rate}  elapsed ${elapsed}`;
  const ratio = Math.min(1, p.done / p.total);
  const filled = Math.round(ratio * width);
  const eta = p.eventsPerSecond > 0 ? Math.max(0, p.total - p.done) / p.eventsPerSecond : Infinity;
  return `${name} [${'#'.repeat(filled)}${'.'.repeat(width - filled)}] ${fmtInt(p.done)}/${fmtInt(p.total)} ${(ratio * 100).toFixed(1)}%  ${rate}  ETA ${fmtDuration(eta)}`;
}

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  const name = args.find((a) => !a.startsWith('--'));
  const batchArg = args.find((a) => a.startsWith('--batch-size='));
  const batchSize = batchArg ? Number(batchArg.slice('--batch-size='.length)) : 5000;
  if (!Number.isInteger(batchSize) || batchSize < 1) usage('--batch-size must be a positive integer');
  if (!name) usage('missing projection name');
  const projection = allProjections().find((p) => p.name === name);
  if (!projection) usage(`unknown projection "${name}"`);

  let config;
  try {
    config = loadConfig();
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`${err.message}\n`);
      process.exit(2);
    }
    throw err;
  }
  // No statement deadline: a rebuild reads the whole log in batches of thousands of events, builds
  // indexes over millions of rows and swaps behind the live projectors' lock; its operator watches
  // it, and cutting one statement would throw away hours of it.
  const { db, store, close } = await openStorage(config, 'motor-replay', { min: 0, max: 10 }, null);
  const tty = process.stderr.isTTY === true;
  let lastPrint = 0;
  const onProgress = (p: RebuildProgress) => {
    const now = Date.now();
    if (p.phase === 'replay' && now - lastPrint < (tty ? 200 : 5000)) return;
    lastPrint = now;
    const line = progressLine(projection.name, p);
    process.stderr.write(tty ? `\r\x1b[K${line}` : `${line}\n`);
  };
  try {
    const r = await rebuild(db, store, projection, { batchSize, onProgress });
    if (tty) process.stderr.write('\n');
    const seconds = r.durationMs / 1000;
    const live = schemaFor(projection.name);
    process.stdout.write(
      `replayed ${projection.name}: ${fmtInt(r.events)} events (${fmtInt(r.applied)} applied, ${fmtInt(r.skipped)} skipped) in ${seconds.toFixed(1)}s, ` +
        `${fmtInt(seconds > 0 ? r.events / seconds : r.events)} events/s; ${live}__next swapped in as ${live}\n`,
    );
  } finally {
    await close();
  }
}

main().catch((err) => {
  process.stderr.write(`\nreplay failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
