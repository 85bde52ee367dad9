/// <reference types="node" />
// Local HTTP servers that speak the Telegram Bot API, Slack Web API and Discord interaction webhooks as far
// as hermes-edge uses them. Every call is recorded; faults (429 with a retry hint, 5xx, a dropped connection)
// are scripted per API method, so retry and ordering paths run without the network.
import { createServer } from "node:http";
import type { IncomingMessage, ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { createHmac } from "node:crypto";
import type { Env } from "../../src/config.ts";
import type { AppDependencies } from "../../src/deps.ts";
import { buildTestApp, type TestApp } from "./app.ts";
import { startFakeOpenAI, type FakeProvider } from "./fake-provider.ts";

export interface PlatformCall {
  method: string;
  path: string;
  /** The API method: Telegram `sendMessage`, Slack `chat.postMessage`, Discord `followup`. */
  name: string;
  headers: Record<string, string>;
  body: any;
  at: number;
}

/** A scripted answer for the next call of one API method: a rate limit, a server error, or a reset. */
export type PlatformFault = { type: "rate_limit"; retryAfter: number } | { type: "error"; status: number; body?: unknown } | { type: "reset" };

export interface FakePlatform {
  /** The API base to put in `*_API_BASE`. */
  readonly url: string;
  readonly calls: PlatformCall[];
  /** Calls of one API method, in arrival order. */
  callsTo(name: string): PlatformCall[];
  /** Queues faults answered, in order, to the next calls of `name`. */
  fault(name: string, ...faults: PlatformFault[]): void;
  close(): Promise<void>;
}

type Answer = { status: number; body: unknown; headers?: Record<string, string> };

interface Dialect {
  basePath: string;
  /** The API method a path names, or null for an unknown route. */
  route(method: string, pathname: string): { name: string; params: string[] } | null;
  handle(call: PlatformCall, params: string[]): Answer;
  rateLimited(retryAfter: number): Answer;
  serverError(status: number): Answer;
  notFound(): Answer;
}

function readBody(request: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    request.on("data", (chunk: Buffer) => chunks.push(chunk));
    request.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
    request.on("error", reject);
  });
}

function send(response: ServerResponse, answer: Answer): void {
  const text = JSON.stringify(answer.body);
  response.writeHead(answer.status, { "content-type": "application/json", "content-length": String(Buffer.byteLength(text)), ...answer.headers });
  response.end(text);
}

