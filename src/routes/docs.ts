// GET /openapi.json and GET /docs (api.md "Other"). Request bodies are converted from the very valibot schemas
// that validate the requests, so the document cannot drift from validation; responses are described with valibot
// too and converted the same way. No CDN: /docs is plain server-rendered HTML.
import { toJsonSchemaDefs } from "@valibot/to-json-schema";
import { Hono } from "hono";
import * as v from "valibot";
import { RuntimeInputSchema } from "../agent/runtime.ts";
import type { AppDependencies } from "../deps.ts";
import type { AppEnv } from "./auth.ts";
import { ChatCompletionRequestSchema } from "./openai-compat.ts";
import { CreateSessionSchema, PatchSessionSchema, PostMessageSchema } from "./schemas.ts";

const errorCodes = ["invalid_request", "unauthorized", "forbidden", "not_found", "conflict", "session_busy", "payload_too_large", "unsupported_media_type", "rate_limited", "provider_error", "not_configured", "internal"] as const;
const reasons = ["rate_limit", "billing", "auth", "overloaded", "server_error", "timeout", "transport", "context_overflow", "payload_too_large", "model_not_found", "format_error", "unknown"] as const;

const timestamp = v.pipe(v.string(), v.isoTimestamp());
const ErrorBody = v.object({ error: v.object({ code: v.picklist(errorCodes), message: v.string(), details: v.optional(v.unknown()) }) });
const Attempt = v.object({ provider: v.string(), model: v.string(), outcome: v.picklist(["ok", "error"]), reason: v.optional(v.picklist(reasons)), status: v.optional(v.number()) });
const Turn = v.object({
  id: v.string(),
  status: v.picklist(["running", "completed", "failed", "interrupted"]),
  provider: v.nullable(v.string()),
  model: v.nullable(v.string()),
  fallback_activated: v.boolean(),
  attempts: v.array(Attempt),
  usage: v.object({ input_tokens: v.number(), output_tokens: v.number() }),
  started_at: timestamp,
  ended_at: v.nullable(timestamp),
});
const Message = v.object({
  seq: v.number(),
  turn_id: v.nullable(v.string()),
  role: v.picklist(["user", "assistant", "tool"]),
  content: v.nullable(v.string()),
  tool_calls: v.optional(v.array(v.object({ id: v.string(), name: v.string(), arguments: v.string() }))),
  tool_call_id: v.optional(v.string()),
  name: v.optional(v.string()),
  is_error: v.optional(v.boolean()),
  effect: v.optional(v.literal("unknown")),
  provider: v.optional(v.string()),
  model: v.optional(v.string()),
  archived: v.optional(v.boolean()),
  created_at: timestamp,
});
const Session = v.object({
  id: v.string(),
  runtime: v.looseObject({ provider: v.string(), model: v.string(), api_key_set: v.boolean() }),
  system_prompt: v.string(),
  metadata: v.record(v.string(), v.unknown()),
  message_count: v.number(),
  created_at: timestamp,
  updated_at: timestamp,
  last_turn: v.nullable(Turn),
});
const TurnResult = v.object({ turn: v.nullable(Turn), reply: v.string(), messages: v.array(Message), command: v.optional(v.string()) });
const ChatCompletion = v.object({
  id: v.string(),
  object: v.literal("chat.completion"),
  created: v.number(),
  model: v.string(),
  choices: v.array(
    v.object({
      index: v.number(),
      message: v.object({ role: v.literal("assistant"), content: v.string(), refusal: v.null() }),
      logprobs: v.null(),
      finish_reason: v.literal("stop"),
    }),
  ),
  usage: v.object({ prompt_tokens: v.number(), completion_tokens: v.number(), total_tokens: v.number() }),
});

/** Every named schema of the document; nested ones are emitted as `$ref`s to each other. */
const definitions = {
  ErrorBody,
  RuntimeInput: RuntimeInputSchema,
  CreateSessionRequest: CreateSessionSchema,
  PatchSessionRequest: PatchSessionSchema,
  PostMessageRequest: PostMessageSchema,
  ChatCompletionRequest: ChatCompletionRequestSchema,
  Turn,
  Message,
  Session,
  TurnResult,
  SessionList: v.object({ sessions: v.array(Session), next_cursor: v.nullable(v.string()) }),
  MessageList: v.object({ messages: v.array(Message), next_after: v.nullable(v.number()) }),
  TurnList: v.object({ turns: v.array(Turn) }),
  ChatCompletion,
  ModelList: v.object({ object: v.literal("list"), data: v.array(v.object({ id: v.string(), object: v.literal("model"), created: v.number(), owned_by: v.string() })) }),
  Health: v.object({ status: v.picklist(["ok", "degraded"]), version: v.string(), runtime: v.picklist(["node", "bun", "deno", "workerd"]), db: v.picklist(["ok", "unreachable"]) }),
};
type SchemaName = keyof typeof definitions;

