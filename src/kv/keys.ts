// The cache keys and TTLs the product uses (design.md "Edge caches", "What is cached"). Every key starts
// with its kind and a layout version, so a deploy that changes a value's shape bumps the version and the old
// entries are simply never read again (they age out by TTL). Parts that come from users or config are
// percent-encoded, so no part can contain the ":" separator and two different tuples never share a key.
import type { EdgeCache } from "./cache.ts";

const minute = 60 * 1000;
const hour = 60 * minute;

/**
 * An assembled system prompt and tool schemas live 1 h, the idle TTL the long-lived gateway gave its cached
 * agents. The entry is keyed by config signature only, so its value must be derived from the signature's
 * inputs and the build alone, never from a user's memory or session.
 */
export const promptTtlMs = hour;
/** Model metadata (context length, limits) changes rarely; 1 h bounds how long a changed limit goes unseen. */
export const modelMetadataTtlMs = hour;
/** A rate-limited primary without a Retry-After is skipped for 60 s, the backoff cap of provider-chain.ts. */
export const providerHealthDefaultMs = minute;
/**
 * A Retry-After above 1 h is honoured for 1 h only: a daily quota header would otherwise pin every turn to the
 * fallback for a day, and one probe an hour costs a single 429.
 */
export const providerHealthMaxMs = hour;
/**
 * How long a session's generation is remembered. It outlives every per-session entry written under it
 * (none should be cached longer than a day); when it expires the entries under it simply become misses.
 */
export const sessionGenerationTtlMs = 24 * hour;

function part(text: string): string {
  return encodeURIComponent(text);
}

/** Trailing slashes do not name another endpoint (provider-chain.ts strips them too). */
function endpoint(baseUrl: string): string {
  return part(baseUrl.replace(/\/+$/, ""));
}

/**
 * The prompt assembly for a config signature (see config-signature.ts). `buildVersion` (the app version) is
 * part of the key because tool schemas come from the code: on Workers KV the entries survive a deploy, and a
 * new build must not be served the previous build's schemas for up to an hour.
 */
export function promptKey(signature: string, buildVersion = ""): string {
  return `prompt:v1:${part(buildVersion)}:${part(signature)}`;
}

/** A provider's metadata for one model. The base URL is part of it: one model name on two endpoints (a
 * local server and a hosted one) can have different limits. */
export function modelMetadataKey(provider: string, baseUrl: string, model: string): string {
  return `model-meta:v1:${part(provider)}:${endpoint(baseUrl)}:${part(model)}`;
}

/** Whether a provider+model on one endpoint recently answered rate_limit (see createProviderHealth). */
export function providerHealthKey(provider: string, baseUrl: string, model: string): string {
  return `provider-health:v1:${part(provider)}:${endpoint(baseUrl)}:${part(model)}`;
}

/**
 * The prefix of every entry that belongs to one session: what `/new`, `/reset`, `/model` and a runtime PATCH
 * invalidate. The tenant is part of it because session ids are unique per tenant only.
 */
export function sessionKeyPrefix(tenant: string, sessionId: string): string {
  return `session:v1:${part(tenant)}:${part(sessionId)}:`;
}

/**
 * Per-session entries under a generation. The cache port has no "delete by prefix" (Workers KV can only list
 * keys, slowly and eventually consistently), so a session's entries are keyed
 * `<prefix><generation>:<name>` and invalidating the session writes a new generation: every old entry
 * becomes unreachable in one write, and ages out by its own TTL.
 */
export interface SessionScope {
  /** The key for a named per-session entry under the current generation. Costs one cache read. */
  key(name: string): Promise<string>;
  /** Makes every entry of the session a miss; costs one cache write. */
  invalidate(): Promise<void>;
}

function newGeneration(): string {
  return crypto.randomUUID();
}

/**
 * A missing generation (never written, evicted, expired) becomes a fresh random one, never a fixed default:
 * otherwise an evicted generation would bring back entries that an invalidation had hidden. Two requests
 * racing to create it may each write their own; the loser's entries are then misses, which is harmless.
 */
export function sessionScope(cache: EdgeCache, tenant: string, sessionId: string): SessionScope {
  const prefix = sessionKeyPrefix(tenant, sessionId);
  const generationKey = `${prefix}generation`;
  return {
    async key(name) {
      let generation = await cache.get(generationKey);
      if (generation === null) {
        generation = newGeneration();
        await cache.put(generationKey, generation, sessionGenerationTtlMs);
      }
      return `${prefix}${generation}:${part(name)}`;
    },
    async invalidate() {
      await cache.put(generationKey, newGeneration(), sessionGenerationTtlMs);
    },
  };
}

/** The provider endpoint a health entry is about; a provider-chain.ts ChainEntry fits it as is. */
export interface ProviderTarget {
  provider: string;
  baseUrl: string;
  model: string;
}

export interface ProviderHealth {
  /** Records a rate_limit answer: the target is skipped for `retryAfterMs` (capped at 1 h), else 60 s. */
  markRateLimited(target: ProviderTarget, retryAfterMs?: number): Promise<void>;
  /** True while a recorded rate limit has not run out. A lost entry reads as healthy (one more 429 at most). */
  isCoolingDown(target: ProviderTarget): Promise<boolean>;
  /** Forgets a recorded rate limit, e.g. after the target answered successfully. */
  clear(target: ProviderTarget): Promise<void>;
}

function healthKey(target: ProviderTarget): string {
  return providerHealthKey(target.provider, target.baseUrl, target.model);
}

/**
 * Short provider health over the edge cache. The deadline is stored in the value and compared with `now`,
 * so the skip ends when the caller's clock says so whatever the adapter's TTL granularity (KV keeps entries
 * at least 60 s).
 */
export function createProviderHealth(cache: EdgeCache, now: () => number): ProviderHealth {
  return {
    async markRateLimited(target, retryAfterMs) {
      const given = retryAfterMs !== undefined && Number.isFinite(retryAfterMs) && retryAfterMs >= 0;
      const coolDownMs = given ? Math.min(retryAfterMs, providerHealthMaxMs) : providerHealthDefaultMs;
      if (coolDownMs === 0) return;
      const until = now() + coolDownMs;
      await cache.put(healthKey(target), JSON.stringify({ until }), coolDownMs);
    },
    async isCoolingDown(target) {
      const text = await cache.get(healthKey(target));
      if (text === null) return false;
      try {
        const { until } = JSON.parse(text) as { until?: unknown };
        return typeof until === "number" && now() < until;
      } catch {
        return false;
      }
    },
    async clear(target) {
      await cache.delete(healthKey(target));
    },
  };
}
