// The turn-scoped fallback chain (design.md "Provider runtime and failover"). Built from the stored primary
// snapshot at the start of every turn, so a fallback used by one turn never leaks into the next.
import type { ProviderAttempt } from "../errors.ts";
import { ProviderChainError } from "../errors.ts";
import { classifyProviderError, type ProviderErrorClass } from "./providers/classify-provider-error.ts";
import type { GenerateRequest, GenerateResult, Provider, ProviderSettings } from "./providers/types.ts";
import { providerDefaults, type StoredFallback, type StoredRuntime } from "./runtime.ts";
import type { ProviderHealth } from "../kv/keys.ts";

export interface ChainEntry {
  provider: string;
  model: string;
  baseUrl: string;
  apiMode: ProviderSettings["apiMode"];
  apiKeyEnv: string | undefined;
  apiKeyEnc: string | undefined;
  aggregator: boolean;
}

export interface ChainDependencies {
  createProvider: (settings: ProviderSettings) => Provider;
  /** Resolves an entry's credential; called again for the one credential re-read after an auth error. */
  resolveApiKey: (entry: ChainEntry) => Promise<string | undefined>;
  fetch: typeof fetch;
  sleep: (ms: number) => Promise<void>;
  random: () => number;
  onFallback?: (from: ChainEntry, to: ChainEntry, reason: string) => void;
  /** Called before a retry of the same step; streaming clients discard the partial text they saw. */
  onRetry?: (entry: ChainEntry, reason: string) => void;
  /** Shared provider health: an entry that just returned rate_limit is skipped by every session for a while. */
  health?: ProviderHealth;
}

const backoffBaseMs = 2000;
const backoffCapMs = 60_000;
/** Retries spent on overloaded/timeout/transport before moving on: these rarely clear within one turn. */
const quickFailoverRetries = 2;

export function toChainEntry(source: StoredRuntime | StoredFallback): ChainEntry {
  const defaults = providerDefaults[source.provider];
  return {
    provider: source.provider,
    model: source.model,
    baseUrl: (source.base_url ?? defaults?.baseUrl ?? "").replace(/\/+$/, ""),
    apiMode: source.api_mode ?? defaults?.apiMode ?? "chat_completions",
    apiKeyEnv: source.api_key_env ?? defaults?.apiKeyEnv,
    apiKeyEnc: source.api_key_enc,
    aggregator: defaults?.aggregator === true,
  };
}

/** The primary first, then the fallbacks in order, skipping entries equal to an earlier provider+model. */
export function chainEntries(runtime: StoredRuntime): ChainEntry[] {
  const entries = [toChainEntry(runtime)];
  for (const fallback of runtime.fallback ?? []) {
    const entry = toChainEntry(fallback);
    if (!entries.some((existing) => existing.provider === entry.provider && existing.model === entry.model)) entries.push(entry);
  }
  return entries;
}

/** Client settings for an entry: endpoint and model from the entry, limits and caching from the primary snapshot. */
export function providerSettings(entry: ChainEntry, runtime: StoredRuntime, apiKey: string, fetchImpl: typeof fetch, overrides: Partial<ProviderSettings> = {}): ProviderSettings {
  return {
    provider: entry.provider,
    model: entry.model,
    baseUrl: entry.baseUrl,
    apiMode: entry.apiMode,
    apiKey,
    timeoutMs: runtime.timeout_ms ?? 120_000,
    maxTokens: runtime.max_tokens ?? 4096,
    promptCaching: runtime.prompt_caching ?? true,
    fetch: fetchImpl,
    ...overrides,
  };
}

/** Jittered exponential backoff (base 2 s, cap 60 s); a Retry-After within the cap wins. */
export function backoffMs(retry: number, retryAfterMs: number | undefined, random: () => number): number {
  if (retryAfterMs !== undefined && retryAfterMs >= 0) return Math.min(retryAfterMs, backoffCapMs);
  const exponential = Math.min(backoffCapMs, backoffBaseMs * 2 ** retry);
  return exponential / 2 + random() * (exponential / 2);
}

/** Guards that may each fire once per attempt on an entry (design.md: one small per-attempt retry-state object). */
interface AttemptState {
  retries: number;
  credentialReread: boolean;
}

export class ProviderChain {
  readonly attempts: ProviderAttempt[] = [];
  readonly entries: ChainEntry[];
  private index = 0;
  private transportRecoveryUsed = false;
  private clients = new Map<number, Provider>();

  constructor(
    private readonly runtime: StoredRuntime,
    private readonly deps: ChainDependencies,
  ) {
    this.entries = chainEntries(runtime);
  }

  get current(): ChainEntry {
    return this.entries[this.index]!;
  }

  get fallbackActivated(): boolean {
    return this.index > 0;
  }

  private async client(rebuild = false): Promise<Provider> {
    const cached = this.clients.get(this.index);
    if (cached && !rebuild) return cached;
    const entry = this.current;
    const apiKey = await this.deps.resolveApiKey(entry);
    if (apiKey === undefined) throw new MissingCredentialError(entry.apiKeyEnv);
    const provider = this.deps.createProvider(providerSettings(entry, this.runtime, apiKey, this.deps.fetch));
    this.clients.set(this.index, provider);
    return provider;
  }

