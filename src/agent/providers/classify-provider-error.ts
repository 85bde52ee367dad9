// Turns whatever a provider call threw into a reason the turn engine acts on (design.md, "Provider
// runtime and failover"). Both SDKs' errors carry `status`, `headers` and the `error` body, so this
// reads those by shape; only the two small error modules are imported, for the connection errors
// that carry no status, never either SDK's full index.
import {
  APIConnectionError as AnthropicConnectionError,
  APIConnectionTimeoutError as AnthropicConnectionTimeoutError,
  APIUserAbortError as AnthropicUserAbortError,
} from "@anthropic-ai/sdk/core/error";
import {
  APIConnectionError as OpenAIConnectionError,
  APIConnectionTimeoutError as OpenAIConnectionTimeoutError,
  APIUserAbortError as OpenAIUserAbortError,
} from "openai/core/error";

export type ProviderErrorReason =
  | "rate_limit"
  | "billing"
  | "auth"
  | "overloaded"
  | "server_error"
  | "timeout"
  | "transport"
  | "context_overflow"
  | "payload_too_large"
  | "model_not_found"
  | "format_error"
  | "unknown";

export interface ProviderErrorClass {
  reason: ProviderErrorReason;
  /** HTTP status of the provider's answer; absent for connection failures and stream errors. */
  status?: number;
  /** Worth another attempt on the same provider after a backoff. */
  retryable: boolean;
  /** Worth trying the next entry of the fallback chain. */
  shouldFailOver: boolean;
  /** From `retry-after-ms` or `retry-after` (seconds or HTTP date), in milliseconds. */
  retryAfterMs?: number;
  /** Human-readable and safe to log: API keys and bearer tokens are removed. */
  message: string;
}

const RETRYABLE = new Set<ProviderErrorReason>(["rate_limit", "overloaded", "server_error", "timeout", "transport"]);
// A fallback receives the same messages and tools, so a malformed request, one over the context
// window or one over the byte limit fails there too; these need the request fixed (compression,
// repair), not another provider.
const NOT_FIXED_BY_FALLBACK = new Set<ProviderErrorReason>(["format_error", "context_overflow", "payload_too_large"]);

