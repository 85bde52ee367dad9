/// <reference types="node" />
// The failover contract (design.md "Provider runtime and failover"), driven over HTTP against real SDK
// clients talking to local fake providers that answer with real error bodies.
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { buildTestApp, type TestApp } from "../support/app.ts";
import { startFakeAnthropic, startFakeOpenAI, type FakeProvider } from "../support/fake-provider.ts";
import { recordingTool, type EventLog } from "./recording.ts";
import { createMemoryCache } from "../../src/kv/memory-cache.ts";

const rateLimited = { type: "error", status: 429, headers: { "retry-after": "7" } } as const;

describe("provider failover", () => {
  let primary: FakeProvider;
  let backup: FakeProvider;
  let anthropic: FakeProvider;
  let harness: TestApp;
  let sleeps: number[];
  let log: EventLog;

  beforeEach(async () => {
    primary = await startFakeOpenAI({ apiKey: "sk-primary" });
    backup = await startFakeOpenAI({ apiKey: "sk-backup" });
    anthropic = await startFakeAnthropic({ apiKey: "ak-anthropic" });
    sleeps = [];
    log = [];
    harness = await buildTestApp(
      { OPENAI_API_KEY: "sk-primary", GROQ_API_KEY: "sk-backup", ANTHROPIC_API_KEY: "ak-anthropic" },
      { sleep: async (ms) => void sleeps.push(ms), tools: [recordingTool("seq_tool", log, { parallelSafe: false }).tool] },
    );
  });
  afterEach(async () => {
    await harness.close();
    await Promise.all([primary.close(), backup.close(), anthropic.close()]);
  });

  async function session(runtime: Record<string, unknown> = {}, id = "s") {
    const response = await harness.call("POST", "/v1/sessions", {
      id,
      runtime: {
        provider: "openai",
        model: "gpt-primary",
        base_url: primary.url,
        retry: { max_retries: 3, time_scale: 0.001 },
        fallback: [{ provider: "groq", model: "llama-backup", base_url: backup.url }],
        ...runtime,
      },
    });
    expect(response.status).toBe(201);
  }
  const send = async (content: string, id = "s") => harness.call("POST", `/v1/sessions/${id}/messages`, { content });

  it("moves to the fallback at once on rate_limit, and the next turn starts on the primary again", async () => {
    await session();
    primary.script(rateLimited);
    backup.script({ type: "text", text: "from backup" });
    const body = await (await send("hi")).json();
    expect(body.reply).toBe("from backup");
    expect(body.turn).toMatchObject({ status: "completed", provider: "groq", model: "llama-backup", fallback_activated: true });
    expect(body.turn.attempts).toEqual([
      { provider: "openai", model: "gpt-primary", outcome: "error", reason: "rate_limit", status: 429 },
      { provider: "groq", model: "llama-backup", outcome: "ok" },
    ]);
    expect(sleeps).toEqual([]);
    expect(body.messages[1]).toMatchObject({ role: "assistant", provider: "groq", model: "llama-backup" });
    const status = await (await send("/status")).json();
    expect(status.reply).toContain("Last turn: completed on groq:llama-backup");
    expect(status.reply).toContain("Fallback used: yes");
    expect(status.reply).toContain("Attempts: openai:gpt-primary rate_limit 429 -> groq:llama-backup ok");

    primary.script({ type: "text", text: "primary is back" });
    const next = await (await send("again")).json();
    expect(next.reply).toBe("primary is back");
    expect(next.turn).toMatchObject({ provider: "openai", fallback_activated: false });
    // The stored snapshot never learned about the fallback.
    const stored = await (await harness.call("GET", "/v1/sessions/s")).json();
    expect(stored.runtime).toMatchObject({ provider: "openai", model: "gpt-primary", base_url: primary.url });
  });

  it("retries server_error up to max_retries with backoff, then fails over", async () => {
    await session();
    primary.script(...Array.from({ length: 4 }, () => ({ type: "error" as const, status: 500 })));
    backup.script({ type: "text", text: "ok" });
    const body = await (await send("hi")).json();
    expect(body.turn.attempts.map((attempt: { reason?: string; outcome: string }) => attempt.reason ?? attempt.outcome)).toEqual(["server_error", "server_error", "server_error", "server_error", "ok"]);
    expect(primary.requests).toHaveLength(4);
    expect(sleeps).toHaveLength(3);
    // Jittered exponential backoff: base 2 s doubling, each wait in [half, full] of its step, times time_scale.
    sleeps.forEach((ms, retry) => {
      const step = 2000 * 2 ** retry * 0.001;
      expect(ms).toBeGreaterThanOrEqual(step / 2);
      expect(ms).toBeLessThanOrEqual(step);
    });
  });

  it("fails over overloaded after 2 retries", async () => {
    await session();
    primary.script({ type: "error", status: 503 }, { type: "error", status: 529 }, { type: "error", status: 503 });
    backup.script({ type: "text", text: "ok" });
    const body = await (await send("hi")).json();
    expect(body.turn.attempts.map((attempt: { reason?: string; outcome: string }) => attempt.reason ?? attempt.outcome)).toEqual(["overloaded", "overloaded", "overloaded", "ok"]);
  });

  it("re-reads a credential once after an auth error before failing over", async () => {
    await session();
    let reads = 0;
    const readEnv = harness.deps.config.readEnv;
    harness.deps.config.readEnv = (name) => (name === "OPENAI_API_KEY" ? (++reads === 1 ? "sk-rotated-away" : "sk-primary") : readEnv(name));
    primary.script({ type: "text", text: "after re-read" });
    const body = await (await send("hi")).json();
    expect(body.reply).toBe("after re-read");
    expect(body.turn.attempts).toEqual([
      { provider: "openai", model: "gpt-primary", outcome: "error", reason: "auth", status: 401 },
      { provider: "openai", model: "gpt-primary", outcome: "ok" },
    ]);
    expect(reads).toBe(2);

    harness.deps.config.readEnv = (name) => (name === "OPENAI_API_KEY" ? "sk-dead" : readEnv(name));
    backup.script({ type: "text", text: "backup" });
    const dead = await (await send("again")).json();
    expect(dead.turn.attempts.map((attempt: { reason?: string; outcome: string }) => attempt.reason ?? attempt.outcome)).toEqual(["auth", "auth", "ok"]);
  });

  it("moves on at once for billing and model_not_found, and fails without fallback on format_error", async () => {
    await session();
    primary.script({ type: "error", status: 402 });
    backup.script({ type: "text", text: "paid elsewhere" });
    expect((await (await send("a")).json()).turn.attempts.map((attempt: { reason?: string }) => attempt.reason ?? "ok")).toEqual(["billing", "ok"]);

    primary.script({ type: "error", status: 404 });
    backup.script({ type: "text", text: "model exists here" });
    expect((await (await send("b")).json()).turn.attempts.map((attempt: { reason?: string }) => attempt.reason ?? "ok")).toEqual(["model_not_found", "ok"]);

    primary.script({ type: "error", status: 400 });
    const response = await send("c");
    expect(response.status).toBe(502);
    expect((await response.json()).error.details.attempts).toEqual([{ provider: "openai", model: "gpt-primary", outcome: "error", reason: "format_error", status: 400 }]);
    expect(backup.requests).toHaveLength(2);
  });

  it("recovers from transport errors once per turn on a direct endpoint: rebuild, wait min(3 + retries, 8) s", async () => {
    await session();
    primary.script({ type: "reset" }, { type: "reset" }, { type: "reset" }, { type: "text", text: "recovered" });
    const body = await (await send("hi")).json();
    expect(body.reply).toBe("recovered");
    expect(body.turn.attempts.map((attempt: { reason?: string; outcome: string }) => attempt.reason ?? attempt.outcome)).toEqual(["transport", "transport", "transport", "ok"]);
    expect(body.turn.fallback_activated).toBe(false);
    // Two backoff retries, then the recovery cooldown of min(3 + 2, 8) = 5 s, scaled by 0.001.
    expect(sleeps).toHaveLength(3);
    expect(sleeps[2]).toBeCloseTo(5, 5);

    // A second transport failure after recovery in the same turn fails over instead of recovering again.
    sleeps.length = 0;
    primary.script(...Array.from({ length: 6 }, () => ({ type: "reset" as const })));
    backup.script({ type: "text", text: "backup" });
    const second = await (await send("again")).json();
    expect(second.turn.attempts.filter((attempt: { reason?: string }) => attempt.reason === "transport")).toHaveLength(4);
    expect(second.reply).toBe("backup");
  });

  it("skips transport recovery for aggregators such as OpenRouter", async () => {
    await session({ provider: "openrouter", model: "some/model", base_url: primary.url });
    harness.deps.config.readEnv = (name) => (name === "OPENROUTER_API_KEY" ? "sk-primary" : name === "GROQ_API_KEY" ? "sk-backup" : undefined);
    primary.script({ type: "reset" }, { type: "reset" }, { type: "reset" });
    backup.script({ type: "text", text: "backup" });
    const body = await (await send("hi")).json();
    expect(body.turn.attempts.map((attempt: { reason?: string; outcome: string }) => attempt.reason ?? attempt.outcome)).toEqual(["transport", "transport", "transport", "ok"]);
    expect(sleeps).toHaveLength(2);
  });

  it("without a chain: honours Retry-After on rate_limit, then fails with 502 naming provider and reason", async () => {
    await session({ fallback: [] });
    primary.script(rateLimited, rateLimited, rateLimited, rateLimited);
    const response = await send("hi");
    expect(response.status).toBe(502);
    const error = (await response.json()).error;
    expect(error.message).toContain("openai");
    expect(error.message).toContain("rate_limit");
    expect(error.details.attempts).toHaveLength(4);
    expect(sleeps).toEqual([7, 7, 7]);
  });

  it("lists every attempt when the whole chain is exhausted, and skips entries equal to the primary", async () => {
    await session({ fallback: [{ provider: "openai", model: "gpt-primary", base_url: primary.url }, { provider: "groq", model: "llama-backup", base_url: backup.url }] });
    primary.script(rateLimited);
    backup.script(rateLimited);
    const response = await send("hi");
    expect(response.status).toBe(502);
    const error = (await response.json()).error;
    expect(error.code).toBe("provider_error");
    expect(error.details.attempts).toEqual([
      { provider: "openai", model: "gpt-primary", outcome: "error", reason: "rate_limit", status: 429 },
      { provider: "groq", model: "llama-backup", outcome: "error", reason: "rate_limit", status: 429 },
    ]);
    expect(primary.requests).toHaveLength(1);
  });

  it("changes provider family mid-turn: OpenAI tool calls continue on Anthropic with valid pairings", async () => {
    await session({ fallback: [{ provider: "anthropic", model: "claude-backup", base_url: anthropic.url }] });
    primary.script({ type: "tool_calls", calls: [{ id: "call_abc.1", name: "seq_tool", arguments: JSON.stringify({ key: "k" }) }] }, rateLimited);
    anthropic.script({ type: "text", text: "finished on anthropic" });
    const body = await (await send("start on openai")).json();
    expect(body.reply).toBe("finished on anthropic");
    expect(anthropic.rejected).toEqual([]);
    const sent = anthropic.requests[0]!.body.messages;
    const toolUse = sent[1].content.find((block: { type: string }) => block.type === "tool_use");
    const toolResult = sent[2].content.find((block: { type: string }) => block.type === "tool_result");
    expect(toolResult.tool_use_id).toBe(toolUse.id);
    expect(log).toEqual(["dispatch:k", "done:k"]);
    expect(body.turn).toMatchObject({ provider: "anthropic", fallback_activated: true });
  });

  it("skips a rate-limited primary for every session for its Retry-After, then tries it again", async () => {
    let clock = Date.now();
    harness.deps.cache = createMemoryCache({ now: () => clock });
    harness.deps.now = () => clock;
    await session({}, "a");
    await session({}, "b");
    primary.script(rateLimited);
    backup.setFallback({ type: "text", text: "backup" });
    expect((await (await send("first", "a")).json()).turn.fallback_activated).toBe(true);
    expect(primary.requests).toHaveLength(1);

    const other = await (await send("second", "b")).json();
    expect(other.reply).toBe("backup");
    expect(primary.requests).toHaveLength(1);
    expect(other.turn.attempts).toEqual([
      { provider: "openai", model: "gpt-primary", outcome: "error", reason: "rate_limit" },
      { provider: "groq", model: "llama-backup", outcome: "ok" },
    ]);

    clock += 7_001;
    primary.script({ type: "text", text: "primary again" });
    expect((await (await send("third", "b")).json()).reply).toBe("primary again");
    expect(primary.requests).toHaveLength(2);
  });

  it("does not recover from transport errors on a fallback, and goes on when the rebuild itself fails", async () => {
    await session({ fallback: [{ provider: "groq", model: "llama-backup", base_url: backup.url }, { provider: "anthropic", model: "claude-last", base_url: anthropic.url }] });
    primary.script(rateLimited);
    backup.script({ type: "reset" }, { type: "reset" }, { type: "reset" });
    anthropic.script({ type: "text", text: "third entry" });
    const body = await (await send("hi")).json();
    expect(body.reply).toBe("third entry");
    expect(body.turn.attempts.map((attempt: { reason?: string; outcome: string }) => attempt.reason ?? attempt.outcome)).toEqual(["rate_limit", "transport", "transport", "transport", "ok"]);
    // Two backoff waits on the fallback, no recovery cooldown.
    expect(sleeps).toHaveLength(2);

    // The primary's transport errors lead to a rebuild; its credential is gone by then, so the chain moves on.
    sleeps.length = 0;
    let reads = 0;
    const readEnv = harness.deps.config.readEnv;
    harness.deps.config.readEnv = (name) => (name === "OPENAI_API_KEY" ? (++reads <= 1 ? "sk-primary" : undefined) : readEnv(name));
    primary.script({ type: "reset" }, { type: "reset" }, { type: "reset" });
    backup.script({ type: "text", text: "after a failed rebuild" });
    const rebuilt = await (await send("again")).json();
    expect(rebuilt.reply).toBe("after a failed rebuild");
    expect(rebuilt.turn.attempts.map((attempt: { reason?: string; outcome: string }) => attempt.reason ?? attempt.outcome).slice(0, 4)).toEqual(["transport", "transport", "transport", "auth"]);
    expect(rebuilt.turn.fallback_activated).toBe(true);
  });
});

