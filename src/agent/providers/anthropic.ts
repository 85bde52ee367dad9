// Provider adapter over the official `@anthropic-ai/sdk` for the Messages API. It builds its client
// from `BaseAnthropic` plus the one resource it calls instead of the `Anthropic` class, which also
// constructs Models, Beta, Files, Skills and more: bundled and minified with esbuild that is 118 KB
// instead of 393 KB (SDK 1.14), which counts against the Workers script size limit.
// Retries are off: the turn engine owns them.
import { BaseAnthropic } from "@anthropic-ai/sdk/client";
import type { ClientOptions } from "@anthropic-ai/sdk/client";
import { Messages } from "@anthropic-ai/sdk/resources/messages";
import type {
  Message,
  MessageCreateParamsBase,
  RawMessageStreamEvent,
  ThinkingConfigEnabled,
} from "@anthropic-ai/sdk/resources/messages";
import type { ToolCall, Usage } from "../messages.ts";
import { convertToAnthropicMessages, convertToAnthropicTools } from "./convert-to-anthropic-messages.ts";
import { mapAnthropicStopReason } from "./map-anthropic-stop-reason.ts";
import { abortReasonOr, createStreamGuard } from "./stream-guard.ts";
import type { FinishReason, GenerateRequest, GenerateResult, Provider, ProviderSettings } from "./types.ts";

class MessagesClient extends BaseAnthropic {
  messages: Messages = new Messages(this);
}

type RequestBody = Omit<MessageCreateParamsBase, "stream">;
type Effort = NonNullable<GenerateRequest["reasoning"]>["effort"];

/** Thinking budgets per effort; Anthropic's minimum budget is 1024 tokens. */
export const THINKING_BUDGET_TOKENS: Record<Effort, number> = { low: 1024, medium: 4096, high: 16384 };

export function createAnthropicProvider(settings: ProviderSettings): Provider {
  const options: ClientOptions = {
    apiKey: settings.apiKey,
    baseURL: settings.baseUrl,
    maxRetries: 0,
    timeout: settings.timeoutMs,
    fetch: settings.fetch,
    // `dangerouslyAllowBrowser` stays off: the SDK's browser check looks for `window.document`, which
    // Node, Bun, Deno and workerd lack, and turning it on would send the
    // `anthropic-dangerous-direct-browser-access` header with every request.
  };
  const client = new MessagesClient(options);

  return {
    settings,
    async generate(request: GenerateRequest): Promise<GenerateResult> {
      const body = requestBody(settings, request);
      if (request.onTextDelta === undefined) {
        try {
          const message = await client.messages.create({ ...body, stream: false }, { signal: request.signal });
          return fromMessage(message);
        } catch (error) {
          throw abortReasonOr(error, request.signal);
        }
      }
      return generateStreaming(client, settings, body, request.onTextDelta, request.signal);
    },
  };
}

function requestBody(settings: ProviderSettings, request: GenerateRequest): RequestBody {
  const conversation = convertToAnthropicMessages(request.system, request.messages, {
    promptCaching: settings.promptCaching,
  });
  const body: RequestBody = {
    model: settings.model,
    max_tokens: settings.maxTokens,
    messages: conversation.messages,
  };
  // An empty system text is rejected ("text content blocks must be non-empty").
  if (conversation.system.length > 0) body.system = conversation.system;
  if (request.tools.length > 0) body.tools = convertToAnthropicTools(request.tools, settings.promptCaching);
  const thinking = thinkingFor(request, body);
  if (thinking !== null) {
    body.thinking = thinking;
    // The budget counts against max_tokens and must stay below it; adding it keeps the configured
    // room for the visible answer.
    body.max_tokens = settings.maxTokens + thinking.budget_tokens;
  }
  return body;
}

/**
 * Thinking is enabled only when reasoning was asked for and the request does not continue a tool
 * loop: Anthropic then requires the previous assistant message to start with its signed thinking
 * block (400 "Expected `thinking` or `redacted_thinking`, but found `tool_use`"), and the normalized
 * message format does not keep thinking blocks.
 */
