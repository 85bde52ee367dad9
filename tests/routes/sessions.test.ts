/// <reference types="node" />
import { readFileSync, readdirSync } from "node:fs";
import { dirname } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { buildTestApp, otherTenantKey, type TestApp } from "../support/app.ts";

const runtime = { provider: "openai", model: "gpt-4o-mini", base_url: "http://127.0.0.1:9/v1" };

async function rowCounts(harness: TestApp) {
  const result = await harness.database.client.batch(["SELECT COUNT(*) AS n FROM sessions", "SELECT COUNT(*) AS n FROM messages", "SELECT COUNT(*) AS n FROM turns"], "read");
  return result.map((set) => Number(set.rows[0]?.n));
}

describe("sessions API", () => {
  let harness: TestApp;
  beforeEach(async () => {
    harness = await buildTestApp();
  });
  afterEach(async () => harness.close());

  it("serves /health without auth and echoes X-Request-Id", async () => {
    const response = await harness.app.request("/health", { headers: { "x-request-id": "req-123" } });
    expect(response.status).toBe(200);
    expect(response.headers.get("x-request-id")).toBe("req-123");
    expect(await response.json()).toEqual({ status: "ok", version: "test", runtime: "node", db: "ok" });
    const generated = await harness.app.request("/health", { headers: { "x-request-id": "bad id with spaces" } });
    expect(generated.headers.get("x-request-id")).toMatch(/^[0-9a-f-]{36}$/);
  });

  it("reports 503 degraded when the store cannot be reached", async () => {
    harness.database.client.close();
    const response = await harness.app.request("/health");
    expect(response.status).toBe(503);
    expect(await response.json()).toMatchObject({ status: "degraded", db: "unreachable" });
  });

  it("creates a session and reads it back", async () => {
    const created = await harness.call("POST", "/v1/sessions", { id: "chat-1", runtime, system_prompt: "be brief", metadata: { team: "a" } });
    expect(created.status).toBe(201);
    const body = await created.json();
    expect(body).toMatchObject({ id: "chat-1", system_prompt: "be brief", metadata: { team: "a" }, message_count: 0, last_turn: null });
    expect(body.runtime).toEqual({ ...runtime, api_key_set: false });
    const read = await harness.call("GET", "/v1/sessions/chat-1");
    expect(read.status).toBe(200);
    expect(await read.json()).toEqual(body);
    const generated = await harness.call("POST", "/v1/sessions", { runtime });
    expect((await generated.json()).id).toMatch(/^ses_[0-9a-f]{24}$/);
  });

  it("uses HERMES_RUNTIME when the request has no runtime, and refuses when neither is set", async () => {
    const refused = await harness.call("POST", "/v1/sessions", {});
    expect(refused.status).toBe(400);
    expect(await refused.json()).toMatchObject({ error: { code: "invalid_request", details: { fields: [{ field: "runtime" }] } } });
    const withDefault = await buildTestApp({ HERMES_RUNTIME: JSON.stringify({ provider: "anthropic", model: "claude-x" }) });
    const created = await withDefault.call("POST", "/v1/sessions", {});
    expect(created.status).toBe(201);
    expect((await created.json()).runtime).toMatchObject({ provider: "anthropic", model: "claude-x" });
    await withDefault.close();
  });

  const badRequests: [string, unknown, string | undefined, number, string, string | null][] = [
    ["malformed JSON", "{not json", "application/json", 400, "invalid_request", "body"],
    ["a non-JSON media type", "id=x", "application/x-www-form-urlencoded", 415, "unsupported_media_type", null],
    ["an unknown field", { runtime, colour: "red" }, "application/json", 400, "invalid_request", "colour"],
    ["a field of the wrong type", { runtime: { ...runtime, max_tokens: "many" } }, "application/json", 400, "invalid_request", "runtime.max_tokens"],
    ["a bad id", { id: "../etc/passwd", runtime }, "application/json", 400, "invalid_request", "id"],
    ["an id too long", { id: "a".repeat(129), runtime }, "application/json", 400, "invalid_request", "id"],
    ["an unknown provider without base_url", { runtime: { provider: "acme", model: "m" } }, "application/json", 400, "invalid_request", "runtime.base_url"],
    ["a custom provider without base_url", { runtime: { provider: "custom", model: "m" } }, "application/json", 400, "invalid_request", "runtime.base_url"],
    ["a bad api_mode", { runtime: { ...runtime, api_mode: "responses" } }, "application/json", 400, "invalid_request", "runtime.api_mode"],
    ["a JSON array body", [1, 2], "application/json", 400, "invalid_request", null],
  ];
  it.each(badRequests)("refuses %s with the documented error and changes nothing", async (_name, body, type, status, code, field) => {
    const before = await rowCounts(harness);
    const response = await harness.call("POST", "/v1/sessions", typeof body === "string" ? body : JSON.stringify(body), type ? { "content-type": type } : {});
    expect(response.status).toBe(status);
    const json = await response.json();
    expect(json.error.code).toBe(code);
    expect(typeof json.error.message).toBe("string");
    if (field) expect(json.error.details.fields.map((entry: { field: string }) => entry.field)).toContain(field);
    expect(await rowCounts(harness)).toEqual(before);
  });

  it("refuses a body over HERMES_MAX_BODY_BYTES with 413", async () => {
    const small = await buildTestApp({ HERMES_MAX_BODY_BYTES: "2048" });
    const response = await small.call("POST", "/v1/sessions", { runtime, system_prompt: "x".repeat(5000) });
    expect(response.status).toBe(413);
    expect((await response.json()).error.code).toBe("payload_too_large");
    expect(await rowCounts(small)).toEqual([0, 0, 0]);
    await small.close();
  });

  it("needs a valid bearer key on /v1/*", async () => {
    const missing = await harness.app.request("/v1/sessions");
    expect(missing.status).toBe(401);
    expect((await missing.json()).error.code).toBe("unauthorized");
    const wrong = await harness.app.request("/v1/sessions", { headers: { authorization: "Bearer wrong-key-0123456789" } });
    expect(wrong.status).toBe(401);
    const before = await rowCounts(harness);
    const refused = await harness.app.request("/v1/sessions", { method: "POST", headers: { authorization: "Basic abc", "content-type": "application/json" }, body: JSON.stringify({ runtime }) });
    expect(refused.status).toBe(401);
    expect(await rowCounts(harness)).toEqual(before);
  });

  it("keeps tenants apart: another tenant's session is a 404, and the same id may exist in both", async () => {
    await harness.call("POST", "/v1/sessions", { id: "shared", runtime });
    const asOther = { authorization: `Bearer ${otherTenantKey}` };
    expect((await harness.call("GET", "/v1/sessions/shared", undefined, asOther)).status).toBe(404);
    expect((await harness.call("DELETE", "/v1/sessions/shared", undefined, asOther)).status).toBe(404);
    expect((await harness.call("GET", "/v1/sessions", undefined, asOther).then((response) => response.json())).sessions).toEqual([]);
    expect((await harness.call("POST", "/v1/sessions", { id: "shared", runtime }, asOther)).status).toBe(201);
    expect((await harness.call("POST", "/v1/sessions", { id: "shared", runtime })).status).toBe(409);
  });

  it("refuses path tricks in ids before touching the store", async () => {
    for (const path of ["/v1/sessions/..%2Fother", "/v1/sessions/a%2Fb", "/v1/sessions/%00", `/v1/sessions/${"x".repeat(200)}`]) {
      const response = await harness.call("GET", path);
      expect([400, 404]).toContain(response.status);
      expect((await response.json()).error.code).toMatch(/invalid_request|not_found/);
    }
    expect((await harness.call("GET", "/v1/sessions/a%2Fb")).status).toBe(400);
  });

  it("lists sessions with a cursor", async () => {
    for (const id of ["c", "a", "b", "d", "e"]) await harness.call("POST", "/v1/sessions", { id, runtime });
    const first = await (await harness.call("GET", "/v1/sessions?limit=2")).json();
    expect(first.sessions.map((session: { id: string }) => session.id)).toEqual(["a", "b"]);
    const second = await (await harness.call("GET", `/v1/sessions?limit=2&cursor=${first.next_cursor}`)).json();
    expect(second.sessions.map((session: { id: string }) => session.id)).toEqual(["c", "d"]);
    const third = await (await harness.call("GET", `/v1/sessions?limit=2&cursor=${second.next_cursor}`)).json();
    expect(third).toMatchObject({ next_cursor: null });
    expect(third.sessions.map((session: { id: string }) => session.id)).toEqual(["e"]);
    expect((await harness.call("GET", "/v1/sessions?limit=0")).status).toBe(400);
    expect((await harness.call("GET", "/v1/sessions?cursor=%%%")).status).toBe(400);
  });

  it("patches the runtime by merging; a provider change drops the old provider's endpoint", async () => {
    await harness.call("POST", "/v1/sessions", { id: "p", runtime: { ...runtime, max_tokens: 100 } });
    const merged = await (await harness.call("PATCH", "/v1/sessions/p", { runtime: { model: "gpt-4o" } })).json();
    expect(merged.runtime).toMatchObject({ provider: "openai", model: "gpt-4o", base_url: runtime.base_url, max_tokens: 100 });
    const switched = await (await harness.call("PATCH", "/v1/sessions/p", { runtime: { provider: "anthropic", model: "claude" }, system_prompt: "new" })).json();
    expect(switched.runtime.base_url).toBeUndefined();
    expect(switched).toMatchObject({ system_prompt: "new", runtime: { provider: "anthropic", model: "claude", max_tokens: 100 } });
    const invalid = await harness.call("PATCH", "/v1/sessions/p", { runtime: { retry: { max_retries: 99 } } });
    expect(invalid.status).toBe(400);
    expect((await invalid.json()).error.details.fields[0].field).toBe("runtime.retry.max_retries");
    expect((await harness.call("PATCH", "/v1/sessions/missing", { system_prompt: "x" })).status).toBe(404);
  });

  it("deletes a session and resets a conversation", async () => {
    await harness.call("POST", "/v1/sessions", { id: "d", runtime });
    const reset = await harness.call("POST", "/v1/sessions/d/reset");
    expect(reset.status).toBe(200);
    expect((await reset.json()).message_count).toBe(0);
    expect((await harness.call("DELETE", "/v1/sessions/d")).status).toBe(204);
    expect((await harness.call("GET", "/v1/sessions/d")).status).toBe(404);
    expect((await harness.call("POST", "/v1/sessions/d/reset")).status).toBe(404);
    expect((await harness.call("GET", "/v1/sessions/d/messages")).status).toBe(404);
    expect((await harness.call("GET", "/v1/sessions/d/turns")).status).toBe(404);
  });

  it("encrypts an inline provider key: never in a response, a log line or the database in clear", async () => {
    const secret = "sk-live-THIS-MUST-NOT-LEAK-1234567890";
    const created = await harness.call("POST", "/v1/sessions", { id: "k", runtime: { ...runtime, api_key: secret, fallback: { provider: "groq", model: "llama", api_key: `${secret}-2` } } });
    const text = await created.text();
    expect(created.status).toBe(201);
    expect(text).not.toContain("MUST-NOT-LEAK");
    expect(JSON.parse(text).runtime).toMatchObject({ api_key_set: true, fallback: [{ provider: "groq", api_key_set: true }] });
    const listed = await (await harness.call("GET", "/v1/sessions")).text();
    expect(listed).not.toContain("MUST-NOT-LEAK");
    const stored = await harness.database.client.execute("SELECT runtime FROM sessions WHERE id = 'k'");
    expect(String(stored.rows[0]?.runtime)).toMatch(/"api_key_enc":"v1:/);
    harness.database.client.close();
    const directory = dirname(harness.database.url.slice("file:".length));
    for (const file of readdirSync(directory)) expect(readFileSync(`${directory}/${file}`).includes("MUST-NOT-LEAK")).toBe(false);
    expect(JSON.stringify(harness.logs)).not.toContain("MUST-NOT-LEAK");
  });

  it("refuses inline keys when HERMES_SECRET_KEY is not configured", async () => {
    const plain = await buildTestApp({ HERMES_SECRET_KEY: "" });
    const response = await plain.call("POST", "/v1/sessions", { runtime: { ...runtime, api_key: "sk-x" } });
    expect(response.status).toBe(400);
    expect((await response.json()).error.details.fields[0].field).toBe("runtime.api_key");
    expect(await rowCounts(plain)).toEqual([0, 0, 0]);
    await plain.close();
  });

  it("answers unknown routes with the error body", async () => {
    const response = await harness.call("GET", "/v1/nothing-here");
    expect(response.status).toBe(404);
    expect(await response.json()).toMatchObject({ error: { code: "not_found" } });
  });
});
