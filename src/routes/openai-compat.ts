// OpenAI compatibility (api.md "OpenAI compatibility"): POST /v1/chat/completions runs one turn of a session,
// GET /v1/models lists the default runtime's models. Tools run inside the service; clients only see text.
import type { Context } from "hono";
import { Hono } from "hono";
import * as v from "valibot";
import { handleChatMessage, type ChatOutcome } from "../agent/commands.ts";
import { toStoredRuntime } from "../agent/runtime-secrets.ts";
import { randomId } from "../crypto.ts";
import type { AppDependencies } from "../deps.ts";
import { ConflictError, NotConfiguredError, ValidationError } from "../errors.ts";
import type { StoredResponse } from "../state/idempotency.ts";
import type { SessionView } from "../state/store.ts";
import type { AppEnv } from "./auth.ts";
import { readJsonBody, sessionIdPattern } from "./http.ts";
import { beginIdempotency, eventStreamResponse, jsonResult, LiveTurn, recordFinal, replayJson, type FinalResult, type StreamSink } from "./turns.ts";

const TextPartSchema = v.object({ type: v.literal("text"), text: v.string() });
const ChatMessageSchema = v.object({
  role: v.picklist(["system", "developer", "user", "assistant", "tool"]),
  // Only text: image and audio parts would be dropped silently by the text-only journal, so they are refused.
  content: v.nullish(v.union([v.string(), v.array(TextPartSchema)], "must be a string or an array of text parts")),
  name: v.optional(v.string()),
});
const noClientTools = v.pipe(
  v.unknown(),
  v.check((value) => value === null || (Array.isArray(value) && value.length === 0), "client-side tools are not supported: the service runs its own tools"),
);

/**
 * The Chat Completions request. Unknown fields are ignored; the sampling fields below are accepted and ignored
 * (the session's runtime decides), so stock clients work unchanged.
 */
export const ChatCompletionRequestSchema = v.object({
  model: v.pipe(v.string(), v.minLength(1, "must not be empty")),
  messages: v.pipe(v.array(ChatMessageSchema), v.minLength(1, "must not be empty")),
  stream: v.optional(v.nullable(v.boolean())),
  stream_options: v.optional(v.nullable(v.object({ include_usage: v.optional(v.boolean()) }))),
  n: v.optional(v.nullable(v.pipe(v.number(), v.value(1, "only 1 is supported")))),
  temperature: v.optional(v.nullable(v.number())),
  top_p: v.optional(v.nullable(v.number())),
  max_tokens: v.optional(v.nullable(v.number())),
  max_completion_tokens: v.optional(v.nullable(v.number())),
  presence_penalty: v.optional(v.nullable(v.number())),
  frequency_penalty: v.optional(v.nullable(v.number())),
  stop: v.optional(v.nullable(v.union([v.string(), v.array(v.string())]))),
  seed: v.optional(v.nullable(v.number())),
  user: v.optional(v.string()),
  metadata: v.optional(v.nullable(v.record(v.string(), v.string()))),
  tools: v.optional(noClientTools),
  functions: v.optional(noClientTools),
});
type ChatCompletionRequest = v.InferOutput<typeof ChatCompletionRequestSchema>;
type RequestMessage = ChatCompletionRequest["messages"][number];

function messageText(message: RequestMessage): string {
  if (typeof message.content === "string") return message.content;
  return (message.content ?? []).map((part) => part.text).join("");
}

/**
 * Splits the request: the last user message is the input; system/developer messages become this call's
 * ephemeral prompt. In a fresh session the earlier user/assistant messages are quoted in that prompt, so a
 * stateless client that resends its history keeps its context; with X-Session-Id the session's own journal is
 * the history and the client's copy is ignored.
 */
function splitRequest(body: ChatCompletionRequest, freshSession: boolean): { input: string; ephemeralSystem: string | undefined } {
  let lastUser = -1;
  body.messages.forEach((message, index) => (message.role === "user" ? (lastUser = index) : undefined));
  const last = body.messages[lastUser];
  if (!last) throw new ValidationError("Send at least one user message.", { fields: [{ field: "messages", message: "must contain a user message" }] });
  const input = messageText(last);
  if (input.trim() === "") throw new ValidationError("The last user message is empty.", { fields: [{ field: `messages.${lastUser}.content`, message: "must not be empty" }] });
  const system = body.messages.filter((message) => message.role === "system" || message.role === "developer").map(messageText).filter((text) => text.trim() !== "");
  if (freshSession) {
    const earlier = body.messages
      .slice(0, lastUser)
      .filter((message) => (message.role === "user" || message.role === "assistant") && messageText(message).trim() !== "")
      .map((message) => `${message.role}: ${messageText(message)}`);
    if (earlier.length > 0) system.push(`Earlier messages of this conversation, as the client sent them:\n${earlier.join("\n")}`);
  }
  return { input, ephemeralSystem: system.length > 0 ? system.join("\n\n") : undefined };
}

