/// <reference types="node" />
// Shared machinery of the fake providers: HTTP plumbing, request recording, the script queue and
// the wire-independent parts of each step (hang, reset). The wire formats live in fake-openai.ts and
// fake-anthropic.ts, which plug in through the `Dialect` interface.
import { createServer } from "node:http";
import type { IncomingMessage, Server, ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { randomBytes } from "node:crypto";

export type Usage = { input: number; output: number };

export type ScriptStep =
  | { type: "text"; text: string; usage?: Usage }
  | {
      type: "tool_calls";
      calls: { id?: string; name: string; arguments: string }[];
      text?: string;
      usage?: Usage;
    }
  | { type: "error"; status: number; body?: unknown; headers?: Record<string, string> }
  | { type: "reset" }
  | { type: "hang"; ms: number; then?: ScriptStep }
  | { type: "stream_cut"; text: string }
  /** A body that is not JSON, with a JSON content type: a broken proxy or a truncated gateway answer. */
  | { type: "invalid_json"; status?: number; body?: string };

export type ScriptEntry = ScriptStep | ((request: RecordedRequest) => ScriptStep);

export interface RecordedRequest {
  path: string;
  headers: Record<string, string>;
  body: any;
  stream: boolean;
  at: number;
}

export interface FakeProvider {
  readonly url: string;
  readonly requests: RecordedRequest[];
  script(...entries: ScriptEntry[]): void;
  setFallback(entry: ScriptEntry | null): void;
  readonly rejected: { status: number; message: string }[];
  close(): Promise<void>;
}

export interface FakeProviderOptions {
  /** When set, requests must carry this key in the provider's auth header or get a 401. */
  apiKey?: string;
  /** Port to listen on; 0 (default) picks a free one. Lets a restarted process keep its URL. */
  port?: number;
}

/** A refusal produced by the fake itself (auth, routing, validation), never by the script. */
export class Refusal {
  constructor(
    readonly status: number,
    readonly message: string,
    readonly body: unknown,
  ) {}
}

export type AnswerStep = Extract<ScriptStep, { type: "text" } | { type: "tool_calls" }>;

/** The per-provider half: routes, auth, validation and serialisation. */
export interface Dialect {
  /** Path prefix appended to the origin to form `FakeProvider.url`. */
  basePath: string;
  /** Answers non-scripted routes (e.g. model lists); returns false when the route is not handled. */
  staticRoute(method: string, pathname: string, res: ServerResponse): boolean;
  /** True for the route that consumes script entries. */
  isGenerateRoute(method: string, pathname: string): boolean;
  checkAuth(headers: Record<string, string>, apiKey: string): Refusal | null;
  notFound(method: string, pathname: string): Refusal;
  malformed(detail: string): Refusal;
  validate(body: any): Refusal | null;
  errorBody(status: number): unknown;
  /** Extra headers the real API puts on every response (request ids and the like). */
  commonHeaders(): Record<string, string>;
  answer(step: AnswerStep, req: RecordedRequest, out: Output): Promise<void>;
  /** Streams `text` as deltas without the closing events; the caller then drops the socket. */
  streamCut(text: string, req: RecordedRequest, out: Output): Promise<void>;
}

/** Write helpers over one response that stop quietly once the client has gone away. */
export class Output {
  constructor(
    readonly res: ServerResponse,
    private readonly common: Record<string, string>,
  ) {}

  get gone(): boolean {
    return this.res.destroyed || this.res.socket == null || this.res.socket.destroyed;
  }

  json(status: number, body: unknown, headers: Record<string, string> = {}): void {
    if (this.gone) return;
    const text = JSON.stringify(body);
    this.res.writeHead(status, {
      ...this.common,
      "content-type": "application/json",
      "content-length": String(Buffer.byteLength(text)),
      ...headers,
    });
    this.res.end(text);
  }

  raw(status: number, text: string, contentType: string): void {
    if (this.gone) return;
    this.res.writeHead(status, { ...this.common, "content-type": contentType, "content-length": String(Buffer.byteLength(text)) });
    this.res.end(text);
  }

  startStream(): void {
    if (this.gone) return;
    this.res.writeHead(200, {
      ...this.common,
      "content-type": "text/event-stream; charset=utf-8",
      "cache-control": "no-cache",
      connection: "keep-alive",
    });
    this.res.flushHeaders();
  }

  /** Resolves once the chunk is handed to the kernel, so a later socket destroy cannot drop it. */
  write(chunk: string): Promise<void> {
    if (this.gone) return Promise.resolve();
    return new Promise((resolve) => {
      // A client that disconnects mid-write may leave the callback pending; 'close' settles it.
      const done = () => {
        this.res.off("close", done);
        setImmediate(resolve);
      };
      this.res.once("close", done);
      this.res.write(chunk, done);
    });
  }

  end(): void {
    if (!this.gone) this.res.end();
  }

  destroy(): void {
    this.res.socket?.destroy();
    this.res.destroy();
  }
}

const ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

export function randomId(prefix: string, length: number): string {
  const bytes = randomBytes(length);
  let id = prefix;
  for (const byte of bytes) id += ALPHABET[byte % ALPHABET.length];
  return id;
}

/** Splits into up to `count` non-empty pieces without breaking surrogate pairs, as real deltas do. */
export function splitPieces(text: string, count = 3): string[] {
  const chars = Array.from(text);
  if (chars.length === 0) return [];
  const size = Math.ceil(chars.length / Math.min(count, chars.length));
  const pieces: string[] = [];
  for (let i = 0; i < chars.length; i += size) pieces.push(chars.slice(i, i + size).join(""));
  return pieces;
}

/** A rough token count (4 characters a token) so usage numbers move with the payload. */
export function estimateTokens(value: unknown): number {
  const text = typeof value === "string" ? value : JSON.stringify(value ?? "");
  return Math.max(1, Math.ceil(text.length / 4));
}

export function outputTokens(step: AnswerStep): number {
  if (step.usage) return step.usage.output;
  let text = step.text ?? "";
  if (step.type === "tool_calls") for (const c of step.calls) text += c.name + c.arguments;
  return estimateTokens(text);
}

const DEFAULT_FALLBACK: ScriptStep = { type: "text", text: "ok" };

function flattenHeaders(req: IncomingMessage): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(req.headers)) {
    if (value === undefined) continue;
    headers[name.toLowerCase()] = Array.isArray(value) ? value.join(", ") : value;
  }
  return headers;
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
    req.on("error", reject);
  });
}