describe("a provider that answers 200 with a body that is not JSON", () => {
  it("is an error of that attempt (never an empty answer), and the chain moves on", async () => {
    const primary = await startFakeOpenAI({ apiKey: "sk-primary" });
    const backup = await startFakeOpenAI({ apiKey: "sk-backup" });
    const harness = await buildTestApp({ OPENAI_API_KEY: "sk-primary", GROQ_API_KEY: "sk-backup" }, { sleep: async () => undefined });
    await harness.call("POST", "/v1/sessions", {
      id: "j",
      runtime: { provider: "openai", model: "gpt-primary", base_url: primary.url, retry: { max_retries: 1, time_scale: 0 }, fallback: [{ provider: "groq", model: "llama-backup", base_url: backup.url }] },
    });
    primary.setFallback({ type: "invalid_json" });
    backup.script({ type: "text", text: "from backup" });
    const body = await (await harness.call("POST", "/v1/sessions/j/messages", { content: "hi" })).json();
    expect(body.reply).toBe("from backup");
    const failed = body.turn.attempts.filter((attempt: { outcome: string }) => attempt.outcome === "error");
    expect(failed.length).toBeGreaterThanOrEqual(1);
    expect(failed.every((attempt: { provider: string }) => attempt.provider === "openai")).toBe(true);
    const messages = await (await harness.call("GET", "/v1/sessions/j/messages")).json();
    expect(messages.messages.map((message: { role: string; content: string }) => [message.role, message.content])).toEqual([
      ["user", "hi"],
      ["assistant", "from backup"],
    ]);
    await harness.close();
    await primary.close();
    await backup.close();
  });
});
