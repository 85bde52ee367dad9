// One agent turn (design.md "The flow of one message"), written to the journal as it happens:
// user message before the first provider call, assistant tool-call message before any tool starts,
// each tool result as the runner produces it, and the final answer with the turn record and lease release.
import type { Config } from "../config.ts";
import { randomId } from "../crypto.ts";
import { NotFoundError, ProviderChainError, SessionBusyError } from "../errors.ts";
import type { NotesStore } from "../state/notes.ts";
import type { Store, TurnRecord } from "../state/store.ts";
import type { ChatMessage, JournalMessage, ToolCall, Usage } from "./messages.ts";
import { assembleSystemPrompt, budgetExhaustedText, orphanResultText, stoppedReplyText, stoppedToolText } from "./prompt.ts";
import { ProviderChain, type ChainEntry } from "./provider-chain.ts";
import { createProvider as createSdkProvider } from "./providers/index.ts";
import type { Provider, ProviderSettings } from "./providers/types.ts";
import { openKey } from "./runtime-secrets.ts";
import { runToolBatch } from "./tool-runner.ts";
import { orderForProvider, type ConversationEntry } from "./compression.ts";
import { CompressionStep } from "./compression-step.ts";
import type { EdgeCache } from "../kv/cache.ts";
import { createProviderHealth } from "../kv/keys.ts";
import { selectTools, toolSpecs } from "./tools/registry.ts";
import type { Tool } from "./tools/types.ts";

export type TurnEvent =
  | { type: "turn-start"; turnId: string; seq: number }
  | { type: "text-delta"; text: string }
  | { type: "step-discarded"; reason: string }
  | { type: "tool-call-start"; call: ToolCall }
  | { type: "tool-call-end"; call: ToolCall; seq: number; isError: boolean }
  | { type: "provider-fallback"; from: string; to: string; reason: string };

export interface TurnDependencies {
  store: Store;
  notes: NotesStore;
  config: Config;
  fetch: typeof fetch;
  now: () => number;
  resolveHost?: (hostname: string) => Promise<string[]>;
  /** Replaceable in tests; defaults to the SDK adapters. */
  createProvider?: (settings: ProviderSettings) => Provider;
  sleep?: (ms: number) => Promise<void>;
  random?: () => number;
  /** Holds the compression cooldown; optional because the cache is never the source of truth. */
  cache?: EdgeCache;
  /** The tools toolsets select from; defaults to the built-ins. */
  tools?: readonly Tool[];
}

export interface TurnRequest {
  tenant: string;
  sessionId: string;
  /** Null runs the turn on the journal as it stands (used by /retry after it re-appends the message). */
  content: string | null;
  reasoning?: { effort: "low" | "medium" | "high" } | undefined;
  onEvent?: (event: TurnEvent) => void;
  /**
   * A caller-chosen turn id. The platform processor derives it from the inbox event, so an event claimed again
   * after a crash can see that its turn already ran and never runs it twice.
   */
  turnId?: string;
  /** Streaming: text deltas are forwarded through onEvent. */
  stream?: boolean;
  /**
   * Extra system text for this call only (OpenAI-compatible `system` messages). Appended after the stored
   * conversation prompt, so the cached prefix stays byte-identical; never stored.
   */
  ephemeralSystem?: string | undefined;
}

export interface TurnOutcome {
  turn: TurnRecord;
  reply: string;
  /** Every message this turn appended, in journal order. */
  messages: JournalMessage[];
}

const defaultMaxIterations = 25;

function toEntry(message: JournalMessage): ConversationEntry {
  const { turnId: _turnId, createdAt: _createdAt, archived: _archived, ...entry } = message;
  return entry;
}

/**
 * Tool call ids pair a call with its result, and the journal keeps one result per id in the active
 * conversation. Providers usually issue unique ids, but some number them (call_0, call_1) in every response
 * or repeat one within a batch; such an id gets a suffix before the call is journaled, so no result is lost.
 */
export function uniqueToolCallIds(calls: readonly ToolCall[], conversation: readonly ChatMessage[]): ToolCall[] {
  if (calls.length === 0) return [];
  const taken = new Set<string>();
  for (const message of conversation) {
    for (const call of message.toolCalls ?? []) taken.add(call.id);
    if (message.toolCallId) taken.add(message.toolCallId);
  }
  return calls.map((call) => {
    let id = call.id;
    for (let suffix = 2; taken.has(id); suffix++) id = `${call.id}_${suffix}`;
    taken.add(id);
    return id === call.id ? call : { ...call, id };
  });
}

