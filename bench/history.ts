/// <reference types="node" />
// 4. History growth: the 0-tool turn on sessions that already hold 10, 1,000 or 10,000 messages. Sessions
// are created over the API, then the server stops and the history is written straight into the file with
// SQL in one transaction (rows shaped as the store writes them: user/assistant pairs with their turn rows,
// FTS rows through the schema's trigger), then a fresh server runs the turns. The floor sends the same
// history with the SDK.
import { createClient, type Client, type InStatement } from "@libsql/client";
import type { ChatCompletionMessageParam } from "openai/resources/chat/completions";
import { join } from "node:path";
import type { FloorTurn } from "./lib/floor.ts";
import { JsonClient } from "./lib/http.ts";
import { removeDirectory, tempDirectory } from "./lib/proc.ts";
import { apiKey, checkTurn, createSessions, model, sendTurn, serverEnv, startNodeServer, turnCases } from "./lib/setup.ts";
import { ms, percentile, table } from "./lib/stats.ts";

export const question = (seq: number) => `history question ${seq}: what did the quick brown fox do next in the story?`;
export const answer = (seq: number) => `history answer ${seq}: it jumped over the lazy dog and went on with the journey.`;

const insertMessages = `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < :count)
  INSERT INTO messages (session_pk, seq, turn_id, role, content, tool_calls, tool_call_id, name, is_error, effect, provider, model, created_at)
  SELECT :pk, i, 'hist-' || :pk || '-' || ((i + 1) / 2),
         CASE i % 2 WHEN 1 THEN 'user' ELSE 'assistant' END,
         CASE i % 2 WHEN 1 THEN printf('history question %d: what did the quick brown fox do next in the story?', i)
                   ELSE printf('history answer %d: it jumped over the lazy dog and went on with the journey.', i) END,
         NULL, NULL, NULL, 0, NULL,
         CASE i % 2 WHEN 0 THEN 'openai' END, CASE i % 2 WHEN 0 THEN :model END, :now
  FROM n`;

const insertTurns = `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < :pairs)
  INSERT INTO turns (id, session_pk, status, provider, model, fallback_activated, attempts, input_tokens, output_tokens, error, started_at, ended_at)
  SELECT 'hist-' || :pk || '-' || i, :pk, 'completed', 'openai', :model, 0, :attempts, 10, 2, NULL, :now, :now FROM n`;

/**
 * Writes `messages` prior messages (user/assistant pairs, as the store writes them, with a turn row per pair)
 * into each session of `pks`, in one write transaction. Also used by section 8 (compressed-history.ts).
 */
export async function insertHistory(db: Client, pks: number[], messages: number): Promise<void> {
  const now = new Date().toISOString();
  const attempts = JSON.stringify([{ provider: "openai", model, outcome: "ok" }]);
  const statements = pks.flatMap((pk): InStatement[] => [
    { sql: insertMessages, args: { count: messages, pk, model, now } },
    { sql: insertTurns, args: { pairs: messages / 2, pk, model, attempts, now } },
  ]);
  await db.batch(statements, "write");
}

export interface HistoryPlan {
  messages: number;
  iterations: number;
  warmup: number;
  /** Turns run on one session before moving to the next; its history grows by 2 per turn. */
  turnsPerSession: number;
}

export interface HistoryRow {
  plan: HistoryPlan;
  turn: number[];
  floor: number[];
  insertMs: number;
}

/**
 * Creates `sessions` sessions per history size over the API (a server that then stops), and writes each one's
 * `messages` prior messages into the file with SQL, one write transaction per size. Returns the session ids per
 * size and the insert time per size.
 */
