/// <reference types="node" />
// Shared pieces of the reliability suite (tests/reliability): the app over any libSQL database (file or sqld),
// a whole-database journal consistency check, a fingerprint of every table (to prove a refused request
// changed nothing), and a scan for secrets in text and in the bytes of a database file.
import { createClient, type Client } from "@libsql/client";
import { existsSync, readFileSync } from "node:fs";
import { createHash } from "node:crypto";
import type { Env } from "../../src/config.ts";
import type { AppDependencies } from "../../src/deps.ts";
import { buildTestApp, testApiKey, testSecretKey, otherTenantKey, type TestApp } from "./app.ts";
import type { TestDatabase } from "./db.ts";
import { startFakeOpenAI, type RecordedRequest, type ScriptStep } from "./fake-provider.ts";
import { discordApplicationId, slackBotToken, slackSigningSecret, startFakeDiscord, startFakeSlack, startFakeTelegram, telegramSecret, telegramToken } from "./fake-platforms.ts";

export { testApiKey, testSecretKey, otherTenantKey };

/**
 * A database on a libSQL server: one client per app instance, the server outlives them.
 *
 * Each client keeps at most 3 requests in flight. The sqld build the tests use (0.24.32) can stop answering
 * writes for good when a few dozen write transactions arrive at once over HTTP: reads still work, every
 * write waits forever (seen with plain @libsql/client batches and no app code at all, two clients at their
 * default concurrency of 20). The app's turns still all start at once; only the client queues its requests.
 */
export function serverDatabase(url: string, concurrency = 3): TestDatabase {
  const client = createClient({ url, concurrency });
  return { url, client, close: async () => client.close() };
}

/**
 * `buildTestApp` over a database of the caller's choice (a temp file by default), so the same scenario runs
 * over an embedded file and over sqld, and several app instances can share one database (scale-out).
 */
export async function buildAppOver(options: { database?: TestDatabase; env?: Env; overrides?: Partial<AppDependencies> } = {}): Promise<TestApp> {
  return buildTestApp(options.env, options.overrides, options.database);
}

interface MessageRow {
  seq: number;
  turnId: string | null;
  role: string;
  toolCalls: { id: string; name: string }[] | null;
  toolCallId: string | null;
}

/**
 * Every invariant the journal contract promises once no turn is running, over every session of the database:
 * seqs 1..n without gaps; each assistant tool call answered exactly once, by results directly after it in call
 * order; no stray or duplicate tool result; every message belongs to a turn of its session; every turn ended
 * (completed, failed or interrupted) with an end time; no session lease held; no inbox event left processing.
 * Returns the problems found (an empty list when the database is consistent).
 */