function componentSchemas(): Record<string, unknown> {
  // `check` actions (e.g. metadata's serialized-size limit) have no JSON Schema form; the server still enforces them.
  return toJsonSchemaDefs(definitions, { target: "draft-2020-12", typeMode: "input", ignoreActions: ["check"], overrideSchema: ({ valibotSchema }) => (valibotSchema.type === "custom" ? { type: "object" } : undefined), overrideRef: ({ referenceId }) => `#/components/schemas/${referenceId}` });
}

const statusText: Record<number, string> = {
  400: "Invalid request; `details.fields` names the offending fields",
  401: "Missing or invalid bearer key",
  404: "No such session (or it belongs to another tenant)",
  409: "`session_busy` while another turn of the session runs (with Retry-After), or `conflict`",
  413: "The body is larger than HERMES_MAX_BODY_BYTES",
  415: "The body is not application/json",
  502: "`provider_error`: every provider of the chain failed; `details.attempts` lists them",
  503: "`not_configured`: a feature this request needs is not set up",
};

const schemaRef = (name: SchemaName) => ({ $ref: `#/components/schemas/${name}` });
const jsonContent = (name: SchemaName) => ({ "application/json": { schema: schemaRef(name) } });
const errors = (...statuses: number[]) => Object.fromEntries(statuses.map((status) => [String(status), { $ref: `#/components/responses/Error${status}` }]));
const sessionIdParameter = { name: "id", in: "path", required: true, schema: { type: "string", pattern: "^[A-Za-z0-9:._-]{1,128}$" } };
const queryParameter = (name: string, schema: object, description: string) => ({ name, in: "query", required: false, schema, description });
const headerParameter = (name: string, description: string, required = false) => ({ name, in: "header", required, schema: { type: "string" }, description });
const idempotencyKey = headerParameter("Idempotency-Key", "Same key and body within 24 h returns the first result (header Idempotent-Replayed: true); a different body is 409 conflict, as is a repeat while the first runs.");

const turnEvents =
  "Server-Sent Events, `id:` a per-stream counter from 1: `turn-start` {turn_id, session_id, seq}, `text-delta` {text}, " +
  "`text-reset` {reason} (drop the text received since the last turn-start/tool-call-start/tool-call-end: that step was retried or failed over), " +
  "`tool-call-start` {id, name, arguments}, `tool-call-end` {id, name, is_error, seq}, `provider-fallback` {from, to, reason}, " +
  "then exactly one `turn-end` (data = the JSON 200 body) or `error` (data = an error body).";
const chunkEvents = "`data: {chat.completion.chunk}` lines: the role, content deltas, the finish chunk, a usage chunk when stream_options.include_usage, then `data: [DONE]`; a failure is a `data: {\"error\": ...}` line.";

function operation(tag: string, summary: string, spec: { request?: SchemaName; parameters?: object[]; responses: Record<string, unknown>; public?: boolean; description?: string }) {
  return {
    tags: [tag],
    summary,
    ...(spec.description ? { description: spec.description } : {}),
    ...(spec.parameters ? { parameters: spec.parameters } : {}),
    ...(spec.request ? { requestBody: { required: true, content: jsonContent(spec.request) } } : {}),
    responses: spec.responses,
    ...(spec.public ? { security: [] } : {}),
  };
}

const ok = (description: string, name: SchemaName) => ({ description, content: jsonContent(name) });
const webhookBody = (description: string) => ({ requestBody: { required: true, content: { "application/json": { schema: { type: "object", description } } } } });

