// Both wire formats reject a conversation whose tool calls and results do not pair up: OpenAI answers
// 400 "An assistant message with 'tool_calls' must be followed by tool messages responding to each
// 'tool_call_id'", Anthropic 400 "`tool_use` ids were found without `tool_result` blocks immediately
// after". The journal can hold such gaps (a process died between a call and its result, a result was
// written twice by a retried write), so every converter runs the history through this first.
import type { ChatMessage, ToolCall } from "../messages.ts";

/** The text of the result put in for a call that has none, so the model never assumes an outcome. */
export const MISSING_TOOL_RESULT_TEXT = "result unavailable";

/**
 * Returns the history with each assistant tool call answered exactly once, its results directly after
 * it in call order, then whatever other messages arrived in between (a user message written while the
 * tools ran). Results that answer no call of the preceding assistant message, and second results for
 * one id, are dropped; a call without a result gets an error result saying it is unavailable.
 */
export function repairToolPairing(messages: readonly ChatMessage[]): ChatMessage[] {
  const repaired: ChatMessage[] = [];
  let index = 0;
  while (index < messages.length) {
    const message = messages[index++] as ChatMessage;
    // A result outside the window of an assistant message with calls answers nothing we can send.
    if (message.role === "tool") continue;
    const calls = uniqueCalls(message.toolCalls);
    if (message.role !== "assistant" || calls.length === 0) {
      repaired.push(message);
      continue;
    }

    const callIds = new Set(calls.map((call) => call.id));
    const results = new Map<string, ChatMessage>();
    const interleaved: ChatMessage[] = [];
    // The window of this assistant message runs until the next assistant message.
    while (index < messages.length && messages[index]?.role !== "assistant") {
      const next = messages[index++] as ChatMessage;
      if (next.role !== "tool") {
        interleaved.push(next);
        continue;
      }
      const id = next.toolCallId;
      if (id !== undefined && callIds.has(id) && !results.has(id)) results.set(id, next);
    }

    repaired.push(calls.length === message.toolCalls?.length ? message : { ...message, toolCalls: calls });
    for (const call of calls) repaired.push(results.get(call.id) ?? missingResult(call));
    repaired.push(...interleaved);
  }
  return repaired;
}

/** Both APIs reject two calls with one id in a message; the first one is the one a result can answer. */
function uniqueCalls(calls: ToolCall[] | undefined): ToolCall[] {
  if (calls === undefined || calls.length === 0) return [];
  const seen = new Set<string>();
  return calls.filter((call) => {
    if (seen.has(call.id)) return false;
    seen.add(call.id);
    return true;
  });
}

function missingResult(call: ToolCall): ChatMessage {
  return {
    role: "tool",
    content: MISSING_TOOL_RESULT_TEXT,
    toolCallId: call.id,
    name: call.name,
    isError: true,
  };
}
