/// <reference types="node" />
// The Store contract: one suite, run against every libSQL flavour (file, :memory:, sqld).
import type { Client } from "@libsql/client";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { ChatMessage } from "../../src/agent/messages.ts";
import { createLibsqlStore } from "../../src/state/libsql-store.ts";
import { migrations } from "../../src/state/schema.ts";
import type { BeginTurnInput, Store } from "../../src/state/store.ts";
import { countingClient } from "../support/db.ts";

export interface StoreHarness {
  client: Client;
  url: string;
  /** A second, independent client on the same database (another process, as far as the store can tell). */
  secondClient(): Client;
  close(): Promise<void>;
}

const runtime = { provider: "openai", model: "gpt-4o-mini" };
const now = "2026-11-26T00:00:00.000Z";
const nowMs = Date.parse(now);

function beginInput(sessionId: string, turnId: string, content: string | null, at = nowMs): BeginTurnInput {
  return { tenant: "default", sessionId, turnId, userContent: content, now: new Date(at).toISOString(), nowMs: at, leaseMs: 60_000, orphanText: "outcome unknown" };
}

export function describeStoreContract(name: string, open: () => Promise<StoreHarness>) {
  describe(`Store contract: ${name}`, () => {
    let harness: StoreHarness;
    let store: Store;

    beforeEach(async () => {
      harness = await open();
      store = createLibsqlStore(harness.client, { file: harness.url.startsWith("file:") });
      await store.migrate();
    });
    afterEach(async () => harness.close());

    async function newSession(id = "s1", tenant = "default") {
      const session = await store.createSession({ tenant, id, runtime, systemPrompt: "be brief", metadata: { a: 1 }, now });
      if (!session) throw new Error("session not created");
      return session;
    }

    it("runs each migration once; a second run changes nothing", async () => {
      const before = await harness.client.execute("SELECT type, name, sql FROM sqlite_master ORDER BY name");
      await store.migrate();
      const other = createLibsqlStore(harness.secondClient(), { file: harness.url.startsWith("file:") });
      await other.migrate();
      const after = await harness.client.execute("SELECT type, name, sql FROM sqlite_master ORDER BY name");
      expect(after.rows).toEqual(before.rows);
      const versions = await harness.client.execute("SELECT version FROM schema_migrations");
      expect(versions.rows.map((row) => Number(row.version))).toEqual(migrations.map((migration) => migration.version));
    });

    it("creates, reads, lists with a cursor, updates with compare-and-set and deletes sessions", async () => {
      const created = await newSession("b");
      expect(created).toMatchObject({ id: "b", tenant: "default", systemPrompt: "be brief", metadata: { a: 1 }, version: 1, messageCount: 0, lastTurn: null });
      expect(await store.createSession({ tenant: "default", id: "b", runtime, systemPrompt: "", metadata: {}, now })).toBeNull();
      // Another tenant may use the same id; each sees only its own.
      await newSession("b", "other");
      await newSession("a");
      await newSession("c");
      expect((await store.listSessions("default", 2, null)).map((session) => session.id)).toEqual(["a", "b"]);
      expect((await store.listSessions("default", 2, "b")).map((session) => session.id)).toEqual(["c"]);
      expect((await store.listSessions("other", 10, null)).map((session) => session.id)).toEqual(["b"]);

      const updated = await store.updateSession("default", "b", 1, { systemPrompt: "new" }, now);
      expect(updated).toMatchObject({ systemPrompt: "new", version: 2 });
      expect(await store.updateSession("default", "b", 1, { systemPrompt: "stale" }, now)).toBeNull();
      expect((await store.getSession("default", "b"))?.systemPrompt).toBe("new");
      expect((await store.getSession("other", "b"))?.systemPrompt).toBe("be brief");

      expect(await store.deleteSession("default", "b")).toBe(true);
      expect(await store.getSession("default", "b")).toBeNull();
      expect(await store.deleteSession("default", "b")).toBe(false);
      expect(await store.getSession("other", "b")).not.toBeNull();
    });

    it("loads a session for a turn in one round trip: lease, user message, turn record and reads", async () => {
      await newSession();
      const counting = countingClient(harness.client);
      const counted = createLibsqlStore(counting.client, { file: false });
      const begun = await counted.beginTurn(beginInput("s1", "t1", "hello"));
      expect(counting.counts.roundTrips).toBe(1);
      expect(begun.kind).toBe("started");
      if (begun.kind !== "started") return;
      expect(begun.appended).toMatchObject([{ seq: 1, role: "user", content: "hello", turnId: "t1" }]);
      expect(begun.history.map((message) => message.seq)).toEqual([1]);
      expect(begun.session.runtime).toEqual(runtime);
      const turns = await store.listTurns("default", "s1", 10);
      expect(turns?.map((turn) => [turn.id, turn.status])).toEqual([["t1", "running"]]);
    });

    it("lets exactly one of two concurrent turns take the lease; the loser changes nothing", async () => {
      await newSession();
      const second = createLibsqlStore(harness.secondClient(), { file: harness.url.startsWith("file:") });
      const results = await Promise.all([store.beginTurn(beginInput("s1", "t1", "one")), second.beginTurn(beginInput("s1", "t2", "two"))]);
      expect(results.map((result) => result.kind).sort()).toEqual(["busy", "started"]);
      const messages = await store.listMessages("default", "s1", { after: 0, limit: 10, includeArchived: true });
      expect(messages).toHaveLength(1);
      expect((await store.listTurns("default", "s1", 10))?.length).toBe(1);
    });

    it("lets a new turn take an expired lease and marks the dead turn interrupted", async () => {
      await newSession();
      expect((await store.beginTurn(beginInput("s1", "t1", "one"))).kind).toBe("started");
      expect((await store.beginTurn(beginInput("s1", "t2", "two", nowMs + 1000))).kind).toBe("busy");
      const later = await store.beginTurn(beginInput("s1", "t3", "three", nowMs + 61_000));
      expect(later.kind).toBe("started");
      const turns = await store.listTurns("default", "s1", 10);
      expect(Object.fromEntries(turns!.map((turn) => [turn.id, turn.status]))).toEqual({ t1: "interrupted", t3: "running" });
    });

    it("repairs orphan tool calls with effect unknown, in call order, before the new user message", async () => {
      await newSession();
      const begun = await store.beginTurn(beginInput("s1", "t1", "do two things"));
      if (begun.kind !== "started") throw new Error("not started");
      const calls = [
        { id: "call_a", name: "todo", arguments: "{}" },
        { id: "call_b", name: "memory", arguments: "{}" },
        { id: "call_c", name: "todo", arguments: "{}" },
      ];
      await store.appendMessages(begun.session.pk, "t1", 2, [{ role: "assistant", content: null, toolCalls: calls }], now, nowMs + 60_000);
      await store.appendToolResult(begun.session.pk, "t1", 3, { role: "tool", content: "done a", toolCallId: "call_a", name: "todo" }, now);
      // The process dies here: the lease expires, the next turn repairs b and c.
      const next = await store.beginTurn(beginInput("s1", "t2", "next", nowMs + 61_000));
      if (next.kind !== "started") throw new Error("not started");
      expect(next.appended.map((message) => [message.seq, message.role, message.toolCallId ?? null, message.effect ?? null])).toEqual([
        [4, "tool", "call_b", "unknown"],
        [5, "tool", "call_c", "unknown"],
        [6, "user", null, null],
      ]);
      expect(next.appended[0]).toMatchObject({ content: "outcome unknown", isError: true, name: "memory", turnId: "t1" });
      expect(next.history.map((message) => message.seq)).toEqual([1, 2, 3, 4, 5, 6]);
      // A turn that finds nothing to repair appends only its user message.
      await store.finishTurn({ sessionPk: next.session.pk, turnId: "t2", status: "completed", provider: "openai", model: "m", fallbackActivated: false, attempts: [], usage: { inputTokens: 1, outputTokens: 2 }, error: null, now }, 7, [{ role: "assistant", content: "ok" }]);
      const third = await store.beginTurn(beginInput("s1", "t3", "again", nowMs + 62_000));
      expect(third.kind === "started" && third.appended.map((message) => message.role)).toEqual(["user"]);
    });

    it("writes a tool result once per tool call id; a clash on seq fails loudly", async () => {
      await newSession();
      const begun = await store.beginTurn(beginInput("s1", "t1", "x"));
      if (begun.kind !== "started") throw new Error("not started");
      const pk = begun.session.pk;
      await store.appendMessages(pk, "t1", 2, [{ role: "assistant", content: null, toolCalls: [{ id: "call_1", name: "todo", arguments: "{}" }] }], now, nowMs + 60_000);
      const result: ChatMessage = { role: "tool", content: "r", toolCallId: "call_1", name: "todo" };
      expect(await store.appendToolResult(pk, "t1", 3, result, now)).toMatchObject({ seq: 3 });
      expect(await store.appendToolResult(pk, "t1", 4, result, now)).toBeNull();
      await expect(store.appendToolResult(pk, "t1", 3, { ...result, toolCallId: "call_2" }, now)).rejects.toThrow();
      const messages = await store.listMessages("default", "s1", { after: 0, limit: 10, includeArchived: false });
      expect(messages?.map((message) => message.seq)).toEqual([1, 2, 3]);
    });

    it("finishes a turn: final message, turn record and lease release in one round trip", async () => {
      await newSession();
      const begun = await store.beginTurn(beginInput("s1", "t1", "hi"));
      if (begun.kind !== "started") throw new Error("not started");
      const counting = countingClient(harness.client);
      const counted = createLibsqlStore(counting.client, { file: false });
      await counted.finishTurn(
        { sessionPk: begun.session.pk, turnId: "t1", status: "completed", provider: "openai", model: "gpt", fallbackActivated: true, attempts: [{ provider: "openai", model: "gpt", outcome: "ok" }], usage: { inputTokens: 5, outputTokens: 7 }, error: null, now, conversationPrompt: "frozen" },
        2,
        [{ role: "assistant", content: "hello back", provider: "openai", model: "gpt" }],
      );
      expect(counting.counts.roundTrips).toBe(1);
      const session = await store.getSession("default", "s1");
      expect(session?.messageCount).toBe(2);
      expect(session?.conversationPrompt).toBe("frozen");
      expect(session?.lastTurn).toMatchObject({ id: "t1", status: "completed", fallbackActivated: true, usage: { inputTokens: 5, outputTokens: 7 } });
      expect((await store.beginTurn(beginInput("s1", "t2", "again"))).kind).toBe("started");
    });

    it("archives a conversation instead of deleting it", async () => {
      await newSession();
      const begun = await store.beginTurn(beginInput("s1", "t1", "remember me"));
      if (begun.kind !== "started") throw new Error("not started");
      await store.finishTurn({ sessionPk: begun.session.pk, turnId: "t1", status: "completed", provider: null, model: null, fallbackActivated: false, attempts: [], usage: { inputTokens: 0, outputTokens: 0 }, error: null, now, conversationPrompt: "p" }, 2, [{ role: "assistant", content: "ok" }]);
      expect(await store.archiveConversation("default", "s1", now)).toBe(true);
      expect(await store.listMessages("default", "s1", { after: 0, limit: 10, includeArchived: false })).toEqual([]);
      const all = await store.listMessages("default", "s1", { after: 0, limit: 10, includeArchived: true });
      expect(all?.map((message) => [message.seq, message.archived])).toEqual([
        [1, true],
        [2, true],
      ]);
      const session = await store.getSession("default", "s1");
      expect(session).toMatchObject({ messageCount: 0, conversationPrompt: null });
      const next = await store.beginTurn(beginInput("s1", "t2", "fresh"));
      expect(next.kind === "started" && next.history.map((message) => [message.seq, message.content])).toEqual([[3, "fresh"]]);
      expect(await store.archiveConversation("default", "missing", now)).toBe(false);
    });

    it("refuses a corrupted runtime row instead of trusting it", async () => {
      await newSession();
      await harness.client.execute("UPDATE sessions SET runtime = '{\"provider\": 5}' WHERE id = 's1'");
      await expect(store.getSession("default", "s1")).rejects.toThrow(/runtime failed validation/);
    });

    it("does not leave a turn running or the session leased when its stored row is corrupt", async () => {
      await newSession();
      await harness.client.execute("UPDATE sessions SET runtime = '{\"provider\": 5}' WHERE id = 's1'");
      await expect(store.beginTurn(beginInput("s1", "t1", "hello"))).rejects.toThrow(/runtime failed validation/);
      const turn = await harness.client.execute("SELECT status FROM turns WHERE id = 't1'");
      expect(turn.rows.map((row) => row.status)).toEqual(["failed"]);
      const lease = await harness.client.execute("SELECT lease_owner FROM sessions WHERE id = 's1'");
      expect(lease.rows[0]?.lease_owner).toBeNull();
    });
  });
}
