/// <reference types="node" />
// Where a turn's time goes on the server: runs the 2-tool sequential turn against a Node server started
// with --cpu-prof, then folds the V8 profile into self and inclusive time per function and per package,
// in milliseconds per turn. Not part of the default run: `npm run bench -- --only=profile`.
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { JsonClient } from "./lib/http.ts";
import { removeDirectory, tempDirectory } from "./lib/proc.ts";
import { apiKey, checkTurn, createSessions, sendTurn, serverEnv, startNodeServer, type TurnCase } from "./lib/setup.ts";
import { table } from "./lib/stats.ts";

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}
interface CpuProfile {
  nodes: ProfileNode[];
  startTime: number;
  endTime: number;
  samples: number[];
  timeDeltas: number[];
}

function packageOf(url: string, functionName: string): string {
  if (url === "") return functionName.startsWith("(") ? functionName : "(native)";
  const modules = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (modules) return modules[1]!;
  if (url.startsWith("node:")) return url.split("/")[0]!.replace(/:.*$/, ":internal");
  const source = /\/(src|tests|bench)\/(.*)$/.exec(url);
  return source ? `${source[1]}/${source[2]}` : url;
}

function frameKey(node: ProfileNode): string {
  const { functionName, url, lineNumber } = node.callFrame;
  const where = url ? `${url.replace(/^file:\/\//, "").replace(`${process.cwd()}/`, "")}:${lineNumber + 1}` : "";
  return `${functionName || "(anonymous)"} ${where}`.trim();
}

export interface ProfileSummary {
  turns: number;
  busyMs: number;
  idleMs: number;
  selfByFunction: [string, number][];
  inclusiveByFunction: [string, number][];
  selfByPackage: [string, number][];
}

/** Folds the samples taken in the last `windowMs` of the profile (the measured turns). */
export function summarize(profile: CpuProfile, turns: number, windowMs: number): ProfileSummary {
  const from = profile.endTime - windowMs * 1000;
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  const parent = new Map<number, number>();
  for (const node of profile.nodes) for (const child of node.children ?? []) parent.set(child, node.id);
  const self = new Map<string, number>();
  const inclusive = new Map<string, number>();
  const packages = new Map<string, number>();
  let idle = 0;
  let busy = 0;
  let at = profile.startTime;
  profile.samples.forEach((id, index) => {
    at += profile.timeDeltas[index] ?? 0;
    if (at < from) return;
    const ms = (profile.timeDeltas[index] ?? 0) / 1000;
    const node = byId.get(id)!;
    if (node.callFrame.functionName === "(idle)") return void (idle += ms);
    busy += ms;
    self.set(frameKey(node), (self.get(frameKey(node)) ?? 0) + ms);
    const pkg = packageOf(node.callFrame.url, node.callFrame.functionName);
    packages.set(pkg, (packages.get(pkg) ?? 0) + ms);
    const seen = new Set<string>();
    for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) {
      const key = frameKey(byId.get(at)!);
      if (seen.has(key)) continue;
      seen.add(key);
      inclusive.set(key, (inclusive.get(key) ?? 0) + ms);
    }
  });
  const top = (map: Map<string, number>, count: number) => [...map].sort((a, b) => b[1] - a[1]).slice(0, count);
  return {
    turns,
    busyMs: busy,
    idleMs: idle,
    selfByFunction: top(self, 25),
    inclusiveByFunction: top(inclusive, 60).filter(([key]) => !key.startsWith("(root)") && !key.startsWith("(program)")),
    selfByPackage: top(packages, 15),
  };
}

