/// <reference types="node" />
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { budgetExhaustedText } from "../../src/agent/prompt.ts";
import { createLibsqlStore } from "../../src/state/libsql-store.ts";
import { buildTestApp, type TestApp } from "../support/app.ts";
import { countingClient } from "../support/db.ts";
import { startFakeAnthropic, startFakeOpenAI, type FakeProvider } from "../support/fake-provider.ts";
import { recordingFetch, recordingStore, recordingTool, type EventLog } from "./recording.ts";

const call = (id: string, name: string, args: unknown) => ({ id, name, arguments: JSON.stringify(args) });

describe("turn engine over HTTP", () => {
  let openai: FakeProvider;
  let harness: TestApp;
  let log: EventLog;
  let sequential: ReturnType<typeof recordingTool>;
  let parallel: ReturnType<typeof recordingTool>;

  async function setup(options: { gated?: boolean } = {}) {
    openai = await startFakeOpenAI({ apiKey: "sk-test" });
    log = [];
    sequential = recordingTool("seq_tool", log, { parallelSafe: false });
    parallel = recordingTool("par_tool", log, { parallelSafe: true, gated: options.gated ?? false });
    harness = await buildTestApp({ OPENAI_API_KEY: "sk-test" }, { tools: [sequential.tool, parallel.tool], fetch: recordingFetch(log) });
    harness.deps.store = recordingStore(harness.deps.store, log);
    await harness.call("POST", "/v1/sessions", { id: "s", runtime: { provider: "openai", model: "gpt-test", base_url: openai.url, retry: { time_scale: 0 } } });
  }
  beforeEach(async () => setup());
  afterEach(async () => {
    await harness.close();
    await openai.close();
  });

  async function send(content: string, sessionId = "s") {
    return harness.call("POST", `/v1/sessions/${sessionId}/messages`, { content });
  }

  it("runs a plain turn: user message, one provider call, final answer, turn record", async () => {
    openai.script({ type: "text", text: "hello there", usage: { input: 11, output: 3 } });
    const response = await send("hi");
    expect(response.status).toBe(200);
    const body = await response.json();
    expect(body.reply).toBe("hello there");
    expect(body.turn).toMatchObject({ status: "completed", provider: "openai", model: "gpt-test", fallback_activated: false, usage: { input_tokens: 11, output_tokens: 3 } });
    expect(body.turn.attempts).toEqual([{ provider: "openai", model: "gpt-test", outcome: "ok" }]);
    expect(body.messages.map((message: { seq: number; role: string }) => [message.seq, message.role])).toEqual([
      [1, "user"],
      [2, "assistant"],
    ]);
    expect(log).toEqual(["write:user", "provider", "write:finish:completed"]);
    const request = openai.requests[0]!.body;
    expect(request.messages[0].role).toBe("system");
    expect(request.messages.slice(1)).toEqual([{ role: "user", content: "hi" }]);
    const session = await (await harness.call("GET", "/v1/sessions/s")).json();
    expect(session).toMatchObject({ message_count: 2, last_turn: { id: body.turn.id, status: "completed" } });
  });

  it("journals a sequential batch in order: assistant call message, then each result before the next dispatch", async () => {
    openai.script({ type: "tool_calls", calls: [call("call_1", "seq_tool", { key: "a" }), call("call_2", "par_tool", { key: "b" })] }, { type: "text", text: "both done" });
    const body = await (await send("do a then b")).json();
    expect(body.reply).toBe("both done");
    expect(log).toEqual([
      "write:user",
      "provider",
      "write:assistant:call_1,call_2",
      "dispatch:a",
      "done:a",
      "write:result:call_1",
      "dispatch:b",
      "done:b",
      "write:result:call_2",
      "provider",
      "write:finish:completed",
    ]);
    expect(body.messages.map((message: { role: string; tool_call_id?: string }) => `${message.role}${message.tool_call_id ? `:${message.tool_call_id}` : ""}`)).toEqual([
      "user",
      "assistant",
      "tool:call_1",
      "tool:call_2",
      "assistant",
    ]);
    // The second provider request carries the calls and their results, well formed.
    expect(openai.rejected).toEqual([]);
    const second = openai.requests[1]!.body.messages.slice(1);
    expect(second.map((message: { role: string }) => message.role)).toEqual(["user", "assistant", "tool", "tool"]);
  });

  it("runs a parallel-safe batch concurrently and journals each result once, in call order", async () => {
    await harness.close();
    await openai.close();
    await setup({ gated: true });
    openai.script({ type: "tool_calls", calls: [call("call_1", "par_tool", { key: "a" }), call("call_2", "par_tool", { key: "b" })] }, { type: "text", text: "done" });
    const pending = send("both at once");
    // Both are dispatched before either finishes; b finishes first but its result waits for a's.
    await expect.poll(() => log.filter((entry) => entry.startsWith("dispatch:")).length).toBe(2);
    parallel.release("b");
    await expect.poll(() => log.includes("done:b")).toBe(true);
    await new Promise((resolve) => setTimeout(resolve, 30));
    expect(log.some((entry) => entry.startsWith("write:result"))).toBe(false);
    parallel.release("a");
    const body = await (await pending).json();
    expect(body.reply).toBe("done");
    expect(log).toEqual([
      "write:user",
      "provider",
      "write:assistant:call_1,call_2",
      "dispatch:a",
      "dispatch:b",
      "done:b",
      "done:a",
      "write:result:call_1",
      "write:result:call_2",
      "provider",
      "write:finish:completed",
    ]);
  });

  it("keeps a 2-tool turn within 3 database round trips plus one per tool result, and a plain turn at 2", async () => {
    const counting = countingClient(harness.database.client);
    harness.deps.store = createLibsqlStore(counting.client, { file: true });
    openai.script({ type: "tool_calls", calls: [call("call_1", "seq_tool", { key: "a" }), call("call_2", "seq_tool", { key: "b" })] }, { type: "text", text: "ok" });
    expect((await send("two tools")).status).toBe(200);
    expect(counting.counts.roundTrips).toBeLessThanOrEqual(3 + 2);
    expect(counting.counts.roundTrips).toBe(5);
    counting.reset();
    openai.script({ type: "text", text: "plain" });
    expect((await send("no tools")).status).toBe(200);
    expect(counting.counts.roundTrips).toBe(2);
  });

  it("turns invalid arguments and unknown tools into results the model can read", async () => {
    openai.script(
      { type: "tool_calls", calls: [{ id: "call_1", name: "seq_tool", arguments: "{not json" }, call("call_2", "seq_tool", { key: 5 }), call("call_3", "no_such_tool", {})] },
      { type: "text", text: "sorry" },
    );
    const body = await (await send("break things")).json();
    expect(body.turn.status).toBe("completed");
    const results = body.messages.filter((message: { role: string }) => message.role === "tool");
    expect(results).toHaveLength(3);
    expect(results.every((result: { is_error?: boolean }) => result.is_error === true)).toBe(true);
    expect(results[1].content).toContain("arguments.key");
    expect(results[2].content).toContain("no_such_tool");
    expect(sequential.dispatches).toBe(0);
  });

  it("stops at max_iterations with a final message that says the budget ran out", async () => {
    await harness.call("PATCH", "/v1/sessions/s", { runtime: { max_iterations: 2 } });
    let count = 0;
    openai.setFallback(() => ({ type: "tool_calls", calls: [call(`call_${++count}`, "seq_tool", { key: `k${count}` })] }));
    const body = await (await send("loop forever")).json();
    expect(body.reply).toBe(budgetExhaustedText(2));
    expect(body.turn.status).toBe("completed");
    expect(openai.requests).toHaveLength(2);
    expect(sequential.dispatches).toBe(2);
  });

  it("answers 409 session_busy to a second turn while one runs, then releases the lease", async () => {
    openai.script({ type: "hang", ms: 300, then: { type: "text", text: "slow" } });
    const first = send("slow one");
    await expect.poll(() => openai.requests.length).toBe(1);
    const second = await send("impatient");
    expect(second.status).toBe(409);
    expect(second.headers.get("retry-after")).toMatch(/^\d+$/);
    expect((await second.json()).error.code).toBe("session_busy");
    expect((await first).status).toBe(200);
    openai.script({ type: "text", text: "now" });
    expect((await send("after")).status).toBe(200);
    const messages = await (await harness.call("GET", "/v1/sessions/s/messages")).json();
    expect(messages.messages.map((message: { content: string }) => message.content)).toEqual(["slow one", "slow", "after", "now"]);
  });

  it("fails with 502 provider_error, keeps the user message, records the turn and releases the lease", async () => {
    openai.script({ type: "error", status: 400, body: { error: { message: "bad request shape", type: "invalid_request_error", param: null, code: null } } });
    const response = await send("doomed");
    expect(response.status).toBe(502);
    const error = (await response.json()).error;
    expect(error.code).toBe("provider_error");
    expect(error.details.attempts).toEqual([{ provider: "openai", model: "gpt-test", outcome: "error", reason: "format_error", status: 400 }]);
    const turns = await (await harness.call("GET", "/v1/sessions/s/turns")).json();
    expect(turns.turns[0]).toMatchObject({ status: "failed", attempts: error.details.attempts });
    const messages = await (await harness.call("GET", "/v1/sessions/s/messages")).json();
    expect(messages.messages.map((message: { role: string; content: string }) => [message.role, message.content])).toEqual([["user", "doomed"]]);
    openai.script({ type: "text", text: "recovered" });
    const next = await (await send("again")).json();
    expect(next.reply).toBe("recovered");
  });

  it("repairs an orphan tool call at turn start, never re-runs it, and sends a well-formed request", async () => {
    // A previous process died after journaling the assistant's calls and one result.
    const begun = await harness.deps.store.beginTurn({ tenant: "default", sessionId: "s", turnId: "turn_dead", userContent: "earlier", now: new Date().toISOString(), nowMs: Date.now() - 10 * 60_000 - 5000, leaseMs: 1000, orphanText: "unknown" });
    if (begun.kind !== "started") throw new Error("not started");
    await harness.deps.store.appendMessages(begun.session.pk, "turn_dead", 2, [{ role: "assistant", content: null, toolCalls: [call("call_x", "seq_tool", { key: "x" }), call("call_y", "seq_tool", { key: "y" })] }], new Date().toISOString(), 0);
    await harness.deps.store.appendToolResult(begun.session.pk, "turn_dead", 3, { role: "tool", content: "x done", toolCallId: "call_x", name: "seq_tool" }, new Date().toISOString());
    log.length = 0;
    openai.script({ type: "text", text: "continuing" });
    const body = await (await send("what happened?")).json();
    expect(body.reply).toBe("continuing");
    expect(log).toEqual(["write:repair:call_y", "write:user", "provider", "write:finish:completed"]);
    expect(body.messages[0]).toMatchObject({ seq: 4, role: "tool", tool_call_id: "call_y", effect: "unknown", is_error: true });
    expect(sequential.dispatches).toBe(0);
    expect(openai.rejected).toEqual([]);
    const sent = openai.requests[0]!.body.messages.slice(1).map((message: { role: string; tool_call_id?: string }) => `${message.role}${message.tool_call_id ? `:${message.tool_call_id}` : ""}`);
    expect(sent).toEqual(["user", "assistant", "tool:call_x", "tool:call_y", "user"]);
    const turns = await (await harness.call("GET", "/v1/sessions/s/turns")).json();
    expect(turns.turns.map((turn: { id: string; status: string }) => turn.status)).toEqual(["completed", "interrupted"]);
  });

  it("gives a timed-out tool a result with effect unknown", async () => {
    await harness.close();
    await openai.close();
    await setup({ gated: true });
    harness.deps.config = { ...harness.deps.config, toolTimeoutMs: 100 };
    openai.script({ type: "tool_calls", calls: [call("call_1", "par_tool", { key: "never" })] }, { type: "text", text: "gave up" });
    const body = await (await send("wait")).json();
    expect(body.messages[2]).toMatchObject({ role: "tool", tool_call_id: "call_1", effect: "unknown", is_error: true });
    expect(body.reply).toBe("gave up");
  });
});

