import { describe, expect, it } from "vitest";
import * as AnthropicErrors from "@anthropic-ai/sdk/core/error";
import * as OpenAIErrors from "openai/core/error";
import { classifyProviderError } from "../../../src/agent/providers/classify-provider-error.ts";
import type { ProviderErrorReason } from "../../../src/agent/providers/classify-provider-error.ts";
import { StreamCutError, StreamStallError } from "../../../src/agent/providers/stream-guard.ts";

// Errors built the way each SDK builds them from an HTTP answer.
function openai(status: number, error: Record<string, unknown>, headers: Record<string, string> = {}): Error {
  return OpenAIErrors.APIError.generate(status, { error }, undefined, new Headers(headers));
}
function anthropic(status: number, type: string, message: string, headers: Record<string, string> = {}): Error {
  return AnthropicErrors.APIError.generate(status, { type: "error", error: { type, message } }, undefined, new Headers(headers));
}
function withCause(error: Error, cause: Record<string, unknown>): Error {
  return Object.assign(error, { cause });
}
function socketError(code: string, message: string): Record<string, unknown> {
  return { name: "TypeError", message: "fetch failed", cause: Object.assign(new Error(message), { code }) };
}

const rows: { rule: string; error: unknown; reason: ProviderErrorReason; status?: number }[] = [
  { rule: "401 is auth", error: openai(401, { type: "invalid_request_error", code: "invalid_api_key", message: "Incorrect API key provided" }), reason: "auth", status: 401 },
  { rule: "403 with billing words is billing", error: anthropic(403, "permission_error", "Your credit balance is too low; visit Plans & Billing"), reason: "billing", status: 403 },
  { rule: "403 otherwise is auth", error: openai(403, { type: "invalid_request_error", code: "unsupported_country_region_territory", message: "Country, region, or territory not supported" }), reason: "auth", status: 403 },
  { rule: "402 is billing", error: openai(402, { message: "Payment required" }), reason: "billing", status: 402 },
  { rule: "429 is rate_limit (billing links in the text do not count)", error: openai(429, { type: "requests", code: "rate_limit_exceeded", message: "Rate limit reached for requests per min (RPM). Add a payment method at https://platform.openai.com/account/billing to increase your rate limit." }), reason: "rate_limit", status: 429 },
  { rule: "429 saying overloaded is overloaded", error: openai(429, { message: "Provider is overloaded, try again later" }), reason: "overloaded", status: 429 },
  { rule: "429 insufficient_quota is billing", error: openai(429, { type: "insufficient_quota", code: "insufficient_quota", message: "You exceeded your current quota, please check your plan and billing details." }), reason: "billing", status: 429 },
  { rule: "413 is payload_too_large", error: anthropic(413, "request_too_large", "Request exceeds the maximum allowed number of bytes."), reason: "payload_too_large", status: 413 },
  { rule: "400 about context length is context_overflow (OpenAI)", error: openai(400, { type: "invalid_request_error", code: "context_length_exceeded", message: "This model's maximum context length is 128000 tokens. However, your messages resulted in 130512 tokens." }), reason: "context_overflow", status: 400 },
  { rule: "400 prompt is too long is context_overflow (Anthropic)", error: anthropic(400, "invalid_request_error", "prompt is too long: 210000 tokens > 200000 maximum"), reason: "context_overflow", status: 400 },
  { rule: "400 otherwise is format_error", error: anthropic(400, "invalid_request_error", "messages.1.content.0.text: text content blocks must be non-empty"), reason: "format_error", status: 400 },
  { rule: "400 low credit balance is billing (Anthropic)", error: anthropic(400, "invalid_request_error", "Your credit balance is too low to access the Anthropic API."), reason: "billing", status: 400 },
  { rule: "404 is model_not_found", error: openai(404, { code: "model_not_found", message: "The model `gpt-9` does not exist" }), reason: "model_not_found", status: 404 },
  { rule: "500 is server_error", error: anthropic(500, "api_error", "Internal server error"), reason: "server_error", status: 500 },
  { rule: "502 is server_error", error: openai(502, { message: "Bad gateway" }), reason: "server_error", status: 502 },
  { rule: "503 is overloaded", error: openai(503, { type: "server_error", message: "The engine is currently overloaded" }), reason: "overloaded", status: 503 },
  { rule: "529 is overloaded", error: anthropic(529, "overloaded_error", "Overloaded"), reason: "overloaded", status: 529 },
  { rule: "OpenAI connect timeout is timeout", error: new OpenAIErrors.APIConnectionTimeoutError(), reason: "timeout" },
  { rule: "Anthropic connect timeout is timeout", error: new AnthropicErrors.APIConnectionTimeoutError(), reason: "timeout" },
  { rule: "an AbortSignal.timeout() deadline is timeout", error: new DOMException("The operation timed out.", "TimeoutError"), reason: "timeout" },
  { rule: "a stalled stream is timeout", error: new StreamStallError("the provider sent nothing for 100 ms"), reason: "timeout" },
  { rule: "connection reset is transport", error: withCause(new OpenAIErrors.APIConnectionError({ message: "Connection error." }), socketError("ECONNRESET", "read ECONNRESET")), reason: "transport" },
  { rule: "DNS failure is transport", error: withCause(new AnthropicErrors.APIConnectionError({ message: "Connection error." }), socketError("ENOTFOUND", "getaddrinfo ENOTFOUND api.example")), reason: "transport" },
  { rule: "TLS failure is transport", error: new TypeError("fetch failed", { cause: Object.assign(new Error("certificate has expired"), { code: "CERT_HAS_EXPIRED" }) }), reason: "transport" },
  { rule: "a connect timeout inside a connection error is timeout", error: withCause(new OpenAIErrors.APIConnectionError({ message: "Connection error." }), socketError("UND_ERR_CONNECT_TIMEOUT", "Connect Timeout Error")), reason: "timeout" },
  { rule: "a cut stream is transport", error: new StreamCutError("the stream ended before the provider finished"), reason: "transport" },
  { rule: "an error event inside an Anthropic stream is classified by its type", error: new AnthropicErrors.APIError(undefined, { type: "error", error: { type: "overloaded_error", message: "Overloaded" } }, undefined, new Headers()), reason: "overloaded" },
  { rule: "an error chunk inside an OpenAI stream is classified by its type", error: new OpenAIErrors.APIError(undefined, { type: "server_error", message: "The server had an error" }, undefined, undefined), reason: "server_error" },
  { rule: "anything else is unknown", error: new Error("something odd"), reason: "unknown" },
];

