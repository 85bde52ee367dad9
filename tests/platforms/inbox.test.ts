/// <reference types="node" />
// Inbox processing through the app: per-session order, the queue cap, busy sessions, /stop, and recovery of
// events whose processor died or that keep failing.
import { afterEach, describe, expect, it } from "vitest";
import { acceptInbound, eventTurnId, gaveUpText, maxInboxAttempts, queueFullText, sweepInbox } from "../../src/platforms/processor.ts";
import { runTurn } from "../../src/agent/turn.ts";
import type { InboundMessage } from "../../src/platforms/types.ts";
import { startPlatformHarness, type PlatformHarness } from "../support/fake-platforms.ts";

let nextUpdateId = 5000;
function update(text: string, chatId = 42) {
  const id = nextUpdateId++;
  return { update_id: id, message: { message_id: id, date: 0, chat: { id: chatId, type: "private" }, from: { id: 7, is_bot: false }, text } };
}

/** Holds every provider request until `open()`, so a turn can be kept running for as long as a test needs. */
function gatedFetch() {
  let release!: () => void;
  const gate = new Promise<void>((resolve) => {
    release = resolve;
  });
  let waiting = 0;
  const gated: typeof fetch = async (input, init) => {
    const url = typeof input === "string" ? input : input instanceof URL ? input.href : input.url;
    if (url.includes("/chat/completions")) {
      waiting += 1;
      await gate;
    }
    return globalThis.fetch(input, init);
  };
  return { fetch: gated, open: () => release(), waiting: () => waiting };
}

const completions = (h: PlatformHarness) => h.openai.requests.filter((request) => request.path.endsWith("/chat/completions"));
const sentTexts = (h: PlatformHarness) => h.telegram.callsTo("sendMessage").map((call) => call.body.text as string);

async function journal(h: PlatformHarness, sessionId: string): Promise<string[]> {
  const body = await (await h.test.call("GET", `/v1/sessions/${sessionId}/messages?limit=200`)).json();
  return body.messages.map((message: { role: string; content: string }) => `${message.role}:${message.content}`);
}

