/// <reference types="node" />
import { createHmac } from "node:crypto";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { slackBotToken, slackSigningSecret, startPlatformHarness, type PlatformHarness } from "../support/fake-platforms.ts";

const botUserId = "UBOT0001";
const appId = "A0APP001";

let nextTs = 1_700_000_000;
function messageEvent(text: string, event: Record<string, unknown> = {}, eventId = `Ev${nextTs}`) {
  const ts = `${nextTs++}.000100`;
  return {
    token: "legacy-verification-token",
    team_id: "T1",
    api_app_id: appId,
    type: "event_callback",
    event_id: eventId,
    event_time: Math.floor(Date.now() / 1000),
    authorizations: [{ team_id: "T1", user_id: botUserId, is_bot: true }],
    event: { type: "message", channel: "C0CHAN01", channel_type: "channel", user: "U0HUMAN1", text, ts, ...event },
  };
}

const completions = (h: PlatformHarness) => h.openai.requests.filter((request) => request.path.endsWith("/chat/completions"));
const posts = (h: PlatformHarness) => h.slack.callsTo("chat.postMessage");

async function inboxCount(h: PlatformHarness): Promise<number> {
  return Number((await h.test.database.client.execute("SELECT COUNT(*) AS n FROM inbox")).rows[0]?.n);
}

