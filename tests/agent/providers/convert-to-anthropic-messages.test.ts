import { describe, expect, it } from "vitest";
import type { ContentBlockParam, MessageParam } from "@anthropic-ai/sdk/resources/messages";
import type { ChatMessage } from "../../../src/agent/messages.ts";
import { assistant, call, result, user } from "./messages.ts";
import {
  LEADING_USER_TEXT,
  convertToAnthropicMessages,
  convertToAnthropicTools,
  toAnthropicToolUseId,
} from "../../../src/agent/providers/convert-to-anthropic-messages.ts";


const text = (value: string) => ({ type: "text", text: value });
const use = (id: string, input: unknown = { q: "x" }, name = "lookup") => ({ type: "tool_use", id, name, input });
const answer = (id: string, content?: string, isError?: boolean) => ({
  type: "tool_result",
  tool_use_id: id,
  ...(content !== undefined ? { content } : {}),
  ...(isError ? { is_error: true } : {}),
});

const cases: { name: string; messages: ChatMessage[]; expected: unknown[] }[] = [
  {
    name: "plain chat",
    messages: [user("hi"), assistant("hello"), user("how are you?")],
    expected: [
      { role: "user", content: [text("hi")] },
      { role: "assistant", content: [text("hello")] },
      { role: "user", content: [text("how are you?")] },
    ],
  },
  {
    name: "tool call with its result",
    messages: [user("look"), assistant("let me check", [call("toolu_1")]), result("toolu_1", "found"), assistant("done")],
    expected: [
      { role: "user", content: [text("look")] },
      { role: "assistant", content: [text("let me check"), use("toolu_1")] },
      { role: "user", content: [answer("toolu_1", "found")] },
      { role: "assistant", content: [text("done")] },
    ],
  },
  {
    name: "parallel tool calls: all results in one user message, in call order",
    messages: [user("both"), assistant(null, [call("toolu_a"), call("toolu_b")]), result("toolu_b", "B"), result("toolu_a", "A", true)],
    expected: [
      { role: "user", content: [text("both")] },
      { role: "assistant", content: [use("toolu_a"), use("toolu_b")] },
      { role: "user", content: [answer("toolu_a", "A", true), answer("toolu_b", "B")] },
    ],
  },
  {
    name: "tool-only assistant message has only tool_use blocks",
    messages: [user("go"), assistant(null, [call("toolu_1")]), result("toolu_1", "ok")],
    expected: [
      { role: "user", content: [text("go")] },
      { role: "assistant", content: [use("toolu_1")] },
      { role: "user", content: [answer("toolu_1", "ok")] },
    ],
  },
  {
    name: "invalid JSON arguments become {} and stay paired",
    messages: [user("go"), assistant(null, [call("toolu_1", "lookup", '{"q": '), call("toolu_2", "lookup", "[1]")]), result("toolu_1", "bad", true), result("toolu_2", "bad", true)],
    expected: [
      { role: "user", content: [text("go")] },
      { role: "assistant", content: [use("toolu_1", {}), use("toolu_2", {})] },
      { role: "user", content: [answer("toolu_1", "bad", true), answer("toolu_2", "bad", true)] },
    ],
  },
  {
    name: "an orphan call gets a synthetic error result, followed by the next user text",
    messages: [user("go"), assistant(null, [call("toolu_1"), call("toolu_2")]), result("toolu_1", "ok"), user("still there?")],
    expected: [
      { role: "user", content: [text("go")] },
      { role: "assistant", content: [use("toolu_1"), use("toolu_2")] },
      { role: "user", content: [answer("toolu_1", "ok"), answer("toolu_2", "result unavailable", true), text("still there?")] },
    ],
  },
  {
    name: "a stray result is dropped",
    messages: [user("go"), assistant("plain"), result("toolu_9", "nobody asked"), user("next")],
    expected: [
      { role: "user", content: [text("go")] },
      { role: "assistant", content: [text("plain")] },
      { role: "user", content: [text("next")] },
    ],
  },
  {
    name: "a duplicate result keeps the first",
    messages: [user("go"), assistant(null, [call("toolu_1")]), result("toolu_1", "first"), result("toolu_1", "second")],
    expected: [
      { role: "user", content: [text("go")] },
      { role: "assistant", content: [use("toolu_1")] },
      { role: "user", content: [answer("toolu_1", "first")] },
    ],
  },
  {
    name: "consecutive user messages are merged",
    messages: [user("one"), user("two"), assistant("three"), assistant("four")],
    expected: [
      { role: "user", content: [text("one"), text("two")] },
      { role: "assistant", content: [text("three"), text("four")] },
    ],
  },
  {
    name: "a history starting with an assistant message gets a user message first",
    messages: [assistant("summary so far"), user("go on")],
    expected: [
      { role: "user", content: [text(LEADING_USER_TEXT)] },
      { role: "assistant", content: [text("summary so far")] },
      { role: "user", content: [text("go on")] },
    ],
  },
  {
    name: "empty texts are left out (Anthropic rejects empty text blocks)",
    messages: [user("go"), assistant(""), user(""), user("again"), assistant(null, [call("toolu_1")]), result("toolu_1", "")],
    expected: [
      { role: "user", content: [text("go"), text("again")] },
      { role: "assistant", content: [use("toolu_1")] },
      { role: "user", content: [answer("toolu_1")] },
    ],
  },
];

