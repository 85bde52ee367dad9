// The narrow provider port: one call, one normalized answer. Adapters sit over the official SDKs.
import type { ChatMessage, ToolCall, Usage } from "../messages.ts";

export type ApiMode = "chat_completions" | "anthropic_messages";

export interface ToolSpec {
  name: string;
  description: string;
  /** JSON Schema (draft 2020-12 subset) of the arguments object. */
  parameters: Record<string, unknown>;
}

export interface ProviderSettings {
  provider: string;
  model: string;
  baseUrl: string;
  apiMode: ApiMode;
  /** The resolved secret; never logged. */
  apiKey: string;
  timeoutMs: number;
  maxTokens: number;
  promptCaching: boolean;
  /** Injected so tests, Workers and every runtime share one network path. */
  fetch: typeof fetch;
}

export interface GenerateRequest {
  /** The frozen system prompt of the conversation, byte-identical across its turns. */
  system: string;
  messages: ChatMessage[];
  tools: ToolSpec[];
  reasoning?: { effort: "low" | "medium" | "high" };
  /** When present the call is streamed and each text fragment is passed here as it arrives. */
  onTextDelta?: (text: string) => void;
  signal?: AbortSignal;
}

export type FinishReason = "stop" | "tool_calls" | "length" | "other";

export interface GenerateResult {
  content: string | null;
  toolCalls: ToolCall[];
  usage: Usage;
  finishReason: FinishReason;
}

export interface Provider {
  readonly settings: ProviderSettings;
  /** One model call. Throws the SDK's error (classify it with classifyProviderError); SDK retries are off. */
  generate(request: GenerateRequest): Promise<GenerateResult>;
}
