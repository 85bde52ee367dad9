/// <reference types="node" />
// The Workers KV adapter against a real KV namespace from Miniflare (workerd's local KV), which enforces
// KV's own limits: 512-byte keys, no "", "." or "..", and an expirationTtl of at least 60 s.
import { Miniflare } from "miniflare";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createWorkersKvCache, kvHashedKeyPrefix, kvStorageKey, type KvNamespaceLike } from "../../src/kv/workers-kv-cache.ts";
import { describeCacheContract, manualClock } from "./cache-contract.ts";

/**
 * The namespace Miniflare hands out, as far as these tests use it. Miniflare types it through
 * @cloudflare/workers-types, which this project does not install (KVNamespace then resolves to nothing
 * useful), so the binding is described structurally here, like KvNamespaceLike in the adapter.
 */
interface MiniflareKv extends KvNamespaceLike {
  put(key: string, value: string, options?: { expirationTtl?: number }): Promise<void>;
  list(): Promise<{ keys: { name: string; expiration?: number }[] }>;
}

let miniflare: Miniflare;
let namespaceCount = 0;

beforeAll(async () => {
  miniflare = new Miniflare({
    modules: true,
    script: "export default { fetch() { return new Response('') } }",
    // Each test gets its own namespace, so no test sees another's keys.
    kvNamespaces: Array.from({ length: 40 }, (_, index) => `CACHE_${index}`),
  });
  await miniflare.ready;
}, 60_000);
afterAll(async () => miniflare?.dispose());

async function freshNamespace(): Promise<MiniflareKv> {
  const binding = `CACHE_${namespaceCount++}`;
  return (await miniflare.getKVNamespace(binding)) as unknown as MiniflareKv;
}

describeCacheContract("Workers KV (Miniflare)", async (clock) => {
  const namespace: KvNamespaceLike = await freshNamespace();
  return { cache: createWorkersKvCache(namespace, { now: clock.now }), close: async () => {} };
});

describe("Workers KV adapter", () => {
  it("rounds a short ttl up to KV's 60 s minimum while the envelope keeps the caller's deadline", async () => {
    const namespace = await freshNamespace();
    const clock = manualClock();
    const cache = createWorkersKvCache(namespace, { now: clock.now });
    const before = Math.floor(Date.now() / 1000);
    await cache.put("health", "v", 2_000);
    await cache.put("hour", "v", 3_600_000);
    const { keys } = await namespace.list();
    const expirations = Object.fromEntries(keys.map((key) => [key.name, key.expiration ?? 0]));
    expect(expirations.health).toBeGreaterThanOrEqual(before + 60);
    expect(expirations.health).toBeLessThanOrEqual(before + 62);
    expect(expirations.hour).toBeGreaterThanOrEqual(before + 3_600);
    expect(JSON.parse((await namespace.get("health", "text"))!)).toEqual({ value: "v", expiresAt: clock.now() + 2_000 });
  });

  it("hashes keys KV would refuse: over 512 bytes, empty, '.' and '..'", async () => {
    const namespace = await freshNamespace();
    const cache = createWorkersKvCache(namespace);
    const long = `model-meta:v1:custom:${"https%3A%2F%2Fexample.com%2F".repeat(40)}:model`;
    const multibyte = "é".repeat(300); // 300 characters, 600 bytes
    const exactly512 = "k".repeat(512);
    for (const key of [long, multibyte, "", ".", "..", exactly512]) await cache.put(key, `value of ${key.length}`, 60_000);
    for (const key of [long, multibyte, "", ".", "..", exactly512]) expect(await cache.get(key)).toBe(`value of ${key.length}`);
    expect(await kvStorageKey(exactly512)).toBe(exactly512);
    expect(await kvStorageKey("prompt:v1:x")).toBe("prompt:v1:x");
    const hashed = await kvStorageKey(long);
    expect(hashed).toMatch(new RegExp(`^${kvHashedKeyPrefix}[0-9a-f]{64}$`));
    expect(await kvStorageKey(`${long}x`)).not.toBe(hashed);
    await cache.delete(long);
    expect(await cache.get(long)).toBeNull();
  });

  it("reads a value it did not write (no envelope) as a miss", async () => {
    const namespace = await freshNamespace();
    const cache = createWorkersKvCache(namespace);
    await namespace.put("foreign", "plain text", { expirationTtl: 60 });
    await namespace.put("other-shape", JSON.stringify({ value: 1 }), { expirationTtl: 60 });
    expect(await cache.get("foreign")).toBeNull();
    expect(await cache.get("other-shape")).toBeNull();
  });

  it("turns a failed read or write into a miss it reports, but lets a failed delete throw", async () => {
    const failure = new Error("KV put() limit exceeded for the day.");
    const failing: KvNamespaceLike = {
      get: async () => Promise.reject(failure),
      put: async () => Promise.reject(failure),
      delete: async () => Promise.reject(failure),
    };
    const reported: string[] = [];
    const cache = createWorkersKvCache(failing, { onError: (operation, error) => reported.push(`${operation}: ${(error as Error).message}`) });
    await cache.put("k", "v", 60_000);
    expect(await cache.get("k")).toBeNull();
    expect(reported).toEqual(["put: KV put() limit exceeded for the day.", "get: KV put() limit exceeded for the day."]);
    await expect(cache.delete("k")).rejects.toThrow("limit exceeded");
  });
});