describe("turn engine on Anthropic", () => {
  it("runs a tool turn with tool_use/tool_result pairing and the system prompt at the top level", async () => {
    const anthropic = await startFakeAnthropic({ apiKey: "ak-test" });
    const log: EventLog = [];
    const tool = recordingTool("seq_tool", log, { parallelSafe: false });
    const harness = await buildTestApp({ ANTHROPIC_API_KEY: "ak-test" }, { tools: [tool.tool] });
    await harness.call("POST", "/v1/sessions", { id: "a", runtime: { provider: "anthropic", model: "claude-test", base_url: anthropic.url }, system_prompt: "You are terse." });
    anthropic.script({ type: "tool_calls", calls: [{ name: "seq_tool", arguments: JSON.stringify({ key: "z" }) }] }, { type: "text", text: "done", usage: { input: 20, output: 4 } });
    const body = await (await harness.call("POST", "/v1/sessions/a/messages", { content: "go" })).json();
    expect(body.reply).toBe("done");
    expect(anthropic.rejected).toEqual([]);
    const second = anthropic.requests[1]!.body;
    expect(JSON.stringify(second.system)).toContain("You are terse.");
    expect(second.messages.map((message: { role: string }) => message.role)).toEqual(["user", "assistant", "user"]);
    expect(second.messages[2].content[0]).toMatchObject({ type: "tool_result", tool_use_id: body.messages[1].tool_calls[0].id });
    expect(tool.dispatches).toBe(1);
    await harness.close();
    await anthropic.close();
  });
});
