// Runs one batch of tool calls under the journal contract (design.md "Journal"):
// - sequential: each result is journaled before the next call is dispatched;
// - concurrent (every call parallel-safe with valid arguments): at most 8 run at once, and each result is
//   journaled exactly once, in call order, as soon as it and every earlier result are done.
import type { ChatMessage, ToolCall } from "./messages.ts";
import { executeTool, findTool, parseToolArguments, unknownToolOutput } from "./tools/registry.ts";
import type { Tool, ToolContext, ToolOutput } from "./tools/types.ts";

export const maxConcurrentTools = 8;

export interface ToolRunnerHooks {
  onStart?: (call: ToolCall) => void;
  onEnd?: (call: ToolCall, result: ChatMessage) => void;
  /** Journals one result; resolves once it is durable. */
  journal: (result: ChatMessage) => Promise<void>;
}

interface PreparedCall {
  call: ToolCall;
  tool: Tool | undefined;
  parsed: { ok: true; value: Record<string, unknown> } | { ok: false; error: string } | null;
}

function prepare(tools: readonly Tool[], call: ToolCall): PreparedCall {
  const tool = findTool(tools, call.name);
  return { call, tool, parsed: tool ? parseToolArguments(tool, call.arguments) : null };
}

async function execute(prepared: PreparedCall, context: ToolContext, timeoutMs: number): Promise<ChatMessage> {
  const { call, tool, parsed } = prepared;
  let output: ToolOutput & { effect?: "unknown" };
  if (!tool) output = unknownToolOutput(call.name);
  else if (parsed && !parsed.ok) output = { content: parsed.error, isError: true };
  else output = await executeTool(tool, parsed?.ok ? parsed.value : {}, context, timeoutMs);
  return {
    role: "tool",
    content: output.content,
    toolCallId: call.id,
    name: call.name,
    ...(output.isError ? { isError: true } : {}),
    ...(output.effect ? { effect: output.effect } : {}),
  };
}

export function runsConcurrently(prepared: readonly PreparedCall[]): boolean {
  return prepared.length > 1 && prepared.every(({ tool, parsed }) => tool?.parallelSafe === true && parsed?.ok === true);
}

export async function runToolBatch(calls: readonly ToolCall[], tools: readonly Tool[], context: ToolContext, timeoutMs: number, hooks: ToolRunnerHooks): Promise<ChatMessage[]> {
  const prepared = calls.map((call) => prepare(tools, call));
  const results: ChatMessage[] = [];
  if (!runsConcurrently(prepared)) {
    for (const item of prepared) {
      hooks.onStart?.(item.call);
      const result = await execute(item, context, timeoutMs);
      await hooks.journal(result);
      hooks.onEnd?.(item.call, result);
      results.push(result);
    }
    return results;
  }

  let next = 0;
  const settled: Promise<ChatMessage>[] = new Array(prepared.length);
  const slots: Promise<void>[] = [];
  const resolvers: ((message: ChatMessage) => void)[] = [];
  for (let index = 0; index < prepared.length; index++) {
    settled[index] = new Promise<ChatMessage>((resolve) => (resolvers[index] = resolve));
  }
  const worker = async () => {
    while (next < prepared.length) {
      const index = next++;
      const item = prepared[index]!;
      hooks.onStart?.(item.call);
      resolvers[index]!(await execute(item, context, timeoutMs));
    }
  };
  for (let slot = 0; slot < Math.min(maxConcurrentTools, prepared.length); slot++) slots.push(worker());
  for (let index = 0; index < prepared.length; index++) {
    const result = await settled[index]!;
    await hooks.journal(result);
    hooks.onEnd?.(prepared[index]!.call, result);
    results.push(result);
  }
  await Promise.all(slots);
  return results;
}
