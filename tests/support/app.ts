/// <reference types="node" />
// Builds the whole app in one call over a real libSQL file, as the entries do, for `app.request()` tests.
import { serve } from "@hono/node-server";
import { createApp } from "../../src/app.ts";
import { loadConfig, type Env } from "../../src/config.ts";
import type { AppDependencies, LogEntry } from "../../src/deps.ts";
import { openStore } from "../../src/state/open-store.ts";
import { noCache } from "../../src/kv/cache.ts";
import { tempFileDatabase, type TestDatabase } from "./db.ts";

export const testApiKey = "test-key-0123456789abcdef";
export const otherTenantKey = "other-key-0123456789abcdef";
export const testSecretKey = btoa(String.fromCharCode(...new Uint8Array(32).map((_, index) => index + 1)));

export interface TestApp {
  app: ReturnType<typeof createApp>;
  deps: AppDependencies;
  database: TestDatabase;
  logs: LogEntry[];
  /** `app.request` with the bearer key and JSON content type filled in. */
  call(method: string, path: string, body?: unknown, headers?: Record<string, string>): Promise<Response>;
  close(): Promise<void>;
}

/** The whole app over a temp libSQL file, or over `database` (a sqld server, or a file shared by several apps). */
export async function buildTestApp(env: Env = {}, overrides: Partial<AppDependencies> = {}, database: TestDatabase = tempFileDatabase()): Promise<TestApp> {
  const config = loadConfig({
    HERMES_API_KEYS: `${testApiKey},other=${otherTenantKey}`,
    HERMES_SECRET_KEY: testSecretKey,
    LIBSQL_URL: database.url,
    HERMES_FETCH_ALLOW_PRIVATE: "1",
    ...env,
  });
  const { store, notes, inbox, idempotency } = await openStore(database.client, database.url);
  const logs: LogEntry[] = [];
  const deps: AppDependencies = {
    config,
    store,
    notes,
    inbox,
    idempotency,
    cache: noCache,
    fetch: globalThis.fetch.bind(globalThis),
    now: Date.now,
    runtimeName: "node",
    version: "test",
    log: (entry) => logs.push(entry),
    waitUntil: (work) => void work.catch(() => undefined),
    ...overrides,
  };
  const app = createApp(deps);
  return {
    app,
    deps,
    database,
    logs,
    async call(method, path, body, headers = {}) {
      return app.request(path, {
        method,
        headers: { authorization: `Bearer ${testApiKey}`, ...(body === undefined ? {} : { "content-type": "application/json" }), ...headers },
        ...(body === undefined ? {} : { body: typeof body === "string" ? body : JSON.stringify(body) }),
      });
    },
    close: () => database.close(),
  };
}

/** Serves the app on a free loopback port with the Node adapter, for tests that need real HTTP. */
export async function listen(app: TestApp["app"]): Promise<{ url: string; close(): Promise<void> }> {
  return new Promise((resolve) => {
    const server = serve({ fetch: app.fetch, port: 0, hostname: "127.0.0.1" }, (info) =>
      resolve({
        url: `http://127.0.0.1:${info.port}`,
        close: () =>
          new Promise<void>((done) => {
            server.close(() => done());
            if ("closeAllConnections" in server) server.closeAllConnections();
          }),
      }),
    );
  });
}
