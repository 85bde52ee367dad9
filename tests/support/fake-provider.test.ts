/// <reference types="node" />
// Drives the fakes with the official SDKs: if these pass, the fakes speak the wire formats the
// SDKs (and so our adapters) expect, including their failure modes.
import { spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import OpenAI from "openai";
import Anthropic from "@anthropic-ai/sdk";
import { startFakeAnthropic, startFakeOpenAI } from "./fake-provider.ts";
import type { FakeProvider } from "./fake-provider.ts";

const open: FakeProvider[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((fake) => fake.close()));
});

async function openaiFake(apiKey?: string) {
  const fake = await startFakeOpenAI(apiKey ? { apiKey } : {});
  open.push(fake);
  const client = new OpenAI({ baseURL: fake.url, apiKey: apiKey ?? "k", maxRetries: 0 });
  return { fake, client };
}

async function anthropicFake(apiKey?: string) {
  const fake = await startFakeAnthropic(apiKey ? { apiKey } : {});
  open.push(fake);
  const client = new Anthropic({ baseURL: fake.url, apiKey: apiKey ?? "k", maxRetries: 0 });
  return { fake, client };
}

async function caught(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error("expected the call to fail");
}

const user = (content: string) => ({ role: "user" as const, content });
const MODEL = "gpt-4o-mini";
const CLAUDE = "claude-sonnet-4-5";

