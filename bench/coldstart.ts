/// <reference types="node" />
// 5. Cold start (process spawn to the first `/health` 200) per runtime entry, and the Worker bundle size.
import { execFile, execFileSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { freePort } from "../tests/support/sqld.ts";
import { removeDirectory, startServer, tempDirectory } from "./lib/proc.ts";
import { serverEnv } from "./lib/setup.ts";
import { median, ms, table } from "./lib/stats.ts";

export interface ColdRow {
  runtime: string;
  command: string;
  runs: number[];
  note: string;
}

function scripts(): Record<string, string> {
  return (JSON.parse(readFileSync("package.json", "utf8")) as { scripts?: Record<string, string> }).scripts ?? {};
}

interface Candidate {
  runtime: string;
  /** null: skipped, with the reason in `note`. */
  command: string | null;
  args: string[];
  note: string;
}

function candidates(): Candidate[] {
  const list: Candidate[] = [{ runtime: "node (tsx)", command: process.execPath, args: ["--import", "tsx", "src/entry/node.ts"], note: "" }];
  // `npm start` runs dist/node.mjs, built by `npm run build` (its prestart); build it here when it is missing.
  if (!existsSync("dist/node.mjs")) execFileSync(process.execPath, ["scripts/build-node.mjs"], { stdio: "ignore" });
  list.push(
    existsSync("dist/node.mjs")
      ? { runtime: "node (bundled, npm start)", command: process.execPath, args: ["dist/node.mjs"], note: "" }
      : { runtime: "node (bundled, npm start)", command: null, args: [], note: "skipped: scripts/build-node.mjs produced no dist/node.mjs" },
  );
  const bun = "node_modules/.bin/bun";
  list.push(
    existsSync(bun) && existsSync("src/entry/bun.ts")
      ? { runtime: "bun", command: bun, args: ["src/entry/bun.ts"], note: "" }
      : { runtime: "bun", command: null, args: [], note: `skipped: ${existsSync(bun) ? "src/entry/bun.ts" : bun} does not exist` },
  );
  const deno = "node_modules/.bin/deno";
  const denoScript = scripts()["start:deno"];
  if (!existsSync("src/entry/deno.ts")) {
    list.push({ runtime: "deno", command: null, args: [], note: "skipped: src/entry/deno.ts does not exist yet" });
  } else if (!existsSync(deno)) {
    list.push({ runtime: "deno", command: null, args: [], note: `skipped: ${deno} is not installed` });
  } else {
    // `start:deno` is taken as written, with `deno` resolved to the local binary.
    const words = (denoScript ?? "deno run -A src/entry/deno.ts").trim().split(/\s+/);
    if (words[0] === "deno") list.push({ runtime: "deno", command: deno, args: words.slice(1), note: denoScript ? "" : "no start:deno script; ran deno run -A src/entry/deno.ts" });
    else list.push({ runtime: "deno", command: null, args: [], note: `skipped: start:deno (${denoScript}) does not start with deno` });
  }
  return list;
}

/** One unmeasured start (creates and migrates the database, fills tsx's cache), then `runs` measured starts. */
export async function measureColdStarts(fakeUrl: string, runs: number): Promise<ColdRow[]> {
  const rows: ColdRow[] = [];
  for (const candidate of candidates()) {
    const row: ColdRow = { runtime: candidate.runtime, command: [candidate.command, ...candidate.args].join(" "), runs: [], note: candidate.note };
    rows.push(row);
    if (candidate.command === null) continue;
    const directory = tempDirectory("cold");
    try {
      const env = serverEnv(`file:${join(directory, "cold.db")}`, fakeUrl);
      for (let run = 0; run <= runs; run++) {
        const server = await startServer({ command: candidate.command, args: candidate.args, env, port: await freePort(), timeoutMs: 60_000, pollMs: 5 });
        await server.stop();
        if (run > 0) row.runs.push(server.startMs);
      }
    } catch (error) {
      row.note = `failed: ${String(error).split("\n").slice(0, 3).join(" ").slice(0, 300)}`;
    } finally {
      removeDirectory(directory);
    }
  }
  return rows;
}

export function coldStartTable(rows: ColdRow[], runs: number): string {
  return table(
    "5. Cold start (spawn to first /health 200)",
    ["runtime", "command", "median ms", "min ms", "max ms", "note"],
    rows.map((row) => [
      row.runtime,
      row.runs.length > 0 || !row.note.startsWith("skipped") ? `\`${row.command}\`` : "",
      row.runs.length > 0 ? ms(median(row.runs), 0) : "n/a",
      row.runs.length > 0 ? ms(Math.min(...row.runs), 0) : "n/a",
      row.runs.length > 0 ? ms(Math.max(...row.runs), 0) : "n/a",
      row.note,
    ]),
    [`Median of ${runs} starts after one unmeasured start; existing migrated libSQL file; /health polled every 5 ms on a new connection.`],
  );
}

export async function workerBundleSize(): Promise<string> {
  if (!scripts().size) return "Worker bundle size: not available (package.json has no `size` script yet).";
  return new Promise((done) => {
    execFile("npm", ["run", "--silent", "size"], { timeout: 180_000, maxBuffer: 4 * 1024 * 1024 }, (error, stdout, stderr) => {
      const lines = `${stdout}`.trim().split("\n").filter((line) => line.trim() !== "").slice(-15);
      if (error) done(`Worker bundle size: \`npm run size\` failed (${String(error.message).split("\n")[0]}):\n${`${stderr}`.trim().split("\n").slice(-5).join("\n")}`);
      else done(`Worker bundle size (\`npm run size\`):\n\n\`\`\`\n${lines.join("\n")}\n\`\`\``);
    });
  });
}
