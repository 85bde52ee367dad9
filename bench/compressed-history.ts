/// <reference types="node" />
// 8. History growth with compression: the 0-tool turn on sessions holding 10, 1,000 or 10,000 prior messages
// whose runtime has a small context (context_length 8192, max_tokens 1024), so the first turn after the
// history was inserted compacts it (src/agent/compression.ts: estimated prompt over half of 8192 - 1024 tokens)
// and later turns load only head + summary + tail + the new messages. Sessions and history are made as in
// section 4 (bench/history.ts); the steady state after the compaction turn is timed over HTTP on the real Node
// server (embedded file store); round trips are counted in-process as in section 2 (bench/roundtrips.ts).
// The fake answers the summarizer request with a short summary and `bench:count:0` with "ok <messages in the
// request>", so each turn reports how many messages it sent to the provider (bench/fake-main.ts).
import { createClient } from "@libsql/client";
import type { ChatCompletionMessageParam } from "openai/resources/chat/completions";
import { dirname, join } from "node:path";
import { createNotesStore } from "../src/state/notes.ts";
import { openStore } from "../src/state/open-store.ts";
import { buildTestApp } from "../tests/support/app.ts";
import { countingClient } from "../tests/support/db.ts";
import { answer, insertHistory, prepareHistorySessions, question } from "./history.ts";
import type { FloorTurn } from "./lib/floor.ts";
import { JsonClient, type Reply } from "./lib/http.ts";
import { adoptDirectory, removeDirectory, tempDirectory } from "./lib/proc.ts";
import { apiKey, benchRuntime, checkTurn, providerKey, sendTurn, serverEnv, startNodeServer } from "./lib/setup.ts";
import { ms, percentile, table } from "./lib/stats.ts";

export const compressedContext = { context_length: 8192, max_tokens: 1024 };
const countCase = { label: "0 tools (count)", content: "bench:count:0", tools: 0 };

export interface CompressedPlan {
  messages: number;
  sessions: number;
  /** Turns per session after its first (compaction) turn: unmeasured, then measured. */
  warmup: number;
  measured: number;
}

interface TurnCounts {
  roundTrips: number;
  statements: number;
}

export interface CompressedRoundTrips {
  /** The first turn (the one that compacts) and the two after it. */
  turns: { journal: TurnCounts; tools: TurnCounts; activeBefore: number; sent: number; compacted: boolean }[];
}

export interface CompressedRow {
  plan: CompressedPlan;
  insertMs: number;
  firstTurn: number[];
  /** Sessions whose first turn journaled a summary. */
  firstCompacted: number;
  turn: number[];
  floor: number[];
  /** Messages in the provider request of each measured turn (system included), from the fake's answer. */
  sent: number[];
  /** Compactions in the warm-up and measured turns (after the first turn). */
  laterCompactions: number;
  /** Rows of each session of the plan at the end: not archived, and all. */
  activeAfter: number[];
  totalAfter: number[];
  roundTrips?: CompressedRoundTrips;
}

function runtimeOf(fakeUrl: string) {
  return { ...benchRuntime(fakeUrl), ...compressedContext };
}

interface TurnBody {
  messages?: { role: string; content?: string | null; summary?: boolean }[];
}

/** Messages the provider request carried (the fake's "ok <n>" answer) and whether the turn compacted. */
function readTurn(body: TurnBody): { sent: number; compacted: boolean } {
  const messages = body.messages ?? [];
  const last = [...messages].reverse().find((message) => message.role === "assistant");
  const match = /^ok (\d+)$/.exec(last?.content ?? "");
  if (!match) throw new Error(`unexpected answer ${JSON.stringify(last?.content)}`);
  return { sent: Number(match[1]), compacted: messages.some((message) => message.summary === true) };
}

/** Synthetic prior messages for the floor: `count` alternating user/assistant messages of section 4's shape. */
function floorHistory(count: number, memo: Map<number, ChatCompletionMessageParam[]>): ChatCompletionMessageParam[] {
  let history = memo.get(count);
  if (!history) {
    history = [];
    for (let seq = 1; seq <= count; seq++) history.push(seq % 2 === 1 ? { role: "user", content: question(seq) } : { role: "assistant", content: answer(seq) });
    memo.set(count, history);
  }
  return history;
}

