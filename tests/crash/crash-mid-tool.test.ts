/// <reference types="node" />
// kill -9 in the middle of a tool batch, restart on the same database: everything journaled before the
// crash is there, the orphaned call is repaired with effect "unknown" and never run again, and the next
// provider request is well formed.
import { mkdtempSync, rmSync } from "node:fs";
import { createServer, type Server } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startFakeOpenAI, type FakeProvider } from "../support/fake-provider.ts";
import { startServerProcess, type ServerProcess } from "../support/server-process.ts";

const apiKey = "crash-test-key-0123456789";

describe("crash in the middle of a tool batch", () => {
  let provider: FakeProvider;
  let site: Server;
  let siteUrl: string;
  const hits: Record<string, number> = { fast: 0, block: 0 };
  let directory: string;
  let server: ServerProcess | undefined;

  beforeAll(async () => {
    provider = await startFakeOpenAI({ apiKey: "sk-crash" });
    site = createServer((request, response) => {
      const path = request.url ?? "";
      if (path.startsWith("/fast")) {
        hits.fast! += 1;
        response.writeHead(200, { "content-type": "text/plain" }).end("fast page");
      } else {
        // Never answers: the tool is still running when the process dies.
        hits.block! += 1;
      }
    });
    await new Promise<void>((done) => site.listen(0, "127.0.0.1", done));
    const address = site.address();
    siteUrl = `http://127.0.0.1:${typeof address === "object" && address ? address.port : 0}`;
    directory = mkdtempSync(join(tmpdir(), "hermes-crash-"));
  });
  afterAll(async () => {
    await server?.kill();
    site.closeAllConnections();
    site.close();
    await provider.close();
    rmSync(directory, { recursive: true, force: true });
  });

  const env = () => ({
    LIBSQL_URL: `file:${join(directory, "crash.db")}`,
    HERMES_API_KEYS: apiKey,
    HERMES_RUNTIME: JSON.stringify({ provider: "openai", model: "gpt-crash", base_url: provider.url, toolsets: ["web"], retry: { time_scale: 0 } }),
    OPENAI_API_KEY: "sk-crash",
    HERMES_FETCH_ALLOW_PRIVATE: "1",
    HERMES_LEASE_MS: "1500",
    HERMES_TOOL_TIMEOUT_MS: "60000",
  });
  const headers = { authorization: `Bearer ${apiKey}`, "content-type": "application/json" };
  const messages = async (url: string) => (await (await fetch(`${url}/v1/sessions/c/messages`, { headers })).json()).messages as Record<string, unknown>[];

  it("keeps the user message, the tool-call message and completed results; repairs the orphan; never re-runs it", async () => {
    server = await startServerProcess(env());
    expect((await fetch(`${server.url}/v1/sessions`, { method: "POST", headers, body: JSON.stringify({ id: "c" }) })).status).toBe(201);
    provider.script({
      type: "tool_calls",
      calls: [
        { id: "call_fast", name: "web_fetch", arguments: JSON.stringify({ url: `${siteUrl}/fast` }) },
        { id: "call_block", name: "web_fetch", arguments: JSON.stringify({ url: `${siteUrl}/block` }) },
      ],
    });
    const pending = fetch(`${server.url}/v1/sessions/c/messages`, { method: "POST", headers, body: JSON.stringify({ content: "fetch both" }) }).catch((error: unknown) => error);
    // Wait until the fast result is journaled and the blocking call is in flight, then kill -9.
    const running = server;
    await expect.poll(async () => (await messages(running.url)).length, { timeout: 15_000 }).toBe(3);
    await expect.poll(() => hits.block, { timeout: 15_000 }).toBe(1);
    await server.kill("SIGKILL");
    expect(await pending).toBeInstanceOf(Error);

    server = await startServerProcess(env());
    const afterCrash = await messages(server.url);
    expect(afterCrash.map((message) => [message.seq, message.role, message.tool_call_id ?? null])).toEqual([
      [1, "user", null],
      [2, "assistant", null],
      [3, "tool", "call_fast"],
    ]);
    expect((afterCrash[1]!.tool_calls as { id: string }[]).map((call) => call.id)).toEqual(["call_fast", "call_block"]);
    expect(afterCrash[2]!.content).toContain("fast page");

    // The dead turn's lease expires (HERMES_LEASE_MS = 1.5 s); the next turn repairs the orphan first.
    await new Promise((done) => setTimeout(done, 1600));
    provider.script({ type: "text", text: "I could not confirm the second page." });
    const next = await fetch(`${server.url}/v1/sessions/c/messages`, { method: "POST", headers, body: JSON.stringify({ content: "what happened?" }) });
    expect(next.status).toBe(200);
    const body = await next.json();
    expect(body.messages.map((message: Record<string, unknown>) => [message.seq, message.role, message.tool_call_id ?? null, message.effect ?? null])).toEqual([
      [4, "tool", "call_block", "unknown"],
      [5, "user", null, null],
      [6, "assistant", null, null],
    ]);
    expect(provider.rejected).toEqual([]);
    const sent = provider.requests[provider.requests.length - 1]!.body.messages.slice(1).map((message: Record<string, unknown>) => `${message.role}${message.tool_call_id ? `:${message.tool_call_id}` : ""}`);
    expect(sent).toEqual(["user", "assistant", "tool:call_fast", "tool:call_block", "user"]);
    expect(hits).toEqual({ fast: 1, block: 1 });
    const turns = (await (await fetch(`${server.url}/v1/sessions/c/turns`, { headers })).json()).turns;
    expect(turns.map((turn: { status: string }) => turn.status)).toEqual(["completed", "interrupted"]);
  }, 60_000);
});