describe("fake OpenAI", () => {
  it("answers a scripted text and records the request", async () => {
    const { fake, client } = await openaiFake();
    fake.script({ type: "text", text: "hello there", usage: { input: 11, output: 7 } });
    const res = await client.chat.completions.create({ model: MODEL, messages: [user("hi")] });
    expect(res.id).toMatch(/^chatcmpl-/);
    expect(res.choices[0]?.message.content).toBe("hello there");
    expect(res.choices[0]?.finish_reason).toBe("stop");
    expect(res.usage).toMatchObject({ prompt_tokens: 11, completion_tokens: 7, total_tokens: 18 });
    expect(fake.requests).toHaveLength(1);
    expect(fake.requests[0]).toMatchObject({ path: "/v1/chat/completions", stream: false });
    expect(fake.requests[0]?.headers.authorization).toBe("Bearer k");
    expect(fake.requests[0]?.body.messages).toEqual([user("hi")]);
  });

  it("consumes the script in order, then the fallback, then fails when the fallback is removed", async () => {
    const { fake, client } = await openaiFake();
    fake.script({ type: "text", text: "one" }, (req) => ({ type: "text", text: `echo ${req.body.messages[0].content}` }));
    const ask = async (q: string) => (await client.chat.completions.create({ model: MODEL, messages: [user(q)] })).choices[0]?.message.content;
    expect(await ask("a")).toBe("one");
    expect(await ask("b")).toBe("echo b");
    expect(await ask("c")).toBe("ok");
    fake.setFallback({ type: "text", text: "fallback" });
    expect(await ask("d")).toBe("fallback");
    fake.setFallback(null);
    expect(await caught(ask("e"))).toBeInstanceOf(OpenAI.InternalServerError);
  });

  it("returns tool calls without streaming", async () => {
    const { fake, client } = await openaiFake();
    fake.script({ type: "tool_calls", calls: [{ id: "call_fixed", name: "lookup", arguments: '{"q":"x"}' }, { name: "clock", arguments: "{}" }] });
    const res = await client.chat.completions.create({ model: MODEL, messages: [user("hi")] });
    const choice = res.choices[0];
    expect(choice?.finish_reason).toBe("tool_calls");
    expect(choice?.message.content).toBeNull();
    const calls = (choice?.message.tool_calls ?? []).map((c) => (c.type === "function" ? [c.id, c.function.name, c.function.arguments] : []));
    expect(calls[0]).toEqual(["call_fixed", "lookup", '{"q":"x"}']);
    expect(calls[1]?.[0]).toMatch(/^call_/);
    expect(calls[1]?.slice(1)).toEqual(["clock", "{}"]);
  });

  it("streams text in several deltas with a usage chunk", async () => {
    const { fake, client } = await openaiFake();
    fake.script({ type: "text", text: "streamed answer text", usage: { input: 3, output: 4 } });
    const stream = await client.chat.completions.create({
      model: MODEL,
      messages: [user("hi")],
      stream: true,
      stream_options: { include_usage: true },
    });
    const deltas: string[] = [];
    let finish: string | null = null;
    let usage: OpenAI.CompletionUsage | null | undefined;
    for await (const chunk of stream) {
      const choice = chunk.choices[0];
      if (choice?.delta.content) deltas.push(choice.delta.content);
      if (choice?.finish_reason) finish = choice.finish_reason;
      if (chunk.usage) usage = chunk.usage;
    }
    expect(deltas.length).toBeGreaterThan(1);
    expect(deltas.join("")).toBe("streamed answer text");
    expect(finish).toBe("stop");
    expect(usage?.total_tokens).toBe(7);
    expect(fake.requests[0]?.stream).toBe(true);
  });

  it("streams tool calls by index with arguments split over chunks", async () => {
    const { fake, client } = await openaiFake();
    fake.script({ type: "tool_calls", text: "checking", calls: [{ name: "a", arguments: '{"city":"Paris","days":3}' }, { name: "b", arguments: '{"n":1}' }] });
    const stream = await client.chat.completions.create({ model: MODEL, messages: [user("hi")], stream: true });
    const calls: { id?: string; name?: string; args: string; pieces: number }[] = [];
    let text = "";
    let finish: string | null = null;
    for await (const chunk of stream) {
      const choice = chunk.choices[0];
      text += choice?.delta.content ?? "";
      if (choice?.finish_reason) finish = choice.finish_reason;
      for (const delta of choice?.delta.tool_calls ?? []) {
        const call = (calls[delta.index] ??= { args: "", pieces: 0 });
        if (delta.id) call.id = delta.id;
        if (delta.function?.name) call.name = (call.name ?? "") + delta.function.name;
        if (delta.function?.arguments) {
          call.args += delta.function.arguments;
          call.pieces++;
        }
      }
    }
    expect(text).toBe("checking");
    expect(finish).toBe("tool_calls");
    expect(calls.map((c) => [c.name, JSON.parse(c.args)])).toEqual([["a", { city: "Paris", days: 3 }], ["b", { n: 1 }]]);
    expect(calls[0]?.id).toMatch(/^call_/);
    expect(calls[0]?.pieces).toBeGreaterThan(1);
  });

  it.each([
    [400, OpenAI.BadRequestError, "invalid_request_error"],
    [401, OpenAI.AuthenticationError, "invalid_request_error"],
    [403, OpenAI.PermissionDeniedError, "invalid_request_error"],
    [404, OpenAI.NotFoundError, "invalid_request_error"],
    [429, OpenAI.RateLimitError, "requests"],
    [500, OpenAI.InternalServerError, "server_error"],
    [503, OpenAI.InternalServerError, "server_error"],
  ])("maps an error step with status %i to the SDK's error class", async (status, cls, type) => {
    const { fake, client } = await openaiFake();
    fake.script({ type: "error", status, headers: { "retry-after": "7" } });
    const error = await caught(client.chat.completions.create({ model: MODEL, messages: [user("hi")] }));
    expect(error).toBeInstanceOf(cls);
    const apiError = error as InstanceType<typeof OpenAI.APIError>;
    expect(apiError.status).toBe(status);
    expect(apiError.type).toBe(type);
    expect(apiError.headers?.get("retry-after")).toBe("7");
    expect(fake.rejected).toEqual([]);
  });

  it("passes a custom error body through", async () => {
    const { fake, client } = await openaiFake();
    fake.script({ type: "error", status: 429, body: { error: { message: "quota gone", type: "insufficient_quota", param: null, code: "insufficient_quota" } } });
    const error = (await caught(client.chat.completions.create({ model: MODEL, messages: [user("hi")] }))) as InstanceType<typeof OpenAI.RateLimitError>;
    expect(error.code).toBe("insufficient_quota");
    expect(error.message).toContain("quota gone");
  });

  it("turns reset into a connection error and keeps serving", async () => {
    const { fake, client } = await openaiFake();
    fake.script({ type: "reset" }, { type: "stream_cut", text: "never sent" }, { type: "text", text: "after" });
    expect(await caught(client.chat.completions.create({ model: MODEL, messages: [user("hi")] }))).toBeInstanceOf(OpenAI.APIConnectionError);
    expect(await caught(client.chat.completions.create({ model: MODEL, messages: [user("hi")] }))).toBeInstanceOf(OpenAI.APIConnectionError);
    const res = await client.chat.completions.create({ model: MODEL, messages: [user("hi")] });
    expect(res.choices[0]?.message.content).toBe("after");
  });

  it("hangs past a client timeout, and answers after the wait otherwise", async () => {
    const { fake, client } = await openaiFake();
    fake.script({ type: "hang", ms: 2_000 }, { type: "hang", ms: 50, then: { type: "text", text: "late" } });
    const started = Date.now();
    const error = await caught(client.chat.completions.create({ model: MODEL, messages: [user("hi")] }, { timeout: 150 }));
    expect(error).toBeInstanceOf(OpenAI.APIConnectionTimeoutError);
    expect(Date.now() - started).toBeLessThan(1_500);
    const res = await client.chat.completions.create({ model: MODEL, messages: [user("hi")] });
    expect(res.choices[0]?.message.content).toBe("late");
  });

  it("closes promptly while a request is hanging", async () => {
    const { fake, client } = await openaiFake();
    fake.script({ type: "hang", ms: 30_000 });
    const pending = caught(client.chat.completions.create({ model: MODEL, messages: [user("hi")] }));
    while (fake.requests.length === 0) await new Promise((r) => setTimeout(r, 5));
    const started = Date.now();
    await fake.close();
    expect(Date.now() - started).toBeLessThan(1_000);
    expect(await pending).toBeInstanceOf(OpenAI.APIConnectionError);
  });

  it("errors while iterating a cut stream after the first deltas", async () => {
    const { fake, client } = await openaiFake();
    fake.script({ type: "stream_cut", text: "partial words here" });
    const stream = await client.chat.completions.create({ model: MODEL, messages: [user("hi")], stream: true });
    let seen = "";
    const error = await caught(
      (async () => {
        for await (const chunk of stream) seen += chunk.choices[0]?.delta.content ?? "";
      })(),
    );
    expect(error).toBeInstanceOf(Error);
    expect(seen).toBe("partial words here");
  });

  it("rejects broken tool-call histories without consuming the script", async () => {
    const { fake, client } = await openaiFake();
    fake.script({ type: "text", text: "scripted" });
    const call = { id: "call_1", type: "function" as const, function: { name: "f", arguments: "{}" } };
    const assistant = { role: "assistant" as const, content: null, tool_calls: [call] };
    const tool = (id: string) => ({ role: "tool" as const, tool_call_id: id, content: "r" });
    const histories: OpenAI.ChatCompletionMessageParam[][] = [
      [user("hi"), assistant, user("next")],
      [user("hi"), assistant],
      [user("hi"), tool("call_1")],
      [user("hi"), assistant, tool("call_1"), tool("call_1")],
      [user("hi"), assistant, tool("call_2")],
    ];
    for (const messages of histories) {
      const error = await caught(client.chat.completions.create({ model: MODEL, messages }));
      expect(error).toBeInstanceOf(OpenAI.BadRequestError);
    }
    expect(fake.rejected).toHaveLength(histories.length);
    expect(fake.rejected[0]?.message).toContain("call_1");
    expect(fake.requests).toHaveLength(histories.length);
    const ok = await client.chat.completions.create({ model: MODEL, messages: [user("hi"), assistant, tool("call_1"), user("thanks")] });
    expect(ok.choices[0]?.message.content).toBe("scripted");
  });

  it("requires model and messages, valid JSON and a known path", async () => {
    const { fake, client } = await openaiFake();
    expect(await caught(client.chat.completions.create({ messages: [user("hi")] } as never))).toBeInstanceOf(OpenAI.BadRequestError);
    expect(await caught(client.chat.completions.create({ model: MODEL } as never))).toBeInstanceOf(OpenAI.BadRequestError);
    const malformed = await fetch(`${fake.url}/chat/completions`, { method: "POST", body: "{nope" });
    expect(malformed.status).toBe(400);
    expect((await malformed.json()).error.type).toBe("invalid_request_error");
    const missing = await fetch(`${fake.url}/embeddings`, { method: "POST", body: "{}" });
    expect(missing.status).toBe(404);
    expect(fake.rejected.map((r) => r.status)).toEqual([400, 400, 400, 404]);
    const models = await client.models.list();
    expect(models.data.length).toBeGreaterThan(0);
  });

  it("enforces the API key when one is configured", async () => {
    const { fake, client } = await openaiFake("sk-right");
    const res = await client.chat.completions.create({ model: MODEL, messages: [user("hi")] });
    expect(res.choices[0]?.message.content).toBe("ok");
    const wrong = new OpenAI({ baseURL: fake.url, apiKey: "sk-wrong", maxRetries: 0 });
    const error = await caught(wrong.chat.completions.create({ model: MODEL, messages: [user("hi")] }));
    expect(error).toBeInstanceOf(OpenAI.AuthenticationError);
    expect((error as InstanceType<typeof OpenAI.AuthenticationError>).code).toBe("invalid_api_key");
    expect(fake.rejected).toEqual([{ status: 401, message: expect.stringContaining("API key") }]);
  });
});