/** Runs `turns` measured turns of `turnCase` (after `warmup`) on a profiled file-store server. */
export async function profileTurns(fakeUrl: string, turnCase: TurnCase, turns = 300, warmup = 100): Promise<ProfileSummary> {
  const directory = tempDirectory("profile");
  const profileDirectory = join(directory, "profile");
  try {
    const server = await startNodeServer(serverEnv(`file:${join(directory, "profile.db")}`, fakeUrl), ["--cpu-prof", `--cpu-prof-dir=${profileDirectory}`]);
    const client = new JsonClient(server.url, apiKey);
    let windowStart = 0;
    let windowEnd = 0;
    try {
      const ids = await createSessions(client, "prof", turns + warmup);
      for (const [index, id] of ids.entries()) {
        if (index === warmup) windowStart = performance.now();
        checkTurn(await sendTurn(client, id, turnCase), turnCase);
      }
    } finally {
      client.close();
      windowEnd = performance.now();
      // SIGTERM: the entry calls process.exit, which writes the profile.
      await server.stop();
    }
    const file = readdirSync(profileDirectory).find((name) => name.endsWith(".cpuprofile"));
    if (!file) throw new Error("the server wrote no .cpuprofile");
    // The profile covers the whole process life; only its tail, from the first measured turn to the stop
    // signal (driver clock), is folded, so start-up, session creation and warm-up stay out.
    const profile = JSON.parse(readFileSync(join(profileDirectory, file), "utf8")) as CpuProfile;
    return summarize(profile, turns, windowEnd - windowStart);
  } finally {
    removeDirectory(directory);
  }
}

export function profileTables(summary: ProfileSummary): string {
  const per = (ms: number) => (ms / summary.turns).toFixed(3);
  const pct = (ms: number) => `${((ms / summary.busyMs) * 100).toFixed(1)}%`;
  const notes = [
    `Server CPU while ${summary.turns} measured turns ran one at a time (after warm-up): busy ${(summary.busyMs / 1000).toFixed(2)} s, idle ${(summary.idleMs / 1000).toFixed(2)} s; ms/turn = time / turns. Time blocked in a synchronous native call (libSQL's fsync) counts as busy.`,
  ];
  return [
    table("Profile: self time by package", ["package", "ms/turn", "share"], summary.selfByPackage.map(([name, ms]) => [name, per(ms), pct(ms)]), notes),
    table("Profile: self time by function (top 25)", ["function", "ms/turn", "share"], summary.selfByFunction.map(([name, ms]) => [name.slice(0, 110), per(ms), pct(ms)])),
    table("Profile: inclusive time by function", ["function", "ms/turn", "share"], summary.inclusiveByFunction.slice(0, 40).map(([name, ms]) => [name.slice(0, 110), per(ms), pct(ms)])),
  ].join("\n");
}

/**
 * What one write transaction costs on this disk: a one-row INSERT as its own transaction on a WAL file, with
 * the default `synchronous = FULL` (fsync of the WAL at every commit) and with `NORMAL` (no fsync at commit).
 */
export async function commitCost(samples = 300): Promise<string> {
  const { createClient } = await import("@libsql/client");
  const rows: string[][] = [];
  for (const synchronous of ["FULL", "NORMAL"]) {
    const directory = tempDirectory("commit");
    const client = createClient({ url: `file:${join(directory, "commit.db")}` });
    try {
      await client.execute("PRAGMA journal_mode = WAL");
      await client.execute(`PRAGMA synchronous = ${synchronous}`);
      await client.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, value TEXT NOT NULL)");
      const times: number[] = [];
      for (let index = 0; index < samples; index++) {
        const started = performance.now();
        await client.execute({ sql: "INSERT INTO t (value) VALUES (?)", args: ["x"] });
        times.push(performance.now() - started);
      }
      times.sort((a, b) => a - b);
      rows.push([synchronous, times[Math.floor(samples / 2)]!.toFixed(3), times[Math.ceil(samples * 0.99) - 1]!.toFixed(3)]);
    } finally {
      client.close();
      removeDirectory(directory);
    }
  }
  return table("Profile: one write transaction on this disk (WAL file)", ["synchronous", "p50 ms", "p99 ms"], rows, [
    `${samples} one-row INSERTs, each its own transaction, through @libsql/client. The store sets journal_mode=WAL and leaves synchronous at its default (FULL).`,
  ]);
}