export async function measureCompressedHistory(fakeUrl: string, floor: FloorTurn, plans: CompressedPlan[]): Promise<CompressedRow[]> {
  const directory = tempDirectory("compressed");
  const url = `file:${join(directory, "compressed.db")}`;
  const env = { ...serverEnv(url, fakeUrl), HERMES_RUNTIME: JSON.stringify(runtimeOf(fakeUrl)) };
  try {
    const { ids, insertMs } = await prepareHistorySessions(env, url, plans, "chist");

    const server = await startNodeServer(env);
    const client = new JsonClient(server.url, apiKey);
    const rows: CompressedRow[] = [];
    const memo = new Map<number, ChatCompletionMessageParam[]>();
    const turn = async (id: string): Promise<Reply & { sent: number; compacted: boolean }> => {
      const reply = await sendTurn(client, id, countCase);
      checkTurn(reply, countCase);
      return { ...reply, ...readTurn(reply.body as TurnBody) };
    };
    try {
      for (const plan of plans) {
        const row: CompressedRow = {
          plan,
          insertMs: insertMs.get(plan.messages)!,
          firstTurn: [],
          firstCompacted: 0,
          turn: [],
          floor: [],
          sent: [],
          laterCompactions: 0,
          activeAfter: [],
          totalAfter: [],
        };
        for (const id of ids.get(plan.messages)!) {
          const first = await turn(id);
          row.firstTurn.push(first.ms);
          if (first.compacted) row.firstCompacted += 1;
          for (let index = 0; index < plan.warmup + plan.measured; index++) {
            const reply = await turn(id);
            if (reply.compacted) row.laterCompactions += 1;
            // The floor: the same number of messages, sent directly (system + prior + the new user message).
            const direct = await floor(countCase.content, floorHistory(reply.sent - 2, memo));
            if (index < plan.warmup) continue;
            row.turn.push(reply.ms);
            row.floor.push(direct.ms);
            row.sent.push(reply.sent);
          }
        }
        rows.push(row);
      }
    } finally {
      client.close();
      await server.stop();
    }

    const reader = createClient({ url });
    try {
      const counts = await reader.execute(
        "SELECT s.id AS id, COUNT(*) AS total, SUM(m.archived = 0) AS active FROM messages m JOIN sessions s ON s.pk = m.session_pk GROUP BY s.pk",
      );
      const byId = new Map(counts.rows.map((entry) => [String(entry.id), { total: Number(entry.total), active: Number(entry.active) }]));
      for (const row of rows) {
        for (const id of ids.get(row.plan.messages)!) {
          row.activeAfter.push(byId.get(id)?.active ?? 0);
          row.totalAfter.push(byId.get(id)?.total ?? 0);
        }
      }
    } finally {
      reader.close();
    }
    return rows;
  } finally {
    removeDirectory(directory);
  }
}

/**
 * In-process, as section 2 counts them: one session per size with its history inserted, then its first turn
 * (the compaction) and two more, each counted over `countingClient` (journal = session store, tools = notes).
 */
export async function countCompressedRoundTrips(fakeUrl: string, sizes: number[]): Promise<Map<number, CompressedRoundTrips>> {
  const harness = await buildTestApp({ HERMES_RUNTIME: JSON.stringify(runtimeOf(fakeUrl)), OPENAI_API_KEY: providerKey });
  adoptDirectory(dirname(harness.database.url.slice("file:".length)));
  try {
    const raw = harness.database.client;
    const journal = countingClient(raw);
    const tools = countingClient(raw);
    Object.assign(harness.deps, await openStore(journal.client, harness.database.url));
    harness.deps.notes = createNotesStore(tools.client);
    const result = new Map<number, CompressedRoundTrips>();
    for (const size of sizes) {
      const id = `rt-compressed-${size}`;
      if ((await harness.call("POST", "/v1/sessions", { id })).status !== 201) throw new Error(`create ${id}`);
      const pk = Number((await raw.execute({ sql: "SELECT pk FROM sessions WHERE id = ?", args: [id] })).rows[0]!.pk);
      await insertHistory(raw, [pk], size);
      const turns: CompressedRoundTrips["turns"] = [];
      for (let index = 0; index < 3; index++) {
        // Read on the raw client, so the count is not part of the turn's.
        const activeBefore = Number((await raw.execute({ sql: "SELECT COUNT(*) AS n FROM messages WHERE session_pk = ? AND archived = 0", args: [pk] })).rows[0]!.n);
        journal.reset();
        tools.reset();
        const response = await harness.call("POST", `/v1/sessions/${id}/messages`, { content: countCase.content });
        const body = (await response.json()) as TurnBody;
        checkTurn({ status: response.status, body, ms: 0 }, countCase);
        const read = readTurn(body);
        // A turn that does not compact sends every active row it loaded: the rows before it, the new user message.
        if (!read.compacted && read.sent - 1 !== activeBefore + 1) throw new Error(`${id}: sent ${read.sent} messages with ${activeBefore} active rows before the turn`);
        turns.push({ journal: { ...journal.counts }, tools: { ...tools.counts }, activeBefore, ...read });
      }
      result.set(size, { turns });
    }
    return result;
  } finally {
    await harness.close();
  }
}

