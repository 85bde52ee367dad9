import { describe, expect, it } from "vitest";
import {
  createProviderHealth,
  modelMetadataKey,
  promptKey,
  providerHealthDefaultMs,
  providerHealthKey,
  providerHealthMaxMs,
  sessionKeyPrefix,
  sessionScope,
} from "../../src/kv/keys.ts";
import { createMemoryCache } from "../../src/kv/memory-cache.ts";
import { manualClock } from "./cache-contract.ts";

const primary = { provider: "openai", baseUrl: "https://api.openai.com/v1", model: "gpt-4o-mini" };
const fallback = { provider: "anthropic", baseUrl: "https://api.anthropic.com", model: "claude-sonnet-4" };

describe("cache keys", () => {
  it("name their kind and layout version", () => {
    expect(promptKey("abc", "0.1.0")).toBe("prompt:v1:0.1.0:abc");
    expect(modelMetadataKey("openai", "https://api.openai.com/v1", "gpt-4o")).toBe("model-meta:v1:openai:https%3A%2F%2Fapi.openai.com%2Fv1:gpt-4o");
    expect(providerHealthKey("openai", "https://api.openai.com/v1/", "gpt-4o")).toBe(providerHealthKey("openai", "https://api.openai.com/v1", "gpt-4o"));
    expect(sessionKeyPrefix("default", "s1")).toBe("session:v1:default:s1:");
  });

  it("keep a new build's prompt assembly apart from the previous build's", () => {
    expect(promptKey("abc", "0.1.0")).not.toBe(promptKey("abc", "0.2.0"));
  });

  it("never let a separator inside a part make two tuples share a key", () => {
    expect(sessionKeyPrefix("a:b", "c")).not.toBe(sessionKeyPrefix("a", "b:c"));
    expect(modelMetadataKey("p:x", "u", "m")).not.toBe(modelMetadataKey("p", "x:u", "m"));
    expect(providerHealthKey("p", "u", "m:x")).not.toBe(providerHealthKey("p", "u:m", "x"));
  });

  it("scope one session's entries apart from another tenant's session of the same id", async () => {
    const cache = createMemoryCache();
    const mine = sessionScope(cache, "tenant-a", "s1");
    const theirs = sessionScope(cache, "tenant-b", "s1");
    await cache.put(await mine.key("idempotency:k"), "mine", 60_000);
    expect(await cache.get(await theirs.key("idempotency:k"))).toBeNull();
    expect((await mine.key("idempotency:k")).startsWith(sessionKeyPrefix("tenant-a", "s1"))).toBe(true);
  });

  it("invalidate every entry of a session in one write; a lost generation never brings old entries back", async () => {
    const cache = createMemoryCache();
    const scope = sessionScope(cache, "default", "s1");
    const before = await scope.key("prompt");
    await cache.put(before, "old", 60_000);
    expect(await scope.key("prompt")).toBe(before);
    await scope.invalidate();
    expect(await scope.key("prompt")).not.toBe(before);
    await cache.delete(`${sessionKeyPrefix("default", "s1")}generation`);
    expect(await scope.key("prompt")).not.toBe(before);
  });
});

describe("provider health", () => {
  it("cools a rate-limited target down for its Retry-After, then lets it back", async () => {
    const clock = manualClock();
    const health = createProviderHealth(createMemoryCache({ now: clock.now }), clock.now);
    await health.markRateLimited(primary, 2_000);
    expect(await health.isCoolingDown(primary)).toBe(true);
    expect(await health.isCoolingDown(fallback)).toBe(false);
    clock.advance(1_999);
    expect(await health.isCoolingDown(primary)).toBe(true);
    clock.advance(1);
    expect(await health.isCoolingDown(primary)).toBe(false);
  });

  it("cools down for 60 s without a Retry-After", async () => {
    const clock = manualClock();
    const health = createProviderHealth(createMemoryCache({ now: clock.now }), clock.now);
    expect(providerHealthDefaultMs).toBe(60_000);
    await health.markRateLimited(primary);
    clock.advance(59_999);
    expect(await health.isCoolingDown(primary)).toBe(true);
    clock.advance(1);
    expect(await health.isCoolingDown(primary)).toBe(false);
  });

  it("caps a very long Retry-After at 1 h, and a Retry-After of 0 does not cool down", async () => {
    const clock = manualClock();
    const health = createProviderHealth(createMemoryCache({ now: clock.now }), clock.now);
    await health.markRateLimited(primary, 24 * 3_600_000);
    clock.advance(providerHealthMaxMs);
    expect(await health.isCoolingDown(primary)).toBe(false);
    await health.markRateLimited(fallback, 0);
    expect(await health.isCoolingDown(fallback)).toBe(false);
  });

  it("forgets a rate limit when cleared", async () => {
    const health = createProviderHealth(createMemoryCache(), Date.now);
    await health.markRateLimited(primary, 30_000);
    await health.clear(primary);
    expect(await health.isCoolingDown(primary)).toBe(false);
  });

  it("ends the cool-down on the caller's clock, whatever the adapter's own clock and TTL granularity", async () => {
    const clock = manualClock();
    // The cache runs on real time (the entry would live 2 s more); the health deadline follows the caller's.
    const health = createProviderHealth(createMemoryCache(), clock.now);
    await health.markRateLimited(primary, 2_000);
    expect(await health.isCoolingDown(primary)).toBe(true);
    clock.advance(2_000);
    expect(await health.isCoolingDown(primary)).toBe(false);
  });
});
