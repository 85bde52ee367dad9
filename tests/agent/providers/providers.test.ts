// The adapters against local servers that speak the OpenAI and Anthropic wire formats: real SDKs,
// real HTTP, scripted answers and faults.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import type { ChatMessage } from "../../../src/agent/messages.ts";
import { createProvider } from "../../../src/agent/providers/index.ts";
import { classifyProviderError } from "../../../src/agent/providers/classify-provider-error.ts";
import type { ProviderErrorReason } from "../../../src/agent/providers/classify-provider-error.ts";
import { StreamCutError, StreamStallError } from "../../../src/agent/providers/stream-guard.ts";
import type { ApiMode, GenerateRequest, Provider, ProviderSettings } from "../../../src/agent/providers/types.ts";
import { startFakeAnthropic, startFakeOpenAI } from "../../support/fake-provider.ts";
import type { FakeProvider } from "../../support/fake-provider.ts";

const API_KEY = "sk-test-0123456789abcdef";
const TOOLS = [{ name: "lookup", description: "Look it up", parameters: { type: "object", properties: { q: { type: "string" } } } }];

interface Dialect {
  name: string;
  apiMode: ApiMode;
  start(): Promise<FakeProvider>;
  model: string;
  callId: string;
  overloadedStatus: number;
}

const dialects: Dialect[] = [
  { name: "openai", apiMode: "chat_completions", start: () => startFakeOpenAI({ apiKey: API_KEY }), model: "gpt-4o-mini", callId: "call_abc", overloadedStatus: 503 },
  { name: "anthropic", apiMode: "anthropic_messages", start: () => startFakeAnthropic({ apiKey: API_KEY }), model: "claude-sonnet-4-6", callId: "toolu_01AbC", overloadedStatus: 529 },
];

function settingsFor(dialect: Dialect, fake: FakeProvider, overrides: Partial<ProviderSettings> = {}): ProviderSettings {
  return {
    provider: dialect.name,
    model: dialect.model,
    baseUrl: fake.url,
    apiMode: dialect.apiMode,
    apiKey: API_KEY,
    timeoutMs: 5_000,
    maxTokens: 1024,
    promptCaching: false,
    fetch: globalThis.fetch,
    ...overrides,
  };
}

const hello: ChatMessage[] = [{ role: "user", content: "hello" }];

function request(overrides: Partial<GenerateRequest> = {}): GenerateRequest {
  return { system: "You are terse.", messages: hello, tools: TOOLS, ...overrides };
}

async function failure(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error("expected the call to fail");
}