/** Resolves true after `ms`, or false as soon as the client drops the connection. */
function waitUnlessAborted(res: ServerResponse, ms: number): Promise<boolean> {
  return new Promise((resolve) => {
    const onClose = () => {
      clearTimeout(timer);
      resolve(false);
    };
    const timer = setTimeout(() => {
      res.off("close", onClose);
      resolve(true);
    }, ms);
    res.once("close", onClose);
  });
}

export async function startFakeServer(dialect: Dialect, options: FakeProviderOptions = {}): Promise<FakeProvider> {
  const requests: RecordedRequest[] = [];
  const rejected: { status: number; message: string }[] = [];
  const queue: ScriptEntry[] = [];
  let fallback: ScriptEntry | null = DEFAULT_FALLBACK;

  const refuse = (out: Output, refusal: Refusal) => {
    rejected.push({ status: refusal.status, message: refusal.message });
    out.json(refusal.status, refusal.body);
  };

  const nextStep = (recorded: RecordedRequest): ScriptStep => {
    const entry = queue.length > 0 ? queue.shift() : fallback;
    if (entry == null) {
      return { type: "error", status: 500, body: undefined, headers: { "x-fake-provider": "script-exhausted" } };
    }
    return typeof entry === "function" ? entry(recorded) : entry;
  };

  const run = async (step: ScriptStep, recorded: RecordedRequest, out: Output): Promise<void> => {
    switch (step.type) {
      case "text":
      case "tool_calls":
        await dialect.answer(step, recorded, out);
        return;
      case "error":
        out.json(step.status, step.body === undefined ? dialect.errorBody(step.status) : step.body, step.headers);
        return;
      case "reset":
        out.destroy();
        return;
      case "hang": {
        const stillThere = await waitUnlessAborted(out.res, step.ms);
        if (!stillThere || out.gone) return;
        // Without an explicit follow-up the hang ends like an unscripted request would.
        const then = step.then ?? (fallback == null ? DEFAULT_FALLBACK : typeof fallback === "function" ? fallback(recorded) : fallback);
        await run(then, recorded, out);
        return;
      }
      case "stream_cut":
        if (recorded.stream) await dialect.streamCut(step.text, recorded, out);
        out.destroy();
        return;
      case "invalid_json":
        out.raw(step.status ?? 200, step.body ?? '{"choices": [', "application/json");
        return;
    }
  };

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const out = new Output(res, dialect.commonHeaders());
    const raw = await readBody(req);
    const headers = flattenHeaders(req);
    let body: any = raw;
    let parsed = raw.length === 0;
    if (raw.length > 0) {
      try {
        body = JSON.parse(raw);
        parsed = true;
      } catch {
        // Kept as the raw text so a test can see what was sent.
      }
    }
    const recorded: RecordedRequest = {
      path: req.url ?? "/",
      headers,
      body,
      stream: parsed && typeof body === "object" && body !== null && body.stream === true,
      at: Date.now(),
    };
    requests.push(recorded);

    const method = req.method ?? "GET";
    const pathname = new URL(recorded.path, "http://fake").pathname;
    if (options.apiKey !== undefined) {
      const denied = dialect.checkAuth(headers, options.apiKey);
      if (denied) return refuse(out, denied);
    }
    if (dialect.staticRoute(method, pathname, res)) return;
    if (!dialect.isGenerateRoute(method, pathname)) return refuse(out, dialect.notFound(method, pathname));
    if (!parsed || typeof body !== "object" || body === null || Array.isArray(body)) {
      return refuse(out, dialect.malformed(parsed ? "body must be a JSON object" : "body is not valid JSON"));
    }
    const invalid = dialect.validate(body);
    if (invalid) return refuse(out, invalid);

    let step: ScriptStep;
    try {
      step = nextStep(recorded);
    } catch (error) {
      // A throwing script function is a test bug; answer loudly rather than hang the client.
      out.json(500, dialect.errorBody(500), { "x-fake-provider-error": String(error).replace(/[^\x20-\x7e]/g, " ").slice(0, 200) });
      return;
    }
    await run(step, recorded, out);
  };

  const server: Server = createServer((req, res) => {
    handle(req, res).catch((error: unknown) => {
      if (!res.headersSent && !res.destroyed) {
        res.writeHead(500, { "content-type": "text/plain" });
        res.end(`fake provider failure: ${String(error)}`);
      } else {
        res.destroy();
      }
    });
  });
  // Streams may legitimately stay open for long hangs; Node's defaults would cut them.
  server.requestTimeout = 0;
  server.headersTimeout = 0;

  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port ?? 0, "127.0.0.1", () => {
      server.off("error", reject);
      resolve();
    });
  });
  const { port } = server.address() as AddressInfo;
  const url = `http://127.0.0.1:${port}${dialect.basePath}`;
  let closing: Promise<void> | null = null;

  return {
    url,
    requests,
    rejected,
    script(...entries: ScriptEntry[]) {
      queue.push(...entries);
    },
    setFallback(entry: ScriptEntry | null) {
      fallback = entry;
    },
    close() {
      closing ??= new Promise<void>((resolve) => {
        server.close(() => resolve());
        // Keep-alive and hanging requests would otherwise hold close() open.
        server.closeAllConnections();
      });
      return closing;
    },
  };
}
