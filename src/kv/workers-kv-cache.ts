// The Workers KV edge cache for Cloudflare (design.md "Edge caches").
//
// KV is eventually consistent: a write or delete is seen at once in the location that made it, but other
// locations may keep serving the previous value for ~60 s or more (Cloudflare documents "up to 60 seconds or
// more"; reads are cached at the edge for a default cacheTtl of 60 s). That is acceptable
// only because callers cache derived data (prompt assemblies per config signature, model metadata, provider
// health, idempotency results): a stale or missing entry costs latency or one extra provider call, never a
// wrong answer. Nothing that must be read back exactly (sessions, journal, leases) belongs here.
import { sha256Hex } from "../crypto.ts";
import type { EdgeCache } from "./cache.ts";

/**
 * The slice of a KV namespace binding this adapter uses, typed structurally so that neither the app nor its
 * tests depend on @cloudflare/workers-types; a real `KVNamespace` and Miniflare's both satisfy it.
 */
export interface KvNamespaceLike {
  get(key: string, type: "text"): Promise<string | null>;
  put(key: string, value: string, options: { expirationTtl: number }): Promise<void>;
  delete(key: string): Promise<void>;
}

export interface WorkersKvCacheOptions {
  /** Milliseconds since the epoch, for the envelope's `expiresAt`; injected by tests. */
  now?: () => number;
  /**
   * Told about a failed read or write, which the cache then treats as a miss. KV refuses writes past the
   * free plan's 1,000 a day and more than 1 a second to one key; such a failure must slow a turn at most,
   * not fail it. A failed delete is not reported here: it throws, because an invalidation that silently did
   * not happen would leave data the user asked to drop.
   */
  onError?: (operation: "get" | "put", error: unknown) => void;
}

/** KV refuses an `expirationTtl` under 60 seconds. */
export const kvMinimumTtlSeconds = 60;
/** KV refuses keys over 512 bytes (UTF-8). */
export const kvMaximumKeyBytes = 512;
/**
 * Prefix of hashed keys. A caller's key collides with a hashed one only if it is itself this prefix followed
 * by 64 hex digits; the key helpers in keys.ts never produce that shape.
 */
export const kvHashedKeyPrefix = "sha256/";

const encoder = new TextEncoder();

/**
 * The key KV stores: the caller's key when KV accepts it, else a SHA-256 of it. KV refuses the empty key,
 * "." and "..", and keys over 512 bytes; long base URLs and session ids can exceed that.
 */
export async function kvStorageKey(key: string): Promise<string> {
  const acceptable = key !== "" && key !== "." && key !== ".." && encoder.encode(key).byteLength <= kvMaximumKeyBytes;
  return acceptable ? key : `${kvHashedKeyPrefix}${await sha256Hex(key)}`;
}

/**
 * What is stored under a key. KV's own expiry can only be 60 s or more, so the caller's deadline travels in
 * the value and `get` enforces it: a 2 s provider-health entry is refused after 2 s, although KV keeps the
 * bytes until its 60 s expiry removes them.
 */
interface Envelope {
  value: string;
  /** Milliseconds since the epoch after which the entry is absent. */
  expiresAt: number;
}

function parseEnvelope(text: string): Envelope | null {
  try {
    const parsed: unknown = JSON.parse(text);
    if (typeof parsed !== "object" || parsed === null) return null;
    const { value, expiresAt } = parsed as Record<string, unknown>;
    return typeof value === "string" && typeof expiresAt === "number" ? { value, expiresAt } : null;
  } catch {
    // A value written by something else, or by an older envelope format: a miss, never an error.
    return null;
  }
}

export function createWorkersKvCache(namespace: KvNamespaceLike, options: WorkersKvCacheOptions = {}): EdgeCache {
  const now = options.now ?? Date.now;
  const onError = options.onError ?? (() => {});

  return {
    async get(key) {
      let text: string | null;
      try {
        text = await namespace.get(await kvStorageKey(key), "text");
      } catch (error) {
        onError("get", error);
        return null;
      }
      if (text === null) return null;
      const envelope = parseEnvelope(text);
      if (!envelope || now() >= envelope.expiresAt) return null;
      return envelope.value;
    },

    async put(key, value, ttlMs) {
      if (Number.isNaN(ttlMs)) throw new RangeError("ttlMs must be a number, got NaN");
      const storageKey = await kvStorageKey(key);
      // A zero TTL stores nothing; the old value must not outlive the write that replaced it.
      if (ttlMs <= 0) {
        await namespace.delete(storageKey);
        return;
      }
      // An infinite TTL would store the entry for ever; KV then keeps it for a day, the envelope likewise.
      const boundedTtlMs = Number.isFinite(ttlMs) ? ttlMs : 24 * 60 * 60 * 1000;
      const envelope: Envelope = { value, expiresAt: now() + boundedTtlMs };
      const expirationTtl = Math.max(kvMinimumTtlSeconds, Math.ceil(boundedTtlMs / 1000));
      try {
        await namespace.put(storageKey, JSON.stringify(envelope), { expirationTtl });
      } catch (error) {
        onError("put", error);
      }
    },

    async delete(key) {
      await namespace.delete(await kvStorageKey(key));
    },
  };
}
