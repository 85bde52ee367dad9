/// <reference types="node" />
// Anthropic Messages dialect of the fake provider: event sequence and error bodies follow the
// real API so the official SDK's MessageStream and our adapters behave as in production.
import type { ServerResponse } from "node:http";
import {
  Refusal,
  estimateTokens,
  outputTokens,
  randomId,
  splitPieces,
  startFakeServer,
} from "./fake-server.ts";
import type { AnswerStep, Dialect, FakeProvider, FakeProviderOptions, Output, RecordedRequest } from "./fake-server.ts";

function errorType(status: number): string {
  switch (status) {
    case 400:
      return "invalid_request_error";
    case 401:
      return "authentication_error";
    case 403:
      return "permission_error";
    case 404:
      return "not_found_error";
    case 413:
      return "request_too_large";
    case 429:
      return "rate_limit_error";
    case 529:
      return "overloaded_error";
    default:
      return status >= 500 ? "api_error" : "invalid_request_error";
  }
}

const DEFAULT_MESSAGES: Record<string, string> = {
  invalid_request_error: "Invalid request.",
  authentication_error: "invalid x-api-key",
  permission_error: "Your API key does not have permission to use the specified resource.",
  not_found_error: "The requested resource could not be found.",
  request_too_large: "Request exceeds the maximum allowed number of bytes.",
  rate_limit_error: "Number of request tokens has exceeded your per-minute rate limit.",
  api_error: "Internal server error",
  overloaded_error: "Overloaded",
};

function errorBody(type: string, message = DEFAULT_MESSAGES[type] ?? "Error") {
  return { type: "error", error: { type, message }, request_id: randomId("req_011", 21) };
}

function invalid(message: string): Refusal {
  return new Refusal(400, message, errorBody("invalid_request_error", message));
}

const TOOL_NAME = /^[a-zA-Z0-9_-]{1,64}$/;

function blocksOf(content: unknown): any[] {
  return Array.isArray(content) ? content : [];
}

function countCacheControl(body: any): number {
  let count = 0;
  const visit = (blocks: unknown) => {
    for (const block of blocksOf(blocks)) {
      if (block?.cache_control != null) count++;
      // tool_result blocks may nest their own cacheable content blocks.
      if (block?.type === "tool_result") visit(block.content);
    }
  };
  visit(body.system);
  visit(body.tools);
  for (const message of blocksOf(body.messages)) visit(message?.content);
  return count;
}

