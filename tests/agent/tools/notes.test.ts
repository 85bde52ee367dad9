import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { executeTool, findTool, parseToolArguments, selectTools } from "../../../src/agent/tools/registry.ts";
import { MEMORY_MAX_NOTES } from "../../../src/agent/tools/memory.ts";
import { toFtsExpression } from "../../../src/state/notes.ts";
import { insertMessage, openTestDatabase, toolContext, type TestDatabase } from "./test-db.ts";

let database: TestDatabase;
beforeEach(async () => {
  database = await openTestDatabase();
});
afterEach(() => database.close());

/** Runs a tool the way the engine does: raw JSON arguments, validation, then execution. */
async function call(name: string, rawArguments: string) {
  const tool = findTool(selectTools(undefined), name);
  if (tool === undefined) throw new Error(`no tool ${name}`);
  const parsed = parseToolArguments(tool, rawArguments);
  if (!parsed.ok) return { content: parsed.error, isError: true };
  return executeTool(tool, parsed.value, toolContext(database), 5_000);
}

describe("notes store", () => {
  it("numbers notes per session and kind, starting at 1", async () => {
    const { notes, sessionPk, otherSessionPk } = database;
    const first = await notes.addNote(sessionPk, "memory", "likes tea");
    const second = await notes.addNote(sessionPk, "memory", "lives in Oslo");
    const todo = await notes.addNote(sessionPk, "todo", "book flights");
    const other = await notes.addNote(otherSessionPk, "memory", "other session");
    expect([first, second, todo, other].map((change) => (change.ok ? change.note.id : null))).toEqual([1, 2, 1, 1]);
    expect((await notes.listNotes(sessionPk, "memory")).map((note) => note.content)).toEqual(["likes tea", "lives in Oslo"]);
  });

  it("gives concurrent adds distinct ids", async () => {
    const changes = await Promise.all(
      Array.from({ length: 10 }, (_, index) => database.notes.addNote(database.sessionPk, "todo", `task ${index}`)),
    );
    const ids = changes.map((change) => (change.ok ? change.note.id : 0)).sort((a, b) => a - b);
    expect(ids).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
  });

  it("refuses to add past the cap without writing", async () => {
    const { notes, sessionPk } = database;
    await notes.addNote(sessionPk, "memory", "a", 2);
    await notes.addNote(sessionPk, "memory", "b", 2);
    expect(await notes.addNote(sessionPk, "memory", "c", 2)).toEqual({ ok: false, reason: "full" });
    expect(await notes.listNotes(sessionPk, "memory")).toHaveLength(2);
  });

  it("replaces only a unique substring match and reports none or several", async () => {
    const { notes, sessionPk } = database;
    await notes.addNote(sessionPk, "memory", "prefers metric units");
    await notes.addNote(sessionPk, "memory", "prefers short answers");
    const replaced = await notes.replaceNote(sessionPk, "memory", "metric", "prefers imperial units");
    expect(replaced).toMatchObject({ ok: true, note: { id: 1, content: "prefers imperial units" } });
    expect(await notes.replaceNote(sessionPk, "memory", "nothing like this", "x")).toEqual({ ok: false, reason: "not_found" });
    const ambiguous = await notes.replaceNote(sessionPk, "memory", "prefers", "x");
    expect(ambiguous).toMatchObject({ ok: false, reason: "ambiguous" });
    expect(ambiguous.ok === false && ambiguous.reason === "ambiguous" ? ambiguous.matches.map((note) => note.id) : []).toEqual([1, 2]);
    expect((await notes.listNotes(sessionPk, "memory")).map((note) => note.content)).toEqual([
      "prefers imperial units",
      "prefers short answers",
    ]);
  });

  it("removes by id or unique substring, never on an ambiguous match", async () => {
    const { notes, sessionPk } = database;
    await notes.addNote(sessionPk, "todo", "write tests");
    await notes.addNote(sessionPk, "todo", "write docs");
    await notes.addNote(sessionPk, "todo", "ship");
    expect(await notes.removeNote(sessionPk, "todo", "write")).toMatchObject({ ok: false, reason: "ambiguous" });
    expect(await notes.removeNote(sessionPk, "todo", "docs")).toMatchObject({ ok: true, note: { id: 2 } });
    expect(await notes.removeNote(sessionPk, "todo", 3)).toMatchObject({ ok: true, note: { content: "ship" } });
    expect(await notes.removeNote(sessionPk, "todo", 3)).toEqual({ ok: false, reason: "not_found" });
    expect((await notes.listNotes(sessionPk, "todo")).map((note) => note.id)).toEqual([1]);
  });

  it("marks todos done, idempotently, and only todos", async () => {
    const { notes, sessionPk } = database;
    await notes.addNote(sessionPk, "todo", "task");
    await notes.addNote(sessionPk, "memory", "fact");
    expect(await notes.setTodoDone(sessionPk, 1)).toMatchObject({ ok: true, note: { done: true } });
    expect(await notes.setTodoDone(sessionPk, 1)).toMatchObject({ ok: true, note: { done: true } });
    expect(await notes.setTodoDone(sessionPk, 2)).toEqual({ ok: false, reason: "not_found" });
    expect((await notes.listNotes(sessionPk, "memory"))[0]?.done).toBe(false);
  });
});

