/// <reference types="node" />
// 2. Database round trips and statements per turn, counted in-process: the app built as the tests build it
// (tests/support/app.ts) over a libSQL file, its stores re-opened over `countingClient` wrappers, one for the
// session store (journal, leases, turn records) and one for the notes store the tools use.
import { dirname } from "node:path";
import { createNotesStore } from "../src/state/notes.ts";
import { openStore } from "../src/state/open-store.ts";
import { buildTestApp } from "../tests/support/app.ts";
import { countingClient } from "../tests/support/db.ts";
import { adoptDirectory } from "./lib/proc.ts";
import { benchRuntime, checkTurn, contentFor, providerKey, type TurnCase } from "./lib/setup.ts";
import { table } from "./lib/stats.ts";

export interface RoundTripRow {
  label: string;
  journal: { roundTrips: number; statements: number };
  tools: { roundTrips: number; statements: number };
  /** The counts of the session's second turn equal the first's. */
  stable: boolean;
}

export async function countRoundTrips(fakeUrl: string, cases: TurnCase[]): Promise<RoundTripRow[]> {
  const harness = await buildTestApp({ HERMES_RUNTIME: JSON.stringify(benchRuntime(fakeUrl)), OPENAI_API_KEY: providerKey });
  adoptDirectory(dirname(harness.database.url.slice("file:".length)));
  try {
    const journal = countingClient(harness.database.client);
    const tools = countingClient(harness.database.client);
    Object.assign(harness.deps, await openStore(journal.client, harness.database.url));
    harness.deps.notes = createNotesStore(tools.client);
    const snapshot = () => ({ journal: { ...journal.counts }, tools: { ...tools.counts } });
    const reset = () => (journal.reset(), tools.reset());

    const rows: RoundTripRow[] = [];
    reset();
    const created = await harness.call("POST", "/v1/sessions", { id: "rt-create" });
    if (created.status !== 201) throw new Error(`create session: ${created.status}`);
    rows.push({ label: "create session (POST /v1/sessions)", ...snapshot(), stable: true });

    for (const turnCase of cases) {
      const id = `rt-${turnCase.key}`;
      if ((await harness.call("POST", "/v1/sessions", { id })).status !== 201) throw new Error(`create ${id}`);
      const counts = [];
      for (let turn = 0; turn < 2; turn++) {
        reset();
        const response = await harness.call("POST", `/v1/sessions/${id}/messages`, { content: contentFor(turnCase, id) });
        checkTurn({ status: response.status, body: await response.json(), ms: 0 }, turnCase);
        counts.push(snapshot());
      }
      rows.push({ label: `turn: ${turnCase.label}`, ...counts[0]!, stable: JSON.stringify(counts[0]) === JSON.stringify(counts[1]) });
    }
    return rows;
  } finally {
    await harness.close();
  }
}

export function roundTripTable(rows: RoundTripRow[]): string {
  return table(
    "2. Database round trips and statements per turn (deterministic)",
    ["operation", "journal round trips", "journal statements", "tool round trips", "tool statements", "total round trips", "total statements", "2nd turn same"],
    rows.map((row) => [
      row.label,
      row.journal.roundTrips,
      row.journal.statements,
      row.tools.roundTrips,
      row.tools.statements,
      row.journal.roundTrips + row.tools.roundTrips,
      row.journal.statements + row.tools.statements,
      row.stable ? "yes" : "no",
    ]),
    [
      "Counted with tests/support/db.ts countingClient: one round trip per execute/batch call (one HTTP request on a libSQL server), statements = statements carried.",
      "journal = the session store (lease, journal, turn record); tool = the notes store used by todo / session_search. The same code runs on a file and on sqld, so the counts are the same on both.",
    ],
  );
}
