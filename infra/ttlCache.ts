/**
 * Values kept `ttlMs` after their load started, in process memory. Concurrent misses of one key
 * share one load: when an entry expires under load, the requests in flight (up to the HTTP
 * connections) would otherwise each run the same query. A caller that joins a load started
 * before it gets data no older than the TTL allows. With `ttlMs` 0 every call loads (nothing is
 * shared or kept). A failed load is not kept, and every caller that shared it gets its error.
 * `clear()` also drops the loads in flight: their results still reach their callers, but are
 * not kept.
 */
export class TtlCache<V> {
  /** `settled` is the value as a resolved promise, made once: a hit hands it out (no promise per hit). */
  private readonly entries = new Map<string, { at: number; settled: Promise<V> }>();
  private readonly loading = new Map<string, Promise<V>>();
  private generation = 0;

  constructor(private readonly ttlMs: number, private readonly now: () => number = Date.now, private readonly maxEntries = 50_000) {}

  get(key: string, load: (key: string) => Promise<V>): Promise<V> {
    const t = this.now();
    const hit = this.entries.get(key);
    if (hit && t - hit.at < this.ttlMs) return hit.settled;
    if (this.ttlMs <= 0) return load(key);
    const inFlight = this.loading.get(key);
    if (inFlight) return inFlight;
    const generation = this.generation;
    const loaded = load(key)
      .then((value) => {
        if (generation === this.generation) {
          if (this.entries.size >= this.maxEntries) this.entries.clear();
          this.entries.set(key, { at: t, settled: Promise.resolve(value) });
        }
        return value;
      })
      .finally(() => {
        if (this.loading.get(key) === loaded) this.loading.delete(key);
      });
    this.loading.set(key, loaded);
    return loaded;
  }

  clear(): void {
    this.entries.clear();
    this.loading.clear();
    this.generation++;
  }
}
