/// <reference types="node" />
// Every api.md error code that applies to the turn-creating routes and /v1/models, with its status and body.
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { buildTestApp, otherTenantKey, type TestApp } from "../support/app.ts";
import { startFakeOpenAI, type FakeProvider } from "../support/fake-provider.ts";

const fieldsOf = async (response: Response) => ((await response.json()).error.details.fields as { field: string }[]).map((entry) => entry.field);

describe("errors of the turn routes", () => {
  let openai: FakeProvider;
  let harness: TestApp;
  let runtime: Record<string, unknown>;

  beforeEach(async () => {
    openai = await startFakeOpenAI({ apiKey: "sk-test" });
    runtime = { provider: "openai", model: "gpt-test", base_url: openai.url, retry: { time_scale: 0, max_retries: 0 } };
    harness = await buildTestApp({ OPENAI_API_KEY: "sk-test", HERMES_RUNTIME: JSON.stringify(runtime), HERMES_MAX_BODY_BYTES: "4096" });
    await harness.call("POST", "/v1/sessions", { id: "s", runtime });
  });
  afterEach(async () => {
    await harness.close();
    await openai.close();
  });

  const chat = (body: unknown, headers: Record<string, string> = {}) => harness.call("POST", "/v1/chat/completions", body, headers);

  it.each([
    ["an empty content", { content: "" }, ["content"]],
    ["an unknown field", { content: "hi", colour: "red" }, ["colour"]],
    ["a bad reasoning effort", { content: "hi", reasoning: { effort: "max" } }, ["reasoning.effort"]],
    ["a non-boolean stream", { content: "hi", stream: "yes" }, ["stream"]],
  ])("400 names the field for %s (messages)", async (_name, body, fields) => {
    const response = await harness.call("POST", "/v1/sessions/s/messages", body);
    expect(response.status).toBe(400);
    expect(await fieldsOf(response)).toEqual(fields);
  });

  it.each([
    ["no model", { messages: [{ role: "user", content: "hi" }] }, ["model"]],
    ["messages not an array", { model: "m", messages: "hi" }, ["messages"]],
    ["no user message", { model: "m", messages: [{ role: "system", content: "be nice" }] }, ["messages"]],
    ["an empty user message", { model: "m", messages: [{ role: "user", content: " " }] }, ["messages.0.content"]],
    ["an image part", { model: "m", messages: [{ role: "user", content: [{ type: "image_url", image_url: { url: "x" } }] }] }, ["messages.0.content"]],
    ["a bad role", { model: "m", messages: [{ role: "robot", content: "hi" }] }, ["messages.0.role"]],
    ["client tools", { model: "m", messages: [{ role: "user", content: "hi" }], tools: [{ type: "function", function: { name: "f" } }] }, ["tools"]],
    ["n > 1", { model: "m", messages: [{ role: "user", content: "hi" }], n: 2 }, ["n"]],
  ])("400 names the field for %s (chat completions)", async (_name, body, fields) => {
    const response = await chat(body);
    expect(response.status).toBe(400);
    const json = await response.clone().json();
    expect(json.error.code).toBe("invalid_request");
    expect(await fieldsOf(response)).toEqual(fields);
    expect(openai.requests).toHaveLength(0);
  });

  it("400 for a bad X-Session-Id or malformed JSON; the usual optional fields are accepted", async () => {
    const badHeader = await chat({ model: "m", messages: [{ role: "user", content: "hi" }] }, { "x-session-id": "../x" });
    expect(badHeader.status).toBe(400);
    expect(await fieldsOf(badHeader)).toEqual(["X-Session-Id"]);
    const malformed = await harness.call("POST", "/v1/chat/completions", "{nope");
    expect(malformed.status).toBe(400);
    expect(await fieldsOf(malformed)).toEqual(["body"]);
    const accepted = await chat({ model: "m", messages: [{ role: "user", content: "hi" }], temperature: 1, top_p: 1, max_tokens: 5, max_completion_tokens: 5, presence_penalty: 0, frequency_penalty: 0, stop: ["x"], seed: 1, user: "u", n: 1, tools: [], logit_bias: {} });
    expect(accepted.status).toBe(200);
  });

  it("401 without a valid bearer key", async () => {
    for (const [method, path] of [["POST", "/v1/sessions/s/messages"], ["POST", "/v1/chat/completions"], ["GET", "/v1/models"]] as const) {
      const response = await harness.app.request(path, { method, headers: { "content-type": "application/json", authorization: "Bearer wrong-key" }, ...(method === "POST" ? { body: "{}" } : {}) });
      expect(response.status).toBe(401);
      expect((await response.json()).error.code).toBe("unauthorized");
    }
  });

  it("404 for an unknown session, also to another tenant", async () => {
    const response = await harness.call("POST", "/v1/sessions/missing/messages", { content: "hi" });
    expect(response.status).toBe(404);
    expect((await response.json()).error.code).toBe("not_found");
    const otherTenant = await harness.call("POST", "/v1/sessions/s/messages", { content: "hi" }, { authorization: `Bearer ${otherTenantKey}` });
    expect(otherTenant.status).toBe(404);
    expect(openai.requests).toHaveLength(0);
  });

  it("409 session_busy with Retry-After while a turn runs, on both routes", async () => {
    openai.script({ type: "hang", ms: 300, then: { type: "text", text: "slow" } });
    const running = harness.call("POST", "/v1/sessions/s/messages", { content: "one" });
    await expect.poll(() => openai.requests.length).toBe(1);
    for (const response of [await harness.call("POST", "/v1/sessions/s/messages", { content: "two" }), await chat({ model: "m", messages: [{ role: "user", content: "two" }] }, { "x-session-id": "s" })]) {
      expect(response.status).toBe(409);
      expect(response.headers.get("retry-after")).toMatch(/^\d+$/);
      expect((await response.json()).error.code).toBe("session_busy");
    }
    expect((await running).status).toBe(200);
  });

  it("409 conflict for an Idempotency-Key reused with another body", async () => {
    expect((await chat({ model: "m", messages: [{ role: "user", content: "a" }] }, { "idempotency-key": "k" })).status).toBe(200);
    const reused = await chat({ model: "m", messages: [{ role: "user", content: "b" }] }, { "idempotency-key": "k" });
    expect(reused.status).toBe(409);
    expect((await reused.json()).error.code).toBe("conflict");
  });

  it("413 for a body over HERMES_MAX_BODY_BYTES and 415 for another media type", async () => {
    for (const path of ["/v1/sessions/s/messages", "/v1/chat/completions"]) {
      const large = await harness.call("POST", path, { content: "x".repeat(5000) });
      expect(large.status).toBe(413);
      expect((await large.json()).error.code).toBe("payload_too_large");
      const text = await harness.call("POST", path, "content=hi", { "content-type": "text/plain" });
      expect(text.status).toBe(415);
      expect((await text.json()).error.code).toBe("unsupported_media_type");
    }
  });

  it("502 provider_error with the attempts when every provider failed; the user message stays", async () => {
    openai.setFallback({ type: "error", status: 500 });
    const response = await harness.call("POST", "/v1/sessions/s/messages", { content: "hi" });
    expect(response.status).toBe(502);
    const body = await response.json();
    expect(body.error).toMatchObject({ code: "provider_error", details: { attempts: [{ provider: "openai", model: "gpt-test", outcome: "error", reason: "server_error", status: 500 }] } });
    expect(JSON.stringify(body)).not.toContain("sk-test");
    const journal = await (await harness.call("GET", "/v1/sessions/s/messages")).json();
    expect(journal.messages.map((message: { role: string }) => message.role)).toEqual(["user"]);
    const chatFailure = await chat({ model: "m", messages: [{ role: "user", content: "hi" }] });
    expect(chatFailure.status).toBe(502);
    expect(chatFailure.headers.get("x-session-id")).toMatch(/^ses_/);
    expect((await chatFailure.json()).error.code).toBe("provider_error");
  });

  it("503 not_configured for chat completions needing a session when there is no default runtime", async () => {
    const bare = await buildTestApp();
    const response = await bare.call("POST", "/v1/chat/completions", { model: "m", messages: [{ role: "user", content: "hi" }] });
    expect(response.status).toBe(503);
    expect((await response.json()).error.code).toBe("not_configured");
    expect(await (await bare.call("GET", "/v1/models")).json()).toEqual({ object: "list", data: [] });
    await bare.close();
  });
});