describe("journal search", () => {
  beforeEach(async () => {
    const { client, sessionPk, otherSessionPk } = database;
    await insertMessage(client, sessionPk, 1, "user", "My flight to Lisbon leaves on Friday", { archived: true });
    await insertMessage(client, sessionPk, 2, "assistant", "Noted: the Lisbon flight is on Friday.", { archived: true });
    await insertMessage(client, sessionPk, 3, "user", "What about the hotel in Porto?");
    await insertMessage(client, sessionPk, 4, "assistant", null);
    await insertMessage(client, sessionPk, 5, "user", "forget the Lisbon secret", { undone: true });
    await insertMessage(client, otherSessionPk, 1, "user", "Lisbon belongs to another session");
  });

  it("finds archived rows of this session only, flagged archived", async () => {
    const hits = await database.notes.searchJournal(database.sessionPk, "lisbon friday", 10);
    expect(hits.map((hit) => [hit.seq, hit.role, hit.archived])).toEqual(
      expect.arrayContaining([
        [1, "user", true],
        [2, "assistant", true],
      ]),
    );
    expect(hits).toHaveLength(2);
  });

  it("leaves out undone rows and respects the limit", async () => {
    expect((await database.notes.searchJournal(database.sessionPk, "secret", 10))).toEqual([]);
    expect(await database.notes.searchJournal(database.sessionPk, "Lisbon", 1)).toHaveLength(1);
  });

  it.each([
    '"foo',
    "a OR",
    "*",
    "NEAR(",
    "NEAR(lisbon friday)",
    "lisbon AND",
    "NOT lisbon",
    "-lisbon",
    "content:lisbon",
    "session_pk:1",
    "(lisbon",
    "lisbon*",
    "^lisbon",
    '""""',
    "   ",
    "lisbon'; DROP TABLE messages; --",
  ])("accepts the hostile query %j without throwing", async (query) => {
    const hits = await database.notes.searchJournal(database.sessionPk, query, 10);
    expect(Array.isArray(hits)).toBe(true);
  });

  it("orders hits by rank", async () => {
    const { client, sessionPk } = database;
    await insertMessage(client, sessionPk, 10, "user", `tram ${"filler words about nothing in particular ".repeat(20)}`);
    await insertMessage(client, sessionPk, 11, "user", "tram tram tram");
    const hits = await database.notes.searchJournal(sessionPk, "tram", 10);
    expect(hits.map((hit) => hit.seq)).toEqual([11, 10]);
  });

  it("treats operators as words", async () => {
    expect(toFtsExpression('say "hi" OR NOT')).toBe('"say" """hi""" "OR" "NOT"');
    expect(toFtsExpression("* - ( )")).toBeNull();
    const hits = await database.notes.searchJournal(database.sessionPk, "content:Porto?", 10);
    expect(hits.map((hit) => hit.seq)).toEqual([]);
    expect((await database.notes.searchJournal(database.sessionPk, "Porto?", 10)).map((hit) => hit.seq)).toEqual([3]);
  });

  it("session_search shows seq, role and an [archived] marker", async () => {
    const result = await call("session_search", '{"query": "Lisbon", "limit": 5}');
    expect(result.isError).toBeUndefined();
    expect(result.content).toMatch(/^2 messages match "Lisbon":/u);
    expect(result.content).toContain("#1 user [archived]: My flight to Lisbon leaves on Friday");
    expect(result.content).toContain("#2 assistant [archived]: Noted: the Lisbon flight is on Friday.");
    expect((await call("session_search", '{"query": "Porto"}')).content).toContain("#3 user: What about the hotel in Porto?");
    expect((await call("session_search", '{"query": "NEAR("}')).content).toBe('No messages match "NEAR(".');
  });
});

