/// <reference types="node" />
// OpenAI Chat Completions dialect of the fake provider: shapes copied from real API answers so
// the official SDK and our adapters parse them exactly as they would in production.
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

type ErrorShape = { type: string; code: string | null; message: string };

function errorShape(status: number): ErrorShape {
  switch (status) {
    case 400:
      return { type: "invalid_request_error", code: null, message: "Invalid request." };
    case 401:
      return {
        type: "invalid_request_error",
        code: "invalid_api_key",
        message: "Incorrect API key provided. You can find your API key at https://platform.openai.com/account/api-keys.",
      };
    case 403:
      return { type: "invalid_request_error", code: "unsupported_country_region_territory", message: "Country, region, or territory not supported" };
    case 404:
      return { type: "invalid_request_error", code: "model_not_found", message: "The model does not exist or you do not have access to it." };
    case 429:
      return {
        type: "requests",
        code: "rate_limit_exceeded",
        message: "Rate limit reached for requests per min (RPM): Limit 3, Used 3, Requested 1. Please try again in 20s.",
      };
    case 503:
      return { type: "server_error", code: null, message: "The engine is currently overloaded, please try again later." };
    default:
      return status >= 500
        ? { type: "server_error", code: null, message: "The server had an error while processing your request. Sorry about that!" }
        : { type: "invalid_request_error", code: null, message: `Request failed with status ${status}.` };
  }
}

function errorBody(shape: ErrorShape, param: string | null = null) {
  return { error: { message: shape.message, type: shape.type, param, code: shape.code } };
}

function invalid(message: string, param: string | null = null, code: string | null = null): Refusal {
  return new Refusal(400, message, errorBody({ type: "invalid_request_error", code, message }, param));
}

const ROLES = new Set(["system", "developer", "user", "assistant", "tool", "function"]);
const TOOL_NAME = /^[a-zA-Z0-9_-]{1,64}$/;

function validate(body: any): Refusal | null {
  if (typeof body.model !== "string" || body.model.length === 0) {
    return invalid("you must provide a model parameter", "model");
  }
  if (!Array.isArray(body.messages)) return invalid("Missing required parameter: 'messages'.", "messages", "missing_required_parameter");
  if (body.messages.length === 0) {
    return invalid("Invalid 'messages': empty array. Expected an array with minimum length 1, but got an empty array instead.", "messages", "empty_array");
  }
  if (body.tools !== undefined) {
    if (!Array.isArray(body.tools)) return invalid("Invalid type for 'tools': expected an array.", "tools", "invalid_type");
    for (const [i, tool] of body.tools.entries()) {
      const name = tool?.function?.name;
      if (typeof name !== "string" || !TOOL_NAME.test(name)) {
        return invalid(
          `Invalid 'tools[${i}].function.name': string does not match pattern. Expected a string that matches the pattern '^[a-zA-Z0-9_-]+$'.`,
          `tools[${i}].function.name`,
          "invalid_value",
        );
      }
    }
  }

  // Ids of the latest assistant tool_calls still open for `tool` answers, and those already answered.
  let open = new Map<string, boolean>();
  let openAt = -1;
  const unanswered = () => [...open].filter(([, answered]) => !answered).map(([id]) => id);
  const missingResults = (at: number) =>
    invalid(
      `An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: ${unanswered().join(", ")}`,
      `messages.[${at}].role`,
    );

  for (const [i, message] of (body.messages as any[]).entries()) {
    if (typeof message !== "object" || message === null || !ROLES.has(message.role)) {
      return invalid(
        `Invalid value: '${String(message?.role)}'. Supported values are: 'system', 'assistant', 'user', 'function', 'tool', and 'developer'.`,
        `messages[${i}].role`,
        "invalid_value",
      );
    }
    if (message.role === "tool") {
      const id = message.tool_call_id;
      if (typeof id !== "string" || !open.has(id)) {
        return invalid(
          "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'.",
          `messages.[${i}].role`,
        );
      }
      if (open.get(id)) {
        return invalid(`Invalid parameter: duplicate tool message for 'tool_call_id' ${id}.`, `messages.[${i}].tool_call_id`);
      }
      open.set(id, true);
      continue;
    }
    if (unanswered().length > 0) return missingResults(openAt);
    open = new Map();
    if (message.role === "assistant" && Array.isArray(message.tool_calls) && message.tool_calls.length > 0) {
      for (const call of message.tool_calls) {
        if (typeof call?.id !== "string") {
          return invalid("Missing required parameter: 'messages[].tool_calls[].id'.", `messages.[${i}].tool_calls`, "missing_required_parameter");
        }
        open.set(call.id, false);
      }
      openAt = i;
    }
  }
  if (unanswered().length > 0) return missingResults(openAt);
  return null;
}

function usageOf(step: AnswerStep, req: RecordedRequest) {
  const prompt = step.usage?.input ?? estimateTokens([req.body.messages, req.body.tools]);
  const completion = outputTokens(step);
  return {
    prompt_tokens: prompt,
    completion_tokens: completion,
    total_tokens: prompt + completion,
    prompt_tokens_details: { cached_tokens: 0, audio_tokens: 0 },
    completion_tokens_details: { reasoning_tokens: 0, audio_tokens: 0, accepted_prediction_tokens: 0, rejected_prediction_tokens: 0 },
  };
}

