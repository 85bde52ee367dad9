/// <reference types="node" />
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { discordApplicationId, startPlatformHarness, type PlatformHarness } from "../support/fake-platforms.ts";

const toHex = (bytes: ArrayBuffer) => Buffer.from(bytes).toString("hex");

let nextInteraction = 1;
function command(name: string, options: { name: string; value: string }[] = [], channelId = "900000000000000001") {
  const id = `${8_000_000 + nextInteraction++}`;
  return {
    id,
    application_id: discordApplicationId,
    type: 2,
    token: `interaction-token-${id}`,
    version: 1,
    channel_id: channelId,
    member: { user: { id: "300", username: "ada" } },
    data: { id: "cmd", name, type: 1, options: options.map((option) => ({ ...option, type: 3 })) },
  };
}

const completions = (h: PlatformHarness) => h.openai.requests.filter((request) => request.path.endsWith("/chat/completions"));
const followUps = (h: PlatformHarness) => h.discord.callsTo("followup");

describe("Discord interactions", () => {
  let h: PlatformHarness;
  let keys: CryptoKeyPair;

  async function post(body: unknown, options: { sign?: boolean; timestamp?: string; rawBody?: string } = {}) {
    const text = options.rawBody ?? JSON.stringify(body);
    const timestamp = options.timestamp ?? String(Math.floor(Date.now() / 1000));
    const signature = await crypto.subtle.sign("Ed25519", keys.privateKey, new TextEncoder().encode(timestamp + text));
    const headers: Record<string, string> = { "content-type": "application/json", "x-signature-timestamp": timestamp, "x-signature-ed25519": toHex(signature) };
    if (options.sign === false) headers["x-signature-ed25519"] = "ab".repeat(64);
    return h.test.app.request("/webhooks/discord", { method: "POST", headers, body: text });
  }

  beforeEach(async () => {
    keys = (await crypto.subtle.generateKey({ name: "Ed25519" }, true, ["sign", "verify"])) as CryptoKeyPair;
    const publicKey = toHex(await crypto.subtle.exportKey("raw", keys.publicKey));
    h = await startPlatformHarness({ env: { DISCORD_PUBLIC_KEY: publicKey } });
  });
  afterEach(async () => h.close());

  it("refuses a bad or missing signature and a replayed old timestamp with 401", async () => {
    expect((await post({ type: 1 }, { sign: false })).status).toBe(401);
    const unsigned = await h.test.app.request("/webhooks/discord", { method: "POST", headers: { "content-type": "application/json" }, body: '{"type":1}' });
    expect(unsigned.status).toBe(401);
    expect(await unsigned.json()).toMatchObject({ error: { code: "unauthorized" } });
    expect((await post({ type: 1 }, { timestamp: String(Math.floor(Date.now() / 1000) - 600) })).status).toBe(401);
    // A signature over other bytes than those sent.
    const timestamp = String(Math.floor(Date.now() / 1000));
    const signature = await crypto.subtle.sign("Ed25519", keys.privateKey, new TextEncoder().encode(`${timestamp}{"type":1}`));
    const swapped = await h.test.app.request("/webhooks/discord", {
      method: "POST",
      headers: { "content-type": "application/json", "x-signature-timestamp": timestamp, "x-signature-ed25519": toHex(signature) },
      body: JSON.stringify(command("ask", [{ name: "prompt", value: "hi" }])),
    });
    expect(swapped.status).toBe(401);
  });

  it("answers PING with PONG", async () => {
    const response = await post({ id: "1", application_id: discordApplicationId, type: 1, token: "t", version: 1 });
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({ type: 1 });
  });

  it("defers an ask at once, then posts the reply as a follow-up", async () => {
    h.openai.script({ type: "text", text: "Here you go." });
    const interaction = command("ask", [{ name: "prompt", value: "What is 2+2?" }]);
    const response = await post(interaction);
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({ type: 5 });
    await h.settle();
    expect(completions(h)[0]!.body.messages.at(-1)).toEqual({ role: "user", content: "What is 2+2?" });
    expect(followUps(h)).toHaveLength(1);
    expect(followUps(h)[0]!.path).toBe(`/api/v10/webhooks/${discordApplicationId}/${interaction.token}`);
    expect(followUps(h)[0]!.body).toEqual({ content: "Here you go.", allowed_mentions: { parse: [] } });
    expect((await h.test.call("GET", `/v1/sessions/discord:${interaction.channel_id}`)).status).toBe(200);
  });

  it("splits a reply longer than 2000 characters into ordered follow-ups", async () => {
    const text = Array.from({ length: 700 }, (_, index) => `w${index}`).join(" ");
    h.openai.script({ type: "text", text });
    await post(command("ask", [{ name: "prompt", value: "long" }]));
    await h.settle();
    const parts = followUps(h).map((call) => call.body.content as string);
    expect(parts.length).toBeGreaterThan(1);
    for (const part of parts) expect(part.length).toBeLessThanOrEqual(2000);
    expect(parts.join(" ")).toBe(text);
  });

  it("maps slash commands to chat commands without a provider call", async () => {
    await post(command("model", [{ name: "model", value: "openai:gpt-x" }]));
    await h.settle();
    await post(command("reasoning", [{ name: "effort", value: "high" }]));
    await h.settle();
    await post(command("status"));
    await h.settle();
    await post(command("help"));
    await h.settle();
    expect(completions(h)).toHaveLength(0);
    const replies = followUps(h).map((call) => call.body.content as string);
    expect(replies[0]).toBe("Model set to openai:gpt-x from the next message.");
    expect(replies[1]).toBe("Reasoning effort set to high.");
    expect(replies[2]).toContain("Model: openai:gpt-x");
    expect(replies[2]).toContain("Reasoning: high");
    expect(replies[3]).toContain("/model <provider>:<model>");
  });

  it("answers an unknown command and other interaction types with an ephemeral message", async () => {
    const unknown = await post(command("dance"));
    expect(await unknown.json()).toMatchObject({ type: 4, data: { flags: 64 } });
    const component = await post({ id: "5", application_id: discordApplicationId, type: 3, token: "t", data: { custom_id: "b" } });
    expect(await component.json()).toMatchObject({ type: 4, data: { flags: 64 } });
    const malformed = await post(null, { rawBody: "{oops" });
    expect(malformed.status).toBe(400);
    await h.settle();
    expect(followUps(h)).toHaveLength(0);
  });

  it("honours retry_after (seconds, float) of a 429 on the follow-up", async () => {
    h.discord.fault("followup", { type: "rate_limit", retryAfter: 1.5 });
    await post(command("ask", [{ name: "prompt", value: "hi" }]));
    await h.settle();
    expect(followUps(h)).toHaveLength(2);
    expect(h.sleeps.filter((ms) => ms > 0)).toEqual([1500]);
  });
});
