/// <reference types="node" />
// The official `openai` client against the running service (Node server in-process), with the fake OpenAI
// server as the upstream provider.
import OpenAI from "openai";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { buildTestApp, listen, testApiKey, type TestApp } from "../support/app.ts";
import { startFakeOpenAI, type FakeProvider } from "../support/fake-provider.ts";

describe("OpenAI-compatible API with the official client", () => {
  let openai: FakeProvider;
  let harness: TestApp;
  let server: { url: string; close(): Promise<void> };
  let client: OpenAI;

  beforeEach(async () => {
    openai = await startFakeOpenAI({ apiKey: "sk-test" });
    const runtime = {
      provider: "openai",
      model: "gpt-test",
      base_url: openai.url,
      retry: { time_scale: 0, max_retries: 0 },
      fallback: [{ provider: "openai", model: "gpt-backup", base_url: openai.url }],
    };
    harness = await buildTestApp({ OPENAI_API_KEY: "sk-test", HERMES_RUNTIME: JSON.stringify(runtime) });
    server = await listen(harness.app);
    client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: testApiKey, maxRetries: 0 });
  });
  afterEach(async () => {
    await server.close();
    await harness.close();
    await openai.close();
  });

  it("answers chat.completions.create in a fresh session named in X-Session-Id", async () => {
    openai.script({ type: "text", text: "Paris.", usage: { input: 20, output: 2 } });
    const { data, response } = await client.chat.completions
      .create({ model: "some-other-model", temperature: 0.2, max_tokens: 50, user: "u1", messages: [{ role: "system", content: "Answer in one word." }, { role: "user", content: "Capital of France?" }] })
      .withResponse();
    expect(data.object).toBe("chat.completion");
    expect(data.choices[0]!.message).toMatchObject({ role: "assistant", content: "Paris." });
    expect(data.choices[0]!.finish_reason).toBe("stop");
    expect(data.usage).toEqual({ prompt_tokens: 20, completion_tokens: 2, total_tokens: 22 });
    expect(data.model).toBe("gpt-test");
    const sessionId = response.headers.get("x-session-id")!;
    expect(sessionId).toMatch(/^ses_/);

    // The request's model is ignored; the system message reached the provider for this call only.
    const upstream = openai.requests[0]!.body;
    expect(upstream.model).toBe("gpt-test");
    expect(upstream.messages[0].content).toContain("Answer in one word.");
    const messages = await (await harness.call("GET", `/v1/sessions/${sessionId}/messages`)).json();
    expect(messages.messages.map((message: { content: string }) => message.content)).toEqual(["Capital of France?", "Paris."]);
    const stored = await harness.database.client.execute({ sql: "SELECT conversation_prompt FROM sessions WHERE id = ?", args: [sessionId] });
    expect(String(stored.rows[0]!.conversation_prompt)).not.toContain("Answer in one word.");
  });

  it("quotes a stateless client's earlier messages in a fresh session, and accepts text-part content", async () => {
    openai.script({ type: "text", text: "Your name is Ann." });
    await client.chat.completions.create({
      model: "x",
      messages: [
        { role: "user", content: "My name is Ann." },
        { role: "assistant", content: "Hello Ann." },
        { role: "user", content: [{ type: "text", text: "What is " }, { type: "text", text: "my name?" }] },
      ],
    });
    const upstream = openai.requests[0]!.body.messages;
    expect(upstream[0].content).toContain("user: My name is Ann.");
    expect(upstream.slice(1)).toEqual([{ role: "user", content: "What is my name?" }]);
  });

  it("continues the session given in X-Session-Id (created when missing) and keeps its history", async () => {
    const inSession = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: testApiKey, maxRetries: 0, defaultHeaders: { "X-Session-Id": "app:42" } });
    openai.script({ type: "text", text: "first answer" }, { type: "text", text: "second answer" });
    const first = await inSession.chat.completions.create({ model: "gpt-test", messages: [{ role: "user", content: "one" }] }).withResponse();
    expect(first.response.headers.get("x-session-id")).toBe("app:42");
    const second = await client.chat.completions.create({ model: "gpt-test", messages: [{ role: "user", content: "two" }] }, { headers: { "X-Session-Id": "app:42" } });
    expect(second.choices[0]!.message.content).toBe("second answer");
    expect(openai.requests[1]!.body.messages.slice(1).map((message: { content: string }) => message.content)).toEqual(["one", "first answer", "two"]);
    const session = await (await harness.call("GET", "/v1/sessions/app:42")).json();
    expect(session).toMatchObject({ id: "app:42", message_count: 4, metadata: { created_by: "chat.completions" } });
  });

  it("streams chat.completion.chunk events that end with [DONE]", async () => {
    openai.script({ type: "text", text: "streaming works fine", usage: { input: 9, output: 4 } });
    const stream = await client.chat.completions.create({ model: "gpt-test", messages: [{ role: "user", content: "stream please" }], stream: true, stream_options: { include_usage: true } });
    const chunks: OpenAI.Chat.Completions.ChatCompletionChunk[] = [];
    for await (const chunk of stream) chunks.push(chunk);
    expect(chunks[0]!.choices[0]!.delta.role).toBe("assistant");
    expect(chunks.every((chunk) => chunk.object === "chat.completion.chunk" && chunk.id === chunks[0]!.id)).toBe(true);
    const text = chunks.map((chunk) => chunk.choices[0]?.delta.content ?? "").join("");
    expect(text).toBe("streaming works fine");
    const finish = chunks.filter((chunk) => chunk.choices[0]?.finish_reason);
    expect(finish.map((chunk) => chunk.choices[0]!.finish_reason)).toEqual(["stop"]);
    expect(chunks[chunks.length - 1]!.usage).toEqual({ prompt_tokens: 9, completion_tokens: 4, total_tokens: 13 });
  });

  it("streams in a given session and runs tools inside the service", async () => {
    openai.script({ type: "tool_calls", calls: [{ id: "call_1", name: "todo", arguments: JSON.stringify({ action: "add", item: "tea" }) }] }, { type: "text", text: "Added tea." });
    const stream = await client.chat.completions.create({ model: "gpt-test", messages: [{ role: "user", content: "add tea" }], stream: true }, { headers: { "X-Session-Id": "streamed" } });
    let text = "";
    for await (const chunk of stream) {
      expect(chunk.choices[0]?.delta.tool_calls).toBeUndefined();
      text += chunk.choices[0]?.delta.content ?? "";
    }
    expect(text).toBe("Added tea.");
    const messages = await (await harness.call("GET", "/v1/sessions/streamed/messages")).json();
    expect(messages.messages.map((message: { role: string }) => message.role)).toEqual(["user", "assistant", "tool", "assistant"]);
  });

  it("fails over transparently before any text was sent, and never splices a cut stream into the answer", async () => {
    openai.script({ type: "error", status: 500 }, { type: "text", text: "from the backup" });
    let text = "";
    for await (const chunk of await client.chat.completions.create({ model: "gpt-test", messages: [{ role: "user", content: "hi" }], stream: true })) text += chunk.choices[0]?.delta.content ?? "";
    expect(text).toBe("from the backup");

    openai.script({ type: "stream_cut", text: "partial" }, { type: "text", text: "the whole answer" });
    const headers = { "X-Session-Id": "cut", "Idempotency-Key": "cut-1" };
    const body = { model: "gpt-test", messages: [{ role: "user" as const, content: "hi" }], stream: true as const };
    let seen = "";
    const failure = await (async () => {
      for await (const chunk of await client.chat.completions.create(body, { headers })) seen += chunk.choices[0]?.delta.content ?? "";
    })().catch((error: unknown) => error);
    expect(seen).toBe("partial");
    expect(failure).toBeInstanceOf(OpenAI.APIError);
    expect((failure as InstanceType<typeof OpenAI.APIError>).error).toMatchObject({ code: "provider_error", message: expect.stringContaining("GET /v1/sessions/cut/messages") });
    // The turn went on without the client; the same key then replays its complete answer.
    await expect.poll(async () => (await (await harness.call("GET", "/v1/sessions/cut/turns")).json()).turns[0]?.status).toBe("completed");
    let replayed = "";
    for await (const chunk of await client.chat.completions.create(body, { headers })) replayed += chunk.choices[0]?.delta.content ?? "";
    expect(replayed).toBe("the whole answer");
  });

  it("lists the default runtime's models", async () => {
    const ids: string[] = [];
    for await (const model of client.models.list()) {
      expect(model).toMatchObject({ object: "model", owned_by: "openai" });
      ids.push(model.id);
    }
    expect(ids).toEqual(["gpt-test", "gpt-backup"]);
  });

  it("raises the SDK's APIError with the documented codes", async () => {
    openai.setFallback({ type: "error", status: 401 });
    const failure = await client.chat.completions.create({ model: "gpt-test", messages: [{ role: "user", content: "hi" }] }).catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(OpenAI.APIError);
    expect((failure as InstanceType<typeof OpenAI.APIError>).status).toBe(502);
    expect((failure as InstanceType<typeof OpenAI.APIError>).error).toMatchObject({ code: "provider_error", details: { attempts: expect.any(Array) } });

    const streamed = await client.chat.completions.create({ model: "gpt-test", messages: [{ role: "user", content: "hi" }], stream: true });
    const streamFailure = await (async () => {
      for await (const _chunk of streamed) {
        // drains until the error line
      }
    })().catch((error: unknown) => error);
    expect(streamFailure).toBeInstanceOf(OpenAI.APIError);
    expect((streamFailure as InstanceType<typeof OpenAI.APIError>).error).toMatchObject({ code: "provider_error" });

    const invalid = await client.chat.completions.create({ model: "gpt-test", messages: [] }).catch((error: unknown) => error);
    expect((invalid as InstanceType<typeof OpenAI.APIError>).status).toBe(400);
    const unauthorized = await new OpenAI({ baseURL: `${server.url}/v1`, apiKey: "wrong", maxRetries: 0 }).models.list().catch((error: unknown) => error);
    expect(unauthorized).toBeInstanceOf(OpenAI.AuthenticationError);
  });

  // The SDK sends no Idempotency-Key of its own (its idempotencyHeader is unset), so the header is given per request.
  it("replays a completion for a repeated Idempotency-Key, session header included", async () => {
    openai.script({ type: "text", text: "once" });
    const first = await client.chat.completions.create({ model: "gpt-test", messages: [{ role: "user", content: "hi" }] }, { headers: { "Idempotency-Key": "chat-1" } }).withResponse();
    const again = await client.chat.completions.create({ model: "gpt-test", messages: [{ role: "user", content: "hi" }] }, { headers: { "Idempotency-Key": "chat-1" } }).withResponse();
    expect(again.data).toEqual(first.data);
    expect(again.response.headers.get("x-session-id")).toBe(first.response.headers.get("x-session-id"));
    expect(again.response.headers.get("idempotent-replayed")).toBe("true");
    const streamedReplay = await client.chat.completions.create({ model: "gpt-test", messages: [{ role: "user", content: "hi" }], stream: true }, { headers: { "Idempotency-Key": "chat-2" } });
    let text = "";
    for await (const chunk of streamedReplay) text += chunk.choices[0]?.delta.content ?? "";
    const replayedStream = await client.chat.completions.create({ model: "gpt-test", messages: [{ role: "user", content: "hi" }], stream: true }, { headers: { "Idempotency-Key": "chat-2" } });
    let replayedText = "";
    for await (const chunk of replayedStream) replayedText += chunk.choices[0]?.delta.content ?? "";
    expect(replayedText).toBe(text);
    expect(openai.requests).toHaveLength(2);
  });
});