describe("Slack webhook", () => {
  let h: PlatformHarness;
  beforeEach(async () => {
    h = await startPlatformHarness();
  });
  afterEach(async () => h.close());

  it("refuses a bad signature and a stale (6 minute old) timestamp with 401", async () => {
    const bad = await h.postSlack(messageEvent("hi"), { signature: `v0=${"0".repeat(64)}` });
    expect(bad.status).toBe(401);
    expect(await bad.json()).toMatchObject({ error: { code: "unauthorized" } });
    const stale = await h.postSlack(messageEvent("hi"), { timestamp: Math.floor(Date.now() / 1000) - 6 * 60 });
    expect(stale.status).toBe(401);
    const missing = await h.test.app.request("/webhooks/slack", { method: "POST", headers: { "content-type": "application/json" }, body: "{}" });
    expect(missing.status).toBe(401);
    await h.settle();
    expect(await inboxCount(h)).toBe(0);
    expect(h.slack.calls).toHaveLength(0);
  });

  it("answers url_verification with the challenge", async () => {
    const response = await h.postSlack({ token: "t", challenge: "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P", type: "url_verification" });
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({ challenge: "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P" });
  });

  it("runs a turn for a user message and replies in its thread with the bot token", async () => {
    h.openai.script({ type: "text", text: "Sure: a < b && c > d" });
    const event = messageEvent("hello &lt;bot&gt;");
    const response = await h.postSlack(event);
    expect(response.status).toBe(200);
    await h.settle();
    expect(completions(h)[0]!.body.messages.at(-1)).toEqual({ role: "user", content: "hello <bot>" });
    expect(posts(h)).toHaveLength(1);
    expect(posts(h)[0]!.headers.authorization).toBe(`Bearer ${slackBotToken}`);
    // mrkdwn control characters are escaped, so model text cannot form <!channel> or links.
    expect(posts(h)[0]!.body).toEqual({ channel: "C0CHAN01", thread_ts: event.event.ts, text: "Sure: a &lt; b &amp;&amp; c &gt; d" });
    expect((await h.test.call("GET", `/v1/sessions/slack:C0CHAN01:${event.event.ts}`)).status).toBe(200);
  });

  it("keeps a thread in one session and replies to the thread root", async () => {
    const root = "1699999999.000200";
    await h.postSlack(messageEvent("first in thread", { thread_ts: root }));
    await h.settle();
    await h.postSlack(messageEvent("second in thread", { thread_ts: root }));
    await h.settle();
    expect(posts(h).map((call) => call.body.thread_ts)).toEqual([root, root]);
    const journal = await (await h.test.call("GET", `/v1/sessions/slack:C0CHAN01:${root}/messages`)).json();
    expect(journal.messages.filter((message: { role: string }) => message.role === "user").map((message: { content: string }) => message.content)).toEqual([
      "first in thread",
      "second in thread",
    ]);
  });

  it("runs one turn for a retried event and for the message + app_mention pair of one message", async () => {
    const event = messageEvent("<@UBOT0001> what is up?");
    expect((await h.postSlack(event)).status).toBe(200);
    const retry = await h.postSlack(event, { headers: { "x-slack-retry-num": "1", "x-slack-retry-reason": "http_timeout" } });
    expect(retry.status).toBe(200);
    const mention = { ...event, event_id: "EvMention1", event: { ...event.event, type: "app_mention" } };
    expect((await h.postSlack(mention)).status).toBe(200);
    await h.settle();
    expect(completions(h)).toHaveLength(1);
    expect(completions(h)[0]!.body.messages.at(-1).content).toBe("what is up?");
    expect(posts(h)).toHaveLength(1);
    expect(await inboxCount(h)).toBe(1);
  });

  it("ignores bot messages, its own messages, edits and other event types", async () => {
    const ignored = [
      messageEvent("from a bot", { bot_id: "B1", user: undefined }),
      messageEvent("from another app's bot user", { bot_id: "B2" }),
      messageEvent("my own post", { user: botUserId }),
      messageEvent("posted by this app", { app_id: appId }),
      messageEvent("edited", { subtype: "message_changed" }),
      messageEvent("joined", { subtype: "channel_join" }),
      { ...messageEvent("x"), event: { type: "reaction_added", user: "U1", reaction: "+1" } },
    ];
    for (const payload of ignored) expect((await h.postSlack(payload)).status).toBe(200);
    await h.settle();
    expect(await inboxCount(h)).toBe(0);
    expect(completions(h)).toHaveLength(0);
    expect(posts(h)).toHaveLength(0);
  });

  it("accepts a thread_broadcast reply from a user", async () => {
    await h.postSlack(messageEvent("also to channel", { subtype: "thread_broadcast", thread_ts: "1699999999.000300" }));
    await h.settle();
    expect(posts(h)[0]!.body.thread_ts).toBe("1699999999.000300");
  });

  it("honours Retry-After on a 429 and treats 200 {ok:false} as a failed send", async () => {
    h.slack.fault("chat.postMessage", { type: "rate_limit", retryAfter: 2 });
    await h.postSlack(messageEvent("hi"));
    await h.settle();
    expect(posts(h)).toHaveLength(2);
    expect(h.sleeps.filter((ms) => ms > 0)).toEqual([2000]);

    h.slack.fault("chat.postMessage", { type: "error", status: 200, body: { ok: false, error: "channel_not_found" } });
    await h.postSlack(messageEvent("again"));
    await h.settle();
    expect(posts(h)).toHaveLength(3);
    expect(h.test.logs).toContainEqual(expect.objectContaining({ event: "platform_send_failed", platform: "slack", reason: expect.stringContaining("channel_not_found") }));
  });

  it("splits a long reply at 4000 characters", async () => {
    const words = Array.from({ length: 1500 }, (_, index) => `word${index}`).join(" ");
    h.openai.script({ type: "text", text: words });
    await h.postSlack(messageEvent("long please"));
    await h.settle();
    const parts = posts(h).map((call) => call.body.text as string);
    expect(parts.length).toBeGreaterThan(1);
    for (const part of parts) expect(part.length).toBeLessThanOrEqual(4000);
    expect(parts.join(" ")).toBe(words);
  });

  it("answers 400 to bad JSON with a valid signature", async () => {
    const timestamp = Math.floor(Date.now() / 1000);
    const body = "{broken";
    const signature = `v0=${createHmac("sha256", slackSigningSecret).update(`v0:${timestamp}:${body}`).digest("hex")}`;
    const response = await h.test.app.request("/webhooks/slack", {
      method: "POST",
      headers: { "content-type": "application/json", "x-slack-request-timestamp": String(timestamp), "x-slack-signature": signature },
      body,
    });
    expect(response.status).toBe(400);
  });
});
