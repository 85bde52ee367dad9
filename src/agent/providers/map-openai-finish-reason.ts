// OpenAI-compatible servers send more values than the SDK types list (vLLM "abort", some proxies
// "eos", "end_turn"), so anything unknown maps to "other" instead of failing the turn.
import type { FinishReason } from "./types.ts";

export function mapOpenAIFinishReason(finishReason: string | null | undefined): FinishReason {
  switch (finishReason) {
    case "stop":
    case "eos":
    case "end_turn":
      return "stop";
    case "tool_calls":
    case "function_call":
      return "tool_calls";
    case "length":
      return "length";
    default:
      // content_filter and anything a compatible server invents.
      return "other";
  }
}
