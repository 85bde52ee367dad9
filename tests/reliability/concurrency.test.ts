/// <reference types="node" />
// Many turns at once, over an embedded libSQL file and over a libSQL server (sqld), each time through two
// app instances sharing the database (the scale-out shape): many sessions in parallel without an error; ten
// turns racing on one session (one 200, nine 409 session_busy); the same race through the Telegram webhook
// (every message journaled once, in inbox order); then every journal checked for consistency.
import { createClient, LibsqlError, type Client } from "@libsql/client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { TestApp } from "../support/app.ts";
import type { TestDatabase } from "../support/db.ts";
import { tempFileDatabase } from "../support/db.ts";
import { startFakeOpenAI, type FakeProvider } from "../support/fake-provider.ts";
import { startFakeTelegram, telegramSecret, telegramToken, type FakePlatform } from "../support/fake-platforms.ts";
import { startSqld, type SqldServer } from "../support/sqld.ts";
import { buildAppOver, journalProblems, lastMessage, lastUserText, serverDatabase, waitFor } from "../support/reliability.ts";

interface Backend {
  /** Two handles on one database: one per app instance. */
  open(): Promise<{ first: TestDatabase; second: TestDatabase; close(): Promise<void> }>;
}

const fileBackend: Backend = {
  async open() {
    const first = tempFileDatabase();
    const client = createClient({ url: first.url });
    const second: TestDatabase = { url: first.url, client, close: async () => client.close() };
    return { first, second, close: async () => (await second.close(), await first.close()) };
  },
};

let sqld: SqldServer | undefined;
const sqldBackend: Backend = {
  async open() {
    sqld ??= await startSqld();
    const first = serverDatabase(sqld.url);
    const second = serverDatabase(sqld.url);
    return { first, second, close: async () => (await second.close(), await first.close()) };
  },
};

afterAll(async () => sqld?.stop());

