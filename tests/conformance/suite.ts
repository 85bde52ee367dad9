/// <reference types="node" />
// The runtime conformance suite (design.md "Portability rules"): the same HTTP-level checks against each
// runtime's real server process, over each store it supports. A runtime that cannot start fails its block's
// beforeAll, and with it the run, with the server's output in the error (vitest then lists the block's checks
// as skipped, but the file and the run fail).
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startFakeOpenAI, type FakeProvider } from "../support/fake-provider.ts";
import { startSqld, type SqldServer } from "../support/sqld.ts";
import { startRuntimeServer, type RunningServer, type RuntimeUnderTest } from "./servers.ts";

export type StoreKind = "file" | "sqld";

const providerKey = "sk-conformance-0123456789";
const configuredApiKey = "conformance-key-0123456789abcdef";

interface Target {
  server: RunningServer;
  fake: FakeProvider;
  apiKey: string;
}

async function call(target: Target, method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(`${target.server.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${target.apiKey}`, ...(body === undefined ? {} : { "content-type": "application/json" }), ...headers },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    signal: AbortSignal.timeout(20_000),
  });
}

export function defineConformanceSuite(runtime: RuntimeUnderTest, stores: readonly StoreKind[]): void {
  describe.each(stores)(`${runtime} server over a libSQL %s`, (store) => {
    let workDir = "";
    let sqld: SqldServer | undefined;
    let fake: FakeProvider | undefined;
    let server: RunningServer | undefined;
    let apiKey = configuredApiKey;

    beforeAll(async () => {
      workDir = mkdtempSync(join(tmpdir(), `hermes-conformance-${runtime}-`));
      fake = await startFakeOpenAI({ apiKey: providerKey });
      const env: Record<string, string> = {
        HERMES_RUNTIME: JSON.stringify({
          provider: "openai",
          model: "gpt-4o-mini",
          base_url: fake.url,
          toolsets: ["todo"],
          retry: { max_retries: 0, time_scale: 0.001 },
        }),
        HERMES_FETCH_ALLOW_PRIVATE: "1",
        // Read through the runtime's default api_key_env, so each runtime's way of passing variables is exercised.
        OPENAI_API_KEY: providerKey,
      };
      const databaseFile = join(workDir, "hermes.db");
      if (store === "sqld") {
        sqld = await startSqld();
        env.LIBSQL_URL = sqld.url;
        env.HERMES_API_KEYS = configuredApiKey;
      } else {
        // No HERMES_API_KEYS: the entry generates one beside the database, as on a first `npm start`.
        env.LIBSQL_URL = `file:${databaseFile}`;
      }
      server = await startRuntimeServer(runtime, env, workDir);
      if (store === "file") apiKey = readFileSync(`${databaseFile}.api-key`, "utf8").trim();
    }, 120_000);

    afterAll(async () => {
      await server?.stop();
      await fake?.close();
      await sqld?.stop();
      if (workDir) rmSync(workDir, { recursive: true, force: true });
    }, 30_000);

    /** The started target; a failed start has already failed beforeAll with the server's output. */
    const started = (): Target => {
      if (!server || !fake) throw new Error(`the ${runtime} server did not start`);
      return { server, fake, apiKey };
    };

    it("GET /health names the runtime and reports the store ok", async () => {
      const response = await fetch(`${started().server.url}/health`);
      expect(response.status).toBe(200);
      expect(response.headers.get("x-request-id")).toMatch(/^[0-9a-f-]{36}$/);
      expect(await response.json()).toEqual({ status: "ok", version: expect.any(String), runtime, db: "ok" });
    });

    if (store === "file") {
      it("generated an API key on first start and kept it beside the database", () => {
        expect(started().apiKey).toMatch(/^he_[A-Za-z0-9]{20,32}$/);
        expect(started().server.output()).toContain(started().apiKey);
      });
    }

    it("creates a session from HERMES_RUNTIME and reads it back", async () => {
      const target = started();
      const created = await call(target, "POST", "/v1/sessions", { id: "conformance-1", system_prompt: "be brief", metadata: { runtime } });
      expect(created.status).toBe(201);
      const body = await created.json();
      expect(body).toMatchObject({
        id: "conformance-1",
        system_prompt: "be brief",
        metadata: { runtime },
        message_count: 0,
        last_turn: null,
        runtime: { provider: "openai", model: "gpt-4o-mini", base_url: target.fake.url, api_key_set: false },
      });
      const read = await call(target, "GET", "/v1/sessions/conformance-1");
      expect(read.status).toBe(200);
      expect(await read.json()).toEqual(body);
      const duplicate = await call(target, "POST", "/v1/sessions", { id: "conformance-1" });
      expect(duplicate.status).toBe(409);
    });

    it("runs a turn with a todo tool call against the provider", async () => {
      const target = started();
      target.fake.script(
        { type: "tool_calls", calls: [{ id: "call_todo_1", name: "todo", arguments: JSON.stringify({ action: "add", item: "ship the Worker" }) }] },
        { type: "text", text: "Added it to your list." },
      );
      const before = target.fake.requests.length;
      const created = await call(target, "POST", "/v1/sessions", { id: "conformance-turn" });
      expect(created.status).toBe(201);

      const response = await call(target, "POST", "/v1/sessions/conformance-turn/messages", { content: "Remember to ship the Worker." });
      const body = await response.json();
      expect(response.status, JSON.stringify(body)).toBe(200);
      expect(body.reply).toBe("Added it to your list.");
      expect(body.turn).toMatchObject({ status: "completed", provider: "openai", model: "gpt-4o-mini", fallback_activated: false });
      expect(body.turn.attempts.map((attempt: { outcome: string }) => attempt.outcome)).toEqual(["ok", "ok"]);
      const steps = body.messages.map((message: { role: string; tool_calls?: { name: string }[]; tool_call_id?: string }) => [
        message.role,
        message.tool_calls?.map((toolCall) => toolCall.name) ?? message.tool_call_id ?? null,
      ]);
      expect(steps).toEqual([
        ["user", null],
        ["assistant", ["todo"]],
        ["tool", "call_todo_1"],
        ["assistant", null],
      ]);
      expect(body.messages[2].content).toContain("ship the Worker");

      // The provider got the key from the runtime's environment, the todo schema, and then the tool's result.
      const requests = target.fake.requests.slice(before);
      expect(requests).toHaveLength(2);
      expect(requests[0]?.headers.authorization).toBe(`Bearer ${providerKey}`);
      expect(requests[0]?.body.tools.map((tool: { function: { name: string } }) => tool.function.name)).toEqual(["todo"]);
      expect(requests[1]?.body.messages.at(-1)).toMatchObject({ role: "tool", tool_call_id: "call_todo_1" });

      // The journal holds the same four rows, in order, for the next turn to rebuild from.
      const journal = await call(target, "GET", "/v1/sessions/conformance-turn/messages");
      expect(journal.status).toBe(200);
      const rows = (await journal.json()).messages as { seq: number; role: string }[];
      expect(rows.map((row) => row.role)).toEqual(["user", "assistant", "tool", "assistant"]);
      expect(rows.map((row) => row.seq)).toEqual(body.messages.map((message: { seq: number }) => message.seq));
    });

    it("serves parallel requests: 16 health checks and 8 turns on 8 sessions at once", async () => {
      const target = started();
      const health = await Promise.all(Array.from({ length: 16 }, () => fetch(`${target.server.url}/health`).then((response) => response.status)));
      expect(health).toEqual(Array.from({ length: 16 }, () => 200));
      const ids = Array.from({ length: 8 }, (_, index) => `parallel-${index}`);
      for (const id of ids) expect((await call(target, "POST", "/v1/sessions", { id })).status).toBe(201);
      fake!.setFallback({ type: "text", text: "parallel ok" });
      const turns = await Promise.all(ids.map((id) => call(target, "POST", `/v1/sessions/${id}/messages`, { content: "at once" }).then((response) => response.status)));
      expect(turns).toEqual(Array.from({ length: 8 }, () => 200));
    });

    it("refuses /v1 without a valid API key with 401", async () => {
      const target = started();
      const missing = await fetch(`${target.server.url}/v1/sessions/conformance-1`);
      expect(missing.status).toBe(401);
      expect(missing.headers.get("www-authenticate")).toBe("Bearer");
      expect(await missing.json()).toMatchObject({ error: { code: "unauthorized" } });
      const wrong = await call({ ...target, apiKey: "not-the-key-0123456789abcdef" }, "GET", "/v1/sessions/conformance-1");
      expect(wrong.status).toBe(401);
    });
  });
}
