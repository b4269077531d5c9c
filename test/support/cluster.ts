import cluster, { type Worker } from 'node:cluster';
import type { EventStore } from '../../domain/eventStore';
import type { RoleWorkerMessage } from '../../scripts/roleProcesses';
import { eventually } from './motor';

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

/**
 * Kills one child with SIGKILL while `clients` loops of `attempt` run back to back: waits for
 * `each` acknowledgements before the kill and `each` more after it, stops the clients, then
 * waits for the killed child's replacement to listen, and reads the store for every acknowledged message. `attempt` resolves with the message id of an
 * acknowledged send, null for a refusal, and throws when the connection failed (not acknowledged).
 */
export async function killUnderLoad(o: {
  clients: number;
  each: number;
  attempt: (client: number, i: number) => Promise<string | null>;
  store: EventStore;
}): Promise<{ acknowledged: string[]; missing: string[]; failed: number }> {
  const acknowledged: string[] = [];
  let failed = 0;
  let stop = false;
  const loops = Array.from({ length: o.clients }, async (_, c) => {
    for (let i = 0; !stop; i++) {
      try {
        const id = await o.attempt(c, i);
        if (id) acknowledged.push(id);
        else failed++;
      } catch {
        failed++;
      }
    }
  });
  await eventually(async () => acknowledged.length >= o.each, 30_000, 10);
  const { replacementListening } = await killOneChild();
  let replaced = false;
  void replacementListening.then(() => { replaced = true; });
  const atKill = acknowledged.length;
  await eventually(async () => acknowledged.length >= atKill + o.each, 30_000, 10);
  stop = true;
  await Promise.all(loops);
  // The replacement is forked a second after the kill: a short run can end before that, and a
  // later test that counts the children would see it appear under its feet.
  await eventually(async () => (replaced ? true : undefined), 15_000, 10);
  const missing: string[] = [];
  for (const id of acknowledged) {
    const events = await o.store.readStream(`message-${id}`, { maxCount: 1 });
    if (events[0]?.type !== 'MessageAccepted') missing.push(id);
  }
  return { acknowledged, missing, failed };
}
