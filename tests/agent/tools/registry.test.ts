import { describe, expect, it } from "vitest";
import {
  builtinTools,
  executeTool,
  findTool,
  parseToolArguments,
  selectTools,
  toolSpecs,
  unknownToolOutput,
} from "../../../src/agent/tools/registry.ts";
import { validateJson, type JsonSchema } from "../../../src/agent/tools/json-schema.ts";
import type { Tool, ToolContext } from "../../../src/agent/tools/types.ts";
import type { NotesStore } from "../../../src/state/notes.ts";

const webFetch = findTool(builtinTools, "web_fetch")!;
const memory = findTool(builtinTools, "memory")!;
const todo = findTool(builtinTools, "todo")!;

function context(signal = new AbortController().signal): ToolContext {
  return {
    sessionPk: 1,
    notes: {} as NotesStore, // these tools never touch the store
    fetch: () => Promise.reject(new Error("no network in this test")),
    allowPrivateFetch: false,
    signal,
  };
}

function fakeTool(execute: Tool["execute"], timeoutMs?: number): Tool {
  return {
    name: "fake",
    toolset: "fake",
    description: "test tool",
    parameters: { type: "object", properties: {}, additionalProperties: false },
    parallelSafe: true,
    ...(timeoutMs === undefined ? {} : { timeoutMs }),
    execute,
  };
}

describe("selection", () => {
  it("gives all four tools without toolsets, and only the named toolsets otherwise", () => {
    expect(selectTools(undefined).map((tool) => tool.name)).toEqual(["web_fetch", "memory", "session_search", "todo"]);
    expect(selectTools(["todo", "web"]).map((tool) => tool.name)).toEqual(["web_fetch", "todo"]);
    expect(selectTools([])).toEqual([]);
    expect(selectTools(["nope"])).toEqual([]);
  });

  it("exposes specs and parallel safety as documented", () => {
    const specs = toolSpecs(builtinTools);
    expect(specs.map((spec) => Object.keys(spec).sort())).toEqual(Array(4).fill(["description", "name", "parameters"]));
    expect(Object.fromEntries(builtinTools.map((tool) => [tool.name, [tool.toolset, tool.parallelSafe]]))).toEqual({
      web_fetch: ["web", true],
      memory: ["memory", false],
      session_search: ["session", true],
      todo: ["todo", false],
    });
  });

  it("has no tool for an invented name and says so", () => {
    expect(findTool(builtinTools, "rm_rf")).toBeUndefined();
    expect(unknownToolOutput("rm_rf")).toEqual({
      content: 'Unknown tool "rm_rf"; use only the tools listed for this conversation.',
      isError: true,
    });
  });
});

describe("argument validation", () => {
  it.each([
    ["invalid JSON", webFetch, '{"url": ', "web_fetch: not valid JSON"],
    ["a JSON array", webFetch, '["https://example.com"]', "arguments: expected object, got array"],
    ["a JSON string", webFetch, '"https://example.com"', "arguments: expected object, got string"],
    ["null", webFetch, "null", "arguments: expected object, got null"],
    ["a wrong type", webFetch, '{"url": 42}', "arguments.url: expected string, got number 42"],
    ["a float for an integer", webFetch, '{"url": "https://a.example", "max_chars": 10.5}', "arguments.max_chars: expected integer, got number 10.5"],
    ["a missing required field", webFetch, '{"max_chars": 10}', "arguments.url: required field is missing"],
    ["an unknown field", webFetch, '{"url": "https://a.example", "method": "POST"}', "arguments.method: unknown field (allowed: url, max_chars)"],
    ["a number above the maximum", webFetch, '{"url": "https://a.example", "max_chars": 100001}', "arguments.max_chars: expected a number <= 100000, got 100001"],
    ["a number below the minimum", webFetch, '{"url": "https://a.example", "max_chars": 0}', "arguments.max_chars: expected a number >= 1, got 0"],
    ["an empty string", webFetch, '{"url": ""}', "arguments.url: expected at least 1 character(s), got 0"],
    ["a huge string", memory, JSON.stringify({ action: "add", content: "é".repeat(50_000) }), "arguments.content: expected at most 2000 characters, got 50000"],
    ["a value outside the enum", memory, '{"action": "delete"}', 'arguments.action: expected one of "add", "replace", "remove", "list", got "delete"'],
    ["a boolean for a string", todo, '{"action": "add", "item": true}', "arguments.item: expected string, got boolean"],
  ])("names the field for %s", (_case, tool, raw, expected) => {
    const result = parseToolArguments(tool, raw);
    expect(result.ok).toBe(false);
    expect(result.ok ? "" : result.error).toContain(expected);
    expect(result.ok ? "" : result.error).toMatch(new RegExp(`^Invalid arguments for ${tool.name}: `, "u"));
  });

  it("lists several problems at once", () => {
    const result = parseToolArguments(webFetch, '{"max_chars": "ten", "extra": 1}');
    expect(result).toEqual({
      ok: false,
      error:
        "Invalid arguments for web_fetch: arguments.url: required field is missing; arguments.max_chars: expected " +
        "integer, got string; arguments.extra: unknown field (allowed: url, max_chars).",
    });
  });

  it("validates array items and counts code points", () => {
    const schema: JsonSchema = { type: "array", items: { type: "string", maxLength: 2 } };
    expect(validateJson(["ok", 3, "😀😀", "abc"], schema)).toEqual([
      "arguments[1]: expected string, got number 3",
      "arguments[3]: expected at most 2 characters, got 3",
    ]);
  });

  it("accepts valid arguments and treats an empty string as no arguments", () => {
    expect(parseToolArguments(webFetch, '{"url": "https://example.com", "max_chars": 500}')).toEqual({
      ok: true,
      value: { url: "https://example.com", max_chars: 500 },
    });
    expect(parseToolArguments(fakeTool(async () => ({ content: "" })), "")).toEqual({ ok: true, value: {} });
  });
});

