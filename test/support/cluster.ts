import cluster, { type Worker } from 'node:cluster';
import type { RoleWorkerMessage } from '../../scripts/roleProcesses';

/** The live node:cluster children of this test process (API_PROCESSES / SMTP_PROCESSES). */
export const liveChildren = (): Worker[] => Object.values(cluster.workers ?? {}).filter((w): w is Worker => !!w && !w.isDead());

/**
 * Kills one child with SIGKILL and returns once it has exited, with its pid and a promise of the
 * port its replacement reports listening on (scripts/roleWorker.ts tells the primary).
 */
export async function killOneChild(): Promise<{ pid: number; replacementListening: Promise<number> }> {
  const [victim] = liveChildren();
  const pid = victim.process.pid!;
  const replacementListening = new Promise<number>((resolve) => {
    const onMessage = (w: Worker, m: RoleWorkerMessage) => {
      if (m.type !== 'listening' || w.process.pid === pid) return;
      cluster.off('message', onMessage);
      resolve(m.port);
    };
    cluster.on('message', onMessage);
  });
  const gone = new Promise((r) => victim.once('exit', r));
  process.kill(pid, 'SIGKILL');
  await gone;
  return { pid, replacementListening };
}