function isContextOverflow(error: unknown): boolean {
  const reason = error instanceof ProviderChainError ? error.attempts[error.attempts.length - 1]?.reason : undefined;
  return reason === "context_overflow" || reason === "payload_too_large";
}

export async function runTurn(deps: TurnDependencies, request: TurnRequest): Promise<TurnOutcome> {
  const turnId = request.turnId ?? randomId("turn");
  const iso = () => new Date(deps.now()).toISOString();
  const startedAt = iso();
  const begun = await deps.store.beginTurn({
    tenant: request.tenant,
    sessionId: request.sessionId,
    turnId,
    userContent: request.content,
    now: startedAt,
    nowMs: deps.now(),
    leaseMs: deps.config.leaseMs,
    orphanText: orphanResultText,
  });
  if (begun.kind === "not_found") throw new NotFoundError("Session not found.");
  if (begun.kind === "busy") throw new SessionBusyError(begun.retryAfterMs / 1000);

  const { session } = begun;
  const appended: JournalMessage[] = [...begun.appended];
  const conversation: ConversationEntry[] = begun.history.map(toEntry);
  let nextSeq = (begun.history[begun.history.length - 1]?.seq ?? 0) + 1;
  const emit = request.onEvent ?? (() => undefined);
  emit({ type: "turn-start", turnId, seq: nextSeq - 1 });

  const runtime = session.runtime;
  const tools = selectTools(runtime.toolsets, deps.tools);
  const specs = toolSpecs(tools);
  const storedPrompt = session.conversationPrompt;
  const system = storedPrompt ?? assembleSystemPrompt(session.systemPrompt, begun.memory);
  let promptToStore: string | undefined = storedPrompt === null ? system : undefined;
  const usage: Usage = { inputTokens: 0, outputTokens: 0 };
  const reasoning = request.reasoning ?? (session.reasoning ? { effort: session.reasoning } : undefined);

  const resolveApiKey = async (entry: ChainEntry) => {
    if (entry.apiKeyEnc) return openKey(deps.config.secretKey, entry.apiKeyEnc);
    const fromEnv = entry.apiKeyEnv ? deps.config.readEnv(entry.apiKeyEnv) : undefined;
    // Local servers (Ollama, a custom endpoint) often take no key; the SDKs still want a non-empty one.
    return fromEnv ?? (entry.provider === "ollama" || entry.provider === "custom" || !entry.apiKeyEnv ? "none" : undefined);
  };
  const chain = new ProviderChain(runtime, {
    createProvider: deps.createProvider ?? createSdkProvider,
    resolveApiKey,
    fetch: deps.fetch,
    sleep: deps.sleep ?? ((ms) => new Promise((resolve) => setTimeout(resolve, ms))),
    random: deps.random ?? Math.random,
    onFallback: (from, to, reason) => emit({ type: "provider-fallback", from: `${from.provider}:${from.model}`, to: `${to.provider}:${to.model}`, reason }),
    onRetry: (_entry, reason) => emit({ type: "step-discarded", reason }),
    ...(deps.cache ? { health: createProviderHealth(deps.cache, deps.now) } : {}),
  });

  const compression = new CompressionStep(
    {
      store: deps.store,
      ...(deps.cache ? { cache: deps.cache } : {}),
      createProvider: deps.createProvider ?? createSdkProvider,
      resolveApiKey,
      fetch: deps.fetch,
      now: deps.now,
      onCompacted: (summary) => appended.push(summary),
    },
    { tenant: request.tenant, sessionId: request.sessionId, sessionPk: session.pk, turnId, runtime, system, tools: specs, allocateSeq: () => nextSeq++ },
  );
  /** One model step: compress first when the prompt is over the threshold, and once more after an overflow. */
  const step = async () => {
    await compression.maybeCompress(conversation);
    const generate = () =>
      chain.generate({
        system: request.ephemeralSystem ? `${system}\n\n${request.ephemeralSystem}` : system,
        messages: orderForProvider(conversation),
        tools: specs,
        ...(reasoning ? { reasoning } : {}),
        ...(request.stream ? { onTextDelta: (text: string) => emit({ type: "text-delta", text }) } : {}),
      });
    try {
      return await generate();
    } catch (error) {
      if (!isContextOverflow(error) || !(await compression.maybeCompress(conversation, true))) throw error;
      return generate();
    }
  };

  const toolAbort = new AbortController();
  const toolContext = {
    sessionPk: session.pk,
    notes: deps.notes,
    fetch: deps.fetch,
    allowPrivateFetch: deps.config.fetchAllowPrivate,
    ...(deps.resolveHost ? { resolveHost: deps.resolveHost } : {}),
    signal: toolAbort.signal,
  };
  const leaseExpiry = () => deps.now() + deps.config.leaseMs;

  const finish = async (status: "completed" | "failed" | "interrupted", finalMessages: ChatMessage[], error: string | null): Promise<TurnRecord> => {
    const record: TurnRecord = {
      id: turnId,
      status,
      provider: chain.attempts.length > 0 ? chain.current.provider : null,
      model: chain.attempts.length > 0 ? chain.current.model : null,
      fallbackActivated: chain.fallbackActivated,
      attempts: chain.attempts,
      usage,
      startedAt,
      endedAt: iso(),
    };
    const written = await deps.store.finishTurn(
      {
        sessionPk: session.pk,
        turnId,
        status,
        provider: record.provider,
        model: record.model,
        fallbackActivated: record.fallbackActivated,
        attempts: record.attempts,
        usage,
        error,
        now: record.endedAt!,
        ...(promptToStore !== undefined ? { conversationPrompt: promptToStore } : {}),
      },
      nextSeq,
      finalMessages,
    );
    nextSeq += written.length;
    appended.push(...written);
    return record;
  };

  try {
    const maxIterations = runtime.max_iterations ?? defaultMaxIterations;
    for (let iteration = 0; iteration < maxIterations; iteration++) {
      const result = await step();
      const toolCalls = uniqueToolCallIds(result.toolCalls, conversation);
      compression.recordCall(result.usage.inputTokens, conversation.length);
      usage.inputTokens += result.usage.inputTokens;
      usage.outputTokens += result.usage.outputTokens;
      const assistant: ChatMessage = {
        role: "assistant",
        content: result.content,
        provider: chain.current.provider,
        model: chain.current.model,
        ...(toolCalls.length > 0 ? { toolCalls } : {}),
      };
      if (toolCalls.length === 0) {
        const turn = await finish("completed", [assistant], null);
        return { turn, reply: result.content ?? "", messages: appended };
      }

      const { written, stopRequested } = await deps.store.appendMessages(session.pk, turnId, nextSeq, [assistant], iso(), leaseExpiry(), promptToStore);
      promptToStore = undefined;
      nextSeq += written.length;
      appended.push(...written);
      conversation.push({ ...assistant, seq: written[0]!.seq });
      if (stopRequested) {
        // /stop: the calls are answered without running them, so the journal stays well formed.
        const notRun: ChatMessage[] = toolCalls.map((toolCall) => ({ role: "tool", content: stoppedToolText, toolCallId: toolCall.id, name: toolCall.name, isError: true }));
        const turn = await finish("interrupted", [...notRun, { role: "assistant", content: stoppedReplyText }], null);
        return { turn, reply: stoppedReplyText, messages: appended };
      }

      await runToolBatch(toolCalls, tools, toolContext, deps.config.toolTimeoutMs, {
        onStart: (call) => emit({ type: "tool-call-start", call }),
        journal: async (toolResult) => {
          const seq = nextSeq;
          const row = await deps.store.appendToolResult(session.pk, turnId, seq, toolResult, iso());
          if (row) {
            nextSeq += 1;
            appended.push(row);
          }
          conversation.push(row ? { ...toolResult, seq: row.seq } : toolResult);
        },
        onEnd: (call, toolResult) => emit({ type: "tool-call-end", call, seq: nextSeq - 1, isError: toolResult.isError === true }),
      });
    }
    const text = budgetExhaustedText(maxIterations);
    const turn = await finish("completed", [{ role: "assistant", content: text }], null);
    return { turn, reply: text, messages: appended };
  } catch (error) {
    toolAbort.abort();
    // Every exit path records the turn and releases the lease; the user message and completed results stay.
    const reason = error instanceof ProviderChainError ? "provider_error" : "internal";
    try {
      await finish("failed", [], reason);
    } catch {
      // The lease expires on its own (HERMES_LEASE_MS); the original error is the one to report.
    }
    throw error;
  }
}