function thinkingFor(request: GenerateRequest, body: RequestBody): ThinkingConfigEnabled | null {
  if (request.reasoning === undefined) return null;
  const last = body.messages.at(-1);
  const continuesToolLoop =
    last !== undefined && Array.isArray(last.content) && last.content.some((block) => block.type === "tool_result");
  if (continuesToolLoop) return null;
  return { type: "enabled", budget_tokens: THINKING_BUDGET_TOKENS[request.reasoning.effort] };
}

function fromMessage(message: Message): GenerateResult {
  let text = "";
  const toolCalls: ToolCall[] = [];
  for (const block of message.content) {
    if (block.type === "text") text += block.text;
    else if (block.type === "tool_use") {
      toolCalls.push({ id: block.id, name: block.name, arguments: JSON.stringify(block.input ?? {}) });
    }
    // thinking and redacted_thinking blocks are not part of the normalized answer.
  }
  return {
    content: text.length > 0 ? text : null,
    toolCalls,
    usage: usageOf(message.usage),
    finishReason: finishReasonOf(message.stop_reason, toolCalls),
  };
}

interface UsageCounts {
  input_tokens?: number | null;
  cache_creation_input_tokens?: number | null;
  cache_read_input_tokens?: number | null;
  output_tokens?: number | null;
}

/** Anthropic counts cached input apart from `input_tokens`; all of it was input to this call. */
function usageOf(usage: UsageCounts): Usage {
  return {
    inputTokens: (usage.input_tokens ?? 0) + (usage.cache_creation_input_tokens ?? 0) + (usage.cache_read_input_tokens ?? 0),
    outputTokens: usage.output_tokens ?? 0,
  };
}

async function generateStreaming(
  client: MessagesClient,
  settings: ProviderSettings,
  body: RequestBody,
  onTextDelta: (text: string) => void,
  signal: AbortSignal | undefined,
): Promise<GenerateResult> {
  const guard = createStreamGuard(settings.timeoutMs, signal);
  try {
    let stream: AsyncIterable<RawMessageStreamEvent>;
    try {
      stream = await client.messages.create({ ...body, stream: true }, { signal: guard.signal });
    } catch (error) {
      throw abortReasonOr(error, signal);
    }

    let text = "";
    let stopReason: string | null = null;
    const usage: UsageCounts = {};
    // Indexed by content block index; input arrives as partial JSON fragments.
    const calls = new Map<number, ToolCall & { input: unknown }>();
    for await (const event of guard.read(stream)) {
      switch (event.type) {
        case "message_start":
          Object.assign(usage, event.message.usage);
          break;
        case "content_block_start":
          if (event.content_block.type === "tool_use") {
            const block = event.content_block;
            calls.set(event.index, { id: block.id, name: block.name, arguments: "", input: block.input });
          }
          break;
        case "content_block_delta":
          if (event.delta.type === "text_delta" && event.delta.text.length > 0) {
            text += event.delta.text;
            onTextDelta(event.delta.text);
          } else if (event.delta.type === "input_json_delta") {
            const call = calls.get(event.index);
            if (call !== undefined) call.arguments += event.delta.partial_json;
          }
          break;
        case "message_delta":
          // message_delta usage is cumulative; fields it leaves null keep their message_start values.
          for (const [key, value] of Object.entries(event.usage)) {
            if (typeof value === "number") (usage as Record<string, number>)[key] = value;
          }
          if (event.delta.stop_reason !== null) stopReason = event.delta.stop_reason;
          break;
        default:
          break;
      }
    }
    // Without a stop_reason the text is a fragment; returning it would journal it as an answer.
    if (stopReason === null) throw guard.endedEarly();

    const toolCalls = [...calls.entries()]
      .sort(([left], [right]) => left - right)
      .map(([, call]) => ({
        id: call.id,
        name: call.name,
        arguments: call.arguments.length > 0 ? call.arguments : JSON.stringify(call.input ?? {}),
      }));
    return { content: text.length > 0 ? text : null, toolCalls, usage: usageOf(usage), finishReason: finishReasonOf(stopReason, toolCalls) };
  } finally {
    guard.dispose();
  }
}

function finishReasonOf(stopReason: string | null, toolCalls: ToolCall[]): FinishReason {
  const mapped = mapAnthropicStopReason(stopReason);
  return mapped === "stop" && toolCalls.length > 0 ? "tool_calls" : mapped;
}
