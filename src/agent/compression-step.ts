// Runs compression inside a turn: checks the trigger before each provider call (and after a context
// overflow), calls the compression model, and journals the result in one round trip.
import type { EdgeCache } from "../kv/cache.ts";
import type { Store } from "../state/store.ts";
import type { JournalMessage } from "./messages.ts";
import { compressorState, estimateMessageTokens, estimateTokens, planCompaction, summarizerRequest, summaryPrefix, type ConversationEntry } from "./compression.ts";
import { providerSettings, toChainEntry, type ChainEntry } from "./provider-chain.ts";
import { sessionScope } from "../kv/keys.ts";
import type { Provider, ProviderSettings, ToolSpec } from "./providers/types.ts";
import type { StoredRuntime } from "./runtime.ts";

/** After a failed summary the session is not summarized again for this long (and never twice in one turn). */
export const compressionCooldownMs = 10 * 60_000;

export interface CompressionStepDependencies {
  store: Store;
  cache?: EdgeCache;
  createProvider: (settings: ProviderSettings) => Provider;
  resolveApiKey: (entry: ChainEntry) => Promise<string | undefined>;
  fetch: typeof fetch;
  now: () => number;
  /** The summary row, once journaled (a turn lists it among the messages it appended). */
  onCompacted?: (summary: JournalMessage, archived: number) => void;
  onFailed?: (reason: string) => void;
}

export interface CompressionContext {
  tenant: string;
  sessionId: string;
  sessionPk: number;
  turnId: string;
  runtime: StoredRuntime;
  system: string;
  tools: ToolSpec[];
  allocateSeq: () => number;
}

/** The compression model: its own provider/model from the snapshot, else the primary's. */
function compressionEntry(runtime: StoredRuntime): ChainEntry {
  const compression = runtime.compression ?? {};
  const provider = compression.provider ?? runtime.provider;
  const samePrimary = provider === runtime.provider;
  return toChainEntry({
    provider,
    model: compression.model ?? runtime.model,
    ...(compression.base_url ?? (samePrimary ? runtime.base_url : undefined) ? { base_url: compression.base_url ?? runtime.base_url } : {}),
    ...(samePrimary && runtime.api_mode ? { api_mode: runtime.api_mode } : {}),
    ...(compression.api_key_env ?? (samePrimary ? runtime.api_key_env : undefined) ? { api_key_env: compression.api_key_env ?? runtime.api_key_env } : {}),
    ...(samePrimary && runtime.api_key_enc ? { api_key_enc: runtime.api_key_enc } : {}),
  });
}

export class CompressionStep {
  private readonly state;
  private failedThisTurn = false;
  /** The provider's real prompt size at the last call, and how many entries that call saw. */
  private lastCall: { inputTokens: number; entries: number } | null = null;

  constructor(
    private readonly deps: CompressionStepDependencies,
    private readonly context: CompressionContext,
  ) {
    this.state = compressorState(context.runtime);
  }

  get thresholdTokens(): number {
    return this.state.thresholdTokens;
  }

  recordCall(inputTokens: number, entries: number): void {
    if (inputTokens > 0) this.lastCall = { inputTokens, entries };
  }

  /** The real prompt_tokens of the last response plus an estimate of what came after, else a full estimate. */
  estimatePrompt(entries: readonly ConversationEntry[]): number {
    if (this.lastCall && this.lastCall.entries <= entries.length) {
      return this.lastCall.inputTokens + entries.slice(this.lastCall.entries).reduce((sum, entry) => sum + estimateMessageTokens(entry), 0);
    }
    const fixed = estimateTokens(this.context.system) + estimateTokens(JSON.stringify(this.context.tools));
    return fixed + entries.reduce((sum, entry) => sum + estimateMessageTokens(entry), 0);
  }

  /** Per-session, so /new, /reset, /model and a runtime PATCH (which invalidate the session scope) clear it. */
  private async cooldownKey(): Promise<string | null> {
    return this.deps.cache ? sessionScope(this.deps.cache, this.context.tenant, this.context.sessionId).key("compress-cooldown") : null;
  }

  /**
   * Compacts `entries` in place when the trigger fires (or `force`, after a context overflow). Returns true
   * when it compacted. A failure never loses messages: the turn goes on with the uncompressed history.
   */
  async maybeCompress(entries: ConversationEntry[], force = false): Promise<boolean> {
    if (!this.state.enabled || this.failedThisTurn) return false;
    if (!force && this.estimatePrompt(entries) <= this.state.thresholdTokens) return false;
    const cooldownKey = await this.cooldownKey().catch(() => null);
    if (this.deps.cache && cooldownKey && (await this.deps.cache.get(cooldownKey).catch(() => null))) return false;
    const plan = planCompaction(entries, this.state, force);
    if (!plan) return false;

    let summaryText: string;
    try {
      const entry = compressionEntry(this.context.runtime);
      const apiKey = await this.deps.resolveApiKey(entry);
      if (apiKey === undefined) throw new Error("no credential for the compression model");
      const provider = this.deps.createProvider(
        providerSettings(entry, this.context.runtime, apiKey, this.deps.fetch, { maxTokens: Math.min(4096, this.state.maxTokens), promptCaching: false }),
      );
      const request = summarizerRequest(plan);
      const result = await provider.generate({ system: request.system, messages: request.messages, tools: [] });
      if (!result.content?.trim()) throw new Error("the compression model returned no text");
      summaryText = result.content.trim();
    } catch (error) {
      this.failedThisTurn = true;
      if (cooldownKey) await this.deps.cache?.put(cooldownKey, "1", compressionCooldownMs).catch(() => undefined);
      this.deps.onFailed?.(error instanceof Error ? error.name : "error");
      return false;
    }

    const seqs = plan.middle.map((entry) => entry.seq!);
    const seq = this.context.allocateSeq();
    const summary = { role: "user" as const, content: `${summaryPrefix}\n${summaryText}`, summary: true as const };
    const row = await this.deps.store.compactConversation(
      this.context.sessionPk,
      this.context.turnId,
      { fromSeq: Math.min(...seqs), toSeq: Math.max(...seqs), previousSummarySeq: plan.previousSummary?.seq ?? null },
      seq,
      summary,
      new Date(this.deps.now()).toISOString(),
    );
    entries.splice(0, entries.length, ...plan.head, { ...summary, seq: row.seq }, ...plan.tail);
    this.lastCall = null;
    this.deps.onCompacted?.(row, seqs.length);
    return true;
  }
}
