/// <reference types="node" />
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { compressorState, orderForProvider, planCompaction, thresholdFloorTokens, type ConversationEntry } from "../../src/agent/compression.ts";
import type { EdgeCache } from "../../src/kv/cache.ts";
import { buildTestApp, type TestApp } from "../support/app.ts";
import { startFakeOpenAI, type FakeProvider, type RecordedRequest, type ScriptStep } from "../support/fake-provider.ts";

const user = (seq: number, content = `question ${seq}`): ConversationEntry => ({ seq, role: "user", content });
const answer = (seq: number, content = `answer ${seq}`): ConversationEntry => ({ seq, role: "assistant", content });
const calls = (seq: number, ids: string[]): ConversationEntry => ({ seq, role: "assistant", content: null, toolCalls: ids.map((id) => ({ id, name: "todo", arguments: "{}" })) });
const result = (seq: number, id: string): ConversationEntry => ({ seq, role: "tool", content: `result ${id}`, toolCallId: id, name: "todo" });

describe("compaction plan", () => {
  const state = compressorState({ provider: "openai", model: "m", context_length: 8192, max_tokens: 1024 });

  it("derives the trigger from the primary snapshot: threshold of (context_length - max_tokens), with a floor", () => {
    expect(state).toMatchObject({ contextLength: 8192, maxTokens: 1024, threshold: 0.5, thresholdTokens: 3584 });
    expect(compressorState({ provider: "openai", model: "m", context_length: 2048, max_tokens: 1024, compression: { threshold: 0.1 } }).thresholdTokens).toBe(thresholdFloorTokens);
    expect(compressorState({ provider: "openai", model: "m" })).toMatchObject({ contextLength: 128_000, thresholdTokens: Math.floor(0.5 * (128_000 - 4096)) });
  });

  it("keeps the head (first exchange) and at least the last 8 messages, summarizing only the middle", () => {
    const long = "w".repeat(2000);
    const entries = Array.from({ length: 30 }, (_, index) => (index % 2 === 0 ? user(index + 1, long) : answer(index + 1, long)));
    const plan = planCompaction(entries, state)!;
    expect(plan.head.map((entry) => entry.seq)).toEqual([1, 2]);
    expect(plan.tail.length).toBeGreaterThanOrEqual(8);
    expect(plan.tail[plan.tail.length - 1]!.seq).toBe(30);
    expect([...plan.head, ...plan.middle, ...plan.tail].map((entry) => entry.seq)).toEqual(entries.map((entry) => entry.seq));
  });

  it("never splits a tool call from its results: the tail starts at the assistant message that made the calls", () => {
    const big = "x".repeat(20_000);
    const entries = [user(1), answer(2), user(3, big), calls(4, ["a", "b", "c", "d", "e", "f", "g", "h"]), result(5, "a"), result(6, "b"), result(7, "c"), result(8, "d"), result(9, "e"), result(10, "f"), result(11, "g"), result(12, "h"), answer(13)];
    const plan = planCompaction(entries, state)!;
    expect(plan.tail[0]!.seq).toBe(4);
    expect(plan.middle.map((entry) => entry.seq)).toEqual([3]);
  });

  it("places the summary right after the head when sending, whatever its seq", () => {
    const entries: ConversationEntry[] = [user(1), answer(2), user(9), answer(10), { seq: 11, role: "user", content: "[summary]", summary: true }, user(12)];
    expect(orderForProvider(entries).map((message) => message.content)).toEqual(["question 1", "answer 2", "[summary]", "question 9", "answer 10", "question 12"]);
  });

  it("returns no plan when there is no middle to summarize", () => {
    expect(planCompaction([user(1), answer(2), user(3), answer(4)], state)).toBeNull();
  });
});

function mapCache(): EdgeCache & { entries: Map<string, string> } {
  const entries = new Map<string, string>();
  return {
    entries,
    async get(key) {
      return entries.get(key) ?? null;
    },
    async put(key, value) {
      entries.set(key, value);
    },
    async delete(key) {
      entries.delete(key);
    },
  };
}

const isSummarizer = (request: RecordedRequest) => JSON.stringify(request.body.messages[0]).includes("You compress conversation history");

