/**
 * CPU seconds (user + system) spent by the processes a benchmark exercises, read from /proc
 * (Linux only; null elsewhere). Divided by the messages of a phase it gives a cost per message
 * and says which process it goes to; with the number of cores it bounds the rate a machine can
 * reach. On a shared VM it varies between identical runs too (with the host's speed).
 */
import { readdirSync, readFileSync } from 'node:fs';

/** USER_HZ, the unit of utime/stime in /proc/<pid>/stat: 100 on every Linux architecture Node runs on. */
const TICKS_PER_SECOND = 100;

export interface CpuSnapshot {
  /** Seconds by group: the Motor processes given, every PostgreSQL process, Redis, and the rig (this process: load generator, DNS, a Node sink; Postfix's smtp-sink). */
  motor: number;
  postgres: number;
  redis: number;
  bench: number;
  /** Seconds of each Motor process given, by pid. */
  byPid: Map<number, number>;
}

function pidSeconds(pid: string): number | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the command name, which is in parentheses and may hold spaces.
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(f[11]) + Number(f[12])) / TICKS_PER_SECOND;
  } catch {
    return null; // exited meanwhile
  }
}

function commandOf(pid: string): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8');
  } catch {
    return '';
  }
}

/**
 * Cumulative CPU of each group now. PostgreSQL backends that exit between two snapshots are lost
 * (Motor's pools keep theirs for the whole phase); backends that start between them count fully.
 */
export function cpuSnapshot(motorPids: number[]): CpuSnapshot | null {
  if (process.platform !== 'linux') return null;
  const motor = new Set(motorPids.map(String));
  const snap: CpuSnapshot = { motor: 0, postgres: 0, redis: 0, bench: 0, byPid: new Map() };
  for (const pid of readdirSync('/proc')) {
    if (!/^\d+$/.test(pid)) continue;
    let group: 'motor' | 'postgres' | 'redis' | 'bench' | null = null;
    if (motor.has(pid)) group = 'motor';
    else if (pid === String(process.pid)) group = 'bench';
    else {
      const cmd = commandOf(pid);
      if (cmd.startsWith('postgres')) group = 'postgres';
      else if (cmd.startsWith('redis-server') || cmd.includes('/redis-server')) group = 'redis';
      else if (cmd.includes('smtp-sink')) group = 'bench';
    }
    if (!group) continue;
    const s = pidSeconds(pid);
    if (s === null) continue;
    snap[group] += s;
    if (group === 'motor') snap.byPid.set(Number(pid), s);
  }
  return snap;
}

/**
 * "Motor 3.10 ms + PostgreSQL 1.42 ms + Redis 0.27 ms = 4.79 ms (load generator 0.90 ms)" per
 * item, between two snapshots; with `roles` (a label per Motor pid) Motor's share is split too:
 * "Motor 3.10 ms (api 1.20, projector 0.80, worker 1.10)".
 */
export function cpuPerItem(before: CpuSnapshot | null, after: CpuSnapshot | null, items: number, roles?: Map<number, string>): string {
  if (!before || !after || items <= 0) return 'n/a (needs Linux /proc)';
  const ms = (k: 'motor' | 'postgres' | 'redis' | 'bench') => (((after[k] - before[k]) * 1000) / items).toFixed(2);
  const split = roles && roles.size > 1
    ? ` (${[...roles].map(([pid, label]) => `${label} ${((((after.byPid.get(pid) ?? 0) - (before.byPid.get(pid) ?? 0)) * 1000) / items).toFixed(2)}`).join(', ')})`
    : '';
  const total = (['motor', 'postgres', 'redis'] as const).reduce((a, k) => a + (after[k] - before[k]), 0);
  return `Motor ${ms('motor')} ms${split} + PostgreSQL ${ms('postgres')} ms + Redis ${ms('redis')} ms = ${((total * 1000) / items).toFixed(2)} ms` +
    ` (load generator and sink ${ms('bench')} ms)`;
}
