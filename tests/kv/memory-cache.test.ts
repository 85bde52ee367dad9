// The memory adapter: the shared contract, then the agent-cache cases of the long-lived gateway (LRU cap,
// recency on hit, idle TTL, per-session eviction) ported to bounded string entries.
import { describe, expect, it } from "vitest";
import { sessionScope } from "../../src/kv/keys.ts";
import { createMemoryCache, estimateBytes, memoryCacheDefaults } from "../../src/kv/memory-cache.ts";
import { describeCacheContract, manualClock } from "./cache-contract.ts";

describeCacheContract("memory", async (clock) => ({
  cache: createMemoryCache({ now: clock.now }),
  close: async () => {},
}));

const hour = 60 * 60 * 1000;

describe("memory cache bounds", () => {
  it("uses 5,000 entries, 32 MiB and a 1 h idle TTL by default", () => {
    expect(memoryCacheDefaults).toEqual({ maxEntries: 5_000, maxBytes: 32 * 1024 * 1024, idleTtlMs: hour });
  });

  it("refuses caps that would make it unbounded or empty, naming the field", () => {
    expect(() => createMemoryCache({ maxEntries: 0 })).toThrow("memoryCache.maxEntries must be an integer >= 1");
    expect(() => createMemoryCache({ maxEntries: 1.5 })).toThrow("memoryCache.maxEntries");
    expect(() => createMemoryCache({ maxBytes: -1 })).toThrow("memoryCache.maxBytes");
    expect(() => createMemoryCache({ idleTtlMs: Number.NaN })).toThrow("memoryCache.idleTtlMs");
  });

  it("evicts the least recently used entry beyond the entry cap", async () => {
    const cache = createMemoryCache({ maxEntries: 3 });
    for (const key of ["a", "b", "c", "d"]) await cache.put(key, key, hour);
    expect(cache.size).toBe(3);
    expect(await cache.get("a")).toBeNull();
    expect([await cache.get("b"), await cache.get("c"), await cache.get("d")]).toEqual(["b", "c", "d"]);
  });

  it("refreshes recency on a hit, so the entry read last survives", async () => {
    const cache = createMemoryCache({ maxEntries: 3 });
    for (const key of ["a", "b", "c"]) await cache.put(key, key, hour);
    expect(await cache.get("a")).toBe("a");
    await cache.put("d", "d", hour);
    expect(await cache.get("b")).toBeNull();
    expect(await cache.get("a")).toBe("a");
  });

  it("refreshes recency on an overwrite as well", async () => {
    const cache = createMemoryCache({ maxEntries: 2 });
    await cache.put("a", "1", hour);
    await cache.put("b", "1", hour);
    await cache.put("a", "2", hour);
    await cache.put("c", "1", hour);
    expect(await cache.get("b")).toBeNull();
    expect(await cache.get("a")).toBe("2");
  });

  it("drops idle entries after the idle TTL, and a hit restarts that TTL", async () => {
    const clock = manualClock();
    const cache = createMemoryCache({ idleTtlMs: hour, now: clock.now });
    await cache.put("read", "v", 24 * hour);
    await cache.put("idle", "v", 24 * hour);
    clock.advance(hour - 1);
    expect(await cache.get("read")).toBe("v");
    clock.advance(1);
    expect(await cache.get("idle")).toBeNull();
    clock.advance(hour - 2);
    expect(await cache.get("read")).toBe("v");
    clock.advance(hour);
    expect(await cache.get("read")).toBeNull();
  });

  it("never keeps an entry past its put TTL, however often it is read", async () => {
    const clock = manualClock();
    const cache = createMemoryCache({ idleTtlMs: hour, now: clock.now });
    await cache.put("k", "v", 10_000);
    for (let step = 0; step < 9; step++) {
      clock.advance(1_000);
      expect(await cache.get("k")).toBe("v");
    }
    clock.advance(1_000);
    expect(await cache.get("k")).toBeNull();
  });

  it("sweeps idle entries from the LRU end on the next put, without timers or reads", async () => {
    const clock = manualClock();
    const cache = createMemoryCache({ idleTtlMs: hour, now: clock.now });
    for (let index = 0; index < 50; index++) await cache.put(`old:${index}`, "v", 24 * hour);
    clock.advance(hour);
    await cache.put("fresh", "v", hour);
    expect(cache.size).toBe(1);
    expect(cache.bytes).toBe(estimateBytes("fresh", "v"));
  });

  it("evicting one session's entries leaves the other sessions' entries", async () => {
    const cache = createMemoryCache();
    const alice = sessionScope(cache, "default", "alice");
    const bob = sessionScope(cache, "default", "bob");
    await cache.put(await alice.key("idempotency:1"), "alice result", hour);
    await cache.put(await bob.key("idempotency:1"), "bob result", hour);
    await alice.invalidate();
    expect(await cache.get(await alice.key("idempotency:1"))).toBeNull();
    expect(await cache.get(await bob.key("idempotency:1"))).toBe("bob result");
  });

  it("holds the byte cap, evicting least recently used entries to make room", async () => {
    const entryBytes = estimateBytes("k00", "x".repeat(100));
    const cache = createMemoryCache({ maxBytes: entryBytes * 5 });
    for (let index = 0; index < 20; index++) {
      await cache.put(`k${String(index).padStart(2, "0")}`, "x".repeat(100), hour);
      expect(cache.bytes).toBeLessThanOrEqual(entryBytes * 5);
    }
    expect(cache.size).toBe(5);
    expect(cache.bytes).toBe(entryBytes * 5);
    expect(await cache.get("k14")).toBeNull();
    expect(await cache.get("k15")).toBe("x".repeat(100));
    // Unicode is counted per UTF-16 code unit: an emoji is two.
    const wide = createMemoryCache({ maxBytes: 1_000 });
    await wide.put("e", "🚀".repeat(10), hour);
    expect(wide.bytes).toBe((1 + 20) * 2);
  });

  it("does not store a value larger than the whole byte cap, and drops the value it would replace", async () => {
    const cache = createMemoryCache({ maxBytes: 100 });
    await cache.put("small", "kept", hour);
    await cache.put("big", "v", hour);
    await cache.put("big", "x".repeat(100), hour);
    expect(await cache.get("big")).toBeNull();
    expect(await cache.get("small")).toBe("kept");
    expect(cache.bytes).toBe(estimateBytes("small", "kept"));
  });

  it("keeps the entry cap exactly under 1,000 concurrent puts from many async tasks", async () => {
    const cache = createMemoryCache({ maxEntries: 100 });
    await Promise.all(
      Array.from({ length: 1_000 }, async (_, index) => {
        await Promise.resolve();
        await cache.put(`task:${index}`, `value ${index}`, hour);
      }),
    );
    expect(cache.size).toBe(100);
    const bytes = Array.from({ length: 100 }, (_, offset) => 900 + offset).reduce((sum, index) => sum + estimateBytes(`task:${index}`, `value ${index}`), 0);
    expect(cache.bytes).toBe(bytes);
    expect(await cache.get("task:999")).toBe("value 999");
    expect(await cache.get("task:899")).toBeNull();
  });

  it("frees the bytes of deleted and expired entries", async () => {
    const clock = manualClock();
    const cache = createMemoryCache({ now: clock.now });
    await cache.put("a", "1234", hour);
    await cache.put("b", "5678", 1_000);
    await cache.delete("a");
    clock.advance(1_000);
    expect(await cache.get("b")).toBeNull();
    expect(cache.size).toBe(0);
    expect(cache.bytes).toBe(0);
  });
});
