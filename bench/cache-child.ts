/// <reference types="node" />
// Section 7's child process: `node --expose-gc --import tsx bench/cache-child.ts <value bytes> <rounds> <ops>`.
// One value size per process, so the heap it reports holds this cache and nothing left over from another.
// Prints one JSON line (CacheSample of bench/cache.ts).
import { createMemoryCache, memoryCacheDefaults, type MemoryCache } from "../src/kv/memory-cache.ts";

const gc = (globalThis as { gc?: () => void }).gc;
if (!gc) throw new Error("run with node --expose-gc");
const valueBytes = Number(process.argv[2]);
const rounds = Number(process.argv[3] ?? 5);
const ops = Number(process.argv[4] ?? 200_000);
if (!(valueBytes > 0 && rounds > 0 && ops > 0)) throw new Error("usage: cache-child.ts <value bytes> <rounds> <ops>");
const ttlMs = 60 * 60 * 1000;

/** A flat one-byte string copy (V8 keeps template-literal results as cons strings until they are flattened). */
const flat = (text: string) => Buffer.from(text, "latin1").toString("latin1");
/** Keys shaped like the product's (kind, version, percent-encoded parts): 48 ASCII characters. */
const key = (index: number) => flat(`session:v1:tenant-0001:session-${String(index).padStart(10, "0")}:prompt`);
/** A distinct flat string of `valueBytes` ASCII characters (1 byte each in V8). */
function value(index: number): string {
  const buffer = Buffer.alloc(valueBytes, 0x61);
  buffer.write(index.toString(36));
  return buffer.toString("latin1");
}

function heapUsed(): number {
  gc!();
  gc!();
  return process.memoryUsage().heapUsed;
}

async function fill(cache: MemoryCache, from: number, count: number): Promise<void> {
  for (let index = from; index < from + count; index++) await cache.put(key(index), value(index), ttlMs);
}

/** Median ns per awaited call over `rounds` rounds of `ops` calls (one unmeasured round first); `prepare` is not timed. */
async function timeRounds(run: () => Promise<void>, prepare: () => void = () => undefined, count = ops): Promise<number> {
  prepare();
  await run();
  const samples: number[] = [];
  for (let round = 0; round < rounds; round++) {
    prepare();
    const started = process.hrtime.bigint();
    await run();
    samples.push(Number(process.hrtime.bigint() - started) / count);
  }
  samples.sort((a, b) => a - b);
  return samples[Math.floor(samples.length / 2)]!;
}

// Compile the paths used below before the empty-cache baseline, so code does not count as cache memory.
await fill(createMemoryCache({ maxEntries: 100 }), 0, 300);

const cap = memoryCacheDefaults.maxEntries;
const cache = createMemoryCache();
const heapEmpty = heapUsed();
// Twice the entry cap: the cache reaches whichever cap binds first and then evicts on every put.
const filled = 2 * cap;
await fill(cache, 0, filled);
const heapFull = heapUsed();
const entries = cache.size;
const estimate = cache.bytes;

// Timing, on the same cache at its cap. Keys are prebuilt distinct string objects (their hash is computed on
// first use), so the figures exclude building a key.
const live = (offset: number) => filled - entries + (offset % entries);
let seed = 12345;
const random = () => (seed = (seed * 1103515245 + 12345) % 2147483648);
const hitKeys = Array.from({ length: ops }, () => key(live(random())));
const missKeys = Array.from({ length: ops }, (_, index) => key(1_000_000_000 + index));
const pool = Array.from({ length: 256 }, (_, index) => value(filled + index));
let next = 2_000_000_000;
/** Evicting puts cost microseconds each (see the bare Map row), so they run a quarter as many calls per round. */
const evictOps = Math.max(1000, Math.floor(ops / 4));
let sink = 0;

const noop = async (text: string) => (text.length > 0 ? text : null);
const awaitNs = await timeRounds(async () => {
  for (let index = 0; index < ops; index++) if ((await noop(hitKeys[index]!)) !== null) sink += 1;
});
const hitNs = await timeRounds(async () => {
  for (let index = 0; index < ops; index++) if ((await cache.get(hitKeys[index]!)) !== null) sink += 1;
});
if (sink !== 2 * (rounds + 1) * ops) throw new Error(`expected every get to hit (${sink})`);
const missNs = await timeRounds(async () => {
  for (let index = 0; index < ops; index++) if ((await cache.get(missKeys[index]!)) !== null) sink += 1;
});
if (sink !== 2 * (rounds + 1) * ops) throw new Error("a miss key hit");
// New keys each round (built before the clock starts): every put evicts the least recently used entry.
let putKeys: string[] = [];
const putNs = await timeRounds(
  async () => {
    for (let index = 0; index < evictOps; index++) await cache.put(putKeys[index]!, pool[index & 255]!, ttlMs);
  },
  () => {
    putKeys = Array.from({ length: evictOps }, () => key(next++));
  },
  evictOps,
);
// The same eviction on a bare Map of the same size (evict the first key through a fresh iterator, then set a
// new one): what `trim` costs without the cache's bookkeeping.
const bare = new Map<string, number>();
for (let index = 0; index < entries; index++) bare.set(key(index), index);
const mapEvictNs = await timeRounds(
  async () => {
    for (let index = 0; index < evictOps; index++) {
      const first = bare.keys().next().value!;
      bare.delete(first);
      bare.set(putKeys[index]!, index);
    }
  },
  () => {
    putKeys = Array.from({ length: evictOps }, () => key(next++));
  },
  evictOps,
);

process.stdout.write(
  `${JSON.stringify({ valueBytes, keyChars: key(0).length, entries, entriesAfter: cache.size, estimate, heapEmpty, heapFull, awaitNs, hitNs, missNs, putNs, mapEvictNs, rounds, ops, evictOps })}\n`,
);
