/// <reference types="node" />
// 1. Turn overhead over HTTP against the real Node server, beside the floor (bench/lib/floor.ts), and
// 3. concurrency: many sessions at once on the same server.
import type { FloorTurn } from "./lib/floor.ts";
import type { JsonClient } from "./lib/http.ts";
import type { ServerProcess } from "./lib/proc.ts";
import { checkTurn, contentFor, createSessions, sendTurn, tracedErrors, type TurnCase } from "./lib/setup.ts";
import { mean, ms, percentile, table } from "./lib/stats.ts";

export interface OverheadRow {
  store: string;
  turnCase: TurnCase;
  turn: number[];
  floor: number[];
  floorCalls: number;
  warmup: number;
}

/**
 * Sequential: every iteration is one turn on a fresh session (no history), then the floor for the same
 * case; `warmup` unmeasured iterations first. Alternating keeps both under the same machine conditions.
 */
export async function measureOverhead(
  client: JsonClient,
  floor: FloorTurn,
  store: string,
  cases: TurnCase[],
  options: { iterations: number; warmup: number },
): Promise<OverheadRow[]> {
  const rows: OverheadRow[] = [];
  for (const turnCase of cases) {
    const ids = await createSessions(client, `ovh-${store}-${turnCase.key}`, options.warmup + options.iterations);
    const row: OverheadRow = { store, turnCase, turn: [], floor: [], floorCalls: 0, warmup: options.warmup };
    for (let index = 0; index < ids.length; index++) {
      const reply = await sendTurn(client, ids[index]!, turnCase);
      checkTurn(reply, turnCase);
      const direct = await floor(contentFor(turnCase, ids[index]!));
      if (direct.calls !== turnCase.providerCalls) throw new Error(`floor of ${turnCase.label} made ${direct.calls} calls`);
      if (index < options.warmup) continue;
      row.turn.push(reply.ms);
      row.floor.push(direct.ms);
      row.floorCalls = direct.calls;
    }
    rows.push(row);
  }
  return rows;
}

export function overheadTable(rows: OverheadRow[]): string {
  const counts = [...new Set(rows.map((row) => `${row.store}: ${row.turn.length} measured iterations per row after ${row.warmup} warm-up iterations`))].join("; ");
  return table(
    "1. Turn overhead (sequential, HTTP, real Node server)",
    ["store", "case", "provider calls", "turn p50", "turn p99", "turns/s", "floor p50", "floor p99", "ratio p50", "overhead p50", "overhead p99"],
    rows.map((row) => {
      const turn50 = percentile(row.turn, 50);
      const turn99 = percentile(row.turn, 99);
      const floor50 = percentile(row.floor, 50);
      const floor99 = percentile(row.floor, 99);
      return [
        row.store,
        row.turnCase.label,
        row.floorCalls,
        ms(turn50),
        ms(turn99),
        (1000 / mean(row.turn)).toFixed(0),
        ms(floor50),
        ms(floor99),
        `${(turn50 / floor50).toFixed(2)}x`,
        `+${ms(turn50 - floor50)}`,
        `+${ms(turn99 - floor99)}`,
      ];
    }),
    [
      `Times in ms; ${counts}; each turn runs on a fresh session.`,
      "floor = the same provider calls made directly with the openai SDK (maxRetries 0) against the same fake, no persistence.",
      "overhead = turn - floor at the same percentile; turns/s = 1000 / mean turn latency (one request at a time).",
      "session_search rows query a word unique to the session, except the \"word in every session\" row (file store only): a word every session's messages hold, run last, when the store holds all sessions of the rows above (FTS5 matches the whole table before filtering by session).",
    ],
  );
}

export interface ConcurrencyRow {
  store: string;
  sessions: number;
  turns: number;
  wallMs: number;
  latencies: number[];
  errors: number;
  warmupErrors: number;
  /** Turns never sent because an earlier turn timed out (the store stopped answering). */
  notRun: number;
  firstError: string | null;
  /** Failed turns by kind (HTTP status and error code, or the client error). */
  errorKinds: Map<string, number>;
  /** libSQL errors the server traced during this level (bench/lib/server-preload.mjs), by code and message. */
  serverErrors: Map<string, number>;
}