export function buildOpenApiDocument(version: string) {
  const sessionPath = [sessionIdParameter];
  return {
    openapi: "3.1.0",
    info: {
      title: "hermes-edge",
      version,
      description: "AI-agent gateway: sessions, turns with per-turn provider failover, an OpenAI-compatible endpoint and chat-platform webhooks. Every response carries X-Request-Id.",
    },
    servers: [{ url: "/" }],
    security: [{ bearerAuth: [] }],
    tags: [{ name: "sessions" }, { name: "turns" }, { name: "openai" }, { name: "webhooks" }, { name: "service" }],
    paths: {
      "/health": { get: operation("service", "Service and database health", { public: true, responses: { 200: ok("Healthy", "Health"), 503: ok("The store cannot be reached", "Health") } }) },
      "/openapi.json": { get: operation("service", "This document", { public: true, responses: { 200: { description: "OpenAPI 3.1", content: { "application/json": { schema: { type: "object" } } } } } }) },
      "/docs": { get: operation("service", "Human-readable route list", { public: true, responses: { 200: { description: "HTML", content: { "text/html": { schema: { type: "string" } } } } } }) },
      "/v1/sessions": {
        post: operation("sessions", "Create a session", { request: "CreateSessionRequest", responses: { 201: ok("Created", "Session"), ...errors(400, 401, 409, 413, 415) } }),
        get: operation("sessions", "List sessions", {
          parameters: [queryParameter("limit", { type: "integer", minimum: 1, maximum: 200 }, "Page size (default 50)"), queryParameter("cursor", { type: "string" }, "next_cursor of the previous page")],
          responses: { 200: ok("A page of sessions", "SessionList"), ...errors(400, 401) },
        }),
      },
      "/v1/sessions/{id}": {
        get: operation("sessions", "Read a session", { parameters: sessionPath, responses: { 200: ok("The session", "Session"), ...errors(400, 401, 404) } }),
        patch: operation("sessions", "Change the runtime (merged) or the system prompt", { parameters: sessionPath, request: "PatchSessionRequest", responses: { 200: ok("Updated", "Session"), ...errors(400, 401, 404, 409, 413, 415) } }),
        delete: operation("sessions", "Delete a session and its journal", { parameters: sessionPath, responses: { 204: { description: "Deleted" }, ...errors(400, 401, 404) } }),
      },
      "/v1/sessions/{id}/reset": {
        post: operation("sessions", "Archive the conversation; the next turn starts fresh", { parameters: sessionPath, responses: { 200: ok("The session", "Session"), ...errors(400, 401, 404) } }),
      },
      "/v1/sessions/{id}/messages": {
        post: operation("turns", "Run one turn (or a /command)", {
          description: "Streams when `stream` is true or the request accepts text/event-stream.",
          parameters: [...sessionPath, idempotencyKey],
          request: "PostMessageRequest",
          responses: {
            200: { description: "The turn's result", content: { ...jsonContent("TurnResult"), "text/event-stream": { schema: { type: "string", description: turnEvents } } } },
            ...errors(400, 401, 404, 409, 413, 415, 502, 503),
          },
        }),
        get: operation("turns", "Read the journal", {
          parameters: [
            ...sessionPath,
            queryParameter("after", { type: "integer", minimum: 0 }, "Return messages with seq greater than this"),
            queryParameter("limit", { type: "integer", minimum: 1, maximum: 1000 }, "Page size (default 100)"),
            queryParameter("archived", { type: "boolean" }, "Include rows archived by /new, /reset, compaction or /undo"),
          ],
          responses: { 200: ok("A page of messages", "MessageList"), ...errors(400, 401, 404) },
        }),
      },
      "/v1/sessions/{id}/turns": {
        get: operation("turns", "List the session's turns", {
          parameters: [...sessionPath, queryParameter("limit", { type: "integer", minimum: 1, maximum: 500 }, "Page size (default 50)")],
          responses: { 200: ok("Turns, newest first", "TurnList"), ...errors(400, 401, 404) },
        }),
      },
      "/v1/chat/completions": {
        post: operation("openai", "OpenAI Chat Completions over a session", {
          description: "The last user message is the input; system messages are this call's ephemeral prompt. Without X-Session-Id a fresh session is created; its id comes back in X-Session-Id.",
          parameters: [headerParameter("X-Session-Id", "Run the turn in this session (created with the default runtime when missing)"), idempotencyKey],
          request: "ChatCompletionRequest",
          responses: {
            200: {
              description: "The completion",
              headers: { "X-Session-Id": { description: "The session the turn ran in", schema: { type: "string" } } },
              content: { ...jsonContent("ChatCompletion"), "text/event-stream": { schema: { type: "string", description: chunkEvents } } },
            },
            ...errors(400, 401, 409, 413, 415, 502, 503),
          },
        }),
      },
      "/v1/models": { get: operation("openai", "Models of the default runtime and its fallbacks", { responses: { 200: ok("OpenAI model list", "ModelList"), ...errors(401) } }) },
      "/webhooks/telegram": {
        post: {
          ...operation("webhooks", "Telegram updates", { public: true, parameters: [headerParameter("X-Telegram-Bot-Api-Secret-Token", "Must equal TELEGRAM_WEBHOOK_SECRET", true)], responses: { 200: { description: "Stored and acknowledged" }, ...errors(401, 503) } }),
          ...webhookBody("A Telegram Update"),
        },
      },
      "/webhooks/slack": {
        post: {
          ...operation("webhooks", "Slack Events API", {
            public: true,
            parameters: [headerParameter("X-Slack-Signature", "v0 HMAC-SHA256 over v0:{timestamp}:{body}", true), headerParameter("X-Slack-Request-Timestamp", "Refused when older than 5 minutes", true)],
            responses: { 200: { description: "Stored and acknowledged, or the url_verification challenge" }, ...errors(401, 503) },
          }),
          ...webhookBody("A Slack event callback or url_verification"),
        },
      },
      "/webhooks/discord": {
        post: {
          ...operation("webhooks", "Discord interactions", {
            public: true,
            parameters: [headerParameter("X-Signature-Ed25519", "Ed25519 over timestamp + body", true), headerParameter("X-Signature-Timestamp", "Signed with the body", true)],
            responses: { 200: { description: "PONG, or a deferred response (type 5)" }, ...errors(401, 503) },
          }),
          ...webhookBody("A Discord interaction"),
        },
      },
    },
    components: {
      securitySchemes: { bearerAuth: { type: "http", scheme: "bearer", description: "A key of HERMES_API_KEYS (tenant=key or a bare key)" } },
      schemas: componentSchemas(),
      responses: Object.fromEntries(Object.entries(statusText).map(([status, description]) => [`Error${status}`, { description, content: jsonContent("ErrorBody") }])),
    },
  };
}

