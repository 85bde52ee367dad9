/// <reference types="node" />
// What every phase shares: the fake provider process, the server's environment, sessions and turns over
// HTTP, and the turn cases.
import { resolve } from "node:path";
import { freePort } from "../../tests/support/sqld.ts";
import { JsonClient, type Reply } from "./http.ts";
import { startJsonLineProcess, startServer, stopChild, type ServerProcess } from "./proc.ts";

export const apiKey = "bench-key-0123456789abcdef";
export const providerKey = "sk-bench";
export const model = "gpt-bench";
export const toolsets = ["todo", "session"];

export interface TurnCase {
  key: string;
  label: string;
  /**
   * The user message; the fake reads `bench:<tool>:<n>[:<query>]` from it (bench/fake-main.ts). `{token}`
   * becomes a word unique to the session, so a session_search query matches that session's rows only.
   */
  content: string;
  tools: number;
  providerCalls: number;
}

export const turnCases: TurnCase[] = [
  { key: "t0", label: "0 tools", content: "bench:none:0", tools: 0, providerCalls: 1 },
  { key: "t2s", label: "2 tools sequential (todo)", content: "bench:todo:2", tools: 2, providerCalls: 2 },
  { key: "t2c", label: "2 tools concurrent (session_search)", content: "bench:session_search:2:{token}", tools: 2, providerCalls: 2 },
  { key: "t8s", label: "8 tools sequential (todo)", content: "bench:todo:8", tools: 8, providerCalls: 2 },
  { key: "t8c", label: "8 tools concurrent (session_search)", content: "bench:session_search:8:{token}", tools: 8, providerCalls: 2 },
];

/**
 * session_search for a word every session's first message holds: FTS5 matches it in the whole table before
 * the session filter applies, so the cost follows the size of the store (run last, on the largest store).
 */
export const commonWordCase: TurnCase = {
  key: "t2w",
  label: "2 tools concurrent (session_search, word in every session)",
  content: "bench:session_search:2:bench",
  tools: 2,
  providerCalls: 2,
};

/** The case's user message for one session. */
export function contentFor(turnCase: Pick<TurnCase, "content">, sessionId: string): string {
  return turnCase.content.replace("{token}", `tok${sessionId.replace(/[^A-Za-z0-9]/g, "")}`);
}

export function benchRuntime(fakeUrl: string) {
  return { provider: "openai", model, base_url: fakeUrl, toolsets, retry: { max_retries: 0, time_scale: 0 } };
}

export function serverEnv(libsqlUrl: string, fakeUrl: string): Record<string, string> {
  return {
    LIBSQL_URL: libsqlUrl,
    HERMES_API_KEYS: apiKey,
    HERMES_RUNTIME: JSON.stringify(benchRuntime(fakeUrl)),
    OPENAI_API_KEY: providerKey,
    HERMES_FETCH_ALLOW_PRIVATE: "1",
  };
}

export async function startFake(): Promise<{ url: string; pid: number; stop(): Promise<void> }> {
  const { child, line } = await startJsonLineProcess("bench/fake-main.ts");
  return { url: String(line.url), pid: child.pid!, stop: () => stopChild(child) };
}

/**
 * The real Node entry as a child process: `node [nodeArgs] --import bench/lib/server-preload.mjs --import tsx
 * src/entry/node.ts` (the trace preload only reports libSQL error codes; see that file).
 */
export async function startNodeServer(env: Record<string, string>, nodeArgs: string[] = []): Promise<ServerProcess> {
  const args = [...nodeArgs, "--import", resolve("bench/lib/server-preload.mjs"), "--import", "tsx", "src/entry/node.ts"];
  return startServer({ command: process.execPath, args, env, port: await freePort() });
}

/** The libSQL errors a server traced (bench/lib/server-preload.mjs), counted by code. */
export function tracedErrors(lines: string[]): Map<string, number> {
  const counts = new Map<string, number>();
  for (const line of lines) {
    try {
      const entry = JSON.parse(line) as { bench_trace: string; method: string; code: string | null; message: string };
      if (entry.bench_trace !== "libsql_error") continue;
      const key = `${entry.code ?? "?"} on ${entry.method}: ${entry.message}`;
      counts.set(key, (counts.get(key) ?? 0) + 1);
    } catch {
      // a truncated line at the start of the kept output
    }
  }
  return counts;
}

/** Creates sessions `${prefix}-0..count-1` (HERMES_RUNTIME as their runtime), a few requests at a time. */
export async function createSessions(client: JsonClient, prefix: string, count: number, parallel = 8): Promise<string[]> {
  const ids = Array.from({ length: count }, (_, index) => `${prefix}-${index}`);
  let next = 0;
  const worker = async () => {
    while (next < ids.length) {
      const id = ids[next++]!;
      const reply = await client.send("POST", "/v1/sessions", { id });
      if (reply.status !== 201) throw new Error(`creating session ${id}: ${reply.status} ${JSON.stringify(reply.body)}`);
    }
  };
  await Promise.all(Array.from({ length: Math.min(parallel, count) }, worker));
  return ids;
}

/** One turn of `turnCase` on the session (its content through `contentFor`). */
export function sendTurn(client: JsonClient, sessionId: string, turnCase: Pick<TurnCase, "content">, timeoutMs?: number): Promise<Reply> {
  return client.send("POST", `/v1/sessions/${encodeURIComponent(sessionId)}/messages`, { content: contentFor(turnCase, sessionId) }, timeoutMs);
}

/** Throws unless the turn completed with the expected tool results, none of them an error. */
export function checkTurn(reply: Reply, turnCase: Pick<TurnCase, "tools" | "label">): void {
  if (reply.status !== 200) throw new Error(`${turnCase.label}: HTTP ${reply.status} ${JSON.stringify(reply.body).slice(0, 300)}`);
  const messages = (reply.body?.messages ?? []) as { role: string; is_error?: boolean; content?: string }[];
  const results = messages.filter((message) => message.role === "tool");
  const failed = results.filter((result) => result.is_error);
  if (reply.body?.turn?.status !== "completed" || results.length !== turnCase.tools || failed.length > 0) {
    const detail = failed.length > 0 ? `: ${String(failed[0]!.content).slice(0, 80)}` : "";
    throw new Error(`turn ${reply.body?.turn?.status}, ${results.length}/${turnCase.tools} tool results, ${failed.length} failed${detail}`);
  }
}