function validate(body: any): Refusal | null {
  if (typeof body.model !== "string" || body.model.length === 0) return invalid("model: Field required");
  if (body.max_tokens === undefined) return invalid("max_tokens: Field required");
  if (!Number.isInteger(body.max_tokens) || body.max_tokens < 1) return invalid("max_tokens: Input should be a valid integer greater than 0");
  if (body.messages === undefined) return invalid("messages: Field required");
  if (!Array.isArray(body.messages)) return invalid("messages: Input should be a valid list");
  if (body.system !== undefined && typeof body.system !== "string") {
    if (!Array.isArray(body.system)) return invalid("system: Input should be a valid list");
    for (const [i, block] of body.system.entries()) {
      if (block?.type !== "text" || typeof block.text !== "string") {
        return invalid(`system.${i}: Input tag '${String(block?.type)}' found using 'type' does not match any of the expected tags: 'text'`);
      }
    }
  }
  if (body.tools !== undefined) {
    if (!Array.isArray(body.tools)) return invalid("tools: Input should be a valid list");
    for (const [i, tool] of body.tools.entries()) {
      if (typeof tool?.name !== "string" || !TOOL_NAME.test(tool.name)) {
        return invalid(`tools.${i}.custom.name: String should match pattern '^[a-zA-Z0-9_-]{1,64}$'`);
      }
    }
  }

  const messages = body.messages as any[];
  for (const [i, message] of messages.entries()) {
    const role = message?.role;
    if (role !== "user" && role !== "assistant") return invalid(`messages.${i}.role: Input should be 'user' or 'assistant'`);
    const expected = i % 2 === 0 ? "user" : "assistant";
    if (role !== expected) {
      return invalid(
        i === 0
          ? "messages: first message must use the \"user\" role"
          : "messages: roles must alternate between \"user\" and \"assistant\", but found multiple \"" + role + "\" roles in a row",
      );
    }
    const content = message.content;
    if (typeof content !== "string" && !Array.isArray(content)) return invalid(`messages.${i}.content: Input should be a valid list`);
    const isFinalAssistant = i === messages.length - 1 && role === "assistant";
    if (content.length === 0 && !isFinalAssistant) {
      return invalid(`messages.${i}: all messages must have non-empty content except for the optional final assistant message`);
    }
    for (const [j, block] of blocksOf(content).entries()) {
      if (block?.type === "text" && (typeof block.text !== "string" || block.text.length === 0)) {
        return invalid(`messages.${i}.content.${j}.text: text content blocks must be non-empty`);
      }
    }

    const toolUses = blocksOf(content).filter((b) => b?.type === "tool_use");
    const results = blocksOf(content).filter((b) => b?.type === "tool_result");
    if (role === "assistant" && results.length > 0) {
      return invalid(`messages.${i}.content: tool_result blocks are only allowed in user messages`);
    }
    if (role === "user" && toolUses.length > 0) {
      return invalid(`messages.${i}.content: tool_use blocks are only allowed in assistant messages`);
    }
    if (role === "user" && results.length > 0) {
      const previous = i > 0 ? messages[i - 1] : undefined;
      const offered = new Set(blocksOf(previous?.content).filter((b) => b?.type === "tool_use").map((b) => b.id));
      const seen = new Set<string>();
      for (const result of results) {
        const id = result.tool_use_id;
        if (!offered.has(id)) {
          return invalid(
            `messages.${i}.content: unexpected \`tool_use_id\` found in \`tool_result\` blocks: ${String(id)}. Each \`tool_result\` block must have a corresponding \`tool_use\` block in the previous message.`,
          );
        }
        if (seen.has(id)) return invalid(`messages.${i}.content: duplicate \`tool_result\` blocks for \`tool_use_id\` ${String(id)}`);
        seen.add(id);
      }
    }
    if (role === "assistant" && toolUses.length > 0) {
      const next = messages[i + 1];
      const answered = new Set(blocksOf(next?.content).filter((b) => b?.type === "tool_result").map((b) => b.tool_use_id));
      const missing = toolUses.map((b) => String(b.id)).filter((id) => !answered.has(id));
      if (missing.length > 0) {
        return invalid(
          `messages.${i + 1}: \`tool_use\` ids were found without \`tool_result\` blocks immediately after: ${missing.join(", ")}. Each \`tool_use\` block must have a corresponding \`tool_result\` block in the next message.`,
        );
      }
    }
  }

  const cached = countCacheControl(body);
  if (cached > 4) return invalid(`A maximum of 4 blocks with cache_control may be provided. Found ${cached}.`);
  return null;
}

function parseInput(args: string): unknown {
  if (args.trim() === "") return {};
  try {
    return JSON.parse(args);
  } catch {
    // The real API always returns an object; a scripted broken string becomes an empty input.
    return {};
  }
}

function inputTokens(step: AnswerStep, req: RecordedRequest): number {
  return step.usage?.input ?? estimateTokens([req.body.system, req.body.messages, req.body.tools]);
}

function stopReason(step: AnswerStep): "end_turn" | "tool_use" {
  return step.type === "tool_calls" && step.calls.length > 0 ? "tool_use" : "end_turn";
}

function toolUses(step: AnswerStep) {
  if (step.type !== "tool_calls") return [];
  return step.calls.map((call) => ({ id: call.id ?? randomId("toolu_01", 22), name: call.name, arguments: call.arguments }));
}

class AnthropicStream {
  private index = 0;

  constructor(private readonly out: Output) {}

  event(type: string, data: object): Promise<void> {
    return this.out.write(`event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`);
  }

  async start(req: RecordedRequest, input: number): Promise<void> {
    this.out.startStream();
    await this.event("message_start", {
      message: {
        id: randomId("msg_01", 22),
        type: "message",
        role: "assistant",
        model: req.body.model,
        content: [],
        stop_reason: null,
        stop_sequence: null,
        usage: { input_tokens: input, cache_creation_input_tokens: 0, cache_read_input_tokens: 0, output_tokens: 1 },
      },
    });
  }

