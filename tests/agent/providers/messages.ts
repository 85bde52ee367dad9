// Builders for normalized messages, shared by the converter table tests.
import type { ChatMessage, ToolCall } from "../../../src/agent/messages.ts";

export const user = (content: string): ChatMessage => ({ role: "user", content });
export const assistant = (content: string | null, toolCalls?: ToolCall[]): ChatMessage => ({
  role: "assistant",
  content,
  ...(toolCalls ? { toolCalls } : {}),
});
export const call = (id: string, name = "lookup", args = '{"q":"x"}'): ToolCall => ({ id, name, arguments: args });
export const result = (toolCallId: string, content: string, isError?: boolean): ChatMessage => ({
  role: "tool",
  content,
  toolCallId,
  name: "lookup",
  ...(isError ? { isError } : {}),
});
