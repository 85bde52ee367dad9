/// <reference types="node" />
// 6. Memory: RSS of the Node server while 10,000 distinct sessions each run one 0-tool turn.
import { join } from "node:path";
import { JsonClient } from "./lib/http.ts";
import { removeDirectory, residentKiB, tempDirectory, type ServerProcess } from "./lib/proc.ts";
import { apiKey, checkTurn, sendTurn, serverEnv, startNodeServer, turnCases } from "./lib/setup.ts";
import { table } from "./lib/stats.ts";

export interface MemorySample {
  sessions: number;
  rssKiB: number;
  /** process.memoryUsage() after a full GC, from the server (bench/lib/server-preload.mjs). */
  heapUsed: number;
  external: number;
  rssAfterGcKiB: number;
  elapsedMs: number;
}

/** Asks the server for process.memoryUsage() after a full GC (SIGUSR2 to the preload) and waits for the line. */
async function usageAfterGc(server: ServerProcess): Promise<{ heapUsed: number; external: number; rss: number }> {
  const before = server.traces().length;
  server.child.kill("SIGUSR2");
  const deadline = Date.now() + 10_000;
  while (Date.now() < deadline) {
    for (const line of server.traces().slice(before)) {
      const entry = JSON.parse(line) as { bench_trace: string; heapUsed: number; external: number; rss: number };
      if (entry.bench_trace === "memory") return entry;
    }
    await new Promise((done) => setTimeout(done, 20));
  }
  throw new Error("the server did not report its memory usage");
}

export async function measureMemory(fakeUrl: string, checkpoints: number[], parallel: number): Promise<{ samples: MemorySample[]; errors: number }> {
  const directory = tempDirectory("memory");
  const zeroTools = turnCases[0]!;
  const server = await startNodeServer(serverEnv(`file:${join(directory, "memory.db")}`, fakeUrl), ["--expose-gc"]);
  const client = new JsonClient(server.url, apiKey, parallel);
  const samples: MemorySample[] = [];
  const sample = async (sessions: number, elapsedMs: number) => {
    const rssKiB = residentKiB(server.pid);
    const usage = await usageAfterGc(server);
    samples.push({ sessions, rssKiB, heapUsed: usage.heapUsed, external: usage.external, rssAfterGcKiB: usage.rss / 1024, elapsedMs });
  };
  let errors = 0;
  try {
    await sample(0, 0);
    const started = performance.now();
    let done = 0;
    for (const checkpoint of checkpoints) {
      const worker = async () => {
        while (done < checkpoint) {
          const id = `mem-${done++}`;
          try {
            const created = await client.send("POST", "/v1/sessions", { id });
            if (created.status !== 201) throw new Error(`create: ${created.status}`);
            checkTurn(await sendTurn(client, id, zeroTools), zeroTools);
          } catch {
            errors += 1;
          }
        }
      };
      await Promise.all(Array.from({ length: parallel }, worker));
      await sample(checkpoint, performance.now() - started);
    }
    return { samples, errors };
  } finally {
    client.close();
    await server.stop();
    removeDirectory(directory);
  }
}

export function memoryTable(result: { samples: MemorySample[]; errors: number }, parallel: number): string {
  const bySessions = new Map(result.samples.map((sample) => [sample.sessions, sample.rssKiB]));
  const mib = (kib: number) => (kib / 1024).toFixed(1);
  const at1k = bySessions.get(1000);
  const last = result.samples[result.samples.length - 1]!;
  const at5k = bySessions.get(5000);
  return table(
    "6. Memory (Node server RSS, one 0-tool turn per distinct session)",
    ["sessions", "RSS MiB", "RSS vs 1,000 sessions", "heap used after GC MiB", "external MiB", "RSS after GC MiB", "elapsed s"],
    result.samples.map((sample) => [
      sample.sessions.toLocaleString("en-US"),
      mib(sample.rssKiB),
      at1k !== undefined && sample.sessions >= 1000 ? `${sample.rssKiB >= at1k ? "+" : ""}${mib(sample.rssKiB - at1k)}` : "",
      mib(sample.heapUsed / 1024),
      mib(sample.external / 1024),
      mib(sample.rssAfterGcKiB),
      (sample.elapsedMs / 1000).toFixed(1),
    ]),
    [
      `RSS = VmRSS of /proc/<pid>/status right after the last turn of each step; then the server (started with --expose-gc) runs a full GC and reports process.memoryUsage() (bench/lib/server-preload.mjs, on SIGUSR2). ${parallel} clients at a time, each session created then given one turn; errors: ${result.errors}.`,
      at5k !== undefined ? `5,000 -> ${last.sessions.toLocaleString("en-US")} sessions: ${last.rssKiB >= at5k ? "+" : ""}${mib(last.rssKiB - at5k)} MiB (${(((last.rssKiB - at5k) / at5k) * 100).toFixed(1)}%).` : "",
    ].filter((note) => note !== ""),
  );
}