  async textBlock(text: string, close = true): Promise<void> {
    const index = this.index++;
    await this.event("content_block_start", { index, content_block: { type: "text", text: "" } });
    if (index === 0) await this.event("ping", {});
    for (const piece of splitPieces(text)) {
      await this.event("content_block_delta", { index, delta: { type: "text_delta", text: piece } });
    }
    if (close) await this.event("content_block_stop", { index });
  }

  async toolBlock(id: string, name: string, args: string): Promise<void> {
    const index = this.index++;
    await this.event("content_block_start", { index, content_block: { type: "tool_use", id, name, input: {} } });
    for (const piece of ["", ...splitPieces(args)]) {
      await this.event("content_block_delta", { index, delta: { type: "input_json_delta", partial_json: piece } });
    }
    await this.event("content_block_stop", { index });
  }
}

const MODELS = ["claude-sonnet-4-5", "claude-haiku-4-5", "claude-opus-4-1"];

const dialect: Dialect = {
  basePath: "",
  staticRoute(method: string, pathname: string, res: ServerResponse): boolean {
    if (method !== "GET" || pathname !== "/v1/models") return false;
    const data = MODELS.map((id) => ({ type: "model", id, display_name: id, created_at: "2025-01-01T00:00:00Z" }));
    const text = JSON.stringify({ data, has_more: false, first_id: data[0]?.id ?? null, last_id: data.at(-1)?.id ?? null });
    res.writeHead(200, { "content-type": "application/json", "content-length": String(Buffer.byteLength(text)) });
    res.end(text);
    return true;
  },
  isGenerateRoute: (method, pathname) => method === "POST" && pathname === "/v1/messages",
  checkAuth(headers, apiKey) {
    // SDK 1.x sends the key as a Bearer token, older clients as x-api-key; the API takes both.
    if (headers["x-api-key"] === apiKey || headers.authorization === `Bearer ${apiKey}`) return null;
    const absent = headers["x-api-key"] === undefined && headers.authorization === undefined;
    const message = absent ? "x-api-key header is required" : "invalid x-api-key";
    return new Refusal(401, message, errorBody("authentication_error", message));
  },
  notFound(method, pathname) {
    const message = `Not found: ${method} ${pathname}`;
    return new Refusal(404, message, errorBody("not_found_error", message));
  },
  malformed(detail) {
    return invalid(`There was an issue with your request JSON: ${detail}`);
  },
  validate,
  errorBody: (status) => errorBody(errorType(status)),
  commonHeaders: () => ({ "request-id": randomId("req_011", 21) }),

  async answer(step, req, out) {
    const uses = toolUses(step);
    const input = inputTokens(step, req);
    const output = outputTokens(step);
    if (!req.stream) {
      const content: object[] = [];
      if (step.text) content.push({ type: "text", text: step.text });
      for (const use of uses) content.push({ type: "tool_use", id: use.id, name: use.name, input: parseInput(use.arguments) });
      out.json(200, {
        id: randomId("msg_01", 22),
        type: "message",
        role: "assistant",
        model: req.body.model,
        content,
        stop_reason: stopReason(step),
        stop_sequence: null,
        usage: { input_tokens: input, cache_creation_input_tokens: 0, cache_read_input_tokens: 0, output_tokens: output },
      });
      return;
    }
    const stream = new AnthropicStream(out);
    await stream.start(req, input);
    if (step.text || uses.length === 0) await stream.textBlock(step.text ?? "");
    for (const use of uses) await stream.toolBlock(use.id, use.name, use.arguments);
    await stream.event("message_delta", {
      delta: { stop_reason: stopReason(step), stop_sequence: null },
      usage: { output_tokens: output },
    });
    await stream.event("message_stop", {});
    out.end();
  },

  async streamCut(text, req, out) {
    const stream = new AnthropicStream(out);
    await stream.start(req, estimateTokens([req.body.system, req.body.messages]));
    await stream.textBlock(text, false);
  },
};

export function startFakeAnthropic(options?: FakeProviderOptions): Promise<FakeProvider> {
  return startFakeServer(dialect, options);
}
