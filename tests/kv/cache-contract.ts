// The EdgeCache contract: one suite, run against every adapter (memory LRU, Workers KV over Miniflare).
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { EdgeCache } from "../../src/kv/cache.ts";

export interface CacheHarness {
  cache: EdgeCache;
  close(): Promise<void>;
}

/** A clock the suite moves by hand; adapters read it for TTLs so no test waits in real time. */
export interface ManualClock {
  now(): number;
  advance(ms: number): void;
}

export function manualClock(start = Date.parse("2026-11-26T00:00:00.000Z")): ManualClock {
  let current = start;
  return {
    now: () => current,
    advance(ms) {
      current += ms;
    },
  };
}

const minute = 60_000;

export function describeCacheContract(name: string, open: (clock: ManualClock) => Promise<CacheHarness>) {
  describe(`EdgeCache contract: ${name}`, () => {
    let clock: ManualClock;
    let harness: CacheHarness;
    let cache: EdgeCache;

    beforeEach(async () => {
      clock = manualClock();
      harness = await open(clock);
      cache = harness.cache;
    });
    afterEach(async () => harness.close());

    it("answers null for a key never written", async () => {
      expect(await cache.get("missing")).toBeNull();
    });

    it("returns what was put", async () => {
      await cache.put("prompt:v1:abc", "system prompt", minute);
      expect(await cache.get("prompt:v1:abc")).toBe("system prompt");
    });

    it("keeps the last of two puts to one key", async () => {
      await cache.put("k", "first", minute);
      await cache.put("k", "second", minute);
      expect(await cache.get("k")).toBe("second");
    });

    it("forgets a deleted key and ignores deleting an absent one", async () => {
      await cache.put("k", "v", minute);
      await cache.put("other", "stays", minute);
      await cache.delete("k");
      await cache.delete("never-written");
      expect(await cache.get("k")).toBeNull();
      expect(await cache.get("other")).toBe("stays");
    });

    it("keeps an entry until its ttl and drops it after, even under an adapter's minimum ttl", async () => {
      await cache.put("short", "v", 2_000);
      await cache.put("long", "v", 10 * minute);
      clock.advance(1_999);
      expect(await cache.get("short")).toBe("v");
      clock.advance(1);
      expect(await cache.get("short")).toBeNull();
      expect(await cache.get("long")).toBe("v");
    });

    it("stores nothing for a ttl of zero, and drops the value it replaces", async () => {
      await cache.put("k", "old", minute);
      await cache.put("k", "new", 0);
      expect(await cache.get("k")).toBeNull();
    });

    it("round-trips unicode keys and values exactly", async () => {
      const value = "héllo wörld, 你好, مرحبا, emoji 🚀👩‍💻, a \u0000 nul and a \u2028 line separator";
      await cache.put("session:v1:t%C3%A9nant:\u4f1a\u8bdd:🔑", value, minute);
      expect(await cache.get("session:v1:t%C3%A9nant:\u4f1a\u8bdd:🔑")).toBe(value);
    });

    it("leaves every key readable after many concurrent puts", async () => {
      const keys = Array.from({ length: 200 }, (_, index) => `concurrent:${index}`);
      await Promise.all(keys.map((key, index) => cache.put(key, `value ${index}`, minute)));
      const values = await Promise.all(keys.map((key) => cache.get(key)));
      expect(values).toEqual(keys.map((_, index) => `value ${index}`));
    });

    it("settles concurrent puts to one key on one of the written values", async () => {
      await Promise.all(Array.from({ length: 20 }, (_, index) => cache.put("same", `value ${index}`, minute)));
      expect(await cache.get("same")).toMatch(/^value \d+$/);
    });
  });
}
