/**
 * Runs `fn` on every item, at most `limit` at once (the batch routes' appends, one stream each).
 * After a failure no new item starts; the ones in flight finish (their appends are kept), then the
 * first error is thrown.
 */
export async function eachLimited<T>(items: readonly T[], limit: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  let failed: { err: unknown } | null = null;
  const worker = async () => {
    while (failed === null && next < items.length) {
      const item = items[next++];
      try {
        await fn(item);
      } catch (err) {
        failed ??= { err };
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  if (failed !== null) throw (failed as { err: unknown }).err;
}