  private wait(ms: number): Promise<void> {
    const scaled = ms * (this.runtime.retry?.time_scale ?? 1);
    return scaled > 0 ? this.deps.sleep(scaled) : Promise.resolve();
  }

  private moveOn(reason: string): boolean {
    if (this.index + 1 >= this.entries.length) return false;
    const from = this.current;
    this.index += 1;
    this.deps.onFallback?.(from, this.current, reason);
    return true;
  }

  /** One model step with retries and failover. Throws ProviderChainError when every entry failed. */
  async generate(request: GenerateRequest): Promise<GenerateResult> {
    const maxRetries = this.runtime.retry?.max_retries ?? 3;
    let state: AttemptState = { retries: 0, credentialReread: false };
    let rebuild = false;
    for (;;) {
      const entry = this.current;
      if (state.retries === 0 && !state.credentialReread && (await this.coolingDown(entry))) {
        // No request is made; the skip is recorded so the turn shows why the fallback served it.
        this.attempts.push({ provider: entry.provider, model: entry.model, outcome: "error", reason: "rate_limit" });
        this.moveOn("rate_limit");
        continue;
      }
      let classified: ProviderErrorClass;
      try {
        const provider = await this.client(rebuild);
        rebuild = false;
        const result = await provider.generate(request);
        this.attempts.push({ provider: entry.provider, model: entry.model, outcome: "ok" });
        return result;
      } catch (error) {
        if (request.signal?.aborted) throw error;
        classified = error instanceof MissingCredentialError ? error.classified : classifyProviderError(error);
      }
      this.attempts.push({
        provider: entry.provider,
        model: entry.model,
        outcome: "error",
        reason: classified.reason,
        ...(classified.status !== undefined ? { status: classified.status } : {}),
      });

      if (classified.reason === "rate_limit") await this.deps.health?.markRateLimited(entry, classified.retryAfterMs).catch(() => undefined);
      const decision = this.decide(classified, state, maxRetries);
      if (decision === "retry") {
        this.deps.onRetry?.(entry, classified.reason);
        await this.wait(backoffMs(state.retries, classified.retryAfterMs, this.deps.random));
        state.retries += 1;
        continue;
      }
      if (decision === "reread") {
        state.credentialReread = true;
        rebuild = true;
        this.deps.onRetry?.(entry, classified.reason);
        continue;
      }
      if (decision === "recover") {
        // Transport recovery (once per turn, direct endpoints, primary only): a fresh client drops a poisoned
        // keep-alive pool; the pause lets a restarting endpoint come back.
        this.transportRecoveryUsed = true;
        rebuild = true;
        this.deps.onRetry?.(entry, classified.reason);
        await this.wait(Math.min(3 + state.retries, 8) * 1000);
        continue;
      }
      if (decision === "fail" || !this.moveOn(classified.reason)) {
        const last = this.attempts[this.attempts.length - 1];
        throw new ProviderChainError(
          `Every provider failed; last: ${last?.provider}/${last?.model} (${classified.reason}${classified.status ? ` ${classified.status}` : ""}).`,
          this.attempts,
        );
      }
      state = { retries: 0, credentialReread: false };
    }
  }

  /** Only with somewhere to go: the last entry of a chain is always tried. The cache may fail; that means "healthy". */
  private async coolingDown(entry: ChainEntry): Promise<boolean> {
    if (!this.deps.health || this.index + 1 >= this.entries.length) return false;
    return this.deps.health.isCoolingDown(entry).catch(() => false);
  }

  private decide(classified: ProviderErrorClass, state: AttemptState, maxRetries: number): "retry" | "reread" | "recover" | "next" | "fail" {
    switch (classified.reason) {
      case "billing":
        return "next";
      case "rate_limit":
        // With a chain, waiting out a quota is slower than the next provider; without one, retry the primary.
        return this.entries.length > 1 || state.retries >= maxRetries ? "next" : "retry";
      case "auth":
        return state.credentialReread ? "next" : "reread";
      case "overloaded":
      case "timeout":
        return state.retries < Math.min(quickFailoverRetries, maxRetries) ? "retry" : "next";
      case "transport":
        if (state.retries < Math.min(quickFailoverRetries, maxRetries)) return "retry";
        return !this.transportRecoveryUsed && this.index === 0 && !this.current.aggregator ? "recover" : "next";
      case "server_error":
        return state.retries < maxRetries ? "retry" : "next";
      case "model_not_found":
        return "next";
      default:
        // format_error, context_overflow, payload_too_large: the request itself is at fault; another
        // provider would refuse it too (compression handles context overflow before this point).
        return classified.retryable && state.retries < maxRetries ? "retry" : "fail";
    }
  }
}

class MissingCredentialError extends Error {
  readonly classified: ProviderErrorClass;
  constructor(variable: string | undefined) {
    super(variable ? `no credential in ${variable}` : "no credential configured");
    this.name = new.target.name;
    this.classified = { reason: "auth", retryable: false, shouldFailOver: true, message: this.message };
  }
}
