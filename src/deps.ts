import type { Config } from "./config.ts";
import type { Store } from "./state/store.ts";
import type { NotesStore } from "./state/notes.ts";
import type { Tool } from "./agent/tools/types.ts";
import type { InboxStore } from "./state/inbox.ts";
import type { IdempotencyStore } from "./state/idempotency.ts";
import type { EdgeCache } from "./kv/cache.ts";

export type RuntimeName = "node" | "bun" | "deno" | "workerd";

export interface LogEntry {
  level: "info" | "warn" | "error";
  event: string;
  [field: string]: unknown;
}

/** Everything the app needs from the outside, so a test can build the whole app in one call. */
export interface AppDependencies {
  config: Config;
  store: Store;
  notes: NotesStore;
  /** The durable platform inbox. */
  inbox: InboxStore;
  /** Idempotency-Key results of turn-creating requests (durable, 24 h). */
  idempotency: IdempotencyStore;
  /** Short-lived edge cache (memory LRU on Node/Bun/Deno, Workers KV on Cloudflare). */
  cache: EdgeCache;
  fetch: typeof fetch;
  /** Milliseconds since the epoch. */
  now: () => number;
  runtimeName: RuntimeName;
  version: string;
  /** DNS lookup for the web_fetch address guard; absent where the runtime has none (Workers). */
  resolveHost?: (hostname: string) => Promise<string[]>;
  /** Structured log sink. Entries never carry secrets, SQL or stack traces. */
  log: (entry: LogEntry) => void;
  /** Runs work after the response (Workers `waitUntil`); elsewhere the promise simply runs on. */
  waitUntil: (work: Promise<unknown>) => void;
  /** Tools the runtimes' toolsets select from; defaults to the built-ins (tests add recording tools). */
  tools?: readonly Tool[];
  /** Replaces backoff sleeps in tests. */
  sleep?: (ms: number) => Promise<void>;
}
