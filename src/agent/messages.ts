// The one normalized message format. The journal stores it; `convert-to-*` functions turn it into each
// provider's wire format, so a conversation can change provider mid-turn and stay well formed for both.

export type Role = "user" | "assistant" | "tool";

export interface ToolCall {
  /** Provider-issued id (OpenAI `call_…`, Anthropic `toolu_…`); kept verbatim so results pair up on any provider. */
  id: string;
  name: string;
  /** Arguments as the model sent them: a JSON string, possibly invalid. */
  arguments: string;
}

/** A message as the turn engine sees it (before or after it is journaled). */
export interface ChatMessage {
  role: Role;
  /** Text; null for an assistant message that only calls tools. */
  content: string | null;
  /** Assistant only. */
  toolCalls?: ToolCall[];
  /** Tool only: the call this result answers. */
  toolCallId?: string;
  /** Tool only: the tool's name. */
  name?: string;
  /** Tool only: true when the result reports a failure (invalid arguments, tool error, timeout). */
  isError?: boolean;
  /** Tool only: "unknown" when the service wrote the result itself because the outcome was lost. */
  effect?: "unknown";
  /**
   * A compaction summary (stored as a user-role row): it stands for archived rows and is sent to the model
   * right after the conversation's head, whatever its seq.
   */
  summary?: true;
  /** Assistant only: who produced it. */
  provider?: string;
  model?: string;
}

/** A journaled message: a ChatMessage with its place in the session. */
export interface JournalMessage extends ChatMessage {
  /** Grows by one per message within a session. */
  seq: number;
  turnId: string | null;
  createdAt: string;
  archived: boolean;
}

export interface Usage {
  inputTokens: number;
  outputTokens: number;
}