describe("executeTool", () => {
  it("times out, aborts the tool's signal and reports an unknown effect", async () => {
    let seenSignal: AbortSignal | undefined;
    const hanging = fakeTool(
      (_args, toolContext) =>
        new Promise(() => {
          seenSignal = toolContext.signal; // never settles, as a tool that ignores its signal
        }),
      30,
    );
    const started = Date.now();
    const result = await executeTool(hanging, {}, context(), 10_000);
    expect(Date.now() - started).toBeLessThan(2_000);
    expect(result).toEqual({
      content: "Tool timed out after 30 ms; its outcome is unknown and must not be assumed.",
      isError: true,
      effect: "unknown",
    });
    expect(seenSignal?.aborted).toBe(true);
  });

  it("uses the default timeout when the tool has none", async () => {
    const slow = fakeTool(() => new Promise((resolve) => setTimeout(() => resolve({ content: "late" }), 500)));
    expect(await executeTool(slow, {}, context(), 20)).toMatchObject({ effect: "unknown", content: expect.stringContaining("20 ms") });
  });

  it("stops with the turn and reports an unknown effect", async () => {
    const turn = new AbortController();
    let seenSignal: AbortSignal | undefined;
    const hanging = fakeTool((_args, toolContext) => {
      seenSignal = toolContext.signal;
      return new Promise(() => {});
    });
    setTimeout(() => turn.abort(), 10);
    const result = await executeTool(hanging, {}, context(turn.signal), 10_000);
    expect(result).toMatchObject({ isError: true, effect: "unknown", content: expect.stringContaining("stopped") });
    expect(seenSignal?.aborted).toBe(true);
  });

  it("turns a thrown error into a readable result without a stack", async () => {
    const failing = fakeTool(async () => {
      throw new Error("disk is full");
    });
    expect(await executeTool(failing, {}, context(), 1_000)).toEqual({ content: "Error: disk is full", isError: true });

    const throwsSynchronously = fakeTool(() => {
      throw new TypeError("bad input");
    });
    const result = await executeTool(throwsSynchronously, {}, context(), 1_000);
    expect(result).toEqual({ content: "Error: bad input", isError: true });
    expect(result.content).not.toMatch(/\bat .*\.ts:\d+/u);

    const throwsString = fakeTool(async () => Promise.reject("plain text"));
    expect(await executeTool(throwsString, {}, context(), 1_000)).toEqual({ content: "Error: plain text", isError: true });
  });

  it("passes a successful result through unchanged", async () => {
    const fine = fakeTool(async (args) => ({ content: `got ${JSON.stringify(args)}` }));
    expect(await executeTool(fine, { a: 1 }, context(), 1_000)).toEqual({ content: 'got {"a":1}' });
  });
});

describe("store errors inside a tool", () => {
  it("never quote the driver's message (it can carry SQL) in the result", async () => {
    const failing: Tool = {
      name: "store_user",
      toolset: "test",
      description: "fails like the database",
      parameters: { type: "object", properties: {} },
      parallelSafe: true,
      async execute() {
        const error = new Error("SQLITE_BUSY: database is locked: INSERT INTO session_notes (session_pk, kind) VALUES (?, ?)");
        error.name = "LibsqlError";
        (error as Error & { code: string }).code = "SQLITE_BUSY";
        throw error;
      },
    };
    const output = await executeTool(failing, {}, { sessionPk: 1, notes: {} as never, fetch, allowPrivateFetch: false, signal: new AbortController().signal }, 1000);
    expect(output.isError).toBe(true);
    expect(output.content).toBe("Error: the session store is busy or unavailable; try again later");
    expect(output.content).not.toContain("INSERT");
  });
});
