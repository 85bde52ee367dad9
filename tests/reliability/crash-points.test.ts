/// <reference types="node" />
// kill -9 at every journal point of a turn, all at once, then one restart on the same libSQL file:
//   (a) after the user message (the provider hangs on the first call),
//   (b) after the assistant tool-call message (web_fetch to a URL that never answers),
//   (c) between two sequential tool results ([web_fetch fast, todo add, web_fetch block]: the todo call makes
//       the batch sequential, so the kill lands after two results and before the third),
//   (d) before the turn record (the final provider call hangs: the turn is still `running`),
//   (e) during a Telegram webhook: one chat whose turn is mid-way (provider hanging), one killed right after
//       the 200 acknowledgement, wherever its processing got to.
// After the restart: nothing acknowledged is lost, nothing completed runs again (hits on the local URLs, todo
// rows, provider requests), the next turn / the next update works, and every journal is consistent.
import { createClient, type Client } from "@libsql/client";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer, type Server } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startFakeOpenAI, type FakeProvider, type RecordedRequest, type ScriptStep } from "../support/fake-provider.ts";
import { startFakeTelegram, telegramSecret, telegramToken, type FakePlatform } from "../support/fake-platforms.ts";
import { startServerProcess, type ServerProcess } from "../support/server-process.ts";
import { firstUserText, journalProblems, lastMessage, lastUserText, leakedSecrets, secretsInDatabaseFiles, testSecretKey, waitFor } from "../support/reliability.ts";

const apiKey = "crash-points-key-0123456789";
const providerKey = "sk-crash-points-inline-0123456789abcdef";

type Message = { seq: number; role: string; content: string | null; tool_call_id?: string; effect?: string; tool_calls?: { id: string }[] };

