// The platform port (design.md "Platforms"): each adapter verifies a webhook, parses it into one inbound
// message shape, and sends replies through its platform's API. The two helpers every adapter shares (text
// splitting and the bounded-retry API call) live here too, so the adapters stay free of each other.
import type { LogEntry } from "../deps.ts";
import { ValidationError } from "../errors.ts";

export type PlatformName = "telegram" | "slack" | "discord";

export interface TelegramTarget {
  platform: "telegram";
  chatId: number | string;
  /** Forum topic; absent for private chats, plain groups and a forum's General topic. */
  threadId?: number;
}

export interface SlackTarget {
  platform: "slack";
  channel: string;
  threadTs: string;
}

export interface DiscordTarget {
  platform: "discord";
  applicationId: string;
  /** The interaction token: a short-lived (15 min) credential for follow-ups only. Never logged. */
  token: string;
}

export type ReplyTarget = TelegramTarget | SlackTarget | DiscordTarget;

/** What a webhook turns into; stored as the inbox payload. */
export interface InboundMessage {
  platform: PlatformName;
  /** The platform's delivery id (dedupe key of the inbox). */
  eventId: string;
  sessionId: string;
  text: string;
  reply: ReplyTarget;
  /**
   * Set when the webhook already answered the event itself (a refusal over the queue cap, or `/stop`, which
   * must not wait behind the turn it stops); the processor then only completes it, in order.
   */
  handled?: "refused" | "stop";
}

/** Result of parsing a verified webhook body. */
export type WebhookParse =
  /** A message for a turn or a command; `ack` is the JSON body the platform expects at once. */
  | { kind: "message"; message: InboundMessage; ack: unknown }
  /** Answered in the response itself (Slack url_verification, Discord PING, an unsupported interaction). */
  | { kind: "respond"; body: unknown }
  /** Valid but not for us (bot messages, edits of other kinds, unsupported updates): 200 and nothing else. */
  | { kind: "ignore"; ack: unknown };

export interface PlatformAdapter<Target extends ReplyTarget = ReplyTarget> {
  readonly platform: PlatformName;
  /** Throws AppError: 503 `not_configured` when the platform's secrets are missing, 401 when the request is not authentic. */
  verify(headers: Headers, rawBody: string): Promise<void>;
  /** Parses a verified body; throws ValidationError (400) for malformed JSON. */
  parse(rawBody: string): WebhookParse;
  /** Posts `text` to the target, split at the platform's limit, in order; throws PlatformSendError. */
  send(target: Target, text: string): Promise<void>;
  /** Shows "typing..." until the returned function is called; best effort, never throws. */
  startTyping?(target: Target): () => void;
}

/** What adapters need from AppDependencies to call out. */
export interface OutboundDependencies {
  fetch: typeof fetch;
  now: () => number;
  log: (entry: LogEntry) => void;
  sleep?: (ms: number) => Promise<void>;
}

/** A reply could not be delivered. The message is safe to log: status and the platform's error code only. */
export class PlatformSendError extends Error {
  constructor(message: string) {
    super(message);
    this.name = new.target.name;
  }
}

export const emptyReplyText = "(The model returned an empty reply.)";

/**
 * Splits `text` into parts of at most `limit` UTF-16 code units (what JavaScript's `length` counts; each
 * platform counts characters, so this is never over). Cuts at the last paragraph break, else line break,
 * else space in the second half of the window; else a hard cut, moved back one unit when it would separate a
 * surrogate pair (an emoji sliced in two renders as garbage on every platform).
 */