/** The session named by X-Session-Id (created with the default runtime when missing), or a fresh one. */
async function ensureSession(deps: AppDependencies, tenant: string, id: string | undefined): Promise<SessionView> {
  if (id) {
    const existing = await deps.store.getSession(tenant, id);
    if (existing) return existing;
  }
  const runtimeInput = deps.config.defaultRuntime;
  if (!runtimeInput) {
    throw new NotConfiguredError("This server has no default runtime (HERMES_RUNTIME): create a session with POST /v1/sessions and pass its id in X-Session-Id.");
  }
  const created = await deps.store.createSession({
    tenant,
    id: id ?? randomId("ses"),
    runtime: await toStoredRuntime(runtimeInput, deps.config.secretKey),
    systemPrompt: "",
    metadata: { created_by: "chat.completions" },
    now: new Date(deps.now()).toISOString(),
  });
  if (created) return created;
  // Another request with the same X-Session-Id created it a moment ago.
  const raced = id ? await deps.store.getSession(tenant, id) : null;
  if (!raced) throw new ConflictError("The session was created and deleted concurrently; retry.");
  return raced;
}

interface CompletionMeta {
  id: string;
  created: number;
  model: string;
}

function completionBody(outcome: ChatOutcome, meta: CompletionMeta) {
  const turn = outcome.kind === "turn" ? outcome.outcome.turn : null;
  const usage = turn?.usage ?? { inputTokens: 0, outputTokens: 0 };
  return {
    id: turn ? `chatcmpl-${turn.id}` : meta.id,
    object: "chat.completion" as const,
    created: meta.created,
    model: turn?.model ?? meta.model,
    choices: [
      {
        index: 0,
        message: { role: "assistant" as const, content: outcome.kind === "turn" ? outcome.outcome.reply : outcome.reply, refusal: null },
        logprobs: null,
        finish_reason: "stop" as const,
      },
    ],
    usage: { prompt_tokens: usage.inputTokens, completion_tokens: usage.outputTokens, total_tokens: usage.inputTokens + usage.outputTokens },
    system_fingerprint: null,
  };
}
type CompletionBody = ReturnType<typeof completionBody>;

const dataLine = (payload: unknown) => `data: ${JSON.stringify(payload)}\n\n`;

function chunkWriter(sink: StreamSink, meta: CompletionMeta) {
  return (delta: Record<string, unknown>, finishReason: "stop" | null = null) =>
    sink.send(dataLine({ id: meta.id, object: "chat.completion.chunk", created: meta.created, model: meta.model, system_fingerprint: null, choices: [{ index: 0, delta, logprobs: null, finish_reason: finishReason }] }));
}

/** The end of a chunk stream: the finish chunk, the usage chunk when asked for, then `[DONE]`. */
function finishChunks(sink: StreamSink, body: CompletionBody, includeUsage: boolean): void {
  const meta = { id: body.id, created: body.created, model: body.model };
  chunkWriter(sink, meta)({}, "stop");
  if (includeUsage) sink.send(dataLine({ id: meta.id, object: "chat.completion.chunk", created: meta.created, model: meta.model, system_fingerprint: null, choices: [], usage: body.usage }));
  sink.send("data: [DONE]\n\n");
}

/** A finished completion (a command's answer, a replay) as a complete chunk stream. */
function completionAsChunks(sink: StreamSink, body: CompletionBody, includeUsage: boolean): void {
  const chunk = chunkWriter(sink, { id: body.id, created: body.created, model: body.model });
  chunk({ role: "assistant", content: "" });
  const content = body.choices[0]?.message.content ?? "";
  if (content !== "") chunk({ content });
  finishChunks(sink, body, includeUsage);
}

/**
 * Streams a running turn as `chat.completion.chunk`s. Text of the model's steps before tool calls is streamed
 * too, separated from the next step's text by a blank line (the non-streaming `content` is the final step only).
 * The chunk protocol cannot take text back: when a step whose text was already sent is retried or failed over,
 * the stream ends with an error chunk instead of splicing two attempts into one answer. The turn itself goes
 * on and is journaled; a repeat with the same Idempotency-Key returns its completed answer.
 */
