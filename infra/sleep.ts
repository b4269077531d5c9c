/**
 * Resolves after `ms`, or at once when `signal` aborts (already aborted: at once). The abort
 * listener is taken away when the timer fires, so loops that sleep on one long-lived shared signal
 * (the background roles' stop signal) do not pile listeners onto it.
 */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const t = setTimeout(done, ms);
    function done() {
      clearTimeout(t);
      signal?.removeEventListener('abort', done);
      resolve();
    }
    signal?.addEventListener('abort', done);
  });
}
