// Records -> the JSON shapes of api.md.
import type { JournalMessage } from "../agent/messages.ts";
import { publicRuntime } from "../agent/runtime.ts";
import type { SessionView, TurnRecord } from "../state/store.ts";

export function turnJson(turn: TurnRecord) {
  return {
    id: turn.id,
    status: turn.status,
    provider: turn.provider,
    model: turn.model,
    fallback_activated: turn.fallbackActivated,
    attempts: turn.attempts,
    usage: { input_tokens: turn.usage.inputTokens, output_tokens: turn.usage.outputTokens },
    started_at: turn.startedAt,
    ended_at: turn.endedAt,
  };
}

export function sessionJson(session: SessionView) {
  return {
    id: session.id,
    runtime: publicRuntime(session.runtime),
    system_prompt: session.systemPrompt,
    metadata: session.metadata,
    message_count: session.messageCount,
    created_at: session.createdAt,
    updated_at: session.updatedAt,
    last_turn: session.lastTurn ? turnJson(session.lastTurn) : null,
  };
}

export function messageJson(message: JournalMessage) {
  return {
    seq: message.seq,
    turn_id: message.turnId,
    role: message.role,
    content: message.content,
    ...(message.toolCalls ? { tool_calls: message.toolCalls } : {}),
    ...(message.toolCallId !== undefined ? { tool_call_id: message.toolCallId } : {}),
    ...(message.name !== undefined ? { name: message.name } : {}),
    ...(message.isError ? { is_error: true } : {}),
    ...(message.effect ? { effect: message.effect } : {}),
    ...(message.provider !== undefined ? { provider: message.provider } : {}),
    ...(message.model !== undefined ? { model: message.model } : {}),
    ...(message.summary ? { summary: true } : {}),
    ...(message.archived ? { archived: true } : {}),
    created_at: message.createdAt,
  };
}
