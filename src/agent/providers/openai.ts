// Provider adapter over the official `openai` SDK for the Chat Completions API (OpenAI and the many
// servers that speak it). Retries are off: the turn engine owns retries and failover.
import { OpenAI } from "openai/client";
import type {
  ChatCompletion,
  ChatCompletionChunk,
  ChatCompletionCreateParamsBase,
} from "openai/resources/chat/completions";
import type { ToolCall, Usage } from "../messages.ts";
import { convertToOpenAIMessages, convertToOpenAITools } from "./convert-to-openai-messages.ts";
import { mapOpenAIFinishReason } from "./map-openai-finish-reason.ts";
import { abortReasonOr, createStreamGuard } from "./stream-guard.ts";
import type { FinishReason, GenerateRequest, GenerateResult, Provider, ProviderSettings } from "./types.ts";

type RequestBody = Omit<ChatCompletionCreateParamsBase, "stream" | "stream_options">;

export function createOpenAIProvider(settings: ProviderSettings): Provider {
  const client = new OpenAI({
    apiKey: settings.apiKey,
    baseURL: settings.baseUrl,
    // Explicit nulls keep OPENAI_ORG_ID / OPENAI_PROJECT_ID out on Node, so every runtime sends the same.
    organization: null,
    project: null,
    maxRetries: 0,
    timeout: settings.timeoutMs,
    fetch: settings.fetch,
    // The SDK refuses to start where `window.document` exists (jsdom tests, browser-like hosts);
    // the key is a server-side secret here, so that guard does not apply.
    dangerouslyAllowBrowser: true,
  });

  return {
    settings,
    async generate(request: GenerateRequest): Promise<GenerateResult> {
      const body = requestBody(settings, request);
      if (request.onTextDelta === undefined) {
        try {
          const completion = await client.chat.completions.create({ ...body, stream: false }, { signal: request.signal });
          return fromCompletion(completion);
        } catch (error) {
          throw abortReasonOr(error, request.signal);
        }
      }
      return generateStreaming(client, settings, body, request.onTextDelta, request.signal);
    },
  };
}

function requestBody(settings: ProviderSettings, request: GenerateRequest): RequestBody {
  const body: RequestBody = {
    model: settings.model,
    messages: convertToOpenAIMessages(request.system, request.messages),
  };
  // OpenAI's own API rejects `max_tokens` for reasoning models (o-series, gpt-5: 400 "Unsupported
  // parameter: 'max_tokens' ... Use 'max_completion_tokens' instead"), while several compatible
  // servers (Ollama, older vLLM and llama.cpp) only read `max_tokens`. So the newer name goes to
  // OpenAI and Azure OpenAI only.
  if (usesMaxCompletionTokens(settings.baseUrl)) body.max_completion_tokens = settings.maxTokens;
  else body.max_tokens = settings.maxTokens;
  // OpenAI rejects `tools: []` ("[] is too short").
  if (request.tools.length > 0) body.tools = convertToOpenAITools(request.tools);
  if (request.reasoning !== undefined) body.reasoning_effort = request.reasoning.effort;
  return body;
}

function usesMaxCompletionTokens(baseUrl: string): boolean {
  let host: string;
  try {
    host = new URL(baseUrl).hostname;
  } catch {
    return false;
  }
  return host === "api.openai.com" || host.endsWith(".openai.azure.com");
}

function fromCompletion(completion: ChatCompletion): GenerateResult {
  const choice = completion.choices[0];
  if (choice === undefined) throw new Error("the provider answered without any choice");
  const toolCalls: ToolCall[] = [];
  for (const call of choice.message.tool_calls ?? []) {
    if (call.type !== "function") continue;
    toolCalls.push({ id: call.id || newCallId(), name: call.function.name, arguments: call.function.arguments });
  }
  return {
    content: nonEmpty(choice.message.content),
    toolCalls,
    usage: usageOf(completion.usage),
    finishReason: finishReasonOf(choice.finish_reason, toolCalls),
  };
}

async function generateStreaming(
  client: OpenAI,
  settings: ProviderSettings,
  body: RequestBody,
  onTextDelta: (text: string) => void,
  signal: AbortSignal | undefined,
): Promise<GenerateResult> {
  const guard = createStreamGuard(settings.timeoutMs, signal);
  try {
    let stream: AsyncIterable<ChatCompletionChunk>;
    try {
      stream = await client.chat.completions.create(
        { ...body, stream: true, stream_options: { include_usage: true } },
        { signal: guard.signal },
      );
    } catch (error) {
      throw abortReasonOr(error, signal);
    }

    let text = "";
    let finishReason: string | null = null;
    let usage: Usage = { inputTokens: 0, outputTokens: 0 };
    const calls = new Map<number, ToolCall>();
    for await (const chunk of guard.read(stream)) {
      if (chunk.usage) usage = usageOf(chunk.usage);
      const choice = chunk.choices[0];
      if (choice === undefined) continue;
      const delta = choice.delta;
      if (typeof delta.content === "string" && delta.content.length > 0) {
        text += delta.content;
        onTextDelta(delta.content);
      }
      for (const part of delta.tool_calls ?? []) {
        const call = calls.get(part.index) ?? { id: "", name: "", arguments: "" };
        if (part.id) call.id ||= part.id;
        // Some compatible servers repeat the full name in every delta; the first one is the name.
        if (part.function?.name) call.name ||= part.function.name;
        if (part.function?.arguments) call.arguments += part.function.arguments;
        calls.set(part.index, call);
      }
      if (choice.finish_reason) finishReason = choice.finish_reason;
    }
    // Without a finish_reason the text is a fragment; returning it would journal it as an answer.
    if (finishReason === null) throw guard.endedEarly();

    const toolCalls = [...calls.entries()]
      .sort(([left], [right]) => left - right)
      .map(([, call]) => ({ ...call, id: call.id || newCallId() }));
    return { content: nonEmpty(text), toolCalls, usage, finishReason: finishReasonOf(finishReason, toolCalls) };
  } finally {
    guard.dispose();
  }
}

function usageOf(usage: ChatCompletion["usage"] | null | undefined): Usage {
  return { inputTokens: usage?.prompt_tokens ?? 0, outputTokens: usage?.completion_tokens ?? 0 };
}

/** Older vLLM and Ollama builds say "stop" while returning tool calls; the calls are what counts. */
function finishReasonOf(finishReason: string | null, toolCalls: ToolCall[]): FinishReason {
  const mapped = mapOpenAIFinishReason(finishReason);
  return mapped === "stop" && toolCalls.length > 0 ? "tool_calls" : mapped;
}

function nonEmpty(text: string | null | undefined): string | null {
  return text === null || text === undefined || text.length === 0 ? null : text;
}

/**
 * Some compatible servers omit tool call ids. Results are unique per (session, tool_call_id) in the
 * journal, so a missing id gets a random one rather than a positional "call_0" that would repeat.
 */
function newCallId(): string {
  return `call_${crypto.randomUUID().replaceAll("-", "")}`;
}
