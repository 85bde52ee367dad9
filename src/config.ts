// Every environment variable / binding of api.md, parsed once at start-up. A bad value stops the start
// with a message naming the variable.
import * as v from "valibot";
import { ConfigError } from "./errors.ts";
import { RuntimeInputSchema, runtimeProblem, type RuntimeInput } from "./agent/runtime.ts";
import { describeIssues } from "./validation.ts";

export type Env = Record<string, string | undefined>;

export interface ApiKey {
  tenant: string;
  key: string;
}

export interface Config {
  port: number;
  host: string;
  libsqlUrl: string;
  libsqlAuthToken: string | undefined;
  apiKeys: ApiKey[];
  /** 32 raw bytes for AES-GCM, or null when inline provider keys are refused. */
  secretKey: Uint8Array<ArrayBuffer> | null;
  defaultRuntime: RuntimeInput | null;
  fetchAllowPrivate: boolean;
  maxBodyBytes: number;
  /** How long a turn may hold its session before another request may take it over (a dead process). */
  leaseMs: number;
  toolTimeoutMs: number;
  telegram: { botToken: string | undefined; webhookSecret: string | undefined; apiBase: string };
  slack: { signingSecret: string | undefined; botToken: string | undefined; apiBase: string };
  discord: { publicKey: string | undefined; applicationId: string | undefined; botToken: string | undefined; apiBase: string };
  /** Reads a provider credential by name at call time, so a rotated key is picked up by the credential re-read. */
  readEnv: (name: string) => string | undefined;
}

function integerVariable(env: Env, name: string, fallback: number, min: number, max: number): number {
  const raw = env[name];
  if (raw === undefined || raw === "") return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < min || value > max) {
    throw new ConfigError(`${name} must be an integer between ${min} and ${max} (got "${raw.slice(0, 40)}")`);
  }
  return value;
}

function booleanVariable(env: Env, name: string): boolean {
  const raw = env[name];
  if (raw === undefined || raw === "" || raw === "0" || raw === "false") return false;
  if (raw === "1" || raw === "true") return true;
  throw new ConfigError(`${name} must be 0 or 1 (got "${raw.slice(0, 40)}")`);
}

function urlVariable(env: Env, name: string, fallback: string): string {
  const raw = env[name] || fallback;
  if (!/^https?:\/\/[^\s]+$/.test(raw)) throw new ConfigError(`${name} must be an http(s) URL`);
  return raw.replace(/\/+$/, "");
}

const keyPattern = /^[A-Za-z0-9._~+/=-]{16,256}$/;
const tenantPattern = /^[A-Za-z0-9._-]{1,64}$/;

export function parseApiKeys(raw: string | undefined): ApiKey[] {
  if (!raw) return [];
  return raw
    .split(",")
    .map((part) => part.trim())
    .filter(Boolean)
    .map((part) => {
      const separator = part.indexOf("=");
      // A bare key may itself contain "=" (base64 padding); only a valid tenant name before it counts as a tenant.
      const tenant = separator > 0 && tenantPattern.test(part.slice(0, separator)) ? part.slice(0, separator) : "default";
      const key = tenant === "default" && !part.startsWith("default=") ? part : part.slice(separator + 1);
      if (!keyPattern.test(key)) throw new ConfigError("HERMES_API_KEYS: every key must be 16-256 characters of [A-Za-z0-9._~+/=-]");
      return { tenant, key };
    });
}

function decodeSecretKey(raw: string | undefined): Uint8Array<ArrayBuffer> | null {
  if (!raw) return null;
  let bytes: Uint8Array<ArrayBuffer>;
  try {
    bytes = Uint8Array.from(atob(raw.trim()), (char) => char.charCodeAt(0));
  } catch {
    throw new ConfigError("HERMES_SECRET_KEY must be base64");
  }
  if (bytes.length !== 32) throw new ConfigError(`HERMES_SECRET_KEY must decode to 32 bytes (got ${bytes.length})`);
  return bytes;
}

