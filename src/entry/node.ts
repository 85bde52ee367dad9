// Node entry: `npm start`. Embedded libSQL file by default, no other setup.
import { serve } from "@hono/node-server";
import { createClient } from "@libsql/client";
import { lookup } from "node:dns/promises";
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { createApp } from "../app.ts";
import { loadConfig, parseApiKeys, type Config } from "../config.ts";
import { toBase64 } from "../crypto.ts";
import type { LogEntry } from "../deps.ts";
import { ConfigError } from "../errors.ts";
import { openStore } from "../state/open-store.ts";
import { noCache } from "../kv/cache.ts";
import { packageVersion } from "../version.ts";

function log(entry: LogEntry): void {
  process.stdout.write(`${JSON.stringify({ time: new Date().toISOString(), ...entry })}\n`);
}

/** With no HERMES_API_KEYS, one key is generated on first start, kept beside the database and printed once. */
function ensureApiKey(config: Config): Config {
  if (config.apiKeys.length > 0) return config;
  const keyFile = config.libsqlUrl.startsWith("file:") ? `${resolve(config.libsqlUrl.slice(5))}.api-key` : resolve("data/hermes-edge.api-key");
  if (existsSync(keyFile)) {
    log({ level: "info", event: "api_key_loaded", file: keyFile });
    return { ...config, apiKeys: parseApiKeys(readFileSync(keyFile, "utf8").trim()) };
  }
  const key = `he_${toBase64(crypto.getRandomValues(new Uint8Array(24))).replace(/[+/=]/g, "")}`;
  mkdirSync(dirname(keyFile), { recursive: true });
  writeFileSync(keyFile, `${key}\n`, { mode: 0o600 });
  chmodSync(keyFile, 0o600);
  process.stdout.write(`\nGenerated an API key (kept in ${keyFile}; set HERMES_API_KEYS to choose your own):\n\n  ${key}\n\n`);
  return { ...config, apiKeys: [{ tenant: "default", key }] };
}

async function main(): Promise<void> {
  let config: Config;
  try {
    config = loadConfig(process.env);
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(`hermes-edge: ${error.message}\n`);
      process.exit(2);
    }
    throw error;
  }
  if (config.libsqlUrl.startsWith("file:")) mkdirSync(dirname(resolve(config.libsqlUrl.slice(5))), { recursive: true });
  config = ensureApiKey(config);

  const client = createClient({ url: config.libsqlUrl, ...(config.libsqlAuthToken ? { authToken: config.libsqlAuthToken } : {}) });
  const { store, notes, inbox } = await openStore(client, config.libsqlUrl);
  const app = createApp({
    config,
    store,
    notes,
    inbox,
    cache: noCache,
    fetch: globalThis.fetch.bind(globalThis),
    now: Date.now,
    runtimeName: "node",
    version: packageVersion,
    resolveHost: async (hostname) => (await lookup(hostname, { all: true })).map((entry) => entry.address),
    log,
    waitUntil: (work) => void work.catch(() => undefined),
  });

  const server = serve({ fetch: app.fetch, hostname: config.host, port: config.port }, (info) => {
    log({ level: "info", event: "listening", url: `http://${config.host}:${info.port}`, db: config.libsqlUrl.startsWith("file:") ? config.libsqlUrl : "libsql server" });
  });
  const stop = () => {
    server.close();
    client.close();
    process.exit(0);
  };
  process.on("SIGTERM", stop);
  process.on("SIGINT", stop);
}

void main();
