/// <reference types="node" />
// Streaming turns over real HTTP (the Node server in-process) against the fake OpenAI server, and
// Idempotency-Key replay of turn-creating requests.
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { buildTestApp, listen, otherTenantKey, testApiKey, type TestApp } from "../support/app.ts";
import { startFakeOpenAI, type FakeProvider } from "../support/fake-provider.ts";

interface SseEvent {
  event: string;
  id: number;
  data: any;
}

/** Reads SSE blocks as they arrive; `until` may stop reading early (the caller then aborts the request). */
async function readEvents(response: Response, until?: (event: SseEvent) => boolean): Promise<SseEvent[]> {
  const reader = response.body!.getReader();
  const decoder = new TextDecoder();
  const events: SseEvent[] = [];
  let buffer = "";
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return events;
    buffer += decoder.decode(value, { stream: true });
    let end: number;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const fields = Object.fromEntries(block.split("\n").map((line) => [line.slice(0, line.indexOf(":")), line.slice(line.indexOf(":") + 1).trimStart()]));
      const event: SseEvent = { event: fields.event ?? "message", id: Number(fields.id), data: JSON.parse(fields.data ?? "null") };
      events.push(event);
      if (until?.(event)) return events;
    }
  }
}

const names = (events: SseEvent[]) => events.map((event) => event.event);
const terminal = (events: SseEvent[]) => events.filter((event) => event.event === "turn-end" || event.event === "error");

function expectWellFormed(events: SseEvent[]) {
  expect(events[0]?.event).toBe("turn-start");
  expect(terminal(events)).toHaveLength(1);
  expect(terminal(events)[0]).toBe(events[events.length - 1]);
  events.forEach((event, index) => expect(event.id).toBe(index + 1));
}

/** The text a client keeps: deltas since the last text-reset (and after the last tool call). */
function keptText(events: SseEvent[]): string {
  let text = "";
  for (const event of events) {
    if (event.event === "text-delta") text += event.data.text;
    if (["text-reset", "tool-call-start", "tool-call-end", "turn-start"].includes(event.event)) text = "";
  }
  return text;
}

