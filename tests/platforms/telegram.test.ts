/// <reference types="node" />
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { notConfiguredText, providerFailedText } from "../../src/platforms/processor.ts";
import { splitText } from "../../src/platforms/types.ts";
import { startPlatformHarness, telegramSecret, type PlatformHarness } from "../support/fake-platforms.ts";

let nextUpdateId = 1000;
function update(text: string, options: { chat?: Record<string, unknown>; updateId?: number; extra?: Record<string, unknown> } = {}) {
  const id = options.updateId ?? nextUpdateId++;
  return {
    update_id: id,
    message: {
      message_id: id,
      date: Math.floor(Date.now() / 1000),
      chat: options.chat ?? { id: 42, type: "private" },
      from: { id: 7, is_bot: false, first_name: "Ada" },
      text,
      ...options.extra,
    },
  };
}

async function inboxRows(h: PlatformHarness): Promise<{ event_id: string; status: string; attempts: number }[]> {
  const result = await h.test.database.client.execute("SELECT event_id, status, attempts FROM inbox ORDER BY rowid");
  return result.rows.map((row) => ({ event_id: String(row.event_id), status: String(row.status), attempts: Number(row.attempts) }));
}

const completions = (h: PlatformHarness) => h.openai.requests.filter((request) => request.path.endsWith("/chat/completions"));
const sentTexts = (h: PlatformHarness) => h.telegram.callsTo("sendMessage").map((call) => call.body.text as string);