describe.each(dialects)("$name adapter", (dialect) => {
  let fake: FakeProvider;
  let provider: Provider;

  beforeAll(async () => {
    fake = await dialect.start();
  });
  afterAll(async () => {
    await fake.close();
  });
  beforeEach(() => {
    fake.requests.length = 0;
    fake.rejected.length = 0;
    provider = createProvider(settingsFor(dialect, fake));
  });

  it("returns text with usage and a stop reason", async () => {
    fake.script({ type: "text", text: "Hi there.", usage: { input: 12, output: 3 } });
    const result = await provider.generate(request());
    expect(result).toEqual({ content: "Hi there.", toolCalls: [], usage: { inputTokens: 12, outputTokens: 3 }, finishReason: "stop" });
    expect(fake.requests).toHaveLength(1);
    expect(fake.requests[0]?.stream).toBe(false);
    expect(fake.requests[0]?.body.model).toBe(dialect.model);
    expect(fake.rejected).toEqual([]);
  });

  it("returns tool calls with their ids and arguments", async () => {
    fake.script({ type: "tool_calls", calls: [{ id: dialect.callId, name: "lookup", arguments: '{"q":"paris"}' }, { name: "lookup", arguments: '{"q":"rome"}' }] });
    const result = await provider.generate(request());
    expect(result.finishReason).toBe("tool_calls");
    expect(result.content).toBeNull();
    expect(result.toolCalls.map((call) => ({ ...call, arguments: JSON.parse(call.arguments) }))).toEqual([
      { id: dialect.callId, name: "lookup", arguments: { q: "paris" } },
      { id: expect.any(String), name: "lookup", arguments: { q: "rome" } },
    ]);
  });

  it("streams text deltas in order and returns the same text", async () => {
    fake.script({ type: "text", text: "One, two, three, four." });
    const deltas: string[] = [];
    const result = await provider.generate(request({ onTextDelta: (text) => deltas.push(text) }));
    expect(fake.requests[0]?.stream).toBe(true);
    expect(deltas.length).toBeGreaterThan(1);
    expect(deltas.join("")).toBe("One, two, three, four.");
    expect(result.content).toBe("One, two, three, four.");
    expect(result.finishReason).toBe("stop");
    expect(result.usage.outputTokens).toBeGreaterThan(0);
  });

  it("assembles streamed tool call arguments", async () => {
    fake.script({ type: "tool_calls", text: "Checking.", calls: [{ id: dialect.callId, name: "lookup", arguments: '{"q":"a long query about paris"}' }] });
    const deltas: string[] = [];
    const result = await provider.generate(request({ onTextDelta: (text) => deltas.push(text) }));
    expect(deltas.join("")).toBe("Checking.");
    expect(result.toolCalls).toEqual([{ id: dialect.callId, name: "lookup", arguments: '{"q":"a long query about paris"}' }]);
    expect(result.finishReason).toBe("tool_calls");
  });

  it("throws on a cut stream instead of returning the partial text, and it classifies as transport", async () => {
    fake.script({ type: "stream_cut", text: "This answer never ends" });
    const deltas: string[] = [];
    const error = await failure(provider.generate(request({ onTextDelta: (text) => deltas.push(text) })));
    expect(deltas.join("")).toBe("This answer never ends");
    expect(error).toBeInstanceOf(StreamCutError);
    expect(classifyProviderError(error)).toMatchObject({ reason: "transport", retryable: true, shouldFailOver: true });
  });

  it("lets an error from onTextDelta through unchanged and stops the stream", async () => {
    fake.script({ type: "text", text: "One, two, three, four." });
    const gone = new Error("client went away");
    const error = await failure(
      provider.generate(
        request({
          onTextDelta: () => {
            throw gone;
          },
        }),
      ),
    );
    expect(error).toBe(gone);
  });

  const statuses: { status: number; body?: unknown; reason: ProviderErrorReason }[] = [
    { status: 401, reason: "auth" },
    { status: 403, reason: "auth" },
    { status: 404, reason: "model_not_found" },
    { status: 413, reason: "payload_too_large" },
    { status: 429, reason: "rate_limit" },
    { status: 500, reason: "server_error" },
    { status: 502, reason: "server_error" },
    { status: dialect.overloadedStatus, reason: "overloaded" },
  ];
  it.each(statuses)("classifies the SDK error for status $status as $reason", async ({ status, reason }) => {
    fake.script({ type: "error", status, headers: { "retry-after": "7" } });
    const classified = classifyProviderError(await failure(provider.generate(request())));
    expect(classified).toMatchObject({ reason, status, retryAfterMs: 7000 });
    expect(classified.message).not.toContain(API_KEY);
  });

  it("classifies a 400 about the context window as context_overflow, streaming too", async () => {
    const body =
      dialect.apiMode === "chat_completions"
        ? { error: { message: "This model's maximum context length is 128000 tokens.", type: "invalid_request_error", param: "messages", code: "context_length_exceeded" } }
        : { type: "error", error: { type: "invalid_request_error", message: "prompt is too long: 210000 tokens > 200000 maximum" } };
    fake.script({ type: "error", status: 400, body });
    const classified = classifyProviderError(await failure(provider.generate(request({ onTextDelta: () => {} }))));
    expect(classified).toMatchObject({ reason: "context_overflow", status: 400, retryable: false, shouldFailOver: false });
  });

  it("classifies a connection reset as transport", async () => {
    fake.script({ type: "reset" }, { type: "reset" });
    expect(classifyProviderError(await failure(provider.generate(request()))).reason).toBe("transport");
    expect(classifyProviderError(await failure(provider.generate(request({ onTextDelta: () => {} })))).reason).toBe("transport");
  });

  it("classifies a hanging provider as timeout, streaming or not", async () => {
    provider = createProvider(settingsFor(dialect, fake, { timeoutMs: 200 }));
    fake.script({ type: "hang", ms: 3_000 }, { type: "hang", ms: 3_000 });
    const started = Date.now();
    expect(classifyProviderError(await failure(provider.generate(request()))).reason).toBe("timeout");
    expect(classifyProviderError(await failure(provider.generate(request({ onTextDelta: () => {} })))).reason).toBe("timeout");
    expect(Date.now() - started).toBeLessThan(2_500);
  });

  it("passes the caller's signal: an abort is neither retried nor failed over", async () => {
    fake.script({ type: "hang", ms: 3_000 });
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 50);
    const classified = classifyProviderError(await failure(provider.generate(request({ signal: controller.signal }))));
    expect(classified).toMatchObject({ retryable: false, shouldFailOver: false });
  });

  it("sends reasoning settings only when asked", async () => {
    fake.script({ type: "text", text: "a" }, { type: "text", text: "b" });
    await provider.generate(request());
    await provider.generate(request({ reasoning: { effort: "medium" } }));
    const [plain, reasoning] = fake.requests.map((recorded) => recorded.body);
    if (dialect.apiMode === "chat_completions") {
      expect(plain.reasoning_effort).toBeUndefined();
      expect(reasoning.reasoning_effort).toBe("medium");
      expect(reasoning.max_tokens).toBe(1024);
    } else {
      expect(plain.thinking).toBeUndefined();
      expect(reasoning.thinking).toEqual({ type: "enabled", budget_tokens: 4096 });
      expect(reasoning.max_tokens).toBeGreaterThan(4096);
    }
  });
});

