// The normalized history as OpenAI Chat Completions messages. Tool call ids pass through verbatim, so
// a conversation begun on Anthropic (`toolu_…`) continues here with its calls and results still paired.
import type {
  ChatCompletionAssistantMessageParam,
  ChatCompletionFunctionTool,
  ChatCompletionMessageParam,
} from "openai/resources/chat/completions";
import type { ChatMessage } from "../messages.ts";
import { repairToolPairing } from "./repair-tool-pairing.ts";
import type { ToolSpec } from "./types.ts";

export function convertToOpenAIMessages(system: string, messages: ChatMessage[]): ChatCompletionMessageParam[] {
  const converted: ChatCompletionMessageParam[] = [];
  // Several OpenAI-compatible servers reject an empty system message; no prompt means no message.
  if (system.length > 0) converted.push({ role: "system", content: system });

  for (const message of repairToolPairing(messages)) {
    switch (message.role) {
      case "user":
        converted.push({ role: "user", content: message.content ?? "" });
        break;
      case "tool":
        converted.push({ role: "tool", tool_call_id: message.toolCallId ?? "", content: message.content ?? "" });
        break;
      case "assistant": {
        const assistant = convertAssistant(message);
        if (assistant !== null) converted.push(assistant);
        break;
      }
    }
  }
  return converted;
}

export function convertToOpenAITools(tools: ToolSpec[]): ChatCompletionFunctionTool[] {
  return tools.map((tool) => ({
    type: "function",
    function: { name: tool.name, description: tool.description, parameters: tool.parameters },
  }));
}

function convertAssistant(message: ChatMessage): ChatCompletionAssistantMessageParam | null {
  const text = message.content ?? "";
  const calls = message.toolCalls ?? [];
  // An assistant message with neither text nor calls carries nothing and some servers reject it.
  if (text.length === 0 && calls.length === 0) return null;
  const assistant: ChatCompletionAssistantMessageParam = { role: "assistant", content: text.length > 0 ? text : null };
  // OpenAI rejects `tool_calls: []` ("empty array. Expected an array with minimum length 1").
  if (calls.length > 0) {
    assistant.tool_calls = calls.map((call) => ({
      id: call.id,
      type: "function",
      function: { name: call.name, arguments: normalizeArguments(call.arguments) },
    }));
  }
  return assistant;
}

/**
 * Arguments the model sent as invalid JSON (or as a non-object) are replayed as "{}": servers that
 * render tool calls through a chat template (vLLM, llama.cpp) parse them and answer 400 otherwise.
 * The tool result recorded for such a call already tells the model its arguments were invalid.
 */
function normalizeArguments(text: string): string {
  try {
    const parsed: unknown = JSON.parse(text);
    if (typeof parsed === "object" && parsed !== null && !Array.isArray(parsed)) return text;
  } catch {
    // fall through to the empty object
  }
  return "{}";
}
