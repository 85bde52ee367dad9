// The primary runtime snapshot (api.md "Runtime"): stored with the session, changed only by the user,
// validated when stored and when loaded. Every turn is rebuilt from it.
import * as v from "valibot";
import type { ApiMode } from "./providers/types.ts";

interface ProviderDefaults {
  baseUrl: string;
  apiMode: ApiMode;
  apiKeyEnv?: string;
  /** Aggregators route to many upstreams; transport recovery does not apply to them. */
  aggregator?: boolean;
}

export const providerDefaults: Record<string, ProviderDefaults> = {
  openai: { baseUrl: "https://api.openai.com/v1", apiMode: "chat_completions", apiKeyEnv: "OPENAI_API_KEY" },
  anthropic: { baseUrl: "https://api.anthropic.com", apiMode: "anthropic_messages", apiKeyEnv: "ANTHROPIC_API_KEY" },
  openrouter: { baseUrl: "https://openrouter.ai/api/v1", apiMode: "chat_completions", apiKeyEnv: "OPENROUTER_API_KEY", aggregator: true },
  nous: { baseUrl: "https://inference-api.nousresearch.com/v1", apiMode: "chat_completions", apiKeyEnv: "NOUS_API_KEY", aggregator: true },
  ollama: { baseUrl: "http://127.0.0.1:11434/v1", apiMode: "chat_completions", apiKeyEnv: "OLLAMA_API_KEY" },
  groq: { baseUrl: "https://api.groq.com/openai/v1", apiMode: "chat_completions", apiKeyEnv: "GROQ_API_KEY" },
  deepseek: { baseUrl: "https://api.deepseek.com/v1", apiMode: "chat_completions", apiKeyEnv: "DEEPSEEK_API_KEY" },
  mistral: { baseUrl: "https://api.mistral.ai/v1", apiMode: "chat_completions", apiKeyEnv: "MISTRAL_API_KEY" },
  together: { baseUrl: "https://api.together.xyz/v1", apiMode: "chat_completions", apiKeyEnv: "TOGETHER_API_KEY" },
  custom: { baseUrl: "", apiMode: "chat_completions" },
};