async function startFake(dialect: Dialect): Promise<FakePlatform> {
  const calls: PlatformCall[] = [];
  const faults = new Map<string, PlatformFault[]>();

  const server = createServer(async (request, response) => {
    const raw = await readBody(request);
    const headers: Record<string, string> = {};
    for (const [name, value] of Object.entries(request.headers)) if (value !== undefined) headers[name] = Array.isArray(value) ? value.join(", ") : value;
    let body: any = raw;
    try {
      body = raw === "" ? null : JSON.parse(raw);
    } catch {
      // Kept as text so a test can see what was sent.
    }
    const method = request.method ?? "GET";
    const pathname = new URL(request.url ?? "/", "http://fake").pathname;
    const route = pathname.startsWith(dialect.basePath) ? dialect.route(method, pathname.slice(dialect.basePath.length)) : null;
    const call: PlatformCall = { method, path: request.url ?? "/", name: route?.name ?? "unknown", headers, body, at: Date.now() };
    calls.push(call);
    if (!route) return send(response, dialect.notFound());
    const fault = faults.get(route.name)?.shift();
    if (fault?.type === "reset") {
      response.socket?.destroy();
      return;
    }
    if (fault?.type === "rate_limit") return send(response, dialect.rateLimited(fault.retryAfter));
    if (fault?.type === "error") return send(response, fault.body === undefined ? dialect.serverError(fault.status) : { status: fault.status, body: fault.body });
    send(response, dialect.handle(call, route.params));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}${dialect.basePath}`,
    calls,
    callsTo: (name) => calls.filter((call) => call.name === name),
    fault(name, ...added) {
      faults.set(name, [...(faults.get(name) ?? []), ...added]);
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** Telegram: `POST /bot<token>/<method>`, answers `{ok, result}` or `{ok: false, error_code, description, parameters}`. */
export function startFakeTelegram(options: { token: string }): Promise<FakePlatform> {
  const failure = (code: number, description: string, parameters?: unknown): Answer => ({
    status: code,
    body: { ok: false, error_code: code, description, ...(parameters ? { parameters } : {}) },
  });
  return startFake({
    basePath: "",
    route(method, pathname) {
      const match = /^\/bot([^/]+)\/([A-Za-z]+)$/.exec(pathname);
      return method === "POST" && match ? { name: match[2]!, params: [match[1]!] } : null;
    },
    handle(call, [token]) {
      if (token !== options.token) return failure(401, "Unauthorized");
      const body = call.body ?? {};
      if (call.name === "sendChatAction") {
        if (body.chat_id === undefined || typeof body.action !== "string") return failure(400, "Bad Request: chat_id and action are required");
        return { status: 200, body: { ok: true, result: true } };
      }
      if (call.name === "sendMessage") {
        if (body.chat_id === undefined) return failure(400, "Bad Request: chat_id is empty");
        if (typeof body.text !== "string" || body.text.trim() === "") return failure(400, "Bad Request: message text is empty");
        if (body.text.length > 4096) return failure(400, "Bad Request: message is too long");
        return { status: 200, body: { ok: true, result: { message_id: Date.now(), date: Math.floor(Date.now() / 1000), chat: { id: body.chat_id }, text: body.text } } };
      }
      return failure(404, "Not Found: method not found");
    },
    rateLimited: (retryAfter) => failure(429, `Too Many Requests: retry after ${retryAfter}`, { retry_after: retryAfter }),
    serverError: (status) => failure(status, "Internal Server Error"),
    notFound: () => failure(404, "Not Found"),
  });
}

/** Slack Web API: `POST /api/chat.postMessage` with a bearer token; failures are HTTP 200 `{ok: false, error}`. */
export function startFakeSlack(options: { token: string }): Promise<FakePlatform> {
  return startFake({
    basePath: "/api",
    route: (method, pathname) => (method === "POST" && /^\/[a-z]+\.[A-Za-z]+$/.test(pathname) ? { name: pathname.slice(1), params: [] } : null),
    handle(call) {
      if (call.headers.authorization !== `Bearer ${options.token}`) return { status: 200, body: { ok: false, error: "invalid_auth" } };
      if (call.name !== "chat.postMessage") return { status: 200, body: { ok: false, error: "unknown_method" } };
      const body = call.body ?? {};
      if (typeof body.channel !== "string") return { status: 200, body: { ok: false, error: "channel_not_found" } };
      if (typeof body.text !== "string" || body.text === "") return { status: 200, body: { ok: false, error: "no_text" } };
      if (body.text.length > 40_000) return { status: 200, body: { ok: false, error: "msg_too_long" } };
      const ts = `${Math.floor(Date.now() / 1000)}.${String(Date.now() % 1_000_000).padStart(6, "0")}`;
      return { status: 200, body: { ok: true, channel: body.channel, ts, message: { text: body.text, thread_ts: body.thread_ts } } };
    },
    rateLimited: (retryAfter) => ({ status: 429, body: { ok: false, error: "ratelimited" }, headers: { "retry-after": String(retryAfter) } }),
    serverError: (status) => ({ status, body: { ok: false, error: "fatal_error" } }),
    notFound: () => ({ status: 404, body: { ok: false, error: "unknown_method" } }),
  });
}

/** Discord: `POST /api/v10/webhooks/<application id>/<interaction token>` (the follow-up), no bot token needed. */
export function startFakeDiscord(options: { applicationId: string }): Promise<FakePlatform> {
  return startFake({
    basePath: "/api/v10",
    route(method, pathname) {
      const match = /^\/webhooks\/([^/]+)\/([^/]+)$/.exec(pathname);
      return method === "POST" && match ? { name: "followup", params: [match[1]!, match[2]!] } : null;
    },
    handle(call, [applicationId]) {
      if (applicationId !== options.applicationId) return { status: 404, body: { message: "Unknown Webhook", code: 10015 } };
      const content = call.body?.content;
      if (typeof content !== "string" || content === "" || content.length > 2000) {
        return { status: 400, body: { message: "Invalid Form Body", code: 50035, errors: { content: { _errors: [{ code: "BASE_TYPE_MAX_LENGTH" }] } } } };
      }
      return { status: 200, body: { id: String(Date.now()), type: 0, content, channel_id: "channel" } };
    },
    rateLimited: (retryAfter) => ({
      status: 429,
      body: { message: "You are being rate limited.", retry_after: retryAfter, global: false },
      headers: { "retry-after": String(Math.ceil(retryAfter)) },
    }),
    serverError: (status) => ({ status, body: { message: "Internal Server Error", code: 0 } }),
    notFound: () => ({ status: 404, body: { message: "404: Not Found", code: 0 } }),
  });
}

export const telegramToken = "123456:test-bot-token";
export const telegramSecret = "telegram-webhook-secret-1";
export const slackSigningSecret = "slack-signing-secret-0123456789";
export const slackBotToken = "xoxb-test-token";
export const discordApplicationId = "100000000000000001";

/** Everything a platform test needs: the app with all three platforms pointed at local fakes and a fake OpenAI. */
export interface PlatformHarness {
  test: TestApp;
  openai: FakeProvider;
  telegram: FakePlatform;
  slack: FakePlatform;
  discord: FakePlatform;
  /** Every wait the app asked `deps.sleep` for, in ms (the sleep itself runs 1000 times faster). */
  sleeps: number[];
  /** Waits for all work handed to `waitUntil`, including work that work scheduled. */
  settle(): Promise<void>;
  postTelegram(update: unknown, secret?: string | null): Promise<Response>;
  postSlack(payload: unknown, options?: { timestamp?: number; signature?: string; headers?: Record<string, string> }): Promise<Response>;
  close(): Promise<void>;
}

export async function startPlatformHarness(options: { env?: Env; overrides?: Partial<AppDependencies>; runtime?: Record<string, unknown> | null } = {}): Promise<PlatformHarness> {
  const openai = await startFakeOpenAI({ apiKey: "sk-test" });
  const telegram = await startFakeTelegram({ token: telegramToken });
  const slack = await startFakeSlack({ token: slackBotToken });
  const discord = await startFakeDiscord({ applicationId: discordApplicationId });
  const runtime = options.runtime === undefined ? { provider: "openai", model: "gpt-test", base_url: openai.url, retry: { max_retries: 0, time_scale: 0 } } : options.runtime;
  const pending: Promise<unknown>[] = [];
  const sleeps: number[] = [];
  const test = await buildTestApp(
    {
      OPENAI_API_KEY: "sk-test",
      ...(runtime ? { HERMES_RUNTIME: JSON.stringify(runtime) } : {}),
      TELEGRAM_BOT_TOKEN: telegramToken,
      TELEGRAM_WEBHOOK_SECRET: telegramSecret,
      TELEGRAM_API_BASE: telegram.url,
      SLACK_SIGNING_SECRET: slackSigningSecret,
      SLACK_BOT_TOKEN: slackBotToken,
      SLACK_API_BASE: slack.url,
      DISCORD_APPLICATION_ID: discordApplicationId,
      DISCORD_API_BASE: discord.url,
      ...options.env,
    },
    {
      waitUntil: (work) => void pending.push(work),
      sleep: (ms) => {
        sleeps.push(ms);
        return new Promise((resolve) => setTimeout(resolve, ms / 1000));
      },
      ...options.overrides,
    },
  );
  return {
    test,
    openai,
    telegram,
    slack,
    discord,
    sleeps,
    async settle() {
      while (pending.length > 0) await Promise.all(pending.splice(0));
    },
    async postTelegram(update, secret = telegramSecret) {
      return test.app.request("/webhooks/telegram", {
        method: "POST",
        headers: { "content-type": "application/json", ...(secret === null ? {} : { "x-telegram-bot-api-secret-token": secret }) },
        body: JSON.stringify(update),
      });
    },
    async postSlack(payload, { timestamp = Math.floor(Date.now() / 1000), signature, headers = {} } = {}) {
      const body = JSON.stringify(payload);
      const signed = signature ?? `v0=${createHmac("sha256", slackSigningSecret).update(`v0:${timestamp}:${body}`).digest("hex")}`;
      return test.app.request("/webhooks/slack", {
        method: "POST",
        headers: { "content-type": "application/json", "x-slack-request-timestamp": String(timestamp), "x-slack-signature": signed, ...headers },
        body,
      });
    },
    async close() {
      await test.close();
      await Promise.all([openai.close(), telegram.close(), slack.close(), discord.close()]);
    },
  };
}