export async function journalProblems(client: Client, sessionIds?: readonly string[]): Promise<string[]> {
  const problems: string[] = [];
  const all = await client.execute("SELECT pk, tenant, id, lease_owner FROM sessions ORDER BY pk");
  const sessions = { rows: sessionIds ? all.rows.filter((row) => sessionIds.includes(String(row.id))) : all.rows };
  for (const session of sessions.rows) {
    const pk = Number(session.pk);
    const name = `${String(session.tenant)}/${String(session.id)}`;
    if (session.lease_owner !== null) problems.push(`${name}: lease still held by ${String(session.lease_owner)}`);
    const turns = await client.execute({ sql: "SELECT id, status, ended_at FROM turns WHERE session_pk = ?", args: [pk] });
    const turnIds = new Set(turns.rows.map((row) => String(row.id)));
    for (const turn of turns.rows) {
      if (!["completed", "failed", "interrupted"].includes(String(turn.status))) problems.push(`${name}: turn ${String(turn.id)} is ${String(turn.status)}`);
      if (turn.ended_at === null) problems.push(`${name}: turn ${String(turn.id)} has no ended_at`);
    }
    const result = await client.execute({ sql: "SELECT seq, turn_id, role, tool_calls, tool_call_id FROM messages WHERE session_pk = ? ORDER BY seq", args: [pk] });
    const rows: MessageRow[] = result.rows.map((row) => ({
      seq: Number(row.seq),
      turnId: row.turn_id === null ? null : String(row.turn_id),
      role: String(row.role),
      toolCalls: row.tool_calls === null ? null : (JSON.parse(String(row.tool_calls)) as { id: string; name: string }[]),
      toolCallId: row.tool_call_id === null ? null : String(row.tool_call_id),
    }));
    rows.forEach((row, index) => {
      if (row.seq !== index + 1) problems.push(`${name}: seq ${row.seq} at position ${index + 1} (gap or duplicate)`);
      if (row.turnId !== null && !turnIds.has(row.turnId)) problems.push(`${name}: seq ${row.seq} names turn ${row.turnId}, which is not a turn of the session`);
    });
    const answered = new Map<string, number>();
    for (let index = 0; index < rows.length; index++) {
      const row = rows[index]!;
      if (row.role === "tool") {
        problems.push(`${name}: stray tool result seq ${row.seq} (${row.toolCallId})`);
        continue;
      }
      if (row.role !== "assistant" || !row.toolCalls || row.toolCalls.length === 0) continue;
      const ids = [...new Set(row.toolCalls.map((call) => call.id))];
      for (const id of ids) {
        const next = rows[index + 1];
        if (next?.role === "tool" && next.toolCallId === id) {
          index += 1;
          answered.set(id, (answered.get(id) ?? 0) + 1);
        } else {
          problems.push(`${name}: call ${id} of seq ${row.seq} is not answered in order (next: ${next ? `${next.role} ${next.toolCallId ?? ""} seq ${next.seq}` : "end"})`);
        }
      }
    }
    for (const [id, count] of answered) if (count !== 1) problems.push(`${name}: call ${id} answered ${count} times`);
  }
  const inbox = await client.execute("SELECT platform, event_id, session_id, status FROM inbox WHERE status = 'processing'");
  for (const row of inbox.rows.filter((entry) => !sessionIds || sessionIds.includes(String(entry.session_id)))) problems.push(`inbox ${String(row.platform)}/${String(row.event_id)} left processing`);
  return problems;
}

const fingerprintTables = ["sessions", "messages", "turns", "inbox", "session_notes", "idempotency", "secrets"];

/** SHA-256 over every row of every table (order-independent), to show that a request changed nothing. */
export async function databaseFingerprint(client: Client): Promise<string> {
  const hash = createHash("sha256");
  for (const table of fingerprintTables) {
    const result = await client.execute(`SELECT * FROM ${table}`);
    const rows = result.rows.map((row) => JSON.stringify(result.columns.map((column) => {
      const value = row[column];
      return typeof value === "bigint" ? value.toString() : value instanceof ArrayBuffer ? Buffer.from(value).toString("hex") : value;
    }))).sort();
    hash.update(`${table}:${rows.length}\n${rows.join("\n")}\n`);
  }
  return hash.digest("hex");
}

/** The secrets among `secrets` that occur in `text`. */
export function leakedSecrets(text: string, secrets: readonly string[]): string[] {
  return secrets.filter((secret) => secret.length > 0 && text.includes(secret));
}

/** Status line, headers and body of a response as one text to scan (the body is consumed). */
export async function responseText(response: Response): Promise<string> {
  const headers = [...response.headers.entries()].map(([name, value]) => `${name}: ${value}`).join("\n");
  return `${response.status}\n${headers}\n\n${await response.text()}`;
}

/** The secrets found in the bytes of a SQLite database file and its -wal / -journal companions. */
export function secretsInDatabaseFiles(path: string, secrets: readonly string[]): string[] {
  const found = new Set<string>();
  for (const file of [path, `${path}-wal`, `${path}-journal`, `${path}-shm`]) {
    if (!existsSync(file)) continue;
    const bytes = readFileSync(file);
    for (const secret of secrets) {
      // UTF-8 (how SQLite stores TEXT here) and, to be thorough, UTF-16LE.
      if (bytes.includes(Buffer.from(secret, "utf8")) || bytes.includes(Buffer.from(secret, "utf16le"))) found.add(secret);
    }
  }
  return [...found];
}

