/**
 * `p`, or a rejection with `timeout()` once `ms` have passed without `p` settling; the timer is
 * cleared as soon as `p` settles. `p` itself goes on: whatever it still does must be safe to
 * abandon (a late rejection of it is handled here, never unhandled).
 */
export function within<T>(ms: number, p: Promise<T>, timeout: () => Error): Promise<T> {
  let timer: NodeJS.Timeout;
  return Promise.race([
    p.finally(() => clearTimeout(timer)),
    new Promise<T>((_, reject) => { timer = setTimeout(() => reject(timeout()), ms); }),
  ]);
}