describe("streaming turns over HTTP", () => {
  let openai: FakeProvider;
  let harness: TestApp;
  let server: { url: string; close(): Promise<void> };

  beforeEach(async () => {
    openai = await startFakeOpenAI({ apiKey: "sk-test" });
    harness = await buildTestApp({ OPENAI_API_KEY: "sk-test" });
    server = await listen(harness.app);
    const created = await harness.call("POST", "/v1/sessions", { id: "s", runtime: { provider: "openai", model: "gpt-test", base_url: openai.url, retry: { time_scale: 0 } } });
    expect(created.status).toBe(201);
  });
  afterEach(async () => {
    await server.close();
    await harness.close();
    await openai.close();
  });

  const post = (body: unknown, headers: Record<string, string> = {}, path = "/v1/sessions/s/messages", signal?: AbortSignal) =>
    fetch(`${server.url}${path}`, {
      method: "POST",
      headers: { authorization: `Bearer ${testApiKey}`, "content-type": "application/json", ...headers },
      body: JSON.stringify(body),
      ...(signal ? { signal } : {}),
    });

  it("streams turn-start, the provider's deltas and one turn-end carrying the JSON body", async () => {
    openai.script({ type: "text", text: "hello from the stream", usage: { input: 7, output: 5 } });
    const response = await post({ content: "hi", stream: true });
    expect(response.status).toBe(200);
    expect(response.headers.get("content-type")).toMatch(/^text\/event-stream/);
    expect(response.headers.get("x-request-id")).toBeTruthy();
    const events = await readEvents(response);
    expectWellFormed(events);
    expect(events[0]!.data).toMatchObject({ session_id: "s", seq: 1, turn_id: expect.stringMatching(/^turn_/) });
    const deltas = events.filter((event) => event.event === "text-delta");
    expect(deltas.length).toBeGreaterThan(1);
    expect(names(events)).toEqual(["turn-start", ...deltas.map(() => "text-delta"), "turn-end"]);
    const end = events[events.length - 1]!.data;
    expect(deltas.map((event) => event.data.text).join("")).toBe("hello from the stream");
    expect(end.reply).toBe("hello from the stream");
    expect(end.turn).toMatchObject({ id: events[0]!.data.turn_id, status: "completed", usage: { input_tokens: 7, output_tokens: 5 } });
    expect(end.messages.map((message: { role: string }) => message.role)).toEqual(["user", "assistant"]);
    expect(openai.requests[0]!.stream).toBe(true);
  });

  it("streams when the client accepts text/event-stream without the body flag", async () => {
    openai.script({ type: "text", text: "via accept" });
    const response = await post({ content: "hi" }, { accept: "text/event-stream" });
    const events = await readEvents(response);
    expectWellFormed(events);
    expect(events[events.length - 1]!.data.reply).toBe("via accept");
  });

  it("puts tool-call-start and tool-call-end between the steps of a tool turn", async () => {
    openai.script(
      { type: "tool_calls", text: "Noting it.", calls: [{ id: "call_1", name: "todo", arguments: JSON.stringify({ action: "add", item: "buy milk" }) }] },
      { type: "text", text: "Added to your list." },
    );
    const events = await readEvents(await post({ content: "remember milk", stream: true }));
    expectWellFormed(events);
    const order = names(events).filter((name, index, all) => name !== "text-delta" || all[index - 1] !== "text-delta");
    expect(order).toEqual(["turn-start", "text-delta", "tool-call-start", "tool-call-end", "text-delta", "turn-end"]);
    const start = events.find((event) => event.event === "tool-call-start")!.data;
    const end = events.find((event) => event.event === "tool-call-end")!.data;
    expect(start).toEqual({ id: "call_1", name: "todo", arguments: JSON.stringify({ action: "add", item: "buy milk" }) });
    expect(end).toMatchObject({ id: "call_1", name: "todo", is_error: false, seq: 3 });
    expect(keptText(events)).toBe("Added to your list.");
    expect(events[events.length - 1]!.data.messages.map((message: { role: string }) => message.role)).toEqual(["user", "assistant", "tool", "assistant"]);
  });

  it("announces a retried step with text-reset, so the cut partial text never ends up in the answer", async () => {
    openai.script({ type: "stream_cut", text: "partial" }, { type: "text", text: "the whole answer" });
    const events = await readEvents(await post({ content: "hi", stream: true }));
    expectWellFormed(events);
    const reset = names(events).indexOf("text-reset");
    expect(reset).toBeGreaterThan(names(events).indexOf("text-delta"));
    expect(events[reset]!.data).toEqual({ reason: "transport" });
    expect(events.slice(0, reset).map((event) => (event.event === "text-delta" ? event.data.text : "")).join("")).toBe("partial");
    const end = events[events.length - 1]!;
    expect(end.event).toBe("turn-end");
    expect(end.data.reply).toBe("the whole answer");
    expect(end.data.reply).not.toContain("partial");
    expect(keptText(events)).toBe("the whole answer");
    const journal = await (await harness.call("GET", "/v1/sessions/s/messages")).json();
    expect(journal.messages.map((message: { content: string }) => message.content)).toEqual(["hi", "the whole answer"]);
  });

  it("ends with exactly one error event when every attempt fails, never a silent cut", async () => {
    openai.setFallback({ type: "stream_cut", text: "partial" });
    const events = await readEvents(await post({ content: "hi", stream: true }));
    expectWellFormed(events);
    const last = events[events.length - 1]!;
    expect(last.event).toBe("error");
    expect(last.data.error.code).toBe("provider_error");
    expect(last.data.error.details.attempts.length).toBeGreaterThan(1);
    expect(names(events)).not.toContain("turn-end");
    const turns = await (await harness.call("GET", "/v1/sessions/s/turns")).json();
    expect(turns.turns[0].status).toBe("failed");
  });

  it("keeps running a turn whose client disconnected, and journals all of it", async () => {
    openai.script(
      { type: "tool_calls", text: "Checking.", calls: [{ id: "call_1", name: "todo", arguments: JSON.stringify({ action: "add", item: "x" }) }] },
      { type: "hang", ms: 300, then: { type: "text", text: "finished without you" } },
    );
    const abort = new AbortController();
    const response = await post({ content: "go", stream: true }, {}, undefined, abort.signal);
    const seen = await readEvents(response, (event) => event.event === "text-delta");
    abort.abort();
    expect(names(seen)).toEqual(["turn-start", "text-delta"]);
    await expect
      .poll(async () => (await (await harness.call("GET", "/v1/sessions/s/turns")).json()).turns[0]?.status, { timeout: 5000, interval: 50 })
      .toBe("completed");
    const journal = await (await harness.call("GET", "/v1/sessions/s/messages")).json();
    expect(journal.messages.map((message: { role: string; content: string | null }) => [message.role, message.content])).toEqual([
      ["user", "go"],
      ["assistant", "Checking."],
      ["tool", expect.any(String)],
      ["assistant", "finished without you"],
    ]);
    expect(openai.requests).toHaveLength(2);
    expect(harness.logs.filter((entry) => entry.level === "error")).toEqual([]);
  });

  it("answers errors found before the turn starts as plain JSON with their status", async () => {
    const missing = await post({ content: "hi", stream: true }, {}, "/v1/sessions/nope/messages");
    expect(missing.status).toBe(404);
    expect(missing.headers.get("content-type")).toMatch(/^application\/json/);
    expect((await missing.json()).error.code).toBe("not_found");

    const invalid = await post({ content: "", stream: true });
    expect(invalid.status).toBe(400);
    expect((await invalid.json()).error.details.fields.map((field: { field: string }) => field.field)).toEqual(["content"]);

    openai.script({ type: "hang", ms: 300, then: { type: "text", text: "slow" } });
    const first = post({ content: "one", stream: true });
    await expect.poll(() => openai.requests.length).toBe(1);
    const busy = await post({ content: "two", stream: true });
    expect(busy.status).toBe(409);
    expect(busy.headers.get("retry-after")).toMatch(/^\d+$/);
    expect((await busy.json()).error.code).toBe("session_busy");
    expect(terminal(await readEvents(await first))[0]!.data.reply).toBe("slow");
  });

  it("answers a command with a single turn-end carrying the command body", async () => {
    const events = await readEvents(await post({ content: "/help", stream: true }));
    expect(names(events)).toEqual(["turn-end"]);
    expect(events[0]!.id).toBe(1);
    expect(events[0]!.data).toMatchObject({ turn: null, command: "help", messages: [] });
    expect(events[0]!.data.reply).toContain("/retry");
    expect(openai.requests).toHaveLength(0);
  });

  describe("Idempotency-Key", () => {
    it("replays the first result for the same key and body, without a second turn", async () => {
      openai.script({ type: "text", text: "only once" });
      const first = await post({ content: "charge me" }, { "idempotency-key": "key-1" });
      const second = await post({ content: "charge me" }, { "idempotency-key": "key-1" });
      expect(first.status).toBe(200);
      expect(second.status).toBe(200);
      expect(second.headers.get("idempotent-replayed")).toBe("true");
      expect(await second.json()).toEqual(await first.json());
      expect(openai.requests).toHaveLength(1);
      const turns = await (await harness.call("GET", "/v1/sessions/s/turns")).json();
      expect(turns.turns).toHaveLength(1);
      const rows = await harness.database.client.execute("SELECT key, status, response_status FROM idempotency");
      expect(rows.rows.map((row) => [row.key, row.status, row.response_status])).toEqual([["key-1", "done", 200]]);
    });

    it("refuses the same key with a different body, and while the first request still runs", async () => {
      openai.script({ type: "hang", ms: 300, then: { type: "text", text: "slow" } });
      const first = post({ content: "one" }, { "idempotency-key": "key-2" });
      await expect.poll(() => openai.requests.length).toBe(1);
      const running = await post({ content: "one" }, { "idempotency-key": "key-2" });
      expect(running.status).toBe(409);
      expect((await running.json()).error.code).toBe("conflict");
      expect((await first).status).toBe(200);
      const different = await post({ content: "two" }, { "idempotency-key": "key-2" });
      expect(different.status).toBe(409);
      expect(await different.json()).toMatchObject({ error: { code: "conflict", message: expect.stringContaining("different request") } });
      expect(openai.requests).toHaveLength(1);
    });

    it("replays a stored result as a single turn-end event to a streaming request", async () => {
      openai.script({ type: "text", text: "streamed once" });
      const events = await readEvents(await post({ content: "s", stream: true }, { "idempotency-key": "key-3" }));
      const replay = await post({ content: "s", stream: true }, { "idempotency-key": "key-3" });
      expect(replay.headers.get("idempotent-replayed")).toBe("true");
      const replayed = await readEvents(replay);
      expect(names(replayed)).toEqual(["turn-end"]);
      expect(replayed[0]!.data).toEqual(events[events.length - 1]!.data);
      // A JSON first answer replays as an event too when the repeat asks for a stream.
      openai.script({ type: "text", text: "json once" });
      const json = await (await post({ content: "j" }, { "idempotency-key": "key-3b" })).json();
      const asEvents = await readEvents(await post({ content: "j" }, { "idempotency-key": "key-3b", accept: "text/event-stream" }));
      expect(asEvents).toEqual([{ event: "turn-end", id: 1, data: json }]);
      expect(openai.requests).toHaveLength(2);
    });

    it("replays a failed turn's error, but frees a key whose request never started a turn", async () => {
      const missing = await post({ content: "x" }, { "idempotency-key": "key-4" }, "/v1/sessions/later/messages");
      expect(missing.status).toBe(404);
      await harness.call("POST", "/v1/sessions", { id: "later", runtime: { provider: "openai", model: "gpt-test", base_url: openai.url, retry: { time_scale: 0, max_retries: 0 } } });
      openai.script({ type: "error", status: 400 });
      const failed = await post({ content: "x" }, { "idempotency-key": "key-4" }, "/v1/sessions/later/messages");
      expect(failed.status).toBe(502);
      const replay = await post({ content: "x" }, { "idempotency-key": "key-4" }, "/v1/sessions/later/messages");
      expect(replay.status).toBe(502);
      expect(await replay.json()).toEqual(await failed.json());
      expect(openai.requests).toHaveLength(1);
    });

    it("ignores keys older than 24 h, scopes keys by tenant, and validates the header", async () => {
      openai.setFallback({ type: "text", text: "ok" });
      expect((await post({ content: "a" }, { "idempotency-key": "key-5" })).status).toBe(200);
      const realNow = harness.deps.now;
      harness.deps.now = () => realNow() + 24 * 3_600_000 + 1000;
      expect((await post({ content: "b" }, { "idempotency-key": "key-5" })).status).toBe(200);
      expect(openai.requests).toHaveLength(2);
      harness.deps.now = realNow;

      await fetch(`${server.url}/v1/sessions`, { method: "POST", headers: { authorization: `Bearer ${otherTenantKey}`, "content-type": "application/json" }, body: JSON.stringify({ id: "s", runtime: { provider: "openai", model: "gpt-test", base_url: openai.url } }) });
      const other = await post({ content: "b" }, { "idempotency-key": "key-5", authorization: `Bearer ${otherTenantKey}` });
      expect(other.status).toBe(200);
      expect(other.headers.get("idempotent-replayed")).toBeNull();
      expect(openai.requests).toHaveLength(3);

      const bad = await post({ content: "c" }, { "idempotency-key": "has spaces in it" });
      expect(bad.status).toBe(400);
      expect((await bad.json()).error.details.fields).toEqual([{ field: "Idempotency-Key", message: expect.any(String) }]);
    });
  });
});