describe("kill -9 at each journal point of a turn, then restart on the same database", () => {
  let provider: FakeProvider;
  let telegram: FakePlatform;
  let site: Server;
  let siteUrl: string;
  const hits = { fast: 0, block: 0 };
  let directory: string;
  let databaseFile: string;
  let db: Client;
  let server: ServerProcess | undefined;
  const outputs: string[] = [];
  let phase: "crash" | "recover" = "crash";

  const hang: ScriptStep = { type: "hang", ms: 10 * 60_000 };
  const call = (id: string, name: string, args: unknown) => ({ id, name, arguments: JSON.stringify(args) });

  // One fake provider for every scenario; each is keyed by its first user message.
  function answer(request: RecordedRequest): ScriptStep {
    const key = firstUserText(request);
    const last = lastMessage(request);
    if (phase === "recover") return { type: "text", text: `ok: ${lastUserText(request)}` };
    switch (key) {
      case "crash-a":
        return hang;
      case "crash-b":
        return { type: "tool_calls", calls: [call("call_b_block", "web_fetch", { url: `${siteUrl}/block/b` })] };
      case "crash-c":
        return {
          type: "tool_calls",
          calls: [
            call("call_c_fast", "web_fetch", { url: `${siteUrl}/fast/c` }),
            call("call_c_todo", "todo", { action: "add", item: "c-item" }),
            call("call_c_block", "web_fetch", { url: `${siteUrl}/block/c` }),
          ],
        };
      case "crash-d":
        return last.role === "user" ? { type: "tool_calls", calls: [call("call_d_todo", "todo", { action: "add", item: "d-item" })] } : hang;
      default:
        // crash-e and crash-f (Telegram): the turn hangs on its provider call.
        return hang;
    }
  }

  beforeAll(async () => {
    provider = await startFakeOpenAI({ apiKey: providerKey });
    provider.setFallback(answer);
    telegram = await startFakeTelegram({ token: telegramToken });
    site = createServer((request, response) => {
      const path = request.url ?? "";
      if (path.startsWith("/fast")) {
        hits.fast += 1;
        response.writeHead(200, { "content-type": "text/plain" }).end("fast page");
      } else {
        // Never answers: the tool is still running when the process dies.
        hits.block += 1;
      }
    });
    await new Promise<void>((done) => site.listen(0, "127.0.0.1", done));
    const address = site.address();
    siteUrl = `http://127.0.0.1:${typeof address === "object" && address ? address.port : 0}`;
    directory = mkdtempSync(join(tmpdir(), "hermes-crash-points-"));
    databaseFile = join(directory, "crash.db");
  });
  afterAll(async () => {
    await server?.kill();
    db?.close();
    site.closeAllConnections();
    site.close();
    await provider.close();
    await telegram.close();
    rmSync(directory, { recursive: true, force: true });
  });

  const env = () => ({
    LIBSQL_URL: `file:${databaseFile}`,
    HERMES_API_KEYS: apiKey,
    HERMES_SECRET_KEY: testSecretKey,
    HERMES_RUNTIME: JSON.stringify({ provider: "openai", model: "gpt-crash", base_url: provider.url, toolsets: ["web", "todo"], retry: { time_scale: 0 } }),
    OPENAI_API_KEY: providerKey,
    HERMES_FETCH_ALLOW_PRIVATE: "1",
    HERMES_LEASE_MS: "1500",
    TELEGRAM_BOT_TOKEN: telegramToken,
    TELEGRAM_WEBHOOK_SECRET: telegramSecret,
    TELEGRAM_API_BASE: telegram.url,
  });
  const headers = { authorization: `Bearer ${apiKey}`, "content-type": "application/json" };
  const api = (path: string, init: RequestInit = {}) => fetch(`${server!.url}${path}`, { ...init, headers });
  const messages = async (id: string): Promise<Message[]> => (await (await api(`/v1/sessions/${id}/messages?archived=true&limit=1000`)).json()).messages;
  const turnStatuses = async (id: string): Promise<string[]> => (await (await api(`/v1/sessions/${id}/turns`)).json()).turns.map((turn: { status: string }) => turn.status);
  const shape = (list: Message[]) => list.map((message) => [message.seq, message.role, message.tool_call_id ?? message.content]);
  let nextUpdate = 70_000;
  const postTelegram = (chatId: number, text: string) => {
    const id = nextUpdate++;
    return fetch(`${server!.url}/webhooks/telegram`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-telegram-bot-api-secret-token": telegramSecret },
      body: JSON.stringify({ update_id: id, message: { message_id: id, date: 0, chat: { id: chatId, type: "private" }, from: { id: 7, is_bot: false }, text } }),
    });
  };
  /** Provider requests of one scenario; with `step`, only those whose last message is that user text or tool result. */
  const requestsFor = (key: string, step?: { user: string } | { tool: string }) =>
    provider.requests.filter((request) => {
      if (firstUserText(request) !== key) return false;
      if (step === undefined) return true;
      const last = lastMessage(request);
      return "user" in step ? last.role === "user" && last.content === step.user : last.role === "tool" && last.tool_call_id === step.tool;
    });

  it("loses nothing acknowledged, runs nothing completed twice, and the next turn works", async () => {
    server = await startServerProcess(env());
    const runtime = { provider: "openai", model: "gpt-crash", base_url: provider.url, api_key: providerKey, toolsets: ["web", "todo"], retry: { time_scale: 0 } };
    for (const id of ["a", "b", "c", "d"]) {
      expect((await api("/v1/sessions", { method: "POST", body: JSON.stringify({ id, runtime }) })).status).toBe(201);
    }

    // Every scenario runs at once on the first process; the test waits until each reached its point.
    const pending = ["a", "b", "c", "d"].map((id) => api(`/v1/sessions/${id}/messages`, { method: "POST", body: JSON.stringify({ content: `crash-${id}` }) }).catch((error: unknown) => error));
    expect((await postTelegram(43, "crash-e")).status).toBe(200);
    await waitFor("(a) the first provider call", () => (requestsFor("crash-a").length === 1 ? true : undefined));
    await waitFor("(b)+(c) both blocking fetches in flight", () => (hits.block === 2 ? true : undefined));
    await waitFor("(c) two results journaled", async () => ((await messages("c")).length === 4 ? true : undefined));
    await waitFor("(d) the final provider call", () => (requestsFor("crash-d", { tool: "call_d_todo" }).length === 1 ? true : undefined));
    await waitFor("(e) the webhook's turn at its provider call", () => (requestsFor("crash-e").length === 1 ? true : undefined));
    // (e') killed right after the acknowledgement, wherever its processing is.
    expect((await postTelegram(42, "crash-f")).status).toBe(200);
    await server.kill("SIGKILL");
    outputs.push(server.output());
    for (const result of await Promise.all(pending)) expect(result).toBeInstanceOf(Error);

    server = await startServerProcess(env());
    db = createClient({ url: `file:${databaseFile}` });

    // Everything journaled before the kill is there, nothing more.
    expect(shape(await messages("a"))).toEqual([[1, "user", "crash-a"]]);
    expect(shape(await messages("b"))).toEqual([[1, "user", "crash-b"], [2, "assistant", null]]);
    expect((await messages("b"))[1]!.tool_calls!.map((entry) => entry.id)).toEqual(["call_b_block"]);
    const c = await messages("c");
    expect(shape(c)).toEqual([[1, "user", "crash-c"], [2, "assistant", null], [3, "tool", "call_c_fast"], [4, "tool", "call_c_todo"]]);
    expect(c[2]!.content).toContain("fast page");
    expect(shape(await messages("d"))).toEqual([[1, "user", "crash-d"], [2, "assistant", null], [3, "tool", "call_d_todo"]]);
    expect(shape(await messages("telegram:43"))).toEqual([[1, "user", "crash-e"]]);
    for (const id of ["a", "b", "c", "d", "telegram:43"]) expect(await turnStatuses(id)).toEqual(["running"]);

    // The dead process's leases (sessions and inbox, HERMES_LEASE_MS = 1.5 s) expire; nothing is waited on blindly.
    await waitFor("the dead process's leases to expire", async () => {
      const result = await db.execute("SELECT MAX(lease_expires_at) AS sessions, (SELECT MAX(lease_expires_at) FROM inbox) AS inbox FROM sessions");
      const latest = Math.max(Number(result.rows[0]?.sessions ?? 0), Number(result.rows[0]?.inbox ?? 0));
      return Date.now() > latest + 50 ? true : undefined;
    }, 10_000);
    phase = "recover";

    const next = await Promise.all(["a", "b", "c", "d"].map(async (id) => {
      const response = await api(`/v1/sessions/${id}/messages`, { method: "POST", body: JSON.stringify({ content: `next-${id}` }) });
      expect(response.status).toBe(200);
      return (await response.json()).messages as Message[];
    }));
    const repaired = (list: Message[]) => list.map((message) => [message.seq, message.role, message.tool_call_id ?? message.content, message.effect ?? null]);
    expect(repaired(next[0]!)).toEqual([[2, "user", "next-a", null], [3, "assistant", "ok: next-a", null]]);
    expect(repaired(next[1]!)).toEqual([[3, "tool", "call_b_block", "unknown"], [4, "user", "next-b", null], [5, "assistant", "ok: next-b", null]]);
    expect(repaired(next[2]!)).toEqual([[5, "tool", "call_c_block", "unknown"], [6, "user", "next-c", null], [7, "assistant", "ok: next-c", null]]);
    expect(repaired(next[3]!)).toEqual([[4, "user", "next-d", null], [5, "assistant", "ok: next-d", null]]);
    for (const id of ["a", "b", "c", "d"]) expect(await turnStatuses(id)).toEqual(["completed", "interrupted"]);

    // The webhooks: a second update of each chat makes its queue run, oldest event first.
    expect((await postTelegram(43, "again-e")).status).toBe(200);
    expect((await postTelegram(42, "again-f")).status).toBe(200);
    await waitFor("both chats answered", async () => {
      const open = await db.execute("SELECT COUNT(*) AS n FROM inbox WHERE status <> 'done'");
      return telegram.callsTo("sendMessage").length >= 4 && Number(open.rows[0]?.n) === 0 ? true : undefined;
    });
    const sent = (chatId: number) => telegram.callsTo("sendMessage").filter((entry) => entry.body.chat_id === chatId).map((entry) => entry.body.text);
    expect(sent(43)).toEqual(["ok: crash-e", "ok: again-e"]);
    expect(sent(42)).toEqual(["ok: crash-f", "ok: again-f"]);
    expect(shape(await messages("telegram:43"))).toEqual([[1, "user", "crash-e"], [2, "assistant", "ok: crash-e"], [3, "user", "again-e"], [4, "assistant", "ok: again-e"]]);
    expect(shape(await messages("telegram:42"))).toEqual([[1, "user", "crash-f"], [2, "assistant", "ok: crash-f"], [3, "user", "again-f"], [4, "assistant", "ok: again-f"]]);

    // Nothing that completed ran twice: each fetch once (the blocking ones never again), each todo row once,
    // and no provider step that had answered was asked again.
    expect(hits).toEqual({ fast: 1, block: 2 });
    const todos = await db.execute("SELECT s.id, n.content FROM session_notes n JOIN sessions s ON s.pk = n.session_pk WHERE n.kind = 'todo' ORDER BY s.id");
    expect(todos.rows.map((row) => [row.id, row.content])).toEqual([["c", "c-item"], ["d", "d-item"]]);
    for (const key of ["crash-a", "crash-b", "crash-c", "crash-d"]) expect(requestsFor(key, { user: key })).toHaveLength(1);
    expect(requestsFor("crash-d", { tool: "call_d_todo" })).toHaveLength(1);
    // The webhook turn that died at its provider call is continued once (the hung call never answered).
    expect(requestsFor("crash-e", { user: "crash-e" })).toHaveLength(2);
    expect(provider.rejected).toEqual([]);

    expect(await journalProblems(db)).toEqual([]);

    // No secret in either process's output or in the database file (inline provider keys are stored encrypted).
    await server.kill("SIGTERM");
    outputs.push(server.output());
    server = undefined;
    const secrets = [apiKey, providerKey, testSecretKey, telegramToken, telegramSecret];
    for (const output of outputs) expect(leakedSecrets(output, secrets)).toEqual([]);
    expect(secretsInDatabaseFiles(databaseFile, secrets)).toEqual([]);
  }, 60_000);
});
