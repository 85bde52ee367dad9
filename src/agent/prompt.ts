// The system prompt a provider receives is assembled once per conversation and stored, so it stays
// byte-identical across the conversation's turns (providers bill an uncached prefix several times over).
// Memory written during a conversation reaches the next conversation's prompt, never the current one.

export const defaultSystemPrompt = "You are a helpful assistant. Use the tools you are given when they help; say so plainly when a tool's outcome is unknown.";

export function assembleSystemPrompt(systemPrompt: string, memory: readonly string[]): string {
  const base = systemPrompt.trim() === "" ? defaultSystemPrompt : systemPrompt;
  if (memory.length === 0) return base;
  return `${base}\n\n## Memory (notes saved in earlier conversations)\n${memory.map((note) => `- ${note}`).join("\n")}`;
}

export const orphanResultText =
  "The outcome of this tool call is unknown: the service stopped while it ran. Do not assume it succeeded or failed, and do not repeat it without asking.";

export function budgetExhaustedText(maxIterations: number): string {
  return `I stopped after ${maxIterations} steps, the most this session allows for one message, before reaching a final answer. Send another message to let me continue.`;
}

export const stoppedToolText = "Not run: the user stopped the turn before this tool started.";
export const stoppedReplyText = "Stopped.";