/** The file path of a `file:` libSQL URL. */
export function databasePath(url: string): string {
  return url.replace(/^file:/, "");
}

/** Text of the first user message of a provider request (the scenario key the fakes route on). */
export function firstUserText(request: RecordedRequest): string {
  const messages = (request.body?.messages ?? []) as { role: string; content: unknown }[];
  const first = messages.find((message) => message.role === "user");
  return typeof first?.content === "string" ? first.content : "";
}

/** The last message of a provider request. */
export function lastMessage(request: RecordedRequest): { role: string; content?: unknown; tool_call_id?: string } {
  const messages = (request.body?.messages ?? []) as { role: string; content?: unknown; tool_call_id?: string }[];
  return messages[messages.length - 1] ?? { role: "none" };
}

/** Text of the last user message of a provider request. */
export function lastUserText(request: RecordedRequest): string {
  const messages = (request.body?.messages ?? []) as { role: string; content: unknown }[];
  const users = messages.filter((message) => message.role === "user");
  const last = users[users.length - 1];
  return typeof last?.content === "string" ? last.content : "";
}

/** Waits until `check` returns a value other than undefined, polling every `everyMs` up to `timeoutMs`. */
export async function waitFor<T>(what: string | (() => string), check: () => Promise<T | undefined> | T | undefined, timeoutMs = 15_000, everyMs = 25): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${typeof what === "function" ? what() : what}`);
    await new Promise((resolve) => setTimeout(resolve, everyMs));
  }
}

/**
 * The local fakes the hostile-input and security suites share: one OpenAI-style provider that answers a user
 * message found in `scripts` with that step ("ok" otherwise) and a tool result with "done", the three platform
 * APIs, and a Discord key pair; plus the environment that points the app at all of them.
 */
export async function startScriptedFakes(scripts: Map<string, ScriptStep>, discordBotToken: string) {
  const provider = await startFakeOpenAI();
  provider.setFallback((request) => {
    const last = lastMessage(request);
    if (last.role === "tool") return { type: "text", text: "done" };
    return (last.role === "user" ? scripts.get(String(last.content)) : undefined) ?? { type: "text", text: "ok" };
  });
  const telegram = await startFakeTelegram({ token: telegramToken });
  const slack = await startFakeSlack({ token: slackBotToken });
  const discord = await startFakeDiscord({ applicationId: discordApplicationId });
  const discordKeys = (await crypto.subtle.generateKey({ name: "Ed25519" }, true, ["sign", "verify"])) as CryptoKeyPair;
  const platformEnv: Env = {
    TELEGRAM_BOT_TOKEN: telegramToken,
    TELEGRAM_WEBHOOK_SECRET: telegramSecret,
    TELEGRAM_API_BASE: telegram.url,
    SLACK_SIGNING_SECRET: slackSigningSecret,
    SLACK_BOT_TOKEN: slackBotToken,
    SLACK_API_BASE: slack.url,
    DISCORD_PUBLIC_KEY: Buffer.from(await crypto.subtle.exportKey("raw", discordKeys.publicKey)).toString("hex"),
    DISCORD_APPLICATION_ID: discordApplicationId,
    DISCORD_BOT_TOKEN: discordBotToken,
    DISCORD_API_BASE: discord.url,
  };
  return {
    provider,
    telegram,
    slack,
    discord,
    discordKeys,
    platformEnv,
    /** Origins of every fake, for a test fetch that lets only them through. */
    origins: [provider.url, telegram.url, slack.url, discord.url].map((url) => new URL(url).origin),
    close: () => Promise.all([provider.close(), telegram.close(), slack.close(), discord.close()]),
  };
}
