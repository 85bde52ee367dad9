import { describe, expect, it } from "vitest";
import type { ChatCompletionMessageParam } from "openai/resources/chat/completions";
import type { ChatMessage } from "../../../src/agent/messages.ts";
import { assistant, call, result, user } from "./messages.ts";
import { convertToOpenAIMessages, convertToOpenAITools } from "../../../src/agent/providers/convert-to-openai-messages.ts";


const fnCall = (id: string, args = '{"q":"x"}', name = "lookup") => ({ id, type: "function", function: { name, arguments: args } });

const cases: { name: string; messages: ChatMessage[]; expected: ChatCompletionMessageParam[] }[] = [
  {
    name: "plain chat",
    messages: [user("hi"), assistant("hello"), user("how are you?")],
    expected: [
      { role: "system", content: "be brief" },
      { role: "user", content: "hi" },
      { role: "assistant", content: "hello" },
      { role: "user", content: "how are you?" },
    ],
  },
  {
    name: "tool call with its result",
    messages: [user("look"), assistant("let me check", [call("call_1")]), result("call_1", "found"), assistant("done")],
    expected: [
      { role: "system", content: "be brief" },
      { role: "user", content: "look" },
      { role: "assistant", content: "let me check", tool_calls: [fnCall("call_1")] } as ChatCompletionMessageParam,
      { role: "tool", tool_call_id: "call_1", content: "found" },
      { role: "assistant", content: "done" },
    ],
  },
  {
    name: "parallel tool calls answered out of order come back in call order",
    messages: [user("both"), assistant(null, [call("call_a"), call("call_b")]), result("call_b", "B"), result("call_a", "A")],
    expected: [
      { role: "system", content: "be brief" },
      { role: "user", content: "both" },
      { role: "assistant", content: null, tool_calls: [fnCall("call_a"), fnCall("call_b")] } as ChatCompletionMessageParam,
      { role: "tool", tool_call_id: "call_a", content: "A" },
      { role: "tool", tool_call_id: "call_b", content: "B" },
    ],
  },
  {
    name: "tool-only assistant message has null content",
    messages: [user("go"), assistant(null, [call("call_1")]), result("call_1", "ok")],
    expected: [
      { role: "system", content: "be brief" },
      { role: "user", content: "go" },
      { role: "assistant", content: null, tool_calls: [fnCall("call_1")] } as ChatCompletionMessageParam,
      { role: "tool", tool_call_id: "call_1", content: "ok" },
    ],
  },
  {
    name: "invalid JSON arguments are replayed as {} and stay paired",
    messages: [user("go"), assistant(null, [call("call_1", "lookup", '{"q": ')]), result("call_1", "invalid arguments", true)],
    expected: [
      { role: "system", content: "be brief" },
      { role: "user", content: "go" },
      { role: "assistant", content: null, tool_calls: [fnCall("call_1", "{}")] } as ChatCompletionMessageParam,
      { role: "tool", tool_call_id: "call_1", content: "invalid arguments" },
    ],
  },
  {
    name: "an orphan call gets a synthetic result",
    messages: [user("go"), assistant(null, [call("call_1"), call("call_2")]), result("call_1", "ok"), user("still there?")],
    expected: [
      { role: "system", content: "be brief" },
      { role: "user", content: "go" },
      { role: "assistant", content: null, tool_calls: [fnCall("call_1"), fnCall("call_2")] } as ChatCompletionMessageParam,
      { role: "tool", tool_call_id: "call_1", content: "ok" },
      { role: "tool", tool_call_id: "call_2", content: "result unavailable" },
      { role: "user", content: "still there?" },
    ],
  },
  {
    name: "a stray result is dropped",
    messages: [result("call_0", "early"), user("go"), assistant("plain"), result("call_9", "nobody asked"), user("next")],
    expected: [
      { role: "system", content: "be brief" },
      { role: "user", content: "go" },
      { role: "assistant", content: "plain" },
      { role: "user", content: "next" },
    ],
  },
  {
    name: "a duplicate result keeps the first",
    messages: [user("go"), assistant(null, [call("call_1")]), result("call_1", "first"), result("call_1", "second")],
    expected: [
      { role: "system", content: "be brief" },
      { role: "user", content: "go" },
      { role: "assistant", content: null, tool_calls: [fnCall("call_1")] } as ChatCompletionMessageParam,
      { role: "tool", tool_call_id: "call_1", content: "first" },
    ],
  },
  {
    name: "consecutive user messages stay separate (OpenAI accepts them)",
    messages: [user("one"), user("two")],
    expected: [
      { role: "system", content: "be brief" },
      { role: "user", content: "one" },
      { role: "user", content: "two" },
    ],
  },
  {
    name: "a user message written while tools ran moves after the results",
    messages: [user("go"), assistant(null, [call("call_1")]), user("hurry"), result("call_1", "ok")],
    expected: [
      { role: "system", content: "be brief" },
      { role: "user", content: "go" },
      { role: "assistant", content: null, tool_calls: [fnCall("call_1")] } as ChatCompletionMessageParam,
      { role: "tool", tool_call_id: "call_1", content: "ok" },
      { role: "user", content: "hurry" },
    ],
  },
];