const BILLING_WORDS = /billing|credit|quota|payment|insufficient[_ ]funds|spend(ing)? limit|purchase/i;
// OpenAI's ordinary 429 text suggests "adding a payment method ... /account/billing", so billing
// words alone do not make a 429 a billing error: only an exhausted quota does.
const QUOTA_EXHAUSTED = /insufficient_quota|exceeded your current quota/i;
const OVERLOADED_WORDS = /overload|over capacity|capacity|temporarily unavailable|busy/i;
const CONTEXT_WORDS =
  /context[_ ]length|context[_ ]window|context limit|maximum context|too many tokens|prompt is too long|input is too long|prompt too long|tokens? exceed|exceeds? the (model'?s )?max/i;
const TIMEOUT_CODES = new Set([
  "ETIMEDOUT",
  "ESOCKETTIMEDOUT",
  "UND_ERR_CONNECT_TIMEOUT",
  "UND_ERR_HEADERS_TIMEOUT",
  "UND_ERR_BODY_TIMEOUT",
]);
const TRANSPORT_CODES = new Set([
  "ECONNRESET",
  "ECONNREFUSED",
  "ECONNABORTED",
  "ENOTFOUND",
  "EAI_AGAIN",
  "EPIPE",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "ENETDOWN",
  "EPROTO",
]);
const TRANSPORT_WORDS =
  /fetch failed|terminated|socket|other side closed|connection (reset|refused|lost|closed|error)|network|getaddrinfo|dns|certificate|tls|ssl|econn|enotfound|eai_again|epipe|ehostunreach|enetunreach/i;

/** Classifies an error thrown by a Provider. `now` (ms since epoch) resolves HTTP-date Retry-After headers. */
export function classifyProviderError(error: unknown, now: number = Date.now()): ProviderErrorClass {
  const fields = readFields(error);
  const reason = reasonOf(error, fields);
  const classification: ProviderErrorClass = {
    reason,
    retryable: RETRYABLE.has(reason),
    shouldFailOver: !NOT_FIXED_BY_FALLBACK.has(reason),
    message: redactSecrets(fields.message),
  };
  if (fields.status !== undefined) classification.status = fields.status;
  const retryAfterMs = retryAfterOf(fields.headers, now);
  if (retryAfterMs !== undefined) classification.retryAfterMs = retryAfterMs;
  if (isCallerAbort(error)) {
    // The caller cancelled (client gone, turn cancelled): nothing failed, so nothing to retry or fail over.
    classification.retryable = false;
    classification.shouldFailOver = false;
  }
  return classification;
}

interface ErrorFields {
  status: number | undefined;
  headers: unknown;
  /** The body's error type (`overloaded_error`, `insufficient_quota`, …) and code, lower-cased. */
  bodyType: string;
  /** Message and body text, for word matching. */
  text: string;
  message: string;
}

function readFields(error: unknown): ErrorFields {
  const record = (typeof error === "object" && error !== null ? error : {}) as Record<string, unknown>;
  const status = typeof record.status === "number" ? record.status : undefined;
  const body = record.error;
  // OpenAI puts { message, type, code } in `error`; Anthropic the whole { type: "error", error: { type, message } }.
  const inner = isRecord(body) && isRecord(body.error) ? body.error : body;
  const bodyType = isRecord(inner) ? [inner.type, inner.code].filter((part) => typeof part === "string").join(" ") : "";
  const message = error instanceof Error ? error.message : typeof error === "string" ? error : safeStringify(error);
  const text = `${message} ${safeStringify(body)}`;
  return { status, headers: record.headers, bodyType: bodyType.toLowerCase(), text, message };
}

function reasonOf(error: unknown, fields: ErrorFields): ProviderErrorReason {
  if (fields.status !== undefined) return reasonOfStatus(fields.status, fields);
  const kind = isRecord(error) ? error.kind : undefined;
  if (kind === "timeout" || kind === "transport") return kind;
  if (isTimeout(error)) return "timeout";
  if (isCallerAbort(error)) return "unknown";
  if (fields.bodyType.length > 0) return reasonOfBodyType(fields);
  if (error instanceof AnthropicConnectionError || error instanceof OpenAIConnectionError) {
    return causeChain(error).some(isTimeoutCause) ? "timeout" : "transport";
  }
  if (causeChain(error).some(isTimeoutCause)) return "timeout";
  if (causeChain(error).some(isTransportCause)) return "transport";
  // A success status with a body that is not JSON (a broken proxy, a truncated gateway answer): the endpoint
  // misbehaved, like a 5xx, so it is retried and failed over rather than failing the turn.
  if (causeChain(error).some((cause) => cause instanceof SyntaxError)) return "server_error";
  return "unknown";
}

function reasonOfStatus(status: number, fields: ErrorFields): ProviderErrorReason {
  switch (status) {
    case 400:
      // Anthropic reports an exhausted prepaid balance as 400 "Your credit balance is too low".
      if (/credit balance|billing/i.test(fields.text)) return "billing";
      return CONTEXT_WORDS.test(fields.text) ? "context_overflow" : "format_error";
    case 401:
      return "auth";
    case 402:
      return "billing";
    case 403:
      return BILLING_WORDS.test(fields.text) ? "billing" : "auth";
    case 404:
      return "model_not_found";
    case 408:
      return "timeout";
    case 413:
      return "payload_too_large";
    case 422:
      return "format_error";
    case 429:
      if (QUOTA_EXHAUSTED.test(`${fields.bodyType} ${fields.text}`)) return "billing";
      return OVERLOADED_WORDS.test(`${fields.bodyType} ${fields.text}`) ? "overloaded" : "rate_limit";
    case 500:
    case 502:
      return "server_error";
    case 503:
    case 529:
      return "overloaded";
    // Gateway timeouts (504, Cloudflare's 524): the upstream took too long to answer.
    case 504:
    case 524:
      return "timeout";
    default:
      return status >= 500 ? "server_error" : "unknown";
  }
}

/** Errors sent inside a stream have a body but no status. */
function reasonOfBodyType(fields: ErrorFields): ProviderErrorReason {
  const type = fields.bodyType;
  if (type.includes("overloaded")) return "overloaded";
  if (QUOTA_EXHAUSTED.test(type) || type.includes("billing")) return "billing";
  if (type.includes("rate_limit") || type === "requests" || type === "tokens") return "rate_limit";
  if (type.includes("authentication") || type.includes("permission") || type.includes("invalid_api_key")) return "auth";
  if (type.includes("not_found")) return "model_not_found";
  if (type.includes("request_too_large")) return "payload_too_large";
  if (type.includes("timeout")) return "timeout";
  if (type.includes("invalid_request")) return CONTEXT_WORDS.test(fields.text) ? "context_overflow" : "format_error";
  if (type.includes("api_error") || type.includes("server_error")) return "server_error";
  return "unknown";
}

function isTimeout(error: unknown): boolean {
  if (error instanceof AnthropicConnectionTimeoutError || error instanceof OpenAIConnectionTimeoutError) return true;
  // AbortSignal.timeout() rejects with a DOMException named TimeoutError.
  return isRecord(error) && (error.name === "TimeoutError" || error.name === "APIConnectionTimeoutError");
}

function isCallerAbort(error: unknown): boolean {
  if (error instanceof AnthropicUserAbortError || error instanceof OpenAIUserAbortError) return true;
  return isRecord(error) && (error.name === "AbortError" || error.name === "APIUserAbortError");
}

function causeChain(error: unknown): Record<string, unknown>[] {
  const chain: Record<string, unknown>[] = [];
  let current = error;
  // fetch failures nest 2-3 deep (SDK error -> TypeError "fetch failed" -> socket error); 6 is plenty.
  for (let depth = 0; depth < 6 && isRecord(current); depth++) {
    chain.push(current);
    current = current.cause;
  }
  return chain;
}

function isTimeoutCause(error: Record<string, unknown>): boolean {
  return (typeof error.code === "string" && TIMEOUT_CODES.has(error.code)) || error.name === "TimeoutError";
}

function isTransportCause(error: Record<string, unknown>): boolean {
  const code = typeof error.code === "string" ? error.code : "";
  if (TRANSPORT_CODES.has(code) || /^(UND_ERR_|ERR_TLS_|ERR_SSL_)|CERT/.test(code)) return true;
  return typeof error.message === "string" && TRANSPORT_WORDS.test(error.message);
}

function retryAfterOf(headers: unknown, now: number): number | undefined {
  const milliseconds = Number.parseFloat(headerOf(headers, "retry-after-ms") ?? "");
  if (Number.isFinite(milliseconds) && milliseconds >= 0) return Math.round(milliseconds);
  const value = headerOf(headers, "retry-after")?.trim();
  if (value === undefined || value.length === 0) return undefined;
  if (/^\d+(\.\d+)?$/.test(value)) return Math.round(Number.parseFloat(value) * 1000);
  const date = Date.parse(value);
  return Number.isNaN(date) ? undefined : Math.max(0, date - now);
}

function headerOf(headers: unknown, name: string): string | undefined {
  if (!isRecord(headers)) return undefined;
  if (typeof headers.get === "function") {
    const value: unknown = (headers as { get(name: string): unknown }).get(name);
    return typeof value === "string" ? value : undefined;
  }
  for (const [key, value] of Object.entries(headers)) {
    if (key.toLowerCase() === name && typeof value === "string") return value;
  }
  return undefined;
}

/** Removes API keys and tokens that providers echo back (OpenAI: "Incorrect API key provided: sk-…"). */
export function redactSecrets(text: string): string {
  return text
    .replace(/\b(sk|rk|pk)-[A-Za-z0-9_*.\-]{6,}/g, "$1-[redacted]")
    .replace(/\bBearer\s+[^\s"',;]+/gi, "Bearer [redacted]")
    .replace(/\b(x-api-key|api[_-]?key|authorization|access[_-]?token|auth[_-]?token)(["']?\s*[:=]\s*["']?)[^\s"',;}]+/gi, "$1$2[redacted]")
    .slice(0, 1000);
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null;
}

function safeStringify(value: unknown): string {
  if (value === undefined) return "";
  try {
    return JSON.stringify(value) ?? String(value);
  } catch {
    return String(value);
  }
}
