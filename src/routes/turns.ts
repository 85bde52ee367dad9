// POST /v1/sessions/{id}/messages: one turn, answered as JSON or as Server-Sent Events, with Idempotency-Key
// replay. The streaming and idempotency helpers are shared with the OpenAI-compatible route.
import type { Context } from "hono";
import { Hono } from "hono";
import { handleChatMessage, type ChatOutcome } from "../agent/commands.ts";
import type { TurnEvent } from "../agent/turn.ts";
import { sha256Hex } from "../crypto.ts";
import type { AppDependencies } from "../deps.ts";
import { AppError, ValidationError } from "../errors.ts";
import type { StoredResponse } from "../state/idempotency.ts";
import type { AppEnv } from "./auth.ts";
import { errorResponse, readJsonBody, sessionIdParam } from "./http.ts";
import { PostMessageSchema } from "./schemas.ts";
import { messageJson, turnJson } from "./views.ts";

/** api.md: the same key and body within 24 h returns the first result. */
export const idempotencyTtlMs = 24 * 3_600_000;
/** Printable ASCII, as Stripe and the IETF draft allow; 255 keeps the primary key index small. */
const idempotencyKeyPattern = /^[\x21-\x7e]{1,255}$/;

/** The final answer of a turn-creating request, whether it went out as JSON or as the last SSE event. */
export interface FinalResult {
  status: number;
  body: unknown;
  headers: Record<string, string>;
  /** Set for a failure; thrown when the response has not started, so `app.onError` shapes it. */
  error: AppError | null;
  /** The work began (a turn started or a command ran): only such results are stored for replay. */
  started: boolean;
}

export type IdempotencyBegin =
  | { kind: "replay"; response: StoredResponse }
  | { kind: "run"; settle(result: FinalResult): Promise<void> };

/**
 * Claims the request's Idempotency-Key, if it has one. The hash covers method, path, `scope` (request headers
 * that change what the request does, like X-Session-Id) and the raw body. A key in use by a different request,
 * or by the same request still running, is a 409 `conflict` (the running one is not waited for: a turn can take
 * minutes, longer than clients and proxies hold a request open).
 */
export async function beginIdempotency(deps: AppDependencies, c: Context<AppEnv>, scope: string): Promise<IdempotencyBegin> {
  const key = c.req.header("idempotency-key");
  if (key === undefined) return { kind: "run", settle: async () => undefined };
  if (!idempotencyKeyPattern.test(key)) {
    throw new ValidationError("Invalid Idempotency-Key header.", { fields: [{ field: "Idempotency-Key", message: "must be 1 to 255 printable ASCII characters" }] });
  }
  const idempotency = deps.idempotency;
  const tenant = c.get("tenant");
  const requestHash = await sha256Hex(JSON.stringify([c.req.method, c.req.path, scope, await c.req.text()]));
  const claim = await idempotency.claim({ tenant, key, requestHash, nowMs: deps.now(), ttlMs: idempotencyTtlMs, staleRunningMs: deps.config.leaseMs });
  if (claim.kind === "mismatch") throw new AppError("conflict", 409, "This Idempotency-Key was used for a different request in the last 24 hours.");
  if (claim.kind === "in_progress") {
    throw new AppError("conflict", 409, "A request with this Idempotency-Key is still running; retry when it has finished.", { headers: { "Retry-After": "1" } });
  }
  if (claim.kind === "replay") return claim;
  return {
    kind: "run",
    async settle(result) {
      try {
        if (result.started) {
          await idempotency.complete(tenant, key, claim.owner, { status: result.status, headers: result.headers, body: JSON.stringify(result.body) });
        } else {
          await idempotency.release(tenant, key, claim.owner);
        }
      } catch (error) {
        // The answer still goes out; a retry then sees the claim as running until it goes stale (HERMES_LEASE_MS).
        deps.log({ level: "warn", event: "idempotency_store_failed", request_id: c.get("requestId"), error: error instanceof Error ? error.name : "unknown" });
      }
    },
  };
}

/** A failure as the API shows it; anything that is not an AppError is logged by class only and becomes `internal`. */
export function failureResult(deps: AppDependencies, c: Context<AppEnv>, error: unknown, started: boolean, headers: Record<string, string> = {}): FinalResult {
  let appError: AppError;
  if (error instanceof AppError) {
    appError = error;
  } else {
    deps.log({ level: "error", event: "unhandled_error", request_id: c.get("requestId"), error: error instanceof Error ? error.name : "unknown" });
    appError = new AppError("internal", 500, "Internal error.");
  }
  return { status: appError.status, body: appError.toBody(), headers: { ...appError.headers, ...headers }, error: appError, started };
}