describe("Telegram webhook", () => {
  let h: PlatformHarness;
  beforeEach(async () => {
    h = await startPlatformHarness();
  });
  afterEach(async () => h.close());

  it("refuses a missing or wrong secret token with 401 and stores nothing", async () => {
    const missing = await h.postTelegram(update("hi"), null);
    expect(missing.status).toBe(401);
    expect(await missing.json()).toMatchObject({ error: { code: "unauthorized" } });
    const wrong = await h.postTelegram(update("hi"), `${telegramSecret}x`);
    expect(wrong.status).toBe(401);
    await h.settle();
    expect(await inboxRows(h)).toEqual([]);
    expect(completions(h)).toHaveLength(0);
    expect(h.telegram.calls).toHaveLength(0);
  });

  it("answers 503 not_configured when the secret is not set", async () => {
    const bare = await startPlatformHarness({ env: { TELEGRAM_WEBHOOK_SECRET: "" } });
    const response = await bare.postTelegram(update("hi"), "anything");
    expect(response.status).toBe(503);
    expect(await response.json()).toMatchObject({ error: { code: "not_configured" } });
    await bare.close();
  });

  it("runs a turn for a private message and replies with sendMessage after a typing indicator", async () => {
    h.openai.script({ type: "text", text: "Hello Ada!" });
    const response = await h.postTelegram(update("hi there"));
    expect(response.status).toBe(200);
    await h.settle();
    expect(completions(h)).toHaveLength(1);
    expect(completions(h)[0]!.body.messages.at(-1)).toEqual({ role: "user", content: "hi there" });
    expect(h.telegram.calls.map((call) => call.name)).toEqual(["sendChatAction", "sendMessage"]);
    expect(h.telegram.calls[0]!.body).toEqual({ chat_id: 42, action: "typing" });
    expect(h.telegram.calls[1]!.body).toEqual({ chat_id: 42, text: "Hello Ada!" });
    expect(h.telegram.calls[1]!.body.parse_mode).toBeUndefined();
    const journal = await (await h.test.call("GET", "/v1/sessions/telegram:42/messages")).json();
    expect(journal.messages.map((message: { role: string; content: string }) => [message.role, message.content])).toEqual([
      ["user", "hi there"],
      ["assistant", "Hello Ada!"],
    ]);
    expect(await inboxRows(h)).toEqual([{ event_id: expect.any(String), status: "done", attempts: 1 }]);
  });

  it("keeps forum topics in their own session and replies into the topic", async () => {
    h.openai.script({ type: "text", text: "topic answer" });
    const forum = { id: -1001234567890, type: "supergroup", is_forum: true };
    await h.postTelegram(update("in a topic", { chat: forum, extra: { message_thread_id: 77, is_topic_message: true } }));
    await h.settle();
    expect(h.telegram.callsTo("sendChatAction")[0]!.body).toEqual({ chat_id: forum.id, message_thread_id: 77, action: "typing" });
    expect(h.telegram.callsTo("sendMessage")[0]!.body).toEqual({ chat_id: forum.id, message_thread_id: 77, text: "topic answer" });
    expect((await h.test.call("GET", "/v1/sessions/telegram:-1001234567890:77")).status).toBe(200);
    // A reply thread of an ordinary supergroup is not a topic: same chat session, no thread id on the reply.
    await h.postTelegram(update("a reply", { chat: { id: -100999, type: "supergroup" }, extra: { message_thread_id: 5 } }));
    await h.settle();
    expect(h.telegram.callsTo("sendMessage")[1]!.body).toEqual({ chat_id: -100999, text: "ok" });
    expect((await h.test.call("GET", "/v1/sessions/telegram:-100999")).status).toBe(200);
  });

  it("runs one turn and sends one reply when Telegram delivers the same update twice", async () => {
    const body = update("only once");
    expect((await h.postTelegram(body)).status).toBe(200);
    expect((await h.postTelegram(body)).status).toBe(200);
    await h.settle();
    expect((await h.postTelegram(body)).status).toBe(200);
    await h.settle();
    expect(completions(h)).toHaveLength(1);
    expect(h.telegram.callsTo("sendMessage")).toHaveLength(1);
    expect(await inboxRows(h)).toHaveLength(1);
  });

  it("runs one turn and sends one reply when the same update arrives 5 times at once", async () => {
    const body = update("five at once");
    const responses = await Promise.all(Array.from({ length: 5 }, () => h.postTelegram(body)));
    expect(responses.map((response) => response.status)).toEqual([200, 200, 200, 200, 200]);
    await h.settle();
    expect(completions(h)).toHaveLength(1);
    expect(h.telegram.callsTo("sendMessage")).toHaveLength(1);
    expect(await inboxRows(h)).toHaveLength(1);
  });

  it("splits a long reply into parts of at most 4096 characters, in order, at paragraph breaks", async () => {
    const paragraphs = Array.from({ length: 9 }, (_, index) => `${index}`.repeat(1000));
    const long = paragraphs.join("\n\n");
    h.openai.script({ type: "text", text: long });
    await h.postTelegram(update("tell me a lot"));
    await h.settle();
    const parts = sentTexts(h);
    expect(parts.length).toBe(3);
    for (const part of parts) expect(part.length).toBeLessThanOrEqual(4096);
    expect(parts.join("\n\n")).toBe(long);
    expect(parts[0]!.startsWith("0")).toBe(true);
  });

  it("retries sendMessage after the retry_after of a 429, and after a 500", async () => {
    h.telegram.fault("sendMessage", { type: "rate_limit", retryAfter: 1 }, { type: "error", status: 502 });
    h.openai.script({ type: "text", text: "eventually" });
    await h.postTelegram(update("hi"));
    await h.settle();
    const sends = h.telegram.callsTo("sendMessage");
    expect(sends).toHaveLength(3);
    expect(sends.map((call) => call.body.text)).toEqual(["eventually", "eventually", "eventually"]);
    // 1 s from retry_after, then the first backoff step for the 502.
    expect(h.sleeps.filter((ms) => ms > 0)).toEqual([1000, 2000]);
    expect(await inboxRows(h)).toMatchObject([{ status: "done" }]);
  });

  it("gives up on a send after bounded retries, logs it, and does not run the turn again", async () => {
    h.telegram.fault("sendMessage", ...Array.from({ length: 4 }, () => ({ type: "error" as const, status: 500 })));
    await h.postTelegram(update("hi"));
    await h.settle();
    expect(h.telegram.callsTo("sendMessage")).toHaveLength(4);
    expect(completions(h)).toHaveLength(1);
    expect(h.test.logs).toContainEqual(expect.objectContaining({ event: "platform_send_failed", platform: "telegram" }));
    expect(JSON.stringify(h.test.logs)).not.toContain("test-bot-token");
    expect(await inboxRows(h)).toMatchObject([{ status: "done" }]);
  });

  it("answers /status, /new and /model without calling a provider", async () => {
    await h.postTelegram(update("/status"));
    await h.settle();
    await h.postTelegram(update("/model openai:gpt-x"));
    await h.settle();
    await h.postTelegram(update("/new@HermesBot"));
    await h.settle();
    await h.postTelegram(update("/status"));
    await h.settle();
    expect(completions(h)).toHaveLength(0);
    const [firstStatus, model, fresh, secondStatus] = sentTexts(h);
    expect(firstStatus).toContain("Model: openai:gpt-test");
    expect(model).toBe("Model set to openai:gpt-x from the next message.");
    expect(fresh).toContain("Started a new conversation");
    expect(secondStatus).toContain("Model: openai:gpt-x");
  });

  it("sends the provider-failure text when every provider fails, and does not retry the turn", async () => {
    h.openai.script({ type: "error", status: 500 });
    await h.postTelegram(update("hi"));
    await h.settle();
    expect(sentTexts(h)).toEqual([providerFailedText]);
    expect(completions(h)).toHaveLength(1);
    expect(await inboxRows(h)).toMatchObject([{ status: "done", attempts: 1 }]);
  });

  it("acknowledges unsupported updates without storing them, and answers 400 to bad JSON", async () => {
    const ignored = [
      { update_id: 1, callback_query: { id: "q", data: "x" } },
      { update_id: 2, message: { message_id: 1, chat: { id: 42, type: "private" }, photo: [{ file_id: "f" }] } },
      { update_id: 3, message: { message_id: 2, chat: { id: 42, type: "private" }, from: { id: 9, is_bot: true }, text: "beep" } },
    ];
    for (const body of ignored) expect((await h.postTelegram(body)).status).toBe(200);
    const malformed = await h.test.app.request("/webhooks/telegram", {
      method: "POST",
      headers: { "content-type": "application/json", "x-telegram-bot-api-secret-token": telegramSecret },
      body: "{not json",
    });
    expect(malformed.status).toBe(400);
    expect(await malformed.json()).toMatchObject({ error: { code: "invalid_request" } });
    await h.settle();
    expect(await inboxRows(h)).toEqual([]);
    expect(h.telegram.calls).toHaveLength(0);
  });

  it("replies with a polite text when the server has no default runtime", async () => {
    const bare = await startPlatformHarness({ runtime: null });
    await bare.postTelegram(update("hi"));
    await bare.settle();
    expect(bare.telegram.callsTo("sendMessage").map((call) => call.body.text)).toEqual([notConfiguredText]);
    expect(await inboxRows(bare)).toMatchObject([{ status: "done" }]);
    await bare.close();
  });
});

describe("splitText", () => {
  it("never cuts inside a surrogate pair and loses nothing on a hard cut", () => {
    const emoji = "😀".repeat(3000);
    const parts = splitText(`x${emoji}`, 4096);
    for (const part of parts) {
      expect(part.length).toBeLessThanOrEqual(4096);
      expect(/[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/.test(part)).toBe(false);
    }
    expect(parts.join("")).toBe(`x${emoji}`);
  });

  it("prefers paragraph, then line, then word boundaries", () => {
    expect(splitText(`${"a".repeat(6)}\n${"b".repeat(3)}\n\n${"c".repeat(3)}`, 12)).toEqual([`${"a".repeat(6)}\n${"b".repeat(3)}`, "ccc"]);
    expect(splitText(`${"a".repeat(8)}\n${"b".repeat(8)}`, 12)).toEqual(["a".repeat(8), "b".repeat(8)]);
    expect(splitText("alpha beta gamma delta", 12)).toEqual(["alpha beta", "gamma delta"]);
    expect(splitText("short", 12)).toEqual(["short"]);
    expect(splitText("  ", 12)).toEqual(["(The model returned an empty reply.)"]);
  });
});