export type OpenApiDocument = ReturnType<typeof buildOpenApiDocument>;

const escapeHtml = (text: string) => text.replace(/[&<>"']/g, (char) => `&#${char.charCodeAt(0)};`);

/** The route list of the document as one self-contained page (inline CSS, no script, no external asset). */
export function renderDocsPage(document: OpenApiDocument): string {
  const rows: string[] = [];
  for (const [path, methods] of Object.entries(document.paths)) {
    for (const [method, spec] of Object.entries(methods as Record<string, { summary: string; description?: string; security?: unknown[]; requestBody?: { content: Record<string, { schema: { $ref?: string } }> }; responses: Record<string, unknown> }>)) {
      const request = spec.requestBody?.content["application/json"]?.schema.$ref?.split("/").pop();
      rows.push(
        `<tr><td class="m ${method}">${method.toUpperCase()}</td><td><code>${escapeHtml(path)}</code></td><td>${escapeHtml(spec.summary)}${spec.description ? `<br><small>${escapeHtml(spec.description)}</small>` : ""}</td>` +
          `<td>${request ? `<code>${escapeHtml(request)}</code>` : ""}</td><td>${Object.keys(spec.responses).join(" ")}</td><td>${spec.security ? "none" : "bearer"}</td></tr>`,
      );
    }
  }
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(document.info.title)} API</title>
<style>body{font:15px/1.45 system-ui,sans-serif;margin:2rem auto;max-width:72rem;padding:0 1rem;color:#222}table{border-collapse:collapse;width:100%}
td,th{border-bottom:1px solid #ddd;padding:.4rem .5rem;text-align:left;vertical-align:top}.m{font-weight:700;font-family:monospace}
.get{color:#0a6}.post{color:#06c}.patch{color:#a60}.delete{color:#c22}small{color:#555}</style></head>
<body><h1>${escapeHtml(document.info.title)} ${escapeHtml(document.info.version)}</h1>
<p>${escapeHtml(document.info.description)} The machine-readable description is <a href="/openapi.json">/openapi.json</a> (OpenAPI ${document.openapi}).</p>
<table><thead><tr><th>Method</th><th>Path</th><th>What</th><th>Body</th><th>Statuses</th><th>Auth</th></tr></thead><tbody>
${rows.join("\n")}
</tbody></table></body></html>`;
}

export function docsRoutes(deps: AppDependencies) {
  const routes = new Hono<AppEnv>();
  // Built on first use: the conversion walks every schema once, and cold starts on Workers should not pay for it.
  let document: OpenApiDocument | null = null;
  const current = () => (document ??= buildOpenApiDocument(deps.version));
  routes.get("/openapi.json", (c) => c.json(current()));
  routes.get("/docs", (c) => c.html(renderDocsPage(current())));
  return routes;
}