const range = (values: number[]) => (values.length === 0 ? "n/a" : `${Math.min(...values)}-${Math.max(...values)}`);

export function compressedHistoryTables(rows: CompressedRow[]): string {
  const first = rows[0];
  const timing = table(
    "8. History growth with compression (0-tool turn, context_length 8192, embedded file store)",
    [
      "prior messages",
      "sessions",
      "1st turn compacted",
      "1st turn p50",
      "measured turns",
      "turn p50",
      "turn p99",
      "floor p50",
      "floor p99",
      "overhead p50",
      "overhead p99",
      "compactions after 1st turn",
      "insert s",
    ],
    rows.map((row) => {
      const turn50 = percentile(row.turn, 50);
      const floor50 = percentile(row.floor, 50);
      const turn99 = percentile(row.turn, 99);
      const floor99 = percentile(row.floor, 99);
      return [
        row.plan.messages.toLocaleString("en-US"),
        row.plan.sessions,
        `${row.firstCompacted}/${row.plan.sessions}`,
        ms(percentile(row.firstTurn, 50)),
        row.turn.length,
        ms(turn50),
        ms(turn99),
        ms(floor50),
        ms(floor99),
        `+${ms(turn50 - floor50)}`,
        `+${ms(turn99 - floor99)}`,
        row.laterCompactions,
        (row.insertMs / 1000).toFixed(2),
      ];
    }),
    first
      ? [
          `Times in ms. Per session: the 1st turn after the history was inserted (it compacts when the estimate is over 3,584 tokens: half of 8192 - 1024), then ${first.plan.warmup} unmeasured and ${first.plan.measured} measured turns; sessions one after the other.`,
          "floor = one direct SDK call with as many messages as the turn sent to the provider (system + that many - 2 prior messages of the inserted shape + the user message), made right after each turn.",
          "insert s = the one write transaction that put the history of all sessions of that size into the file (before the server started).",
        ]
      : [],
  );
  const counts = (value: TurnCounts | undefined) => (value ? `${value.roundTrips} / ${value.statements}` : "n/a");
  const sameSteady = (trips: CompressedRoundTrips | undefined) => {
    const [, second, third] = trips?.turns ?? [];
    return second && third ? (JSON.stringify([second.journal, second.tools]) === JSON.stringify([third.journal, third.tools]) ? "yes" : "no") : "n/a";
  };
  const rowsTable = table(
    "8. History growth with compression: rows loaded and round trips",
    [
      "prior messages",
      "messages sent p50 (range)",
      "active rows loaded p50 (range)",
      "rows per session at the end: active / all",
      "1st turn: rows loaded, sent",
      "round trips / statements, 1st turn",
      "round trips / statements, next turn",
      "turn after same",
    ],
    rows.map((row) => {
      const loaded = row.sent.map((sent) => sent - 1);
      const trips = row.roundTrips?.turns;
      return [
        row.plan.messages.toLocaleString("en-US"),
        `${percentile(row.sent, 50)} (${range(row.sent)})`,
        `${percentile(loaded, 50)} (${range(loaded)})`,
        `${range(row.activeAfter)} / ${range(row.totalAfter)}`,
        trips ? `${trips[0]!.activeBefore + 1}, ${trips[0]!.sent}` : "n/a",
        counts(trips?.[0] ? { roundTrips: trips[0].journal.roundTrips + trips[0].tools.roundTrips, statements: trips[0].journal.statements + trips[0].tools.statements } : undefined),
        counts(trips?.[1] ? { roundTrips: trips[1].journal.roundTrips + trips[1].tools.roundTrips, statements: trips[1].journal.statements + trips[1].tools.statements } : undefined),
        sameSteady(row.roundTrips),
      ];
    }),
    [
      "messages sent = the provider request of each measured turn, system message included (the fake answers \"ok <n>\"); active rows loaded = sent - 1: the turn sends every active row it loads (head, summary, tail, the new user message) once it no longer compacts.",
      "Round trips: counted in-process with tests/support/db.ts countingClient, as in section 2, on one session per size with the same history and runtime: the 1st turn after the insert, then the next two (\"turn after same\": the 3rd turn's counts equal the 2nd's). 1st turn rows loaded = active rows before it + the new user message; sent = the main provider request after compaction.",
    ],
  );
  return `${timing}\n${rowsTable}`;
}