async function writeTurnChunks(sink: StreamSink, live: LiveTurn<unknown>, final: Promise<FinalResult>, meta: CompletionMeta, sessionId: string, includeUsage: boolean) {
  const chunk = chunkWriter(sink, meta);
  chunk({ role: "assistant", content: "" });
  let stepStreamedText = false;
  let anyText = false;
  let separate = false;
  for await (const event of live.events()) {
    if (!sink.open) return;
    if (event.type === "provider-fallback") meta.model = event.to.slice(event.to.indexOf(":") + 1);
    if (event.type === "text-delta") {
      chunk({ content: separate ? `\n\n${event.text}` : event.text });
      separate = false;
      stepStreamedText = anyText = true;
    } else if ((event.type === "step-discarded" || event.type === "provider-fallback") && stepStreamedText) {
      sink.send(
        dataLine({
          error: {
            code: "provider_error",
            message: `The provider's stream broke after part of the answer was sent. The turn goes on in session ${sessionId}: read its reply with GET /v1/sessions/${sessionId}/messages, or repeat this request with the same Idempotency-Key.`,
          },
        }),
      );
      return;
    } else if (event.type === "tool-call-start" || event.type === "tool-call-end") {
      stepStreamedText = false;
      separate = anyText;
    }
  }
  const result = await final;
  if (!sink.open) return;
  if (result.error) {
    // OpenAI clients raise an APIError for a `data:` line carrying `error`; no [DONE] follows a failure.
    sink.send(dataLine(result.body));
    return;
  }
  finishChunks(sink, result.body as CompletionBody, includeUsage);
}

function replayChunks(deps: AppDependencies, c: Context<AppEnv>, stored: StoredResponse, includeUsage: boolean): Response {
  for (const [name, value] of Object.entries(stored.headers)) c.header(name, value);
  c.header("Idempotent-Replayed", "true");
  const body = JSON.parse(stored.body) as CompletionBody;
  const ok = stored.status >= 200 && stored.status < 300;
  return eventStreamResponse(deps, c, async (sink) => (ok ? completionAsChunks(sink, body, includeUsage) : sink.send(dataLine(body))));
}

export function openaiCompatRoutes(deps: AppDependencies) {
  const routes = new Hono<AppEnv>();

  routes.post("/chat/completions", async (c) => {
    const body = await readJsonBody(c, ChatCompletionRequestSchema);
    const requestedSessionId = c.req.header("x-session-id");
    if (requestedSessionId !== undefined && !sessionIdPattern.test(requestedSessionId)) {
      throw new ValidationError("Invalid X-Session-Id header.", { fields: [{ field: "X-Session-Id", message: "must match ^[A-Za-z0-9:._-]{1,128}$" }] });
    }
    const { input, ephemeralSystem } = splitRequest(body, requestedSessionId === undefined);
    const streaming = body.stream === true;
    const includeUsage = body.stream_options?.include_usage === true;
    const idempotent = await beginIdempotency(deps, c, requestedSessionId ?? "");
    if (idempotent.kind === "replay") return streaming ? replayChunks(deps, c, idempotent.response, includeUsage) : replayJson(c, idempotent.response);

    const tenant = c.get("tenant");
    const meta: CompletionMeta = { id: `chatcmpl-${randomId("cmd")}`, created: Math.floor(deps.now() / 1000), model: body.model };
    const target: { sessionId: string | null } = { sessionId: null };
    const live = new LiveTurn(async (onEvent) => {
      const session = await ensureSession(deps, tenant, requestedSessionId);
      target.sessionId = session.id;
      // The session's runtime decides the model; a different `model` in the request is ignored (api.md).
      meta.model = session.runtime.model;
      return handleChatMessage(deps, {
        tenant,
        sessionId: session.id,
        content: input,
        stream: streaming,
        ephemeralSystem,
        onEvent: (event) => {
          if (event.type === "turn-start") meta.id = `chatcmpl-${event.turnId}`;
          onEvent(event);
        },
      });
    });
    const sessionHeader = (): Record<string, string> => (target.sessionId ? { "X-Session-Id": target.sessionId } : {});
    const recorded = recordFinal(deps, c, live, idempotent, (outcome) => completionBody(outcome, meta), sessionHeader);

    if (!streaming) return jsonResult(c, await recorded);
    await live.begun();
    if (!live.started) {
      const result = await recorded;
      if (result.error) return jsonResult(c, result);
      for (const [name, value] of Object.entries(result.headers)) c.header(name, value);
      return eventStreamResponse(deps, c, async (sink) => completionAsChunks(sink, result.body as CompletionBody, includeUsage));
    }
    const sessionId = target.sessionId ?? "";
    c.header("X-Session-Id", sessionId);
    return eventStreamResponse(deps, c, (sink) => writeTurnChunks(sink, live, recorded, meta, sessionId, includeUsage));
  });

  routes.get("/models", (c) => {
    const runtime = deps.config.defaultRuntime;
    const entries = runtime ? [runtime, ...(runtime.fallback ?? [])] : [];
    const seen = new Set<string>();
    // No creation date is known for a configured model; 0 keeps the field numeric as clients expect.
    const data = entries
      .filter((entry) => (seen.has(entry.model) ? false : (seen.add(entry.model), true)))
      .map((entry) => ({ id: entry.model, object: "model" as const, created: 0, owned_by: entry.provider }));
    return c.json({ object: "list" as const, data });
  });

  return routes;
}