function toolCalls(step: AnswerStep) {
  if (step.type !== "tool_calls") return [];
  return step.calls.map((call) => ({ id: call.id ?? randomId("call_", 24), name: call.name, arguments: call.arguments }));
}

class OpenAIStream {
  readonly id = randomId("chatcmpl-", 29);
  readonly created = Math.floor(Date.now() / 1000);
  readonly fingerprint = "fp_fake0001";

  constructor(
    private readonly req: RecordedRequest,
    private readonly out: Output,
  ) {}

  private get includeUsage(): boolean {
    return this.req.body.stream_options?.include_usage === true;
  }

  chunk(delta: object, finishReason: string | null = null): Promise<void> {
    const payload: Record<string, unknown> = {
      id: this.id,
      object: "chat.completion.chunk",
      created: this.created,
      model: this.req.body.model,
      service_tier: "default",
      system_fingerprint: this.fingerprint,
      choices: [{ index: 0, delta, logprobs: null, finish_reason: finishReason }],
    };
    if (this.includeUsage) payload.usage = null;
    return this.out.write(`data: ${JSON.stringify(payload)}\n\n`);
  }

  async usage(usage: object): Promise<void> {
    if (!this.includeUsage) return;
    const payload = {
      id: this.id,
      object: "chat.completion.chunk",
      created: this.created,
      model: this.req.body.model,
      service_tier: "default",
      system_fingerprint: this.fingerprint,
      choices: [],
      usage,
    };
    await this.out.write(`data: ${JSON.stringify(payload)}\n\n`);
  }

  async text(text: string): Promise<void> {
    await this.chunk({ role: "assistant", content: "", refusal: null });
    for (const piece of splitPieces(text)) await this.chunk({ content: piece });
  }
}

const dialect: Dialect = {
  basePath: "/v1",
  staticRoute(method: string, pathname: string, res: ServerResponse): boolean {
    if (method !== "GET" || pathname !== "/v1/models") return false;
    const created = 1_700_000_000;
    const data = ["gpt-4o-mini", "gpt-4o", "gpt-4.1"].map((id) => ({ id, object: "model", created, owned_by: "system" }));
    const text = JSON.stringify({ object: "list", data });
    res.writeHead(200, { "content-type": "application/json", "content-length": String(Buffer.byteLength(text)) });
    res.end(text);
    return true;
  },
  isGenerateRoute: (method, pathname) => method === "POST" && pathname === "/v1/chat/completions",
  checkAuth(headers, apiKey) {
    if (headers.authorization === `Bearer ${apiKey}`) return null;
    const shape = errorShape(401);
    if (headers.authorization === undefined) {
      shape.code = null;
      shape.message =
        "You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).";
    }
    return new Refusal(401, shape.message, errorBody(shape));
  },
  notFound(method, pathname) {
    const message = `Invalid URL (${method} ${pathname})`;
    return new Refusal(404, message, errorBody({ type: "invalid_request_error", code: null, message }));
  },
  malformed(detail) {
    return invalid(
      `We could not parse the JSON body of your request (${detail}). (HINT: This likely means you aren't using your HTTP library correctly. The OpenAI API expects a JSON payload, but what was sent was not valid JSON. If you have trouble figuring out how to fix this, please contact us through our help center at help.openai.com.)`,
    );
  },
  validate,
  errorBody: (status) => errorBody(errorShape(status)),
  commonHeaders: () => ({ "x-request-id": randomId("req_", 32), "openai-processing-ms": "1" }),

  async answer(step, req, out) {
    const calls = toolCalls(step);
    const finishReason = calls.length > 0 ? "tool_calls" : "stop";
    const usage = usageOf(step, req);
    if (!req.stream) {
      const message: Record<string, unknown> = {
        role: "assistant",
        content: step.text ? step.text : calls.length > 0 ? null : (step.text ?? ""),
        refusal: null,
        annotations: [],
      };
      if (calls.length > 0) {
        message.tool_calls = calls.map((c) => ({ id: c.id, type: "function", function: { name: c.name, arguments: c.arguments } }));
      }
      out.json(200, {
        id: randomId("chatcmpl-", 29),
        object: "chat.completion",
        created: Math.floor(Date.now() / 1000),
        model: req.body.model,
        choices: [{ index: 0, message, logprobs: null, finish_reason: finishReason }],
        usage,
        service_tier: "default",
        system_fingerprint: "fp_fake0001",
      });
      return;
    }
    const stream = new OpenAIStream(req, out);
    out.startStream();
    if (calls.length === 0 || step.text) {
      await stream.text(step.text ?? "");
    } else {
      await stream.chunk({ role: "assistant", content: null, refusal: null });
    }
    for (const [index, call] of calls.entries()) {
      await stream.chunk({
        tool_calls: [{ index, id: call.id, type: "function", function: { name: call.name, arguments: "" } }],
      });
      for (const piece of splitPieces(call.arguments)) {
        await stream.chunk({ tool_calls: [{ index, function: { arguments: piece } }] });
      }
    }
    await stream.chunk({}, finishReason);
    await stream.usage(usage);
    await out.write("data: [DONE]\n\n");
    out.end();
  },

  async streamCut(text, req, out) {
    out.startStream();
    await new OpenAIStream(req, out).text(text);
  },
};

export function startFakeOpenAI(options?: FakeProviderOptions): Promise<FakeProvider> {
  return startFakeServer(dialect, options);
}