describe("platform inbox", () => {
  let h: PlatformHarness;
  afterEach(async () => h.close());

  it("runs messages of one chat one after another, in arrival order, while the provider is slow", async () => {
    h = await startPlatformHarness();
    h.openai.setFallback((request) => ({ type: "hang", ms: 80, then: { type: "text", text: `re: ${request.body.messages.at(-1).content}` } }));
    for (const text of ["one", "two", "three"]) expect((await h.postTelegram(update(text))).status).toBe(200);
    await h.settle();
    expect(await journal(h, "telegram:42")).toEqual(["user:one", "assistant:re: one", "user:two", "assistant:re: two", "user:three", "assistant:re: three"]);
    expect(sentTexts(h)).toEqual(["re: one", "re: two", "re: three"]);
    // No two provider calls overlapped: each started after the previous one's 80 ms answer.
    const starts = completions(h).map((request) => request.at);
    for (let index = 1; index < starts.length; index++) expect(starts[index]! - starts[index - 1]!).toBeGreaterThanOrEqual(75);
  });

  it("refuses the 33rd pending message of a chat politely and still runs the 32 before it", async () => {
    const gate = gatedFetch();
    h = await startPlatformHarness({ overrides: { fetch: gate.fetch } });
    for (let index = 1; index <= 33; index++) expect((await h.postTelegram(update(`msg ${index}`))).status).toBe(200);
    await expect.poll(() => sentTexts(h)).toEqual([queueFullText]);
    expect(gate.waiting()).toBe(1);
    gate.open();
    await h.settle();
    expect(completions(h)).toHaveLength(32);
    const users = (await journal(h, "telegram:42")).filter((entry) => entry.startsWith("user:"));
    expect(users).toEqual(Array.from({ length: 32 }, (_, index) => `user:msg ${index + 1}`));
    expect(sentTexts(h)).toHaveLength(33);
    const statuses = await h.test.database.client.execute("SELECT status, COUNT(*) AS n FROM inbox GROUP BY status");
    expect(statuses.rows.map((row) => [row.status, Number(row.n)])).toEqual([["done", 33]]);
  });

  it("waits for a turn started over the API, then runs the chat message after it", async () => {
    const gate = gatedFetch();
    h = await startPlatformHarness({ overrides: { fetch: gate.fetch } });
    expect((await h.test.call("POST", "/v1/sessions", { id: "telegram:42" })).status).toBe(201);
    const apiTurn = h.test.call("POST", "/v1/sessions/telegram:42/messages", { content: "from api" });
    await expect.poll(() => gate.waiting()).toBe(1);
    await h.postTelegram(update("from chat"));
    // Not settle(): the API route hands its own work to waitUntil, and that waits for the held turn.
    await expect.poll(() => h.test.logs.some((entry) => entry.event === "inbox_session_busy" && entry.session_id === "telegram:42")).toBe(true);
    expect(await h.test.deps.inbox.pendingCount("telegram:42")).toBe(1);
    gate.open();
    expect((await apiTurn).status).toBe(200);
    await h.settle();
    expect(await sweepInbox(h.test.deps)).toBe(1);
    expect(await journal(h, "telegram:42")).toEqual(["user:from api", "assistant:ok", "user:from chat", "assistant:ok"]);
    expect(sentTexts(h)).toEqual(["ok"]);
    // Waiting for a busy session spent no attempt.
    const [eventId] = (await h.test.database.client.execute("SELECT event_id FROM inbox")).rows.map((row) => String(row.event_id));
    expect(await h.test.deps.inbox.get("telegram", eventId!)).toEqual({ status: "done", attempts: 1 });
  });

  it("answers /stop at once instead of queueing it behind the turn it stops", async () => {
    const gate = gatedFetch();
    h = await startPlatformHarness({ overrides: { fetch: gate.fetch } });
    await h.postTelegram(update("a long task"));
    await expect.poll(() => gate.waiting()).toBe(1);
    await h.postTelegram(update("/stop"));
    await expect.poll(() => sentTexts(h)).toEqual(["Stopping the running turn at its next step."]);
    gate.open();
    await h.settle();
    expect(completions(h)).toHaveLength(1);
    expect((await journal(h, "telegram:42")).filter((entry) => entry.startsWith("user:"))).toEqual(["user:a long task"]);
    expect(await h.test.deps.inbox.pendingCount("telegram:42")).toBe(0);
  });

  it("recovers an event whose processor died once its lease expires, and runs it exactly once", async () => {
    h = await startPlatformHarness();
    const { deps } = h.test;
    const message: InboundMessage = { platform: "telegram", eventId: "777", sessionId: "telegram:42", text: "recover me", reply: { platform: "telegram", chatId: 42 } };
    expect(await acceptInbound(deps, message)).not.toBeNull();
    // The "dead" processor: claims with a 50 ms lease and never completes.
    expect((await deps.inbox.claimNext("telegram:42", "dead-processor", Date.now(), 50, maxInboxAttempts))?.eventId).toBe("777");
    expect(await sweepInbox(deps)).toBe(0);
    await new Promise((resolve) => setTimeout(resolve, 80));
    expect(await sweepInbox(deps)).toBe(1);
    expect(await sweepInbox(deps)).toBe(0);
    expect(completions(h)).toHaveLength(1);
    expect(sentTexts(h)).toEqual(["ok"]);
    expect(await deps.inbox.get("telegram", "777")).toEqual({ status: "done", attempts: 2 });
    // The dead processor waking up late cannot complete or fail what it no longer owns.
    await deps.inbox.fail("telegram", "777", "dead-processor", "late", Date.now(), maxInboxAttempts);
    expect(await deps.inbox.get("telegram", "777")).toEqual({ status: "done", attempts: 2 });
    expect(await journal(h, "telegram:42")).toEqual(["user:recover me", "assistant:ok"]);
  });

  it("never runs a turn twice when its processor died after the turn finished: the reply is sent again", async () => {
    h = await startPlatformHarness();
    const { deps } = h.test;
    const message: InboundMessage = { platform: "telegram", eventId: "901", sessionId: "telegram:42", text: "answer once", reply: { platform: "telegram", chatId: 42 } };
    expect(await acceptInbound(deps, message)).not.toBeNull();
    const claimed = await deps.inbox.claimNext("telegram:42", "dead-processor", Date.now(), 50, maxInboxAttempts);
    expect((await h.test.call("POST", "/v1/sessions", { id: "telegram:42" })).status).toBe(201);
    // The dead processor ran the turn under the event's turn id, then died before sending and completing.
    await runTurn(deps, { tenant: "default", sessionId: "telegram:42", content: "answer once", turnId: await eventTurnId(claimed!) });
    expect(completions(h)).toHaveLength(1);
    await new Promise((resolve) => setTimeout(resolve, 80));
    expect(await sweepInbox(deps)).toBe(1);
    expect(completions(h)).toHaveLength(1);
    expect(sentTexts(h)).toEqual(["ok"]);
    expect(await journal(h, "telegram:42")).toEqual(["user:answer once", "assistant:ok"]);
    expect(await deps.inbox.get("telegram", "901")).toEqual({ status: "done", attempts: 2 });
  });

  it("continues a turn that died mid-way instead of appending the message twice", async () => {
    h = await startPlatformHarness();
    const { deps } = h.test;
    const message: InboundMessage = { platform: "telegram", eventId: "902", sessionId: "telegram:42", text: "half done", reply: { platform: "telegram", chatId: 42 } };
    expect(await acceptInbound(deps, message)).not.toBeNull();
    const claimed = await deps.inbox.claimNext("telegram:42", "dead-processor", Date.now(), 50, maxInboxAttempts);
    expect((await h.test.call("POST", "/v1/sessions", { id: "telegram:42" })).status).toBe(201);
    // The dead processor got as far as the turn's first write (lease, user message, turn record).
    const begun = await deps.store.beginTurn({ tenant: "default", sessionId: "telegram:42", turnId: await eventTurnId(claimed!), userContent: "half done", now: new Date().toISOString(), nowMs: Date.now() - deps.config.leaseMs, leaseMs: 10, orphanText: "unknown" });
    expect(begun.kind).toBe("started");
    await new Promise((resolve) => setTimeout(resolve, 80));
    expect(await sweepInbox(deps)).toBe(1);
    expect(completions(h)).toHaveLength(1);
    expect(sentTexts(h)).toEqual(["ok"]);
    expect(await journal(h, "telegram:42")).toEqual(["user:half done", "assistant:ok"]);
    const turns = (await (await h.test.call("GET", "/v1/sessions/telegram:42/turns")).json()).turns;
    expect(turns.map((turn: { status: string }) => turn.status)).toEqual(["completed", "interrupted"]);
  });

  it("marks an event that keeps failing `failed` after 5 attempts, tells the chat once, and logs no payload", async () => {
    h = await startPlatformHarness();
    const store = h.test.deps.store;
    h.test.deps.store = new Proxy(store, {
      get(target, property, receiver) {
        if (property === "beginTurn") {
          return async () => {
            throw new Error("SQLITE_IOERR: disk I/O error in SELECT content FROM messages");
          };
        }
        const value = Reflect.get(target, property, receiver);
        return typeof value === "function" ? value.bind(target) : value;
      },
    });
    const body = update("my private words");
    await h.postTelegram(body);
    await h.settle();
    const eventId = String(body.update_id);
    expect(await h.test.deps.inbox.get("telegram", eventId)).toEqual({ status: "pending", attempts: 1 });
    for (let sweep = 2; sweep <= maxInboxAttempts; sweep++) expect(await sweepInbox(h.test.deps)).toBe(1);
    expect(await h.test.deps.inbox.get("telegram", eventId)).toEqual({ status: "failed", attempts: 5 });
    expect(await sweepInbox(h.test.deps)).toBe(0);
    expect(sentTexts(h)).toEqual([gaveUpText]);
    expect(h.test.logs.filter((entry) => entry.event === "inbox_event_retry")).toHaveLength(4);
    expect(h.test.logs.filter((entry) => entry.event === "inbox_event_failed")).toEqual([
      expect.objectContaining({ level: "error", platform: "telegram", event_id: eventId, attempt: 5, error: "Error" }),
    ]);
    const logged = JSON.stringify(h.test.logs);
    expect(logged).not.toContain("my private words");
    expect(logged).not.toContain("SELECT");
    const stored = await h.test.database.client.execute({ sql: "SELECT error FROM inbox WHERE event_id = ?", args: [eventId] });
    expect(String(stored.rows[0]?.error)).not.toContain("SELECT");
  });
});
