// One small error hierarchy; `app.onError` turns any AppError into the error body of the API contract.

export type ErrorCode =
  | "invalid_request"
  | "unauthorized"
  | "forbidden"
  | "not_found"
  | "conflict"
  | "session_busy"
  | "payload_too_large"
  | "unsupported_media_type"
  | "rate_limited"
  | "provider_error"
  | "not_configured"
  | "internal";

export class AppError extends Error {
  readonly code: ErrorCode;
  readonly status: number;
  readonly details: unknown;
  readonly headers: Record<string, string>;

  constructor(code: ErrorCode, status: number, message: string, options: { details?: unknown; cause?: unknown; headers?: Record<string, string> } = {}) {
    super(message, { cause: options.cause });
    this.name = new.target.name;
    this.code = code;
    this.status = status;
    this.details = options.details;
    this.headers = options.headers ?? {};
  }

  toBody(): { error: { code: ErrorCode; message: string; details?: unknown } } {
    return { error: { code: this.code, message: this.message, ...(this.details === undefined ? {} : { details: this.details }) } };
  }
}

export class ValidationError extends AppError {
  constructor(message: string, details?: unknown) {
    super("invalid_request", 400, message, { details });
  }
}

export class NotFoundError extends AppError {
  constructor(message = "Not found.") {
    super("not_found", 404, message);
  }
}

export class ConflictError extends AppError {
  constructor(message: string) {
    super("conflict", 409, message);
  }
}

export class SessionBusyError extends AppError {
  constructor(retryAfterSeconds: number) {
    super("session_busy", 409, "Another turn of this session is running; retry when it ends.", {
      headers: { "Retry-After": String(Math.max(1, Math.ceil(retryAfterSeconds))) },
    });
  }
}

export class NotConfiguredError extends AppError {
  constructor(message: string) {
    super("not_configured", 503, message);
  }
}

export interface ProviderAttempt {
  provider: string;
  model: string;
  outcome: "ok" | "error";
  reason?: string;
  status?: number;
}

/** Every provider of the turn's chain failed. */
export class ProviderChainError extends AppError {
  readonly attempts: ProviderAttempt[];
  constructor(message: string, attempts: ProviderAttempt[]) {
    super("provider_error", 502, message, { details: { attempts } });
    this.attempts = attempts;
  }
}

/** Names the configuration variable so a bad deployment fails at start-up with an actionable message. */
export class ConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = new.target.name;
  }
}
