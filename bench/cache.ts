/// <reference types="node" />
// 7. The in-memory edge cache (src/kv/memory-cache.ts, `createMemoryCache()` with its defaults: 5,000 entries,
// 32 MiB estimated, 1 h idle TTL) at its cap: get (hit, miss) and evicting put in ns per awaited call, and the
// heap it holds after a forced GC against an empty cache. Each value size runs in its own child process
// (`node --expose-gc --import tsx bench/cache-child.ts`), so its heap holds nothing else of the run.
import { spawn } from "node:child_process";
import { resolve } from "node:path";
import { memoryCacheDefaults } from "../src/kv/memory-cache.ts";
import { track } from "./lib/proc.ts";
import { table } from "./lib/stats.ts";

/** The JSON line of bench/cache-child.ts. */
export interface CacheSample {
  valueBytes: number;
  keyChars: number;
  /** Entries held once full (whichever cap binds first), and after the timing loops. */
  entries: number;
  entriesAfter: number;
  /** The cache's own `bytes` estimate when full. */
  estimate: number;
  heapEmpty: number;
  heapFull: number;
  /** An awaited no-op async call: the floor of the async EdgeCache interface. */
  awaitNs: number;
  hitNs: number;
  missNs: number;
  putNs: number;
  /** Evict-first + set on a bare Map of the same size. */
  mapEvictNs: number;
  rounds: number;
  ops: number;
  evictOps: number;
}

function runChild(args: string[]): Promise<CacheSample> {
  const child = track(spawn(process.execPath, ["--expose-gc", "--import", "tsx", resolve("bench/cache-child.ts"), ...args], { stdio: ["ignore", "pipe", "pipe"] }));
  let output = "";
  let errors = "";
  child.stdout.on("data", (chunk: Buffer) => (output += chunk.toString()));
  child.stderr.on("data", (chunk: Buffer) => (errors = (errors + chunk.toString()).slice(-4000)));
  return new Promise((done, fail) => {
    child.once("error", fail);
    child.once("exit", (code) => {
      const line = output.trim().split("\n").pop() ?? "";
      if (code !== 0 || !line.startsWith("{")) return fail(new Error(`bench/cache-child.ts ${args.join(" ")} exited with ${code}: ${errors}`));
      done(JSON.parse(line) as CacheSample);
    });
  });
}

export async function measureCache(valueSizes: number[], rounds: number, ops: number): Promise<CacheSample[]> {
  const samples: CacheSample[] = [];
  // One child at a time: the machine has 2 cores and the timing loops are single-threaded.
  for (const size of valueSizes) samples.push(await runChild([String(size), String(rounds), String(ops)]));
  return samples;
}

export function cacheTable(samples: CacheSample[]): string {
  const mib = (bytes: number) => (bytes / (1024 * 1024)).toFixed(2);
  const ns = (value: number) => value.toFixed(0);
  const first = samples[0];
  return table(
    "7. Edge cache (createMemoryCache defaults, at the cap)",
    [
      "value",
      "entries at cap",
      "cap that binds",
      "`bytes` estimate MiB",
      "heap held MiB",
      "heap per entry B",
      "per entry over key+value B",
      "get hit ns",
      "get miss ns",
      "put (evicts) ns",
      "bare Map evict+set ns",
    ],
    samples.map((sample) => {
      const held = sample.heapFull - sample.heapEmpty;
      const perEntry = held / sample.entries;
      return [
        sample.valueBytes >= 1024 ? `${sample.valueBytes / 1024} KiB` : `${sample.valueBytes} B`,
        sample.entries.toLocaleString("en-US"),
        sample.entries >= memoryCacheDefaults.maxEntries ? "entries (5,000)" : "bytes (32 MiB)",
        mib(sample.estimate),
        mib(held),
        perEntry.toFixed(0),
        (perEntry - sample.keyChars - sample.valueBytes).toFixed(0),
        ns(sample.hitNs),
        ns(sample.missNs),
        ns(sample.putNs),
        ns(sample.mapEvictNs),
      ];
    }),
    first
      ? [
          `One child process per value size (node --expose-gc --import tsx bench/cache-child.ts). The cache gets ${(2 * memoryCacheDefaults.maxEntries).toLocaleString("en-US")} puts of distinct ${first.keyChars}-character ASCII keys and distinct flat ASCII values (1 byte per character in V8), so it reaches its cap and evicts; TTL 1 h.`,
          `heap held = process.memoryUsage().heapUsed after two forced GCs, full minus empty cache (empty: ${mib(first.heapEmpty)} MiB). The \`bytes\` estimate counts 2 bytes per character, so it is about twice the key+value bytes V8 holds for ASCII text.`,
          `Times: median ns per awaited call over ${first.rounds} rounds (after one unmeasured round) of ${first.ops.toLocaleString("en-US")} gets or ${first.evictOps.toLocaleString("en-US")} puts, on the full cache; keys prebuilt (hash cached), hits spread at random over the entries held. An awaited no-op async call costs ${samples.map((sample) => ns(sample.awaitNs)).join(" / ")} ns.`,
          "put (evicts) = a put of a new key at the cap: one LRU entry dropped per put. bare Map evict+set = `map.keys().next()`, delete, set on a plain Map of the same size: V8 leaves deleted Map entries as holes until the table is rehashed, and an iterator starts at the first slot, so finding the oldest entry walks past every hole left by earlier evictions and hits.",
        ]
      : [],
  );
}