/**
 * `sessions` workers at once, each running `turnsEach` turns one after another on its own session, after one
 * unmeasured turn per session (also run all at once). Failed turns are counted, never retried.
 */
/** A turn that has not answered by then counts as an error (a stuck store must not stall the run). */
export const turnTimeoutMs = 15_000;

export async function measureConcurrency(
  client: JsonClient,
  server: Pick<ServerProcess, "traces">,
  store: string,
  levels: number[],
  turnsEach: number,
  turnCase: TurnCase,
): Promise<ConcurrencyRow[]> {
  const rows: ConcurrencyRow[] = [];
  let stuck = false;
  for (const sessions of levels) {
    if (stuck) break;
    const ids = await createSessions(client, `conc-${store}-${sessions}`, sessions);
    const tracedBefore = server.traces().length;
    const row: ConcurrencyRow = { store, sessions, turns: 0, wallMs: 0, latencies: [], errors: 0, warmupErrors: 0, notRun: 0, firstError: null, errorKinds: new Map(), serverErrors: new Map() };
    const failed = (kind: string) => row.errorKinds.set(kind, (row.errorKinds.get(kind) ?? 0) + 1);
    const runTurn = async (id: string, measured: boolean) => {
      try {
        const reply = await sendTurn(client, id, turnCase, turnTimeoutMs);
        if (reply.status !== 200) failed(`HTTP ${reply.status} ${reply.body?.error?.code ?? ""} after ${Math.round(reply.ms / 100) / 10} s`.replace(/after \d+(\.\d+)? s/, (text) => (reply.ms > 10_000 ? text : "")).trim());
        checkTurn(reply, turnCase);
        if (measured) row.latencies.push(reply.ms);
      } catch (error) {
        if (/timeout after/.test(String(error))) stuck = true;
        if (!/HTTP \d+/.test(String(error))) failed(String(error).slice(0, 80));
        if (measured) row.errors += 1;
        else row.warmupErrors += 1;
        row.firstError ??= String(error).slice(0, 200);
      }
    };
    await Promise.all(ids.map((id) => runTurn(id, false)));
    const started = performance.now();
    await Promise.all(
      ids.map(async (id) => {
        for (let turn = 0; turn < turnsEach; turn++) {
          if (stuck) {
            row.notRun += turnsEach - turn;
            break;
          }
          row.turns += 1;
          await runTurn(id, true);
        }
      }),
    );
    row.wallMs = performance.now() - started;
    row.serverErrors = tracedErrors(server.traces().slice(tracedBefore));
    rows.push(row);
  }
  return rows;
}

export function concurrencyTable(rows: ConcurrencyRow[], turnsEach: number, turnCase: TurnCase): string {
  const details = rows.flatMap((row) => {
    if (!row.firstError && row.serverErrors.size === 0) return [];
    const server = [...row.serverErrors].map(([error, count]) => `${count} x ${error}`).join("; ");
    const kinds = [...row.errorKinds].map(([kind, count]) => `${count} x ${kind}`).join(", ");
    return [`${row.store} / ${row.sessions} sessions: failed turns: ${kinds}${server ? `; server libSQL errors: ${server}` : ""}`];
  });
  return table(
    "3. Concurrency (sessions in parallel, each its own session)",
    ["store", "sessions", "turns", "wall s", "turns/s", "p50 ms", "p99 ms", "errors", "warm-up errors", "not run"],
    rows.map((row) => [
      row.store,
      row.sessions,
      row.turns,
      (row.wallMs / 1000).toFixed(2),
      (row.latencies.length / (row.wallMs / 1000)).toFixed(0),
      ms(percentile(row.latencies, 50)),
      ms(percentile(row.latencies, 99)),
      row.errors,
      row.warmupErrors,
      row.notRun,
    ]),
    [
      `Each session runs ${turnsEach} turns of "${turnCase.label}" back to back after one unmeasured turn (all sessions at once); p50/p99 over successful turns; a turn without an answer after ${turnTimeoutMs / 1000} s is an error, and then no further turn is sent (not run) and higher levels are skipped.`,
      "turns/s counts successful turns only.",
      ...details,
    ],
  );
}