/** Answers with JSON: the stored or fresh result; failures go through the error body of api.md. */
export function jsonResult(c: Context<AppEnv>, result: FinalResult): Response {
  for (const [name, value] of Object.entries(result.headers)) c.header(name, value);
  if (result.error) return errorResponse(c, result.error);
  return c.json(result.body as object, result.status as 200);
}

export function replayJson(c: Context<AppEnv>, stored: StoredResponse): Response {
  for (const [name, value] of Object.entries(stored.headers)) c.header(name, value);
  c.header("Idempotent-Replayed", "true");
  c.header("Content-Type", "application/json");
  return c.body(stored.body, stored.status as 200);
}

export function acceptsEventStream(c: Context): boolean {
  return (c.req.header("accept") ?? "").toLowerCase().includes("text/event-stream");
}

/**
 * A turn running in the background whose events are buffered until a stream reads them. The turn never waits
 * for the client: events are queued, not written, so a slow or vanished reader cannot stall the journal.
 */
export class LiveTurn<T> {
  readonly done: Promise<T>;
  started = false;
  private settled = false;
  private readonly queue: TurnEvent[] = [];
  private wake: (() => void) | null = null;
  private readonly startSignal: Promise<void>;

  constructor(run: (onEvent: (event: TurnEvent) => void) => Promise<T>) {
    let markStarted = () => {};
    this.startSignal = new Promise<void>((resolve) => (markStarted = resolve));
    this.done = run((event) => {
      if (event.type === "turn-start") {
        this.started = true;
        markStarted();
      }
      this.queue.push(event);
      this.notify();
    });
    const settle = () => {
      this.settled = true;
      this.notify();
    };
    this.done.then(settle, settle);
  }

  private notify(): void {
    const wake = this.wake;
    this.wake = null;
    wake?.();
  }

  /** Resolves once the turn has begun, or once the work settled without beginning one (an error, a command). */
  async begun(): Promise<void> {
    await Promise.race([this.startSignal, this.done.then(noop, noop)]);
  }

  /** The events in order, until the work has settled and every event was read. */
  async *events(): AsyncGenerator<TurnEvent> {
    for (;;) {
      const next = this.queue.shift();
      if (next) {
        yield next;
        continue;
      }
      if (this.settled) return;
      await new Promise<void>((resolve) => (this.wake = resolve));
    }
  }
}

const noop = () => undefined;

/** Write end of an event stream. Writes after the client left are dropped silently. */
export interface StreamSink {
  readonly open: boolean;
  send(text: string): void;
}

const heartbeatMs = 15_000;

/** An SSE response fed by `produce`. Enqueueing never blocks, so the producer never waits on the network. */
export function eventStreamResponse(deps: AppDependencies, c: Context<AppEnv>, produce: (sink: StreamSink) => Promise<void>): Response {
  const encoder = new TextEncoder();
  let open = true;
  let controller: ReadableStreamDefaultController<Uint8Array> | null = null;
  const body = new ReadableStream<Uint8Array>({
    start: (streamController) => void (controller = streamController),
    cancel: () => void (open = false),
  });
  const sink: StreamSink = {
    get open() {
      return open;
    },
    send(text) {
      if (!open || !controller) return;
      try {
        controller.enqueue(encoder.encode(text));
      } catch {
        open = false;
      }
    },
  };
  const requestId = c.get("requestId");
  // A comment line every 15 s: proxies cut idle responses (nginx after 60 s, Cloudflare after 100 s) while a slow
  // provider or tool sends nothing. SSE clients, the OpenAI SDKs included, skip comment lines.
  const heartbeat = setInterval(() => sink.send(": keep-alive\n\n"), heartbeatMs);
  void produce(sink)
    .catch((error: unknown) => deps.log({ level: "error", event: "stream_producer_failed", request_id: requestId, error: error instanceof Error ? error.name : "unknown" }))
    .finally(() => {
      clearInterval(heartbeat);
      if (!open) return;
      open = false;
      try {
        controller?.close();
      } catch {
        // Already closed by a cancel racing this close.
      }
    });
  c.header("Content-Type", "text/event-stream; charset=utf-8");
  c.header("Cache-Control", "no-cache");
  // nginx and some CDNs buffer responses unless told not to, which would hold every delta until the end.
  c.header("X-Accel-Buffering", "no");
  return c.body(body, 200);
}

export function formatEvent(id: number, event: string, data: unknown): string {
  return `event: ${event}\nid: ${id}\ndata: ${JSON.stringify(data)}\n\n`;
}

/** One stored result as a complete stream: `turn-end` for a success, `error` for a failure. */
function replayEvents(deps: AppDependencies, c: Context<AppEnv>, stored: StoredResponse): Response {
  for (const [name, value] of Object.entries(stored.headers)) c.header(name, value);
  c.header("Idempotent-Replayed", "true");
  const ok = stored.status >= 200 && stored.status < 300;
  return eventStreamResponse(deps, c, async (sink) => sink.send(formatEvent(1, ok ? "turn-end" : "error", JSON.parse(stored.body))));
}