export async function prepareHistorySessions(
  env: Record<string, string>,
  url: string,
  plans: { messages: number; sessions: number }[],
  label: string,
): Promise<{ ids: Map<number, string[]>; insertMs: Map<number, number> }> {
  const ids = new Map<number, string[]>();
  const creator = await startNodeServer(env);
  const creatorClient = new JsonClient(creator.url, apiKey);
  try {
    for (const plan of plans) ids.set(plan.messages, await createSessions(creatorClient, `${label}-${plan.messages}`, plan.sessions));
  } finally {
    creatorClient.close();
    await creator.stop();
  }
  const insertMs = new Map<number, number>();
  const db = createClient({ url });
  try {
    const pks = new Map((await db.execute("SELECT id, pk FROM sessions")).rows.map((row) => [String(row.id), Number(row.pk)]));
    for (const plan of plans) {
      const started = performance.now();
      await insertHistory(db, ids.get(plan.messages)!.map((id) => pks.get(id)!), plan.messages);
      insertMs.set(plan.messages, performance.now() - started);
    }
  } finally {
    db.close();
  }
  return { ids, insertMs };
}

export async function measureHistory(fakeUrl: string, floor: FloorTurn, plans: HistoryPlan[]): Promise<HistoryRow[]> {
  const directory = tempDirectory("history");
  const url = `file:${join(directory, "history.db")}`;
  const env = serverEnv(url, fakeUrl);
  const zeroTools = turnCases[0]!;
  const sessionsOf = (plan: HistoryPlan) => Math.ceil((plan.warmup + plan.iterations) / plan.turnsPerSession);
  try {
    const { ids, insertMs } = await prepareHistorySessions(env, url, plans.map((plan) => ({ messages: plan.messages, sessions: sessionsOf(plan) })), "hist");

    const server = await startNodeServer(env);
    const client = new JsonClient(server.url, apiKey);
    const rows: HistoryRow[] = [];
    try {
      for (const plan of plans) {
        const history: ChatCompletionMessageParam[] = [];
        for (let seq = 1; seq <= plan.messages; seq++) history.push(seq % 2 === 1 ? { role: "user", content: question(seq) } : { role: "assistant", content: answer(seq) });
        const sessionIds = ids.get(plan.messages)!;
        const row: HistoryRow = { plan, turn: [], floor: [], insertMs: insertMs.get(plan.messages)! };
        for (let index = 0; index < plan.warmup + plan.iterations; index++) {
          const reply = await sendTurn(client, sessionIds[Math.floor(index / plan.turnsPerSession)]!, zeroTools);
          checkTurn(reply, zeroTools);
          const direct = await floor(zeroTools.content, history);
          if (index < plan.warmup) continue;
          row.turn.push(reply.ms);
          row.floor.push(direct.ms);
        }
        rows.push(row);
      }
    } finally {
      client.close();
      await server.stop();
    }
    return rows;
  } finally {
    removeDirectory(directory);
  }
}

export function historyTable(rows: HistoryRow[]): string {
  return table(
    "4. History growth (0-tool turn, embedded file store)",
    ["prior messages", "iterations", "turn p50", "turn p99", "floor p50", "floor p99", "overhead p50", "overhead p99", "insert s"],
    rows.map((row) => {
      const turn50 = percentile(row.turn, 50);
      const floor50 = percentile(row.floor, 50);
      return [
        row.plan.messages.toLocaleString("en-US"),
        row.turn.length,
        ms(turn50),
        ms(percentile(row.turn, 99)),
        ms(floor50),
        ms(percentile(row.floor, 99)),
        `+${ms(turn50 - floor50)}`,
        `+${ms(percentile(row.turn, 99) - percentile(row.floor, 99))}`,
        (row.insertMs / 1000).toFixed(2),
      ];
    }),
    [
      "Times in ms. The floor sends the same history (system + prior messages + the new user message) with the SDK.",
      `A session serves ${rows.map((row) => `${row.plan.turnsPerSession}`).join("/")} turns before the next is used, so its history grows by at most ${2 * (Math.max(...rows.map((row) => row.plan.turnsPerSession)) - 1)} messages during the run.`,
      "insert s = the one write transaction that put the history of all sessions of that size into the file (before the server started).",
    ],
  );
}
