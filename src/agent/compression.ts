// Context compression (durable): when the prompt outgrows `threshold` of the usable context, the middle of
// the conversation is summarized by the compression model into one journal row; the compacted rows are
// archived, never deleted, so a turn's load stays bounded however long the chat grows.
import type { ChatMessage } from "./messages.ts";
import type { StoredRuntime } from "./runtime.ts";

/** An entry of the active conversation; `seq` is absent only for a result whose write was a duplicate. */
export type ConversationEntry = ChatMessage & { seq?: number };

export const defaultContextLength = 128_000;
export const defaultThreshold = 0.5;
/** Below this many tokens compression never triggers: summarizing a short chat loses more than it saves. */
export const thresholdFloorTokens = 1_000;
/** The tail keeps at least this many messages verbatim. */
export const minTailMessages = 8;
/** Share of the usable context the verbatim tail may take. */
const tailBudgetShare = 0.25;
/** Each message is cut to this many characters in the summarizer's input, to bound that request. */
const summarizerMessageChars = 4_000;

/** Compressor state, restored from the primary snapshot every turn (never from a fallback). */
export interface CompressorState {
  enabled: boolean;
  contextLength: number;
  maxTokens: number;
  threshold: number;
  thresholdTokens: number;
}

export function compressorState(runtime: StoredRuntime): CompressorState {
  const contextLength = runtime.compression?.context_length ?? runtime.context_length ?? defaultContextLength;
  const maxTokens = Math.min(runtime.max_tokens ?? 4096, Math.floor(contextLength / 2));
  const threshold = runtime.compression?.threshold ?? defaultThreshold;
  return {
    enabled: runtime.compression?.enabled ?? true,
    contextLength,
    maxTokens,
    threshold,
    thresholdTokens: Math.max(thresholdFloorTokens, Math.floor(threshold * (contextLength - maxTokens))),
  };
}

/** About four characters per token for English text and JSON; the provider's real count wins when known. */
export function estimateTokens(text: string): number {
  return Math.ceil(text.length / 4);
}

export function estimateMessageTokens(message: ChatMessage): number {
  let total = 4 + estimateTokens(message.content ?? "");
  for (const call of message.toolCalls ?? []) total += estimateTokens(call.name) + estimateTokens(call.arguments) + 4;
  return total;
}

/**
 * The head is the first exchange: entries up to and including the first final assistant answer (one without
 * tool calls), or just the first message when there is none yet. It never ends inside a tool exchange.
 */
function headLength(entries: readonly ConversationEntry[]): number {
  const firstAnswer = entries.findIndex((entry) => entry.role === "assistant" && !entry.toolCalls?.length);
  return firstAnswer === -1 ? Math.min(1, entries.length) : firstAnswer + 1;
}

/** The order a provider receives: head, then the summary (if any), then the rest, each in seq order. */
export function orderForProvider(entries: readonly ConversationEntry[]): ChatMessage[] {
  const summary = entries.find((entry) => entry.summary);
  const plain = entries.filter((entry) => !entry.summary);
  if (!summary) return plain.map(stripSeq);
  const head = headLength(plain);
  return [...plain.slice(0, head), summary, ...plain.slice(head)].map(stripSeq);
}

function stripSeq(entry: ConversationEntry): ChatMessage {
  const { seq: _seq, ...message } = entry;
  return message;
}

export interface CompactionPlan {
  head: ConversationEntry[];
  middle: ConversationEntry[];
  tail: ConversationEntry[];
  previousSummary: ConversationEntry | null;
}

/**
 * Splits the conversation into head / middle / tail. The tail holds at least the last 8 messages and grows
 * back while it fits its token budget; its first entry is never a tool result (that would split a call from
 * its results), so the start moves back to the assistant message that made the calls. Null when the middle
 * would be empty. `overflow` keeps only the minimum tail.
 */
export function planCompaction(entries: readonly ConversationEntry[], state: CompressorState, overflow = false): CompactionPlan | null {
  const previousSummary = entries.find((entry) => entry.summary) ?? null;
  const plain = entries.filter((entry) => !entry.summary);
  const head = headLength(plain);
  // After the provider reported an overflow the estimate was wrong, so the tail shrinks to its minimum.
  const budget = overflow ? 0 : tailBudgetShare * (state.contextLength - state.maxTokens);
  let tailStart = plain.length;
  let tailTokens = 0;
  while (tailStart > head) {
    const cost = estimateMessageTokens(plain[tailStart - 1]!);
    const keep = plain.length - tailStart < minTailMessages || tailTokens + cost <= budget;
    if (!keep) break;
    tailTokens += cost;
    tailStart -= 1;
  }
  while (tailStart > head && plain[tailStart]?.role === "tool") tailStart -= 1;
  const middle = plain.slice(head, tailStart);
  if (middle.length === 0 || middle.some((entry) => entry.seq === undefined)) return null;
  return { head: plain.slice(0, head), middle, tail: plain.slice(tailStart), previousSummary };
}

export const summaryPrefix = "[Summary of the earlier part of this conversation]";

export function summarizerRequest(plan: CompactionPlan): { system: string; messages: ChatMessage[] } {
  const transcript = plan.middle
    .map((entry) => {
      const who = entry.role === "tool" ? `tool ${entry.name ?? ""}`.trim() : entry.role;
      const calls = entry.toolCalls?.length ? ` [calls: ${entry.toolCalls.map((call) => `${call.name}(${call.arguments.slice(0, 200)})`).join(", ")}]` : "";
      return `${who}: ${(entry.content ?? "").slice(0, summarizerMessageChars)}${calls}`;
    })
    .join("\n\n");
  const previous = plan.previousSummary?.content?.replace(summaryPrefix, "").trim();
  const instruction = previous
    ? "Update the existing summary with the new messages below. Keep every fact, decision, open task, name, number and tool outcome that later messages may need; drop chit-chat. Write the updated summary only."
    : "Summarize the messages below for an assistant that will continue this conversation without seeing them. Keep every fact, decision, open task, name, number and tool outcome that later messages may need; drop chit-chat. Write the summary only.";
  return {
    system: "You compress conversation history. You never answer the conversation itself.",
    messages: [{ role: "user", content: `${instruction}\n\n${previous ? `Existing summary:\n${previous}\n\nNew messages:\n` : "Messages:\n"}${transcript}` }],
  };
}