describe("convertToOpenAIMessages", () => {
  it.each(cases)("$name", ({ messages, expected }) => {
    const converted = convertToOpenAIMessages("be brief", messages);
    expect(converted).toEqual(expected);
    expectWellFormed(converted);
  });

  it("omits an empty system prompt", () => {
    expect(convertToOpenAIMessages("", [user("hi")])).toEqual([{ role: "user", content: "hi" }]);
  });

  it("keeps Anthropic ids verbatim when a conversation moves from Anthropic to OpenAI", () => {
    const fromAnthropic: ChatMessage[] = [
      user("weather in Paris and Rome?"),
      { ...assistant("checking", [call("toolu_01A09q90qw90lq917835lq9"), call("toolu_01Bx")]), provider: "anthropic" },
      result("toolu_01A09q90qw90lq917835lq9", "18C"),
      result("toolu_01Bx", "24C"),
      { ...assistant(null, [call("toolu_01Cz", "forecast")]), provider: "anthropic" },
    ];
    const converted = convertToOpenAIMessages("be brief", fromAnthropic);
    expectWellFormed(converted);
    const ids = converted.flatMap((message) => (message.role === "assistant" ? (message.tool_calls ?? []).map((c) => c.id) : []));
    expect(ids).toEqual(["toolu_01A09q90qw90lq917835lq9", "toolu_01Bx", "toolu_01Cz"]);
    expect(converted.at(-1)).toEqual({ role: "tool", tool_call_id: "toolu_01Cz", content: "result unavailable" });
  });
});

describe("convertToOpenAITools", () => {
  it("wraps each tool as a function tool", () => {
    const parameters = { type: "object", properties: { q: { type: "string" } }, required: ["q"] };
    expect(convertToOpenAITools([{ name: "lookup", description: "Look it up", parameters }])).toEqual([
      { type: "function", function: { name: "lookup", description: "Look it up", parameters } },
    ]);
  });
});

/** The rules OpenAI enforces: results right after their call, each call answered once, none stray. */
function expectWellFormed(messages: ChatCompletionMessageParam[]): void {
  let open = new Set<string>();
  for (const message of messages) {
    if (message.role === "tool") {
      expect(open.has(message.tool_call_id), `result ${message.tool_call_id} answers an open call`).toBe(true);
      open.delete(message.tool_call_id);
      continue;
    }
    expect([...open], "every call answered before the next message").toEqual([]);
    open = new Set(message.role === "assistant" ? (message.tool_calls ?? []).map((c) => c.id) : []);
  }
  expect([...open]).toEqual([]);
}