const retryable = new Set<ProviderErrorReason>(["rate_limit", "overloaded", "server_error", "timeout", "transport"]);
const notFailover = new Set<ProviderErrorReason>(["format_error", "context_overflow", "payload_too_large"]);

describe("classifyProviderError", () => {
  it.each(rows)("$rule", ({ error, reason, status }) => {
    const classified = classifyProviderError(error);
    expect(classified.reason).toBe(reason);
    expect(classified.status).toBe(status);
    expect(classified.retryable).toBe(retryable.has(reason));
    expect(classified.shouldFailOver).toBe(!notFailover.has(reason));
  });

  it("treats the caller's own abort as neither retryable nor a reason to fail over", () => {
    for (const error of [new OpenAIErrors.APIUserAbortError(), new AnthropicErrors.APIUserAbortError(), new DOMException("aborted", "AbortError")]) {
      expect(classifyProviderError(error)).toMatchObject({ reason: "unknown", retryable: false, shouldFailOver: false });
    }
  });

  it("reads retry-after-ms, retry-after seconds and retry-after HTTP dates", () => {
    const now = Date.parse("2025-01-01T00:00:00Z");
    const rateLimited = (headers: Record<string, string>) => openai(429, { message: "slow down" }, headers);
    expect(classifyProviderError(rateLimited({ "retry-after-ms": "1500", "retry-after": "9" }), now).retryAfterMs).toBe(1500);
    expect(classifyProviderError(rateLimited({ "retry-after": "20" }), now).retryAfterMs).toBe(20_000);
    expect(classifyProviderError(rateLimited({ "retry-after": "Wed, 01 Jan 2025 00:00:30 GMT" }), now).retryAfterMs).toBe(30_000);
    expect(classifyProviderError(rateLimited({}), now).retryAfterMs).toBeUndefined();
    const plainHeaders = { status: 429, headers: { "Retry-After": "3" }, error: { message: "slow" } };
    expect(classifyProviderError(plainHeaders, now)).toMatchObject({ reason: "rate_limit", status: 429, retryAfterMs: 3000 });
  });

  it("never puts an API key or bearer token in the message", () => {
    const key = "sk-proj-AbCdEf0123456789xyzXYZ";
    const error = openai(401, { message: `Incorrect API key provided: ${key}. Sent Authorization: Bearer ${key} and x-api-key: sk-ant-api03-secretsecret` });
    const { message } = classifyProviderError(error);
    expect(message).not.toContain("AbCdEf0123456789");
    expect(message).not.toContain("secretsecret");
    expect(message).toContain("Incorrect API key provided");
  });
});