describe("compression in a turn", () => {
  let provider: FakeProvider;
  let harness: TestApp;
  let summaries: RecordedRequest[];
  let summarizerAnswer: () => ScriptStep;
  let cache: ReturnType<typeof mapCache>;

  beforeEach(async () => {
    provider = await startFakeOpenAI();
    summaries = [];
    let summaryCount = 0;
    summarizerAnswer = () => ({ type: "text", text: `SUMMARY-${++summaryCount}` });
    provider.setFallback((request) => {
      if (isSummarizer(request)) {
        summaries.push(request);
        return summarizerAnswer();
      }
      return { type: "text", text: `reply ${"r".repeat(600)}`, usage: { input: 0, output: 10 } };
    });
    cache = mapCache();
    harness = await buildTestApp({ OPENAI_API_KEY: "sk" }, { cache });
    // usable = 4096 - 512 = 3584 tokens; threshold 0.5 -> 1792 tokens (about 7,000 characters).
    await harness.call("POST", "/v1/sessions", {
      id: "long",
      runtime: { provider: "openai", model: "main-model", base_url: provider.url, context_length: 4096, max_tokens: 512, toolsets: ["session"], compression: { model: "small-model" }, retry: { time_scale: 0 } },
    });
  });
  afterEach(async () => {
    await harness.close();
    await provider.close();
  });

  const send = async (content: string) => (await harness.call("POST", "/v1/sessions/long/messages", { content })).json();
  const journal = async (archived = false) => (await (await harness.call("GET", `/v1/sessions/long/messages?limit=1000&archived=${archived}`)).json()).messages as Record<string, unknown>[];

  it("summarizes the middle durably once the prompt passes the threshold; archived rows stay readable and searchable", async () => {
    await send("first question: remember the word PINEAPPLE");
    let compactingTurn: { messages: { summary?: boolean }[] } | undefined;
    for (let index = 0; index < 6; index++) {
      const body = await send(`message ${index} ${"m".repeat(800)}`);
      if (!compactingTurn && body.messages.some((message: { summary?: boolean }) => message.summary)) compactingTurn = body;
    }
    expect(summaries.length).toBeGreaterThanOrEqual(1);
    expect(summaries[0]!.body.model).toBe("small-model");
    const active = await journal();
    const summaryRows = active.filter((message) => message.summary);
    expect(summaryRows).toHaveLength(1);
    // The turn that compacted lists the summary row among the messages it appended.
    expect(compactingTurn?.messages.some((message: { summary?: boolean }) => message.summary)).toBe(true);
    // The head survives verbatim and comes first.
    expect(active[0]).toMatchObject({ role: "user", content: "first question: remember the word PINEAPPLE" });
    const all = await journal(true);
    expect(all.length).toBeGreaterThan(active.length);
    expect(all.filter((message) => message.archived).length).toBe(all.length - active.length);
    // Nothing was deleted: seqs run 1..max without a gap.
    expect(all.map((message) => message.seq)).toEqual(Array.from({ length: all.length }, (_, index) => index + 1));
    // The last provider request: head, summary, then the verbatim tail.
    const last = provider.requests.filter((request) => !isSummarizer(request)).at(-1)!.body.messages;
    expect(last[1].content).toContain("PINEAPPLE");
    expect(last[3].content).toContain("[Summary of the earlier part of this conversation]");
    // Archived rows are still found by session_search.
    const pk = Number((await harness.database.client.execute("SELECT pk FROM sessions WHERE id = 'long'")).rows[0]!.pk);
    const hits = await harness.deps.notes.searchJournal(pk, "message 0", 10);
    expect(hits.some((hit) => hit.archived)).toBe(true);
  });

  it("updates the previous summary instead of summarizing a summary, and archives the old one", async () => {
    await send("first question");
    for (let index = 0; index < 14; index++) await send(`message ${index} ${"m".repeat(800)}`);
    expect(summaries.length).toBeGreaterThanOrEqual(2);
    const second = JSON.stringify(summaries[1]!.body.messages);
    expect(second).toContain("Existing summary:\\nSUMMARY-1");
    expect(second).not.toContain("[Summary of the earlier part");
    const active = await journal();
    expect(active.filter((message) => message.summary).map((message) => String(message.content).split("\n")[1])).toEqual([`SUMMARY-${summaries.length}`]);
    const archivedSummaries = (await journal(true)).filter((message) => message.summary && message.archived);
    expect(archivedSummaries.length).toBe(summaries.length - 1);
  });

  it("loses nothing when the summary fails, and a cooldown stops repeated failing summaries", async () => {
    summarizerAnswer = () => ({ type: "error", status: 500 });
    await send("first question");
    for (let index = 0; index < 6; index++) await send(`message ${index} ${"m".repeat(800)}`);
    expect(summaries).toHaveLength(1);
    expect([...cache.entries.keys()].filter((key) => key.includes("compress-cooldown"))).toHaveLength(1);
    const active = await journal();
    expect(active).toHaveLength(14);
    expect(active.some((message) => message.archived || message.summary)).toBe(false);
    // When the cooldown entry is gone (the cache lost it or it expired), the next turn tries again.
    summarizerAnswer = () => ({ type: "text", text: "RECOVERED" });
    cache.entries.clear();
    await send("one more");
    expect(summaries).toHaveLength(2);
    expect((await journal()).some((message) => message.summary)).toBe(true);
  });

  it("compresses once and retries when the provider reports a context overflow", async () => {
    for (let index = 0; index < 5; index++) await send(`short ${index}`);
    expect(summaries).toHaveLength(0);
    provider.script({ type: "error", status: 400, body: { error: { message: "This model's maximum context length is 4096 tokens. However, your messages resulted in 5000 tokens.", type: "invalid_request_error", param: "messages", code: "context_length_exceeded" } } });
    const body = await send("overflowing");
    expect(body.turn.status).toBe("completed");
    expect(summaries).toHaveLength(1);
    expect(body.turn.attempts.map((attempt: { reason?: string }) => attempt.reason ?? "ok")).toEqual(["context_overflow", "ok"]);
  });

  it("restores the compressor state from the primary snapshot after a fallback with another context length", async () => {
    const backup = await startFakeOpenAI();
    backup.setFallback({ type: "text", text: `backup reply ${"b".repeat(600)}` });
    await harness.call("PATCH", "/v1/sessions/long", { runtime: { fallback: [{ provider: "groq", model: "big-context", base_url: backup.url }] } });
    harness.deps.config.readEnv = (name) => (name === "OPENAI_API_KEY" || name === "GROQ_API_KEY" ? "sk" : undefined);
    await send("first question");
    provider.script({ type: "error", status: 429 });
    const fellBack = await send(`served by the fallback ${"m".repeat(800)}`);
    expect(fellBack.turn.fallback_activated).toBe(true);
    for (let index = 0; index < 5; index++) await send(`message ${index} ${"m".repeat(800)}`);
    // The trigger still used the primary's 4,096-token context, and the compression model of the primary snapshot.
    expect(summaries.length).toBeGreaterThanOrEqual(1);
    expect(summaries[0]!.body.model).toBe("small-model");
    await backup.close();
  });
});