export function splitText(text: string, limit: number): string[] {
  if (text.trim() === "") return [emptyReplyText];
  const parts: string[] = [];
  let rest = text;
  while (rest.length > limit) {
    const window = rest.slice(0, limit + 1);
    const floor = Math.floor(limit / 2);
    let cut = -1;
    let skip = 0;
    for (const separator of ["\n\n", "\n", " "]) {
      const at = window.lastIndexOf(separator, limit - separator.length);
      if (at >= floor) {
        cut = at;
        skip = separator.length;
        break;
      }
    }
    if (cut < 0) {
      cut = limit;
      const code = rest.charCodeAt(cut - 1);
      if (code >= 0xd800 && code <= 0xdbff) cut -= 1;
    }
    const part = rest.slice(0, cut).trimEnd();
    if (part !== "") parts.push(part);
    rest = rest.slice(cut + skip).replace(/^\n+/, "");
  }
  if (rest.trim() !== "") parts.push(rest);
  return parts;
}

/** `waitMs: null` retries with the exponential backoff (1, 2, 4 s), for answers that give no hint (5xx). */
export type ApiVerdict = { kind: "ok"; body: unknown } | { kind: "retry"; waitMs: number | null; reason: string } | { kind: "fail"; reason: string };

// Three retries keep one reply under ~3 minutes of waiting even at the 60 s cap; a platform that asks for a
// longer pause (Telegram flood control can say 300+ s) gets a failed send instead of a stuck worker.
const maxRetries = 3;
const maxWaitMs = 60_000;

// A platform API that accepts the connection and never answers would otherwise hold the session's queue forever.
const callTimeoutMs = 15_000;

const defaultSleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/**
 * One platform API call with bounded retries: `judge` reads the response and says ok, retry after a wait
 * (429 with the platform's retry hint, 5xx) or fail. Transport errors are retried with backoff (1, 2, 4 s).
 * `label` names the call in errors and logs; it never contains a token or a URL.
 */
export async function callPlatformApi(
  outbound: OutboundDependencies,
  label: string,
  send: (signal: AbortSignal) => Promise<Response>,
  judge: (response: Response, body: unknown) => ApiVerdict,
): Promise<unknown> {
  const sleep = outbound.sleep ?? defaultSleep;
  for (let attempt = 0; ; attempt++) {
    let verdict: ApiVerdict;
    try {
      const response = await send(AbortSignal.timeout(callTimeoutMs));
      const text = await response.text();
      let body: unknown = null;
      try {
        body = text === "" ? null : JSON.parse(text);
      } catch {
        body = null;
      }
      verdict = judge(response, body);
    } catch (error) {
      verdict = { kind: "retry", waitMs: null, reason: `transport (${error instanceof Error ? error.name : "error"})` };
    }
    if (verdict.kind === "ok") return verdict.body;
    if (verdict.kind === "fail") throw new PlatformSendError(`${label} failed: ${verdict.reason}`);
    const waitMs = verdict.waitMs ?? 1000 * 2 ** attempt;
    if (attempt >= maxRetries || waitMs > maxWaitMs) throw new PlatformSendError(`${label} failed after ${attempt + 1} attempts: ${verdict.reason}`);
    outbound.log({ level: "warn", event: "platform_retry", call: label, reason: verdict.reason, wait_ms: waitMs });
    await sleep(waitMs);
  }
}

/** Seconds from a Retry-After header (Slack, Discord), or null. */
export function retryAfterHeaderMs(response: Response): number | null {
  const raw = response.headers.get("retry-after");
  if (raw === null) return null;
  const seconds = Number(raw);
  return Number.isFinite(seconds) && seconds >= 0 ? Math.ceil(seconds * 1000) : null;
}

/** A short, log-safe piece of a platform's error text (bounded, printable ASCII). */
export function safeReason(value: unknown): string {
  return String(value ?? "").replace(/[^\x20-\x7e]/g, " ").slice(0, 160);
}

/** Parses a verified webhook body: malformed JSON is a 400, never a 500. */
export function parseWebhookJson(rawBody: string): unknown {
  try {
    return JSON.parse(rawBody);
  } catch {
    throw new ValidationError("The body is not valid JSON.", { fields: [{ field: "body", message: "malformed JSON" }] });
  }
}

/** Narrows an unknown JSON value to an object with unknown fields. */
export function asRecord(value: unknown): Record<string, unknown> | null {
  return typeof value === "object" && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : null;
}