function concurrencySuite(name: string, backend: Backend) {
  describe(`concurrency over ${name}`, () => {
    let provider: FakeProvider;
    let telegram: FakePlatform;
    let apps: TestApp[];
    let close: () => Promise<void>;
    let client: TestDatabase["client"];
    const pending: Promise<unknown>[] = [];
    /** While set, provider requests wait for it: a turn holds its lease as long as a test needs. */
    let gate: Promise<void> | null = null;
    let waiting = 0;
    let callCounter = 0;

    beforeAll(async () => {
      provider = await startFakeOpenAI({ apiKey: "sk-concurrency" });
      provider.setFallback((request) => {
        const text = lastUserText(request);
        if (lastMessage(request).role === "user" && text.includes("#tool")) {
          return { type: "tool_calls", calls: [{ id: `call_${++callCounter}`, name: "todo", arguments: JSON.stringify({ action: "add", item: text }) }] };
        }
        return { type: "text", text: `re: ${text}` };
      });
      telegram = await startFakeTelegram({ token: telegramToken });
      const databases = await backend.open();
      close = databases.close;
      client = databases.first.client;
      const gatedFetch: typeof fetch = async (input, init) => {
        const url = typeof input === "string" ? input : input instanceof URL ? input.href : input.url;
        if (gate && url.includes("/chat/completions")) {
          waiting += 1;
          await gate;
        }
        return globalThis.fetch(input, init);
      };
      const env = {
        OPENAI_API_KEY: "sk-concurrency",
        HERMES_RUNTIME: JSON.stringify({ provider: "openai", model: "gpt-many", base_url: provider.url, toolsets: ["todo"], retry: { max_retries: 0, time_scale: 0 } }),
        TELEGRAM_BOT_TOKEN: telegramToken,
        TELEGRAM_WEBHOOK_SECRET: telegramSecret,
        TELEGRAM_API_BASE: telegram.url,
      };
      const overrides = { fetch: gatedFetch, waitUntil: (work: Promise<unknown>) => void pending.push(work) };
      apps = [await buildAppOver({ database: databases.first, env, overrides }), await buildAppOver({ database: databases.second, env, overrides })];
    }, 30_000);
    afterAll(async () => {
      await close?.();
      await provider?.close();
      await telegram?.close();
    });

    const settle = async () => {
      while (pending.length > 0) await Promise.all(pending.splice(0));
    };
    const app = (index: number) => apps[index % apps.length]!;

    it("runs 40 sessions × 3 turns at once without a single error", async () => {
      const sessions = Array.from({ length: 40 }, (_, index) => `many-${index}`);
      const created = await Promise.all(sessions.map((id, index) => app(index).call("POST", "/v1/sessions", { id })));
      expect(created.map((response) => response.status)).toEqual(sessions.map(() => 201));
      const failures: string[] = [];
      await Promise.all(
        sessions.map(async (id, index) => {
          for (let turn = 1; turn <= 3; turn++) {
            // Turn 2 of every session makes a tool call, so tool-result writes interleave with plain turns.
            const content = `${id} turn ${turn}${turn === 2 ? " #tool" : ""}`;
            const response = await app(index + turn).call("POST", `/v1/sessions/${id}/messages`, { content });
            const body = await response.json();
            if (response.status !== 200 || body.reply !== `re: ${content}`) failures.push(`${id} turn ${turn}: ${response.status} ${JSON.stringify(body).slice(0, 200)}`);
          }
        }),
      );
      expect(failures).toEqual([]);
      for (const [index, id] of sessions.entries()) {
        const body = await (await app(index).call("GET", `/v1/sessions/${id}/messages`)).json();
        expect(body.messages.map((message: { role: string }) => message.role)).toEqual(["user", "assistant", "user", "assistant", "tool", "assistant", "user", "assistant"]);
        expect(body.messages.map((message: { seq: number }) => message.seq)).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
      }
      const todos = await client.execute("SELECT COUNT(*) AS n FROM session_notes WHERE kind = 'todo'");
      expect(Number(todos.rows[0]?.n)).toBe(40);
      expect(provider.rejected).toEqual([]);
    }, 60_000);

    it("lets exactly one of 10 racing turns on one session run; the others get 409 session_busy", async () => {
      expect((await app(0).call("POST", "/v1/sessions", { id: "race" })).status).toBe(201);
      let open!: () => void;
      gate = new Promise<void>((resolve) => (open = resolve));
      waiting = 0;
      const answered: number[] = [];
      let results: { status: number; retryAfter: string | null; body: any }[];
      try {
        const racing = Array.from({ length: 10 }, (_, index) =>
          app(index)
            .call("POST", "/v1/sessions/race/messages", { content: `racer ${index}` })
            .then(async (response) => {
              answered.push(response.status);
              return { status: response.status, retryAfter: response.headers.get("retry-after"), body: await response.json() };
            }),
        );
        // The winner holds the lease at its (held) provider call until all nine others were answered.
        await waitFor(
          () => `nine answers and one turn at the provider (answered: ${answered.join(",")}; at the provider: ${waiting})`,
          () => (answered.length === 10 || (answered.length === 9 && (waiting === 1 || answered.some((status) => status !== 409))) ? true : undefined),
        );
        expect(answered).toEqual(Array<number>(9).fill(409));
        expect(waiting).toBe(1);
        gate = null;
        open();
        results = await Promise.all(racing);
      } finally {
        // Never leave the provider held for the tests after this one.
        gate = null;
        open();
      }
      expect(results.map((result) => result.status).sort()).toEqual([200, ...Array<number>(9).fill(409)]);
      for (const result of results.filter((entry) => entry.status === 409)) {
        expect(result.body.error.code).toBe("session_busy");
        expect(result.retryAfter).toMatch(/^[1-9]\d*$/);
      }
      const winner = results.find((result) => result.status === 200)!;
      const journal = await (await app(1).call("GET", "/v1/sessions/race/messages")).json();
      expect(journal.messages.map((message: { role: string; content: string }) => [message.role, message.content])).toEqual([
        ["user", winner.body.messages[0].content],
        ["assistant", `re: ${winner.body.messages[0].content}`],
      ]);
      const turns = await (await app(0).call("GET", "/v1/sessions/race/turns")).json();
      expect(turns.turns.map((turn: { status: string }) => turn.status)).toEqual(["completed"]);
    }, 30_000);

    it("journals every message of a racing Telegram chat exactly once, in inbox order", async () => {
      const chatId = 555;
      const updates = Array.from({ length: 10 }, (_, index) => ({
        update_id: 90_000 + index,
        message: { message_id: 90_000 + index, date: 0, chat: { id: chatId, type: "private" }, from: { id: 7, is_bot: false }, text: `chat message ${index}` },
      }));
      const post = (update: unknown, index: number) =>
        app(index).app.request("/webhooks/telegram", {
          method: "POST",
          headers: { "content-type": "application/json", "x-telegram-bot-api-secret-token": telegramSecret },
          body: JSON.stringify(update),
        });
      // Every update at once, and every third one redelivered at the same time (Telegram retries).
      const deliveries = [...updates.map((update, index) => post(update, index)), ...updates.filter((_, index) => index % 3 === 0).map((update, index) => post(update, index + 1))];
      const statuses = (await Promise.all(deliveries)).map((response) => response.status);
      expect(statuses).toEqual(deliveries.map(() => 200));
      await settle();
      await waitFor("every event done", async () => {
        const open = await client.execute({ sql: "SELECT COUNT(*) AS n FROM inbox WHERE session_id = ? AND status <> 'done'", args: [`telegram:${chatId}`] });
        return Number(open.rows[0]?.n) === 0 ? true : undefined;
      });
      const inbox = await client.execute({ sql: "SELECT payload FROM inbox WHERE session_id = ? ORDER BY rowid", args: [`telegram:${chatId}`] });
      const inboxOrder = inbox.rows.map((row) => (JSON.parse(String(row.payload)) as { text: string }).text);
      expect([...inboxOrder].sort()).toEqual(updates.map((update) => update.message.text).sort());
      const journal = await (await app(0).call("GET", `/v1/sessions/telegram:${chatId}/messages`)).json();
      const users = journal.messages.filter((message: { role: string }) => message.role === "user").map((message: { content: string }) => message.content);
      expect(users).toEqual(inboxOrder);
      const replies = telegram.callsTo("sendMessage").filter((entry) => entry.body.chat_id === chatId).map((entry) => entry.body.text);
      expect(replies).toEqual(inboxOrder.map((text) => `re: ${text}`));
    }, 30_000);

    it("leaves every journal consistent: contiguous seqs, valid pairing, every turn ended, no lease held", async () => {
      await settle();
      expect(await journalProblems(client)).toEqual([]);
      const turns = await client.execute("SELECT status, COUNT(*) AS n FROM turns GROUP BY status");
      expect(Object.fromEntries(turns.rows.map((row) => [row.status, Number(row.n)]))).toEqual({ completed: 40 * 3 + 1 + 10 });
    }, 30_000);
  });
}

