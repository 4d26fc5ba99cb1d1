/**
 * A map that keeps at most `max` entries: setting a new key past it drops the entry set
 * longest ago (a Map iterates in insertion order, and a set moves its key to the end). The
 * per-process caches (verified tokens, webhook admissions, connectors) each need no more:
 * what they keep is checked against the database or the clock on every use, so an entry
 * dropped early only costs one fresh read.
 */
export interface BoundedMap<K, V> {
  get(key: K): V | undefined;
  set(key: K, value: V): void;
  delete(key: K): void;
  clear(): void;
  /** Oldest set first. */
  keys(): IterableIterator<K>;
  readonly size: number;
}

export function boundedMap<K, V>(max: number): BoundedMap<K, V> {
  const entries = new Map<K, V>();
  return {
    get: (key) => entries.get(key),
    set(key, value) {
      if (!entries.delete(key) && entries.size >= max) entries.delete(entries.keys().next().value!);
      entries.set(key, value);
    },
    delete: (key) => void entries.delete(key),
    clear: () => entries.clear(),
    keys: () => entries.keys(),
    get size() {
      return entries.size;
    },
  };
}
