// The normalized history as Anthropic Messages. Anthropic is stricter than OpenAI: roles must
// alternate starting with a user message, text blocks must be non-empty, all results for one
// assistant message travel in the next user message (results first), tool_use ids must match
// ^[a-zA-Z0-9_-]+$, and at most 4 blocks may carry cache_control.
import type {
  CacheControlEphemeral,
  ContentBlockParam,
  MessageParam,
  TextBlockParam,
  Tool,
} from "@anthropic-ai/sdk/resources/messages";
import type { ChatMessage } from "../messages.ts";
import { repairToolPairing } from "./repair-tool-pairing.ts";
import type { ToolSpec } from "./types.ts";

export interface AnthropicConversionOptions {
  /** Mark cache breakpoints so the unchanged prefix is billed at the cache-read rate (0.1x). */
  promptCaching: boolean;
}

export interface AnthropicConversation {
  system: TextBlockParam[] | string;
  messages: MessageParam[];
}

/** Text of the user message put first when a history starts with an assistant message (after compaction). */
export const LEADING_USER_TEXT = "(conversation continues)";

const EPHEMERAL: CacheControlEphemeral = { type: "ephemeral" };
// Anthropic allows 4 breakpoints: system prompt, tools (see convertToAnthropicTools), and the last two
// user messages, so the previous request's prefix is read from cache and this one's is written.
const CACHED_USER_MESSAGES = 2;
const VALID_TOOL_USE_ID = /^[a-zA-Z0-9_-]+$/;

type Turn = { role: "user" | "assistant"; content: ContentBlockParam[] };

export function convertToAnthropicMessages(
  system: string,
  messages: ChatMessage[],
  options: AnthropicConversionOptions,
): AnthropicConversation {
  const turns: Turn[] = [];
  for (const message of repairToolPairing(messages)) {
    const turn = toTurn(message);
    // Empty content is rejected ("all messages must have non-empty content").
    if (turn.content.length === 0) continue;
    const previous = turns.at(-1);
    if (previous?.role === turn.role) previous.content.push(...turn.content);
    else turns.push(turn);
  }
  if (turns[0]?.role === "assistant") {
    turns.unshift({ role: "user", content: [{ type: "text", text: LEADING_USER_TEXT }] });
  }

  if (options.promptCaching) markLastUserBlocks(turns, CACHED_USER_MESSAGES);
  return {
    // Anthropic rejects an empty text block, so an empty prompt stays a (skippable) empty string.
    system: options.promptCaching && system.length > 0 ? [{ type: "text", text: system, cache_control: EPHEMERAL }] : system,
    messages: turns.map((turn) => ({ role: turn.role, content: turn.content })),
  };
}

export function convertToAnthropicTools(tools: ToolSpec[], promptCaching: boolean): Tool[] {
  return tools.map((tool, index) => {
    const converted: Tool = {
      name: tool.name,
      description: tool.description,
      input_schema: { type: "object", ...tool.parameters } as Tool.InputSchema,
    };
    // Tools precede the system prompt in Anthropic's cache prefix; one breakpoint on the last covers all.
    if (promptCaching && index === tools.length - 1) converted.cache_control = EPHEMERAL;
    return converted;
  });
}

/**
 * The id as Anthropic accepts it: kept verbatim when it already matches ^[a-zA-Z0-9_-]+$ (OpenAI
 * `call_…` ids do), else other characters become "_" plus a hash of the original, so two ids that
 * differ only in replaced characters stay distinct. The call and its result map the same way.
 */
export function toAnthropicToolUseId(id: string): string {
  if (VALID_TOOL_USE_ID.test(id)) return id;
  const readable = id.replace(/[^a-zA-Z0-9_-]/g, "_");
  return `${readable.length > 0 ? readable : "id"}_${fnv1a(id)}`;
}

function toTurn(message: ChatMessage): Turn {
  const text = message.content ?? "";
  switch (message.role) {
    case "user":
      return { role: "user", content: text.length > 0 ? [{ type: "text", text }] : [] };
    case "tool":
      return {
        role: "user",
        content: [
          {
            type: "tool_result",
            tool_use_id: toAnthropicToolUseId(message.toolCallId ?? ""),
            ...(text.length > 0 ? { content: text } : {}),
            ...(message.isError === true ? { is_error: true } : {}),
          },
        ],
      };
    case "assistant": {
      const content: ContentBlockParam[] = text.length > 0 ? [{ type: "text", text }] : [];
      for (const call of message.toolCalls ?? []) {
        content.push({ type: "tool_use", id: toAnthropicToolUseId(call.id), name: call.name, input: parseInput(call.arguments) });
      }
      return { role: "assistant", content };
    }
  }
}

/** tool_use input must be an object; invalid or non-object arguments become {} and the call stays paired. */
function parseInput(text: string): Record<string, unknown> {
  try {
    const parsed: unknown = JSON.parse(text);
    if (typeof parsed === "object" && parsed !== null && !Array.isArray(parsed)) return parsed as Record<string, unknown>;
  } catch {
    // fall through to the empty object
  }
  return {};
}

function markLastUserBlocks(turns: Turn[], count: number): void {
  let marked = 0;
  for (let index = turns.length - 1; index >= 0 && marked < count; index--) {
    const turn = turns[index] as Turn;
    if (turn.role !== "user") continue;
    const last = turn.content.at(-1);
    if (last === undefined) continue;
    turn.content[turn.content.length - 1] = withCacheControl(last);
    marked++;
  }
}

function withCacheControl(block: ContentBlockParam): ContentBlockParam {
  // Only text and tool_result blocks reach user messages here; both accept a breakpoint.
  if (block.type === "text" || block.type === "tool_result") return { ...block, cache_control: EPHEMERAL };
  return block;
}

/** 32-bit FNV-1a in base 36: short, synchronous (crypto.subtle is async) and the same on every runtime. */
function fnv1a(text: string): string {
  let hash = 0x811c9dc5;
  for (let index = 0; index < text.length; index++) {
    hash ^= text.charCodeAt(index);
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return hash.toString(36);
}