describe("a write refused with SQLITE_BUSY", () => {
  // libSQL servers (sqld, Turso) answer SQLITE_BUSY "database is locked" to a write under contention: the 40 ×
  // 3 run over sqld above hits it now and then. A refused statement or batch was rolled back entirely, so the
  // store can retry it; a turn must not fail with 500 because the database asked to come back a moment later.
  it("is retried by the store: the turn still answers 200 and is journaled once", async () => {
    const provider = await startFakeOpenAI({ apiKey: "sk-busy" });
    const database = tempFileDatabase();
    let refusals = 0;
    const busyOnce = new Set(["UPDATE sessions SET lease_owner", "UPDATE turns SET status = ?"]);
    const client = new Proxy(database.client, {
      get(target, property, receiver) {
        const value = Reflect.get(target, property, receiver) as unknown;
        if (property !== "batch") return typeof value === "function" ? (value as (...args: unknown[]) => unknown).bind(target) : value;
        return async (statements: Parameters<Client["batch"]>[0], mode?: Parameters<Client["batch"]>[1]) => {
          const text = JSON.stringify(statements);
          for (const marker of busyOnce) {
            if (text.includes(marker)) {
              // The first beginTurn batch and the first finishTurn batch are refused once each, as sqld does.
              busyOnce.delete(marker);
              refusals += 1;
              throw new LibsqlError("SQLite error: database is locked", "SQLITE_BUSY");
            }
          }
          return target.batch(statements, mode);
        };
      },
    });
    const harness = await buildAppOver({ database: { url: database.url, client, close: () => database.close() }, env: { OPENAI_API_KEY: "sk-busy" } });
    try {
      expect((await harness.call("POST", "/v1/sessions", { id: "busy", runtime: { provider: "openai", model: "gpt-busy", base_url: provider.url, retry: { time_scale: 0 } } })).status).toBe(201);
      provider.script({ type: "text", text: "answered" });
      const response = await harness.call("POST", "/v1/sessions/busy/messages", { content: "hello" });
      expect(response.status).toBe(200);
      expect(refusals).toBe(2);
      expect((await response.json()).reply).toBe("answered");
      const journal = await (await harness.call("GET", "/v1/sessions/busy/messages")).json();
      expect(journal.messages.map((message: { role: string; content: string }) => [message.role, message.content])).toEqual([["user", "hello"], ["assistant", "answered"]]);
      expect(await journalProblems(database.client)).toEqual([]);
    } finally {
      await harness.close();
      await provider.close();
    }
  }, 30_000);
});

concurrencySuite("a libSQL file", fileBackend);
concurrencySuite("a libSQL server (sqld)", sqldBackend);