const base = { model: CLAUDE, max_tokens: 256 };

describe("fake Anthropic", () => {
  it("answers a scripted text", async () => {
    const { fake, client } = await anthropicFake();
    fake.script({ type: "text", text: "bonjour", usage: { input: 5, output: 2 } });
    const msg = await client.messages.create({ ...base, system: "be brief", messages: [user("hi")] });
    expect(msg.id).toMatch(/^msg_/);
    expect(msg.content).toEqual([{ type: "text", text: "bonjour" }]);
    expect(msg.stop_reason).toBe("end_turn");
    expect(msg.usage).toMatchObject({ input_tokens: 5, output_tokens: 2 });
    expect(fake.requests[0]).toMatchObject({ path: "/v1/messages", stream: false });
    const headers = fake.requests[0]?.headers ?? {};
    expect(headers["x-api-key"] ?? headers.authorization).toMatch(/^(Bearer )?k$/);
  });

  it("returns tool_use blocks with parsed input", async () => {
    const { fake, client } = await anthropicFake();
    fake.script({ type: "tool_calls", text: "let me look", calls: [{ name: "lookup", arguments: '{"q":"x"}' }, { id: "toolu_mine", name: "clock", arguments: "" }] });
    const msg = await client.messages.create({ ...base, messages: [user("hi")] });
    expect(msg.stop_reason).toBe("tool_use");
    expect(msg.content[0]).toEqual({ type: "text", text: "let me look" });
    expect(msg.content[1]).toMatchObject({ type: "tool_use", name: "lookup", input: { q: "x" } });
    expect((msg.content[1] as Anthropic.ToolUseBlock).id).toMatch(/^toolu_/);
    expect(msg.content[2]).toEqual({ type: "tool_use", id: "toolu_mine", name: "clock", input: {} });
  });

  it("streams text and tool input through MessageStream", async () => {
    const { fake, client } = await anthropicFake();
    fake.script({ type: "tool_calls", text: "one moment", calls: [{ name: "weather", arguments: '{"city":"Oslo","unit":"c"}' }], usage: { input: 9, output: 12 } });
    const stream = client.messages.stream({ ...base, messages: [user("hi")] });
    const deltas: string[] = [];
    stream.on("text", (delta) => deltas.push(delta));
    const msg = await stream.finalMessage();
    expect(deltas.length).toBeGreaterThan(1);
    expect(deltas.join("")).toBe("one moment");
    expect(msg.stop_reason).toBe("tool_use");
    expect(msg.content[1]).toMatchObject({ type: "tool_use", name: "weather", input: { city: "Oslo", unit: "c" } });
    expect(msg.usage).toMatchObject({ input_tokens: 9, output_tokens: 12 });
    expect(fake.requests[0]?.stream).toBe(true);
  });

  it("sends the real event sequence on create({ stream: true })", async () => {
    const { fake, client } = await anthropicFake();
    fake.script({ type: "tool_calls", calls: [{ name: "f", arguments: '{"a":[1,2,3]}' }] });
    const stream = await client.messages.create({ ...base, messages: [user("hi")], stream: true });
    const types: string[] = [];
    let json = "";
    for await (const event of stream) {
      types.push(event.type);
      if (event.type === "content_block_delta" && event.delta.type === "input_json_delta") json += event.delta.partial_json;
      if (event.type === "message_delta") expect(event.delta.stop_reason).toBe("tool_use");
    }
    expect(types[0]).toBe("message_start");
    expect(types[1]).toBe("content_block_start");
    expect(types.slice(-3)).toEqual(["content_block_stop", "message_delta", "message_stop"]);
    expect(types.filter((t) => t === "content_block_delta").length).toBeGreaterThan(1);
    expect(JSON.parse(json)).toEqual({ a: [1, 2, 3] });
  });

  it.each([
    [400, Anthropic.BadRequestError, "invalid_request_error"],
    [401, Anthropic.AuthenticationError, "authentication_error"],
    [403, Anthropic.PermissionDeniedError, "permission_error"],
    [404, Anthropic.NotFoundError, "not_found_error"],
    [429, Anthropic.RateLimitError, "rate_limit_error"],
    [500, Anthropic.InternalServerError, "api_error"],
    [529, Anthropic.OverloadedError, "overloaded_error"],
  ])("maps an error step with status %i to the SDK's error class", async (status, cls, type) => {
    const { fake, client } = await anthropicFake();
    fake.script({ type: "error", status, headers: { "retry-after": "3" } });
    const error = await caught(client.messages.create({ ...base, messages: [user("hi")] }));
    expect(error).toBeInstanceOf(cls);
    const apiError = error as InstanceType<typeof Anthropic.APIError>;
    expect(apiError.status).toBe(status);
    expect((apiError.error as any)?.error?.type).toBe(type);
    expect(apiError.headers?.get("retry-after")).toBe("3");
  });

  it("turns reset into a connection error", async () => {
    const { fake, client } = await anthropicFake();
    fake.script({ type: "reset" });
    expect(await caught(client.messages.create({ ...base, messages: [user("hi")] }))).toBeInstanceOf(Anthropic.APIConnectionError);
  });

  it("errors the MessageStream when the stream is cut", async () => {
    const { fake, client } = await anthropicFake();
    fake.script({ type: "stream_cut", text: "half an answer" });
    const stream = client.messages.stream({ ...base, messages: [user("hi")] });
    let seen = "";
    stream.on("text", (delta) => (seen += delta));
    expect(await caught(stream.finalMessage())).toBeInstanceOf(Error);
    expect(seen).toBe("half an answer");
  });

  it("rejects invalid conversations without consuming the script", async () => {
    const { fake, client } = await anthropicFake();
    fake.script({ type: "text", text: "scripted" });
    const use = { role: "assistant" as const, content: [{ type: "tool_use" as const, id: "toolu_1", name: "f", input: {} }] };
    const result = (id: string) => ({ role: "user" as const, content: [{ type: "tool_result" as const, tool_use_id: id, content: "r" }] });
    const cached = (n: number) => Array.from({ length: n }, (_, i) => ({ type: "text" as const, text: `s${i}`, cache_control: { type: "ephemeral" as const } }));
    const bad: Anthropic.MessageCreateParamsNonStreaming[] = [
      { ...base, messages: [user("hi"), use, user("no result")] },
      { ...base, messages: [user("hi"), use] },
      { ...base, messages: [user("hi"), { role: "assistant", content: "text" }, result("toolu_1")] },
      { ...base, messages: [user("hi"), use, result("toolu_2")] },
      { ...base, messages: [{ role: "system", content: "sys" } as never, user("hi")] },
      { ...base, messages: [user("a"), user("b")] },
      { ...base, messages: [{ role: "assistant", content: "first" }] },
      { ...base, system: cached(5), messages: [user("hi")] },
      { model: CLAUDE, messages: [user("hi")] } as never,
    ];
    for (const params of bad) {
      expect(await caught(client.messages.create(params))).toBeInstanceOf(Anthropic.BadRequestError);
    }
    expect(fake.rejected).toHaveLength(bad.length);
    expect(fake.rejected[0]?.message).toContain("toolu_1");
    expect(fake.rejected[7]?.message).toContain("Found 5");
    const ok = await client.messages.create({ ...base, system: cached(4), messages: [user("hi"), use, result("toolu_1")] });
    expect(ok.content).toEqual([{ type: "text", text: "scripted" }]);
  });

  it("answers malformed JSON with 400 and unknown paths with 404", async () => {
    const { fake } = await anthropicFake();
    const malformed = await fetch(`${fake.url}/v1/messages`, { method: "POST", body: "not json" });
    expect(malformed.status).toBe(400);
    expect(await malformed.json()).toMatchObject({ type: "error", error: { type: "invalid_request_error" } });
    const missing = await fetch(`${fake.url}/v1/complete`, { method: "POST", body: "{}" });
    expect(missing.status).toBe(404);
    expect(fake.requests).toHaveLength(2);
  });

  it("enforces x-api-key when configured", async () => {
    const { fake, client } = await anthropicFake("sk-ant-right");
    expect((await client.messages.create({ ...base, messages: [user("hi")] })).content).toHaveLength(1);
    const wrong = new Anthropic({ baseURL: fake.url, apiKey: "sk-ant-wrong", maxRetries: 0 });
    expect(await caught(wrong.messages.create({ ...base, messages: [user("hi")] }))).toBeInstanceOf(Anthropic.AuthenticationError);
    expect(fake.rejected.map((r) => r.status)).toEqual([401]);
    const raw = (headers: Record<string, string>) =>
      fetch(`${fake.url}/v1/messages`, { method: "POST", headers, body: JSON.stringify({ ...base, messages: [user("hi")] }) });
    expect((await raw({ "x-api-key": "sk-ant-right" })).status).toBe(200);
    expect((await raw({})).status).toBe(401);
  });
});

describe("fake-provider-main", () => {
  it("serves from a separate process and prints its URL", async () => {
    const script = fileURLToPath(new URL("./fake-provider-main.ts", import.meta.url));
    const child = spawn(process.execPath, ["--import", "tsx", script, "anthropic", "--text", "from afar"], { stdio: ["ignore", "pipe", "inherit"] });
    try {
      const line = await new Promise<string>((resolve, reject) => {
        createInterface({ input: child.stdout }).once("line", resolve);
        child.once("exit", (code) => reject(new Error(`exited with ${code}`)));
      });
      const { url } = JSON.parse(line) as { url: string };
      expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
      const client = new Anthropic({ baseURL: url, apiKey: "k", maxRetries: 0 });
      const msg = await client.messages.create({ ...base, messages: [user("hi")] });
      expect(msg.content).toEqual([{ type: "text", text: "from afar" }]);
    } finally {
      child.kill("SIGTERM");
    }
  }, 20_000);
});