describe("the OpenAI token limit parameter", () => {
  it("is max_completion_tokens for api.openai.com and max_tokens for compatible servers", async () => {
    const bodies: Record<string, unknown>[] = [];
    const recordingFetch: typeof fetch = async (_input, init) => {
      bodies.push(JSON.parse(String(init?.body)) as Record<string, unknown>);
      const completion = {
        id: "c1",
        object: "chat.completion",
        created: 0,
        model: "m",
        choices: [{ index: 0, message: { role: "assistant", content: "ok" }, finish_reason: "stop" }],
        usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 },
      };
      return new Response(JSON.stringify(completion), { status: 200, headers: { "content-type": "application/json" } });
    };
    for (const baseUrl of ["https://api.openai.com/v1", "https://openrouter.ai/api/v1"]) {
      const provider = createProvider({
        provider: "openai",
        model: "gpt-5",
        baseUrl,
        apiMode: "chat_completions",
        apiKey: API_KEY,
        timeoutMs: 1_000,
        maxTokens: 256,
        promptCaching: false,
        fetch: recordingFetch,
      });
      await provider.generate(request({ tools: [] }));
    }
    expect(bodies.map((body) => [body.max_completion_tokens, body.max_tokens, "tools" in body])).toEqual([
      [256, undefined, false],
      [undefined, 256, false],
    ]);
  });
});

