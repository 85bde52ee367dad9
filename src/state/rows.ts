// Row <-> record mapping. Stored JSON is parsed and validated on the way out: a corrupted row is an error
// with a clear message, never trusted.
import type { Row } from "@libsql/client";
import * as v from "valibot";
import type { JournalMessage, ToolCall } from "../agent/messages.ts";
import { StoredRuntimeSchema } from "../agent/runtime.ts";
import type { ProviderAttempt } from "../errors.ts";
import type { SessionRecord, TurnRecord, TurnStatus } from "./store.ts";

const ToolCallsSchema = v.array(v.object({ id: v.string(), name: v.string(), arguments: v.string() }));
const AttemptsSchema = v.array(
  v.object({
    provider: v.string(),
    model: v.string(),
    outcome: v.picklist(["ok", "error"]),
    reason: v.optional(v.string()),
    status: v.optional(v.number()),
  }),
);
const MetadataSchema = v.pipe(
  v.record(v.string(), v.unknown()),
  v.rawCheck(({ dataset, addIssue }) => {
    if (dataset.typed && Array.isArray(dataset.value)) addIssue({ message: "must be a JSON object" });
  }),
);

export class CorruptRowError extends Error {
  constructor(what: string) {
    super(`stored ${what} failed validation`);
    this.name = new.target.name;
  }
}

function parseStored<const TSchema extends v.GenericSchema>(schema: TSchema, text: string, what: string): v.InferOutput<TSchema> {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    throw new CorruptRowError(what);
  }
  const result = v.safeParse(schema, json);
  if (!result.success) throw new CorruptRowError(what);
  return result.output;
}

const text = (value: unknown): string => String(value);
const nullableText = (value: unknown): string | null => (value === null || value === undefined ? null : String(value));

export function toSessionRecord(row: Row): SessionRecord {
  const reasoning = nullableText(row.reasoning);
  return {
    pk: Number(row.pk),
    tenant: text(row.tenant),
    id: text(row.id),
    runtime: parseStored(StoredRuntimeSchema, text(row.runtime), "runtime"),
    systemPrompt: text(row.system_prompt),
    metadata: parseStored(MetadataSchema, text(row.metadata), "metadata"),
    version: Number(row.version),
    conversationPrompt: nullableText(row.conversation_prompt),
    reasoning: reasoning === "low" || reasoning === "medium" || reasoning === "high" ? reasoning : null,
    createdAt: text(row.created_at),
    updatedAt: text(row.updated_at),
  };
}

export function toJournalMessage(row: Row): JournalMessage {
  const role = text(row.role);
  if (role !== "user" && role !== "assistant" && role !== "tool") throw new CorruptRowError("message role");
  const message: JournalMessage = {
    seq: Number(row.seq),
    turnId: nullableText(row.turn_id),
    role,
    content: nullableText(row.content),
    createdAt: text(row.created_at),
    archived: Number(row.archived) === 1,
  };
  if (row.tool_calls !== null && row.tool_calls !== undefined) {
    message.toolCalls = parseStored(ToolCallsSchema, text(row.tool_calls), "tool calls") as ToolCall[];
  }
  if (row.tool_call_id !== null && row.tool_call_id !== undefined) message.toolCallId = text(row.tool_call_id);
  if (row.name !== null && row.name !== undefined) message.name = text(row.name);
  if (Number(row.is_error) === 1) message.isError = true;
  if (row.effect === "unknown") message.effect = "unknown";
  if (row.kind === "summary") message.summary = true;
  if (row.provider !== null && row.provider !== undefined) message.provider = text(row.provider);
  if (row.model !== null && row.model !== undefined) message.model = text(row.model);
  return message;
}

export function toTurnRecord(row: Row): TurnRecord {
  return {
    id: text(row.id),
    status: text(row.status) as TurnStatus,
    provider: nullableText(row.provider),
    model: nullableText(row.model),
    fallbackActivated: Number(row.fallback_activated) === 1,
    attempts: parseStored(AttemptsSchema, text(row.attempts), "turn attempts") as ProviderAttempt[],
    usage: { inputTokens: Number(row.input_tokens), outputTokens: Number(row.output_tokens) },
    startedAt: text(row.started_at),
    endedAt: nullableText(row.ended_at),
  };
}