describe("convertToAnthropicMessages", () => {
  it.each(cases)("$name", ({ messages, expected }) => {
    const converted = convertToAnthropicMessages("be brief", messages, { promptCaching: false });
    expect(converted.system).toBe("be brief");
    expect(converted.messages).toEqual(expected);
    expectWellFormed(converted.messages);
  });

  it("places cache breakpoints on the system prompt and the last two user messages", () => {
    const messages = [user("a"), assistant("b"), user("c"), assistant(null, [call("toolu_1")]), result("toolu_1", "d"), user("e")];
    const converted = convertToAnthropicMessages("be brief", messages, { promptCaching: true });
    expect(converted.system).toEqual([{ type: "text", text: "be brief", cache_control: { type: "ephemeral" } }]);
    const marked = converted.messages.map((message) => blocks(message).map((block) => "cache_control" in block && block.cache_control != null));
    expect(marked).toEqual([[false], [false], [true], [false], [false, true]]);
    const tools = convertToAnthropicTools(
      [
        { name: "lookup", description: "Look it up", parameters: { type: "object", properties: {} } },
        { name: "fetch", description: "Fetch it", parameters: { type: "object", properties: {} } },
      ],
      true,
    );
    const breakpoints =
      (Array.isArray(converted.system) ? converted.system.filter((block) => block.cache_control != null).length : 0) +
      tools.filter((tool) => tool.cache_control != null).length +
      marked.flat().filter(Boolean).length;
    expect(breakpoints).toBe(4);
  });

  it("uses at most one user breakpoint when there is one user message, and none without caching", () => {
    const cached = convertToAnthropicMessages("", [user("only")], { promptCaching: true });
    expect(cached.system).toBe("");
    expect(cached.messages).toEqual([{ role: "user", content: [{ ...text("only"), cache_control: { type: "ephemeral" } }] }]);
    const plain = convertToAnthropicMessages("sys", [user("a"), assistant("b"), user("c")], { promptCaching: false });
    expect(JSON.stringify(plain)).not.toContain("cache_control");
  });

  it("keeps OpenAI call ids verbatim when a conversation moves from OpenAI to Anthropic", () => {
    const fromOpenAI: ChatMessage[] = [
      user("weather in Paris and Rome?"),
      { ...assistant(null, [call("call_abc"), call("call_def")]), provider: "openai" },
      result("call_abc", "18C"),
      result("call_def", "24C"),
      { ...assistant("and tomorrow:", [call("call_ghi", "forecast")]), provider: "openai" },
    ];
    const converted = convertToAnthropicMessages("be brief", fromOpenAI, { promptCaching: true });
    expectWellFormed(converted.messages);
    const ids = converted.messages.flatMap((message) => blocks(message).flatMap((block) => (block.type === "tool_use" ? [block.id] : [])));
    expect(ids).toEqual(["call_abc", "call_def", "call_ghi"]);
  });

  it("maps ids Anthropic would reject the same way for the call and its result", () => {
    const odd = "call.1:x/y";
    const converted = convertToAnthropicMessages("", [user("go"), assistant(null, [call(odd), call("call_1_x_y")]), result(odd, "ok")], {
      promptCaching: false,
    });
    expectWellFormed(converted.messages);
    const mapped = toAnthropicToolUseId(odd);
    expect(mapped).toMatch(/^[a-zA-Z0-9_-]+$/);
    expect(mapped).toBe(toAnthropicToolUseId(odd));
    expect(mapped).not.toBe(toAnthropicToolUseId("call.1:x:y"));
    expect(converted.messages[2]).toEqual({
      role: "user",
      content: [answer(mapped, "ok"), answer("call_1_x_y", "result unavailable", true)],
    });
  });
});

describe("convertToAnthropicTools", () => {
  it("passes the schema as input_schema and marks only the last tool when caching", () => {
    const parameters = { type: "object", properties: { q: { type: "string" } } };
    const tools = [
      { name: "a", description: "A", parameters },
      { name: "b", description: "B", parameters },
    ];
    expect(convertToAnthropicTools(tools, false)).toEqual([
      { name: "a", description: "A", input_schema: parameters },
      { name: "b", description: "B", input_schema: parameters },
    ]);
    expect(convertToAnthropicTools(tools, true).map((tool) => tool.cache_control ?? null)).toEqual([null, { type: "ephemeral" }]);
  });
});

function blocks(message: MessageParam): ContentBlockParam[] {
  return typeof message.content === "string" ? [] : message.content;
}

/** The rules Anthropic enforces: alternation from a user message, every tool_use answered in the next message, nothing stray. */
function expectWellFormed(messages: MessageParam[]): void {
  expect(messages[0]?.role).toBe("user");
  messages.forEach((message, index) => {
    expect(message.role, `message ${index} alternates`).toBe(index % 2 === 0 ? "user" : "assistant");
    const content = blocks(message);
    expect(content.length).toBeGreaterThan(0);
    const results = content.filter((block) => block.type === "tool_result").map((block) => block.tool_use_id);
    const previousUses = index > 0 ? blocks(messages[index - 1] as MessageParam).filter((block) => block.type === "tool_use").map((block) => block.id) : [];
    expect(results, `results in message ${index} answer the previous tool_use blocks exactly once`).toEqual(previousUses);
    const firstOther = content.findIndex((block) => block.type !== "tool_result");
    if (firstOther >= 0) expect(content.slice(firstOther).some((block) => block.type === "tool_result")).toBe(false);
    for (const block of content) if (block.type === "tool_use") expect(block.id).toMatch(/^[a-zA-Z0-9_-]+$/);
  });
  const last = messages.at(-1);
  if (last?.role === "assistant") expect(blocks(last).some((block) => block.type === "tool_use")).toBe(false);
}