describe("memory tool", () => {
  it("adds, lists, replaces and removes notes", async () => {
    expect((await call("memory", '{"action": "list"}')).content).toBe("Memory is empty.");
    expect((await call("memory", '{"action": "add", "content": "User prefers metric units"}')).content).toContain(
      "Saved to memory",
    );
    await call("memory", '{"action": "add", "content": "User is called Ada"}');
    expect((await call("memory", '{"action": "replace", "old": "metric", "content": "User prefers SI units"}')).content).toContain(
      "User prefers SI units",
    );
    const ambiguous = await call("memory", '{"action": "remove", "old": "User"}');
    expect(ambiguous.isError).toBe(true);
    expect(ambiguous.content).toContain("2 memory notes contain");
    expect((await call("memory", '{"action": "remove", "old": "Ada"}')).content).toContain("removed");
    expect((await call("memory", '{"action": "list"}')).content).toBe("Memory (1/50 notes):\n- User prefers SI units");
  });

  it("explains missing arguments and a full memory", async () => {
    expect(await call("memory", '{"action": "add"}')).toEqual({ content: "The add action needs arguments.content.", isError: true });
    const missing = await call("memory", '{"action": "replace", "old": "nothing", "content": "x"}');
    expect(missing).toMatchObject({ isError: true });
    expect(missing.content).toContain('No memory note contains "nothing"');
    for (let index = 0; index < MEMORY_MAX_NOTES; index++) {
      await database.notes.addNote(database.sessionPk, "memory", `note ${index}`);
    }
    const full = await call("memory", '{"action": "add", "content": "one too many"}');
    expect(full).toEqual({ content: "Memory is full (50 notes); replace or remove a note first.", isError: true });
  });

  it("refuses an oversized note before touching the store", async () => {
    const result = await call("memory", JSON.stringify({ action: "add", content: "x".repeat(2_001) }));
    expect(result).toEqual({
      content: "Invalid arguments for memory: arguments.content: expected at most 2000 characters, got 2001.",
      isError: true,
    });
    expect(await database.notes.listNotes(database.sessionPk, "memory")).toEqual([]);
  });
});

describe("todo tool", () => {
  it("adds, completes, removes and lists items", async () => {
    expect((await call("todo", '{"action": "add", "item": "draft the plan"}')).content).toBe('Added: [ ] 1. draft the plan');
    await call("todo", '{"action": "add", "item": "review the plan"}');
    await call("todo", '{"action": "add", "item": "ship it"}');
    expect((await call("todo", '{"action": "done", "id": 1}')).content).toBe("Done: [x] 1. draft the plan");
    expect((await call("todo", '{"action": "remove", "item": "review"}')).content).toBe("Removed: [ ] 2. review the plan");
    expect((await call("todo", '{"action": "list"}')).content).toBe("Todo (1 open, 1 done):\n[x] 1. draft the plan\n[ ] 3. ship it");
  });

  it("reports unknown ids and invalid ids", async () => {
    expect(await call("todo", '{"action": "done", "id": 9}')).toEqual({
      content: "No todo item matches #9; use list to see the ids.",
      isError: true,
    });
    const invalid = await call("todo", '{"action": "done", "id": 1.5}');
    expect(invalid.content).toContain("arguments.id: expected integer, got number 1.5");
  });
});