function parseRuntimeVariable(raw: string | undefined): RuntimeInput | null {
  if (!raw) return null;
  let json: unknown;
  try {
    json = JSON.parse(raw);
  } catch {
    throw new ConfigError("HERMES_RUNTIME must be JSON");
  }
  const result = v.safeParse(RuntimeInputSchema, json);
  if (!result.success) {
    const issue = describeIssues(result.issues, "HERMES_RUNTIME")[0];
    throw new ConfigError(`${issue?.field ?? "HERMES_RUNTIME"}: ${issue?.message ?? "invalid"}`);
  }
  const problem = runtimeProblem(result.output);
  if (problem) throw new ConfigError(`HERMES_RUNTIME: ${problem.field.replace(/^runtime\./, "")} ${problem.message}`);
  if (result.output.api_key || (result.output.fallback ?? []).some((entry) => entry.api_key)) {
    throw new ConfigError("HERMES_RUNTIME must not carry api_key: name the variable with api_key_env");
  }
  return result.output;
}

/**
 * A runtime names its credential with `api_key_env`, and any API key holder can write a runtime, so only
 * provider key variables can be read that way: `<NAME>_API_KEY`, never `HERMES_*`. Otherwise a client could have
 * the server send HERMES_SECRET_KEY, the API keys or a platform token as a bearer token to a base URL it chose.
 */
export function isProviderKeyVariable(name: string): boolean {
  return /^[A-Z][A-Z0-9_]*_API_KEY$/.test(name) && !name.startsWith("HERMES_");
}

export function loadConfig(env: Env): Config {
  const libsqlUrl = env.LIBSQL_URL || "file:data/hermes-edge.db";
  if (!/^(file:|:memory:$|https?:\/\/|libsql:\/\/|wss?:\/\/)/.test(libsqlUrl)) {
    throw new ConfigError("LIBSQL_URL must start with file:, http(s)://, libsql:// or ws(s)://, or be :memory:");
  }
  const host = env.HOST || "127.0.0.1";
  if (!/^[A-Za-z0-9.:[\]-]{1,255}$/.test(host)) throw new ConfigError("HOST must be a host name or address");
  return {
    port: integerVariable(env, "PORT", 8787, 0, 65535),
    host,
    libsqlUrl,
    libsqlAuthToken: env.LIBSQL_AUTH_TOKEN || undefined,
    apiKeys: parseApiKeys(env.HERMES_API_KEYS),
    secretKey: decodeSecretKey(env.HERMES_SECRET_KEY),
    defaultRuntime: parseRuntimeVariable(env.HERMES_RUNTIME),
    fetchAllowPrivate: booleanVariable(env, "HERMES_FETCH_ALLOW_PRIVATE"),
    maxBodyBytes: integerVariable(env, "HERMES_MAX_BODY_BYTES", 1024 * 1024, 1024, 64 * 1024 * 1024),
    leaseMs: integerVariable(env, "HERMES_LEASE_MS", 10 * 60_000, 1000, 24 * 3_600_000),
    toolTimeoutMs: integerVariable(env, "HERMES_TOOL_TIMEOUT_MS", 30_000, 100, 15 * 60_000),
    telegram: {
      botToken: env.TELEGRAM_BOT_TOKEN || undefined,
      webhookSecret: env.TELEGRAM_WEBHOOK_SECRET || undefined,
      apiBase: urlVariable(env, "TELEGRAM_API_BASE", "https://api.telegram.org"),
    },
    slack: {
      signingSecret: env.SLACK_SIGNING_SECRET || undefined,
      botToken: env.SLACK_BOT_TOKEN || undefined,
      apiBase: urlVariable(env, "SLACK_API_BASE", "https://slack.com/api"),
    },
    discord: {
      publicKey: env.DISCORD_PUBLIC_KEY || undefined,
      applicationId: env.DISCORD_APPLICATION_ID || undefined,
      botToken: env.DISCORD_BOT_TOKEN || undefined,
      apiBase: urlVariable(env, "DISCORD_API_BASE", "https://discord.com/api/v10"),
    },
    readEnv: (variable) => (isProviderKeyVariable(variable) ? env[variable] || undefined : undefined),
  };
}
