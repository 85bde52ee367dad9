// Start-up shared by the long-running server entries (Node, Bun, Deno): config, the data directory, the
// generated API key and the app over an `@libsql/client` store (file or server). Files, DNS, output and exit
// come in through `ServerHost`, so this file touches no runtime's own API and each entry stays a thin adapter.
import { createClient, type Client } from "@libsql/client";
import { createApp } from "../app.ts";
import { loadConfig, parseApiKeys, type Config, type Env } from "../config.ts";
import { toBase64 } from "../crypto.ts";
import type { AppDependencies, LogEntry, RuntimeName } from "../deps.ts";
import { ConfigError } from "../errors.ts";
import { createMemoryCache } from "../kv/memory-cache.ts";
import { sweepInbox } from "../platforms/processor.ts";
import { openStore } from "../state/open-store.ts";
import { packageVersion } from "../version.ts";

/** In-flight requests to a libSQL server per process (ignored for files). */
const serverConcurrency = 4;

/** Inbox events whose processor died are picked up within this long (after their lease expires). */
const sweepIntervalMs = 30_000;

/** What a server entry supplies from its runtime. */
export interface ServerHost {
  runtimeName: Exclude<RuntimeName, "workerd">;
  env: Env;
  /** The absolute form of `path`, relative paths taken from the working directory. */
  resolvePath(path: string): string;
  /** Creates the directory that holds `file`, with its parents; does nothing when it exists. */
  ensureParentDirectory(file: string): Promise<void>;
  /** The file's text, or null when the file does not exist. */
  readTextFile(file: string): Promise<string | null>;
  /** Creates or replaces a file that only its owner may read or write (mode 0600). */
  writePrivateFile(file: string, text: string): Promise<void>;
  /** All addresses of a host name, as the runtime's own connections would resolve it (for the web_fetch guard). */
  resolveHost(hostname: string): Promise<string[]>;
  /** Writes one line to standard output. */
  printLine(line: string): void;
  /** Writes one line to standard error. */
  printErrorLine(line: string): void;
  exit(code: number): never;
}

export interface StartedServer {
  app: ReturnType<typeof createApp>;
  config: Config;
  log: (entry: LogEntry) => void;
  /** Closes the store's client; the entry stops its listener itself. */
  close(): void;
}

function databaseFile(config: Config): string | null {
  return config.libsqlUrl.startsWith("file:") ? config.libsqlUrl.slice("file:".length) : null;
}

/** With no HERMES_API_KEYS, one key is generated on first start, kept beside the database and printed once. */
async function ensureApiKey(config: Config, host: ServerHost, log: (entry: LogEntry) => void): Promise<Config> {
  if (config.apiKeys.length > 0) return config;
  const file = databaseFile(config);
  const keyFile = file !== null ? `${host.resolvePath(file)}.api-key` : host.resolvePath("data/hermes-edge.api-key");
  const existing = await host.readTextFile(keyFile);
  if (existing !== null) {
    log({ level: "info", event: "api_key_loaded", file: keyFile });
    return { ...config, apiKeys: parseApiKeys(existing.trim()) };
  }
  const key = `he_${toBase64(crypto.getRandomValues(new Uint8Array(24))).replace(/[+/=]/g, "")}`;
  await host.ensureParentDirectory(keyFile);
  await host.writePrivateFile(keyFile, `${key}\n`);
  host.printLine(`\nGenerated an API key (kept in ${keyFile}; set HERMES_API_KEYS to choose your own):\n\n  ${key}\n`);
  return { ...config, apiKeys: [{ tenant: "default", key }] };
}

/** Parses the config, prepares the database and builds the app; a bad variable ends the process with code 2. */
export async function startServer(host: ServerHost): Promise<StartedServer> {
  const log = (entry: LogEntry) => host.printLine(JSON.stringify({ time: new Date().toISOString(), ...entry }));
  let config: Config;
  try {
    config = loadConfig(host.env);
    const file = databaseFile(config);
    if (file !== null) await host.ensureParentDirectory(host.resolvePath(file));
    config = await ensureApiKey(config, host, log);
  } catch (error) {
    if (error instanceof ConfigError) {
      host.printErrorLine(`hermes-edge: ${error.message}`);
      host.exit(2);
    }
    throw error;
  }

  const client: Client = createClient({
    url: config.libsqlUrl,
    ...(config.libsqlAuthToken ? { authToken: config.libsqlAuthToken } : {}),
    // A libSQL server answers overlapping write transactions with SQLITE_BUSY, and sqld 0.24 was seen to stop
    // taking writes after a few dozen overlapped; a few requests in flight per process keep it steady.
    concurrency: serverConcurrency,
  });
  const { store, notes, inbox, idempotency } = await openStore(client, config.libsqlUrl);
  const deps: AppDependencies = {
    config,
    store,
    notes,
    inbox,
    idempotency,
    // Bounded by entries and bytes, so memory stays flat however many sessions pass through.
    cache: createMemoryCache(),
    fetch: globalThis.fetch.bind(globalThis),
    now: Date.now,
    runtimeName: host.runtimeName,
    version: packageVersion,
    resolveHost: (hostname) => host.resolveHost(hostname),
    log,
    waitUntil: (work) => void work.catch(() => undefined),
  };
  const app = createApp(deps);
  // The recovery sweep picks up inbox events whose processing died (Workers use the cron trigger instead).
  let sweeping = false;
  const sweepTimer = setInterval(() => {
    if (sweeping) return;
    sweeping = true;
    void sweepInbox(deps).finally(() => {
      sweeping = false;
    });
  }, sweepIntervalMs);
  (sweepTimer as { unref?: () => void }).unref?.();
  return {
    app,
    config,
    log,
    close: () => {
      clearInterval(sweepTimer);
      client.close();
    },
  };
}

/** The log line every server entry writes once it accepts connections. */
export function listeningEntry(config: Config, port: number): LogEntry {
  return {
    level: "info",
    event: "listening",
    url: `http://${config.host.includes(":") ? `[${config.host}]` : config.host}:${port}`,
    db: config.libsqlUrl.startsWith("file:") ? config.libsqlUrl : "libsql server",
  };
}