describe("a conversation that changes provider mid-turn", () => {
  let openai: FakeProvider;
  let anthropic: FakeProvider;
  beforeAll(async () => {
    [openai, anthropic] = await Promise.all([startFakeOpenAI({ apiKey: API_KEY }), startFakeAnthropic({ apiKey: API_KEY })]);
  });
  afterAll(async () => {
    await Promise.all([openai.close(), anthropic.close()]);
  });

  it("continues OpenAI tool calls on Anthropic and Anthropic tool calls on OpenAI, with caching on", async () => {
    const [openaiDialect, anthropicDialect] = dialects as [Dialect, Dialect];
    const onOpenAI = createProvider(settingsFor(openaiDialect, openai, { promptCaching: true }));
    const onAnthropic = createProvider(settingsFor(anthropicDialect, anthropic, { promptCaching: true }));
    const messages: ChatMessage[] = [{ role: "user", content: "weather in Paris and Rome?" }];

    openai.script({ type: "tool_calls", calls: [{ id: "call_abc", name: "lookup", arguments: '{"q":"paris"}' }, { id: "call_def", name: "lookup", arguments: '{"q":"rome"}' }] });
    const first = await onOpenAI.generate(request({ messages }));
    messages.push({ role: "assistant", content: first.content, toolCalls: first.toolCalls, provider: "openai" });
    // Only the first result was written before the primary failed over.
    messages.push({ role: "tool", content: "18C", toolCallId: "call_abc", name: "lookup" });

    anthropic.script({ type: "tool_calls", calls: [{ id: "toolu_01Xyz", name: "lookup", arguments: '{"q":"tomorrow"}' }] });
    const second = await onAnthropic.generate(request({ messages }));
    expect(anthropic.rejected).toEqual([]);
    const sent = anthropic.requests[0]?.body;
    expect(JSON.stringify(sent)).toContain('"tool_use_id":"call_def"');
    messages.push({ role: "assistant", content: second.content, toolCalls: second.toolCalls, provider: "anthropic" });
    messages.push({ role: "tool", content: "sunny", toolCallId: "toolu_01Xyz", name: "lookup" });

    openai.script({ type: "text", text: "Paris 18C, Rome unknown, sunny tomorrow." });
    const third = await onOpenAI.generate(request({ messages }));
    expect(openai.rejected).toEqual([]);
    expect(third.content).toBe("Paris 18C, Rome unknown, sunny tomorrow.");
    const toolIds = (openai.requests[1]?.body.messages as { role: string; tool_call_id?: string }[])
      .filter((message) => message.role === "tool")
      .map((message) => message.tool_call_id);
    expect(toolIds).toEqual(["call_abc", "call_def", "toolu_01Xyz"]);
  });
});

describe("a stream that stalls after its headers", () => {
  // The fakes hang before the headers only; a fetch that answers with a never-ending body stands in
  // for a provider that stops sending mid-answer, which the SDKs' own timeouts do not cover.
  const firstEvents: Record<ApiMode, string> = {
    chat_completions: `data: ${JSON.stringify({ id: "c1", object: "chat.completion.chunk", created: 0, model: "m", choices: [{ index: 0, delta: { content: "Half" }, finish_reason: null }] })}\n\n`,
    anthropic_messages: [
      `event: message_start\ndata: ${JSON.stringify({ type: "message_start", message: { id: "msg_1", type: "message", role: "assistant", model: "m", content: [], stop_reason: null, stop_sequence: null, usage: { input_tokens: 5, output_tokens: 1 } } })}\n\n`,
      `event: content_block_start\ndata: ${JSON.stringify({ type: "content_block_start", index: 0, content_block: { type: "text", text: "" } })}\n\n`,
      `event: content_block_delta\ndata: ${JSON.stringify({ type: "content_block_delta", index: 0, delta: { type: "text_delta", text: "Half" } })}\n\n`,
    ].join(""),
  };

  it.each(dialects)("$name: throws a timeout after the idle limit instead of waiting forever", async (dialect) => {
    let requestSignal: AbortSignal | null | undefined;
    // Like a fetch whose body ignores the request signal, so the guard cannot rely on the body erroring.
    const stalledFetch: typeof fetch = async (_input, init) => {
      requestSignal = init?.signal;
      const body = new ReadableStream<Uint8Array>({
        start(controller) {
          controller.enqueue(new TextEncoder().encode(firstEvents[dialect.apiMode]));
        },
      });
      return new Response(body, { status: 200, headers: { "content-type": "text/event-stream" } });
    };
    const provider = createProvider({
      provider: dialect.name,
      model: dialect.model,
      baseUrl: dialect.apiMode === "chat_completions" ? "http://127.0.0.1:9/v1" : "http://127.0.0.1:9",
      apiMode: dialect.apiMode,
      apiKey: API_KEY,
      timeoutMs: 200,
      maxTokens: 64,
      promptCaching: false,
      fetch: stalledFetch,
    });
    const deltas: string[] = [];
    const started = Date.now();
    const error = await failure(provider.generate(request({ onTextDelta: (text) => deltas.push(text) })));
    expect(deltas).toEqual(["Half"]);
    expect(error).toBeInstanceOf(StreamStallError);
    expect(classifyProviderError(error)).toMatchObject({ reason: "timeout", retryable: true, shouldFailOver: true });
    expect(Date.now() - started).toBeLessThan(2_000);
    // The request is aborted, so a real fetch releases the connection.
    expect(requestSignal?.aborted).toBe(true);
  });
});