const name = v.pipe(v.string(), v.minLength(1), v.maxLength(200));
const baseUrl = v.pipe(v.string(), v.url(), v.maxLength(2000), v.regex(/^https?:\/\//, "must be an http(s) URL"));
const apiMode = v.picklist(["chat_completions", "anthropic_messages"]);
const envName = v.pipe(v.string(), v.regex(/^[A-Z_][A-Z0-9_]{0,127}$/, "must be an environment variable name"));
const apiKey = v.pipe(v.string(), v.minLength(1), v.maxLength(4096));

export const FallbackEntrySchema = v.strictObject({
  provider: name,
  model: name,
  base_url: v.optional(baseUrl),
  api_mode: v.optional(apiMode),
  api_key_env: v.optional(envName),
  api_key: v.optional(apiKey),
});

const toolsetName = v.picklist(["web", "memory", "session", "todo"]);

/** The runtime as a client sends it. `api_key` is write-only: it is encrypted before it is stored. */
export const RuntimeInputSchema = v.strictObject({
  provider: name,
  model: name,
  base_url: v.optional(baseUrl),
  api_mode: v.optional(apiMode),
  api_key_env: v.optional(envName),
  api_key: v.optional(apiKey),
  timeout_ms: v.optional(v.pipe(v.number(), v.integer(), v.minValue(1000), v.maxValue(900_000))),
  max_tokens: v.optional(v.pipe(v.number(), v.integer(), v.minValue(1), v.maxValue(1_000_000))),
  prompt_caching: v.optional(v.boolean()),
  context_length: v.optional(v.pipe(v.number(), v.integer(), v.minValue(1024), v.maxValue(10_000_000))),
  compression: v.optional(
    v.strictObject({
      enabled: v.optional(v.boolean()),
      threshold: v.optional(v.pipe(v.number(), v.minValue(0.05), v.maxValue(0.95))),
      provider: v.optional(name),
      model: v.optional(name),
      base_url: v.optional(baseUrl),
      api_key_env: v.optional(envName),
      context_length: v.optional(v.pipe(v.number(), v.integer(), v.minValue(1024))),
    }),
  ),
  // A single object is accepted for convenience and normalized to a one-entry chain.
  fallback: v.optional(
    v.pipe(
      v.union([FallbackEntrySchema, v.pipe(v.array(FallbackEntrySchema), v.maxLength(8))]),
      v.transform((value) => (Array.isArray(value) ? value : [value])),
    ),
  ),
  retry: v.optional(
    v.strictObject({
      max_retries: v.optional(v.pipe(v.number(), v.integer(), v.minValue(0), v.maxValue(10))),
      time_scale: v.optional(v.pipe(v.number(), v.minValue(0), v.maxValue(10))),
    }),
  ),
  toolsets: v.optional(v.pipe(v.array(toolsetName), v.maxLength(16))),
  max_iterations: v.optional(v.pipe(v.number(), v.integer(), v.minValue(1), v.maxValue(200))),
});
export type RuntimeInput = v.InferOutput<typeof RuntimeInputSchema>;

/**
 * The stored form: the same object with inline keys replaced by `api_key_enc` (AES-GCM ciphertext).
 * Loaded rows are validated with this schema, so a corrupted row is refused, not trusted.
 */
const StoredFallbackSchema = v.strictObject({
  ...v.omit(FallbackEntrySchema, ["api_key"]).entries,
  api_key_enc: v.optional(v.string()),
});
export const StoredRuntimeSchema = v.strictObject({
  ...v.omit(RuntimeInputSchema, ["api_key", "fallback"]).entries,
  api_key_enc: v.optional(v.string()),
  fallback: v.optional(v.array(StoredFallbackSchema)),
});
export type StoredRuntime = v.InferOutput<typeof StoredRuntimeSchema>;
export type StoredFallback = v.InferOutput<typeof StoredFallbackSchema>;

/** What responses show: the runtime without secrets, with `api_key_set`. */
export function publicRuntime(runtime: StoredRuntime): Record<string, unknown> {
  const { api_key_enc, fallback, ...rest } = runtime;
  return {
    ...rest,
    api_key_set: api_key_enc !== undefined,
    ...(fallback ? { fallback: fallback.map(({ api_key_enc: key, ...entry }) => ({ ...entry, api_key_set: key !== undefined })) } : {}),
  };
}

/** Checks that cross fields: `custom` needs a base URL. Returns the offending field or null. */
const providerKeyVariable = /^[A-Z][A-Z0-9_]*_API_KEY$/;

function keyVariableProblem(field: string, name: string | undefined): { field: string; message: string } | null {
  if (name === undefined || (providerKeyVariable.test(name) && !name.startsWith("HERMES_"))) return null;
  return { field, message: "must name a provider key variable (<NAME>_API_KEY, not HERMES_*)" };
}

export function runtimeProblem(runtime: {
  provider: string;
  base_url?: string | undefined;
  api_key_env?: string | undefined;
  compression?: { api_key_env?: string | undefined } | undefined;
  fallback?: readonly { provider: string; base_url?: string | undefined; api_key_env?: string | undefined }[] | undefined;
}): { field: string; message: string } | null {
  const keyProblem =
    keyVariableProblem("runtime.api_key_env", runtime.api_key_env) ??
    keyVariableProblem("runtime.compression.api_key_env", runtime.compression?.api_key_env) ??
    (runtime.fallback ?? []).reduce<{ field: string; message: string } | null>((found, entry, index) => found ?? keyVariableProblem(`runtime.fallback.${index}.api_key_env`, entry.api_key_env), null);
  if (keyProblem) return keyProblem;
  if (!providerDefaults[runtime.provider] && !runtime.base_url) return { field: "runtime.base_url", message: `provider "${runtime.provider}" is not known; give base_url` };
  if (runtime.provider === "custom" && !runtime.base_url) return { field: "runtime.base_url", message: "provider custom needs base_url" };
  for (const [index, entry] of (runtime.fallback ?? []).entries()) {
    if ((!providerDefaults[entry.provider] || entry.provider === "custom") && !entry.base_url) {
      return { field: `runtime.fallback.${index}.base_url`, message: `provider "${entry.provider}" needs base_url` };
    }
  }
  return null;
}
