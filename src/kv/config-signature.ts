// The config signature (design.md "Edge caches"): the key under which derived data such as an assembled
// system prompt and tool schemas may be shared. Two configs with the same signature must produce the same
// assembly; anything that changes the assembly or the provider's prefix cache must change the signature.
import { sha256Hex } from "../crypto.ts";

/** Compression settings that change what is sent, and so bust a provider's prefix cache. */
export interface CompressionSignatureInput {
  enabled?: boolean | undefined;
  threshold?: number | undefined;
  provider?: string | undefined;
  model?: string | undefined;
  baseUrl?: string | undefined;
  contextLength?: number | undefined;
}

/**
 * Everything the signature covers. Reasoning settings are deliberately absent: they change per message and
 * must not invalidate the cache or the prompt prefix. Only the fields named here are read, so a caller may
 * pass a wider object (one carrying `reasoning`, say) and the extra properties are ignored.
 */
export interface ConfigSignatureInput {
  provider: string;
  model: string;
  baseUrl: string;
  apiMode: string;
  /** The full key; only its SHA-256 enters the signature, and undefined (no key) differs from "". */
  apiKey: string | undefined;
  /** A set: order and duplicates do not matter. Undefined (the defaults) differs from [] (no tools). */
  toolsets?: readonly string[] | undefined;
  ephemeralPrompt?: string | undefined;
  contextLength?: number | undefined;
  maxTokens?: number | undefined;
  compression?: CompressionSignatureInput | undefined;
}

/** Bumped when the covered fields change, so signatures from an older layout never match. */
const signatureVersion = 1;

type Canonical = string | number | boolean | null | Canonical[] | { [key: string]: Canonical };

/**
 * JSON with object keys sorted at every level and undefined properties left out, so that the same config
 * always serializes to the same bytes whatever order its fields were assigned in.
 */
export function canonicalJson(value: Canonical): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`;
  if (value !== null && typeof value === "object") {
    const fields = Object.keys(value)
      .sort()
      .filter((key) => value[key] !== undefined)
      .map((key) => `${JSON.stringify(key)}:${canonicalJson(value[key]!)}`);
    return `{${fields.join(",")}}`;
  }
  return JSON.stringify(value);
}

function orNull<T extends Canonical>(value: T | undefined): T | null {
  return value === undefined ? null : value;
}

/** Trailing slashes do not name another endpoint; provider-chain.ts strips them the same way. */
function normalizeBaseUrl(baseUrl: string): string {
  return baseUrl.replace(/\/+$/, "");
}

/** SHA-256 hex over the canonical JSON of the covered fields. */
export async function configSignature(input: ConfigSignatureInput): Promise<string> {
  const compression = input.compression;
  const covered: Canonical = {
    version: signatureVersion,
    provider: input.provider,
    model: input.model,
    baseUrl: normalizeBaseUrl(input.baseUrl),
    apiMode: input.apiMode,
    // The whole key is hashed, not a prefix: keys of one provider often share their first 20 characters.
    apiKeySha256: input.apiKey === undefined ? null : await sha256Hex(input.apiKey),
    toolsets: input.toolsets === undefined ? null : [...new Set(input.toolsets)].sort(),
    ephemeralPrompt: orNull(input.ephemeralPrompt),
    contextLength: orNull(input.contextLength),
    maxTokens: orNull(input.maxTokens),
    compression:
      compression === undefined
        ? null
        : {
            enabled: orNull(compression.enabled),
            threshold: orNull(compression.threshold),
            provider: orNull(compression.provider),
            model: orNull(compression.model),
            baseUrl: compression.baseUrl === undefined ? null : normalizeBaseUrl(compression.baseUrl),
            contextLength: orNull(compression.contextLength),
          },
  };
  return sha256Hex(canonicalJson(covered));
}
