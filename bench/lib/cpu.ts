/**
 * CPU seconds (user + system) spent by the processes a benchmark exercises, read from /proc
 * (Linux only; null elsewhere). Divided by the messages of a phase it gives a cost per message
 * and says which process it goes to; with the number of cores it bounds the rate a machine can
 * reach. On a shared VM it varies between identical runs too (with the host's speed).
 */
import { readdirSync, readFileSync } from 'node:fs';

/** USER_HZ, the unit of utime/stime in /proc/<pid>/stat: 100 on every Linux architecture Node runs on. */
const TICKS_PER_SECOND = 100;

type Group = 'motor' | 'postgres' | 'redis' | 'bench';

/**
 * CPU seconds so far of each process in a group: the processes given (Motor, or the server under
 * test) with their descendants, every PostgreSQL process, Redis, and the rig (this process: load
 * generator, DNS, a Node sink; Postfix's smtp-sink).
 */
export interface CpuSnapshot {
  byPid: Map<string, { group: Group; root: string | null; seconds: number }>;
}

interface ProcStat { ppid: string; seconds: number }

function procStat(pid: string): ProcStat | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the command name, which is in parentheses and may hold spaces.
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return { ppid: f[1], seconds: (Number(f[11]) + Number(f[12])) / TICKS_PER_SECOND };
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
 * Cumulative CPU of each process of the groups now. The first group is the processes given and
 * their descendants (API_PROCESSES children count for the process that forked them).
 */
export function cpuSnapshot(motorPids: number[]): CpuSnapshot | null {
  if (process.platform !== 'linux') return null;
  const stats = new Map<string, ProcStat>();
  for (const pid of readdirSync('/proc')) {
    if (!/^\d+$/.test(pid)) continue;
    const st = procStat(pid);
    if (st) stats.set(pid, st);
  }
  const roots = new Set(motorPids.map(String));
  const rootOf = (pid: string): string | null => {
    for (let p: string | undefined = pid, depth = 0; p && p !== '0' && depth < 8; p = stats.get(p)?.ppid, depth++) {
      if (roots.has(p)) return p;
    }
    return null;
  };
  const snap: CpuSnapshot = { byPid: new Map() };
  for (const [pid, st] of stats) {
    const root = rootOf(pid);
    let group: Group | null = null;
    if (root) group = 'motor';
    else if (pid === String(process.pid)) group = 'bench';
    else {
      const cmd = commandOf(pid);
      if (cmd.startsWith('postgres')) group = 'postgres';
      else if (cmd.startsWith('redis-server') || cmd.includes('/redis-server')) group = 'redis';
      else if (cmd.includes('smtp-sink')) group = 'bench';
    }
    if (group) snap.byPid.set(pid, { group, root, seconds: st.seconds });
  }
  return snap;
}

/**
 * "Motor 3.10 ms + PostgreSQL 1.42 ms + Redis 0.27 ms = 4.79 ms (load generator and sink 0.90 ms)"
 * per item, between two snapshots (`label` names the processes given, "Motor" by default); with
 * `roles` (a label per pid given) their share is split too: "Motor 3.10 ms (api 1.20, projector
 * 0.80, worker 1.10)".
 */
export function cpuPerItem(before: CpuSnapshot | null, after: CpuSnapshot | null, items: number, roles?: Map<number, string>, label = 'Motor'): string {
  if (!before || !after || items <= 0) return 'n/a (needs Linux /proc)';
  // Per process: one that started in between counts fully; one that exited in between is lost
  // (the pools of the servers measured keep their PostgreSQL backends for the whole phase).
  const byGroup: Record<Group, number> = { motor: 0, postgres: 0, redis: 0, bench: 0 };
  const byRoot = new Map<string, number>();
  for (const [pid, p] of after.byPid) {
    const d = p.seconds - (before.byPid.get(pid)?.seconds ?? 0);
    byGroup[p.group] += d;
    if (p.root) byRoot.set(p.root, (byRoot.get(p.root) ?? 0) + d);
  }
  const ms = (seconds: number) => ((seconds * 1000) / items).toFixed(2);
  const split = roles && roles.size > 1 ? ` (${[...roles].map(([pid, role]) => `${role} ${ms(byRoot.get(String(pid)) ?? 0)}`).join(', ')})` : '';
  return `${label} ${ms(byGroup.motor)} ms${split} + PostgreSQL ${ms(byGroup.postgres)} ms + Redis ${ms(byGroup.redis)} ms` +
    ` = ${ms(byGroup.motor + byGroup.postgres + byGroup.redis)} ms (load generator and sink ${ms(byGroup.bench)} ms)`;
}