/**
 * Writes a running turn's events. `id:` is a per-stream counter from 1 (text deltas have no journal position);
 * journal positions travel in the data (`seq`). A step that streamed text and is then retried or failed over is
 * followed by `text-reset`: the client drops the text received since the last `turn-start`, `tool-call-start`
 * or `tool-call-end`. The stream ends with exactly one `turn-end` or `error`.
 */
async function writeTurnEvents(sink: StreamSink, live: LiveTurn<unknown>, final: Promise<FinalResult>, sessionId: string): Promise<void> {
  let id = 0;
  let stepStreamedText = false;
  const send = (event: string, data: unknown) => sink.send(formatEvent(++id, event, data));
  for await (const event of live.events()) {
    if (!sink.open) return;
    switch (event.type) {
      case "turn-start":
        send("turn-start", { turn_id: event.turnId, session_id: sessionId, seq: event.seq });
        break;
      case "text-delta":
        stepStreamedText = true;
        send("text-delta", { text: event.text });
        break;
      case "step-discarded":
        if (stepStreamedText) send("text-reset", { reason: event.reason });
        stepStreamedText = false;
        break;
      case "provider-fallback":
        if (stepStreamedText) send("text-reset", { reason: event.reason });
        stepStreamedText = false;
        send("provider-fallback", { from: event.from, to: event.to, reason: event.reason });
        break;
      case "tool-call-start":
        stepStreamedText = false;
        send("tool-call-start", { id: event.call.id, name: event.call.name, arguments: event.call.arguments });
        break;
      case "tool-call-end":
        stepStreamedText = false;
        send("tool-call-end", { id: event.call.id, name: event.call.name, is_error: event.isError, seq: event.seq });
        break;
    }
  }
  const result = await final;
  if (!sink.open) return;
  send(result.error ? "error" : "turn-end", result.body);
}

/**
 * The end of a turn-creating request, shared by both routes: the turn's value or failure as a FinalResult,
 * stored for Idempotency-Key replay before the answer goes out (so a client that retries after reading it
 * gets the replay), and handed to waitUntil because the turn outlives a client that disconnects (on Workers
 * this keeps the isolate alive until it ends).
 */
export function recordFinal<T>(
  deps: AppDependencies,
  c: Context<AppEnv>,
  live: LiveTurn<T>,
  idempotent: Extract<IdempotencyBegin, { kind: "run" }>,
  body: (value: T) => unknown,
  headers: () => Record<string, string> = () => ({}),
): Promise<FinalResult> {
  const recorded = live.done
    .then(
      (value): FinalResult => ({ status: 200, body: body(value), headers: headers(), error: null, started: true }),
      (error: unknown) => failureResult(deps, c, error, live.started, headers()),
    )
    .then(async (result) => {
      await idempotent.settle(result);
      return result;
    });
  deps.waitUntil(recorded);
  return recorded;
}

function outcomeBody(result: ChatOutcome) {
  if (result.kind === "command") return { turn: null, reply: result.reply, messages: [], command: result.command };
  const { outcome } = result;
  return { turn: turnJson(outcome.turn), reply: outcome.reply, messages: outcome.messages.map(messageJson) };
}

export function turnRoutes(deps: AppDependencies) {
  const routes = new Hono<AppEnv>();

  routes.post("/:id/messages", async (c) => {
    const sessionId = sessionIdParam(c);
    const body = await readJsonBody(c, PostMessageSchema);
    const streaming = body.stream === true || acceptsEventStream(c);
    const tenant = c.get("tenant");
    const idempotent = await beginIdempotency(deps, c, "");
    if (idempotent.kind === "replay") return streaming ? replayEvents(deps, c, idempotent.response) : replayJson(c, idempotent.response);

    const live = new LiveTurn((onEvent) => handleChatMessage(deps, { tenant, sessionId, content: body.content, reasoning: body.reasoning, stream: streaming, onEvent }));
    const recorded = recordFinal(deps, c, live, idempotent, outcomeBody);

    if (!streaming) return jsonResult(c, await recorded);
    await live.begun();
    if (!live.started) {
      // Nothing began (400/404/409 before the turn) or a command answered: plain JSON errors keep their status.
      const result = await recorded;
      if (result.error) return errorResponse(c, result.error);
      return eventStreamResponse(deps, c, async (sink) => sink.send(formatEvent(1, "turn-end", result.body)));
    }
    return eventStreamResponse(deps, c, (sink) => writeTurnEvents(sink, live, recorded, sessionId));
  });

  return routes;
}
