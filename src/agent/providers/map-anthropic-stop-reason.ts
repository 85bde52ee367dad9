// Anthropic stop reasons into the normalized FinishReason.
import type { FinishReason } from "./types.ts";

export function mapAnthropicStopReason(stopReason: string | null | undefined): FinishReason {
  switch (stopReason) {
    case "end_turn":
    case "stop_sequence":
      return "stop";
    case "tool_use":
      return "tool_calls";
    case "max_tokens":
    // The model hit the context window while generating: the answer is cut like at max_tokens.
    case "model_context_window_exceeded":
      return "length";
    default:
      // refusal, pause_turn (a server tool paused; this gateway sends no server tools) and future values.
      return "other";
  }
}
