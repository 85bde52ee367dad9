// The in-memory edge cache for Node, Bun and Deno (design.md "Edge caches"). Bounded three ways (entry
// count, estimated bytes, idle TTL) because unbounded per-chat caches were the first limit users of the
// long-lived gateway hit: it kept up to 128 live agents per process with a 1 h idle TTL. Entries here are
// small derived strings, so the caps are larger and nothing is ever the source of truth.
import type { EdgeCache } from "./cache.ts";

export interface MemoryCacheOptions {
  /** Most entries kept at once; the least recently used go first. Default 5,000. */
  maxEntries?: number;
  /** Most estimated bytes kept at once (see `estimateBytes`). Default 32 MiB. */
  maxBytes?: number;
  /** An entry not read or written for this long is dropped, whatever its put TTL. Default 1 h. */
  idleTtlMs?: number;
  /** Milliseconds since the epoch; injected by tests. */
  now?: () => number;
}

export interface MemoryCache extends EdgeCache {
  /** Entries held, including expired ones not yet dropped (they go on access or from the LRU end). */
  readonly size: number;
  /** Estimated bytes held by those entries. */
  readonly bytes: number;
}

interface Entry {
  value: string;
  bytes: number;
  /** From the put TTL; never moves. */
  putDeadline: number;
  /** Last put or hit plus the idle TTL; moves forward on every hit. */
  idleDeadline: number;
}

export const memoryCacheDefaults = {
  maxEntries: 5_000,
  // 32 MiB over 5,000 entries allows ~3,300 characters each on average (at 2 bytes per code unit): room for
  // assembled prompts, which are the large entries, beside health and metadata entries of a few hundred.
  maxBytes: 32 * 1024 * 1024,
  idleTtlMs: 60 * 60 * 1000,
} as const;

/**
 * JavaScript strings are UTF-16, so 2 bytes per code unit is what the engines hold for non-Latin-1 text
 * (V8 stores pure Latin-1 strings at 1 byte, so this over-counts those by up to 2x: the cap errs on the safe
 * side). The Map slot and entry object add a fixed overhead per entry, on the order of 100 bytes in V8, that
 * is not counted: at the default 5,000 entries that is about 0.5 MiB beside the 32 MiB cap.
 */
export function estimateBytes(key: string, value: string): number {
  return (key.length + value.length) * 2;
}

function positive(name: string, value: number, integer: boolean): number {
  if (Number.isNaN(value) || value <= 0 || (integer && !Number.isInteger(value))) {
    throw new RangeError(`memoryCache.${name} must be ${integer ? "an integer >= 1" : "a number > 0"}, got ${value}`);
  }
  return value;
}

export function createMemoryCache(options: MemoryCacheOptions = {}): MemoryCache {
  const maxEntries = positive("maxEntries", options.maxEntries ?? memoryCacheDefaults.maxEntries, true);
  const maxBytes = positive("maxBytes", options.maxBytes ?? memoryCacheDefaults.maxBytes, false);
  const idleTtlMs = positive("idleTtlMs", options.idleTtlMs ?? memoryCacheDefaults.idleTtlMs, false);
  const now = options.now ?? Date.now;

  // A Map iterates in insertion order, so re-inserting on every hit keeps the least recently used entry
  // first: eviction is `keys().next()`, O(1), with no linked list of our own.
  const entries = new Map<string, Entry>();
  let bytes = 0;

  function remove(key: string, entry: Entry): void {
    entries.delete(key);
    bytes -= entry.bytes;
  }

  function expired(entry: Entry, at: number): boolean {
    return at >= entry.putDeadline || at >= entry.idleDeadline;
  }

  /**
   * Drops expired entries from the LRU end, then the least recently used ones while a cap is exceeded.
   * The idle deadline of the first entry is the earliest of all (same idle TTL, oldest touch), so idle
   * expiry is fully swept here without timers; an entry whose shorter put TTL ran out further down the
   * list is dropped when it is read or reaches the end. Each entry is removed at most once, so a put
   * stays amortized O(1).
   */
  function trim(at: number): void {
    for (const [key, entry] of entries) {
      if (!expired(entry, at) && entries.size <= maxEntries && bytes <= maxBytes) break;
      remove(key, entry);
    }
  }

  return {
    get size() {
      return entries.size;
    },
    get bytes() {
      return bytes;
    },

    async get(key) {
      const entry = entries.get(key);
      if (!entry) return null;
      const at = now();
      if (expired(entry, at)) {
        remove(key, entry);
        return null;
      }
      entries.delete(key);
      entry.idleDeadline = at + idleTtlMs;
      entries.set(key, entry);
      return entry.value;
    },

    async put(key, value, ttlMs) {
      if (Number.isNaN(ttlMs)) throw new RangeError("ttlMs must be a number, got NaN");
      const previous = entries.get(key);
      if (previous) remove(key, previous);
      const size = estimateBytes(key, value);
      // A zero TTL stores nothing, and a value larger than the whole byte cap would only evict everything
      // else before being evicted itself: both leave the key absent rather than holding the old value.
      if (ttlMs <= 0 || size > maxBytes) return;
      const at = now();
      entries.set(key, { value, bytes: size, putDeadline: at + ttlMs, idleDeadline: at + idleTtlMs });
      bytes += size;
      trim(at);
    },

    async delete(key) {
      const entry = entries.get(key);
      if (entry) remove(key, entry);
    },
  };
}
