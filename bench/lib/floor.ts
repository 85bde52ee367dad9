/// <reference types="node" />
// The floor: the provider calls a turn makes, made directly with the official `openai` SDK (maxRetries 0)
// from the driver against the same fake, with the same system prompt, tool schemas and messages, and no
// persistence. Turn latency minus this is what the gateway adds (HTTP hop, journal, tools, rebuild).
import OpenAI from "openai";
import type { ChatCompletionMessageParam } from "openai/resources/chat/completions";
import { assembleSystemPrompt } from "../../src/agent/prompt.ts";
import { convertToOpenAITools } from "../../src/agent/providers/convert-to-openai-messages.ts";
import { selectTools, toolSpecs } from "../../src/agent/tools/registry.ts";
import { model, providerKey, toolsets } from "./setup.ts";

export type FloorTurn = (content: string, history?: ChatCompletionMessageParam[]) => Promise<{ ms: number; calls: number }>;

export function createFloor(fakeUrl: string): FloorTurn {
  const client = new OpenAI({ apiKey: providerKey, baseURL: fakeUrl, maxRetries: 0, organization: null, project: null });
  const tools = convertToOpenAITools(toolSpecs(selectTools(toolsets)));
  const system = assembleSystemPrompt("", []);
  return async (content, history = []) => {
    const messages: ChatCompletionMessageParam[] = [{ role: "system", content: system }, ...history, { role: "user", content }];
    const started = performance.now();
    let calls = 0;
    for (let step = 0; step < 25; step++) {
      const completion = await client.chat.completions.create({ model, messages, tools, max_tokens: 4096 });
      calls += 1;
      const message = completion.choices[0]?.message;
      if (!message?.tool_calls?.length) break;
      messages.push({ role: "assistant", content: message.content, tool_calls: message.tool_calls });
      for (const call of message.tool_calls) messages.push({ role: "tool", tool_call_id: call.id, content: "Added: [ ] 1. benchmark item" });
    }
    return { ms: performance.now() - started, calls };
  };
}
