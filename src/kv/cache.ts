// The edge cache port (design.md "Edge caches"). Short-lived, lossy, never the source of truth: losing any
// entry at any moment changes latency only, never behaviour or data.

export interface EdgeCache {
  /** The stored value, or null when absent, expired or evicted. May be stale on eventually consistent adapters. */
  get(key: string): Promise<string | null>;
  /** Stores a value for at most `ttlMs` milliseconds (adapters may round up to their minimum TTL). */
  put(key: string, value: string, ttlMs: number): Promise<void>;
  /** Removes the entry; on eventually consistent adapters other locations may still see it for a while. */
  delete(key: string): Promise<void>;
}

/** A cache that keeps nothing; every test of the turn engine also passes with it. */
export const noCache: EdgeCache = {
  async get() {
    return null;
  },
  async put() {},
  async delete() {},
};
