// Cloudflare Workers entry (wrangler.toml `main`). Bindings are the config; the store is a libSQL server
// reached over HTTP (`@libsql/client/web`), since a Worker has no file system. No API key is generated here:
// with HERMES_API_KEYS unset, `bearerAuth` refuses /v1/* with 503 (api.md "Conventions").
import { createClient } from "@libsql/client/web";
import { createApp } from "../app.ts";
import { loadConfig, type Config, type Env } from "../config.ts";
import type { AppDependencies, LogEntry } from "../deps.ts";
import { AppError, ConfigError } from "../errors.ts";
import { noCache, type EdgeCache } from "../kv/cache.ts";
import { createWorkersKvCache, type KvNamespaceLike } from "../kv/workers-kv-cache.ts";
import { sweepInbox } from "../platforms/processor.ts";
import { openStore } from "../state/open-store.ts";
import { packageVersion } from "../version.ts";

/** Typed structurally so the project needs no @cloudflare/workers-types; the runtime's objects satisfy these. */
interface ExecutionContextLike {
  waitUntil(work: Promise<unknown>): void;
}
interface ScheduledControllerLike {
  readonly scheduledTime: number;
  readonly cron: string;
}
export interface WorkerBindings {
  /** Optional Workers KV namespace for the edge cache; without it nothing is cached. */
  CACHE?: KvNamespaceLike;
  [name: string]: unknown;
}

type IsolateState = Pick<AppDependencies, "config" | "store" | "notes" | "inbox" | "idempotency" | "cache">;

function log(entry: LogEntry): void {
  console.log(JSON.stringify(entry));
}

/** Only string bindings are variables; KV namespaces and other bindings are objects. */
function variables(bindings: WorkerBindings): Env {
  const env: Env = {};
  for (const [name, value] of Object.entries(bindings)) if (typeof value === "string") env[name] = value;
  return env;
}

class StoreUnavailableError extends Error {
  constructor(cause: unknown) {
    super("the libSQL server could not be reached or migrated", { cause });
    this.name = new.target.name;
  }
}

/**
 * The config, the client and a migrated store, built once per isolate: even with nothing to apply, `migrate()`
 * makes 2 + one per migration round trips to the libSQL server, too many to repeat on every request. Bindings
 * cannot change under a running isolate (a new version or secret starts new isolates), so the first request's
 * bindings hold for all. A failed preparation is forgotten, so the next request tries again rather than the
 * isolate failing until it is evicted.
 */
let isolateState: Promise<IsolateState> | undefined;

async function prepare(bindings: WorkerBindings): Promise<IsolateState> {
  const env = variables(bindings);
  const config: Config = loadConfig(env);
  // loadConfig's default is a local file, which a Worker cannot open; the web client speaks HTTP only.
  if (!env.LIBSQL_URL || !/^(https?|libsql):\/\//.test(env.LIBSQL_URL)) {
    throw new ConfigError("LIBSQL_URL must be the http(s):// or libsql:// URL of a libSQL server (Turso, sqld) on Workers");
  }
  // No queue in the client: the client is shared by the isolate's requests, and a request waiting in its queue
  // for a slot freed by another request's fetch has no I/O of its own, so workerd cancels it as hung (seen with
  // a limit of 4 under 16 parallel requests). Busy answers from the server are retried by the store instead.
  const client = createClient({ url: config.libsqlUrl, ...(config.libsqlAuthToken ? { authToken: config.libsqlAuthToken } : {}), concurrency: 1024 });
  let opened: Awaited<ReturnType<typeof openStore>>;
  try {
    opened = await openStore(client, config.libsqlUrl);
  } catch (error) {
    client.close();
    throw new StoreUnavailableError(error);
  }
  const namespace = bindings.CACHE;
  const cache: EdgeCache =
    typeof namespace === "object" && namespace !== null
      ? createWorkersKvCache(namespace, { onError: (operation) => log({ level: "warn", event: "kv_error", operation }) })
      : noCache;
  return { config, ...opened, cache };
}

function isolate(bindings: WorkerBindings): Promise<IsolateState> {
  if (!isolateState) {
    const pending = prepare(bindings);
    isolateState = pending;
    pending.catch(() => {
      if (isolateState === pending) isolateState = undefined;
    });
  }
  return isolateState;
}

function dependencies(state: IsolateState, context: ExecutionContextLike): AppDependencies {
  return {
    ...state,
    fetch: globalThis.fetch.bind(globalThis),
    now: Date.now,
    runtimeName: "workerd",
    version: packageVersion,
    log,
    // Work after the response (a platform turn after its webhook is acknowledged) is cancelled with the
    // request unless handed to waitUntil.
    waitUntil: (work) => context.waitUntil(work.catch(() => undefined)),
  };
}

/** The API's error body for a Worker that cannot serve yet; nothing of the cause (URLs, tokens, SQL) leaks. */
function unavailableResponse(error: unknown): Response {
  const headers: Record<string, string> = { "X-Request-Id": crypto.randomUUID() };
  let message: string;
  if (error instanceof ConfigError) {
    message = `Configuration error: ${error.message}.`;
  } else {
    message = "The libSQL server at LIBSQL_URL could not be reached or migrated; check LIBSQL_URL and LIBSQL_AUTH_TOKEN.";
    // An unreachable server may come back; a configuration error stays until the bindings change.
    headers["Retry-After"] = "30";
  }
  return Response.json(new AppError("not_configured", 503, message).toBody(), { status: 503, headers });
}

function errorLabel(error: unknown): string {
  const cause = error instanceof StoreUnavailableError ? error.cause : error;
  return cause instanceof Error ? cause.name : typeof cause;
}

export default {
  async fetch(request: Request, bindings: WorkerBindings, context: ExecutionContextLike): Promise<Response> {
    let state: IsolateState;
    try {
      state = await isolate(bindings);
    } catch (error) {
      log({ level: "error", event: "worker_unavailable", error: errorLabel(error) });
      return unavailableResponse(error);
    }
    // waitUntil belongs to the request, so the app is built per request over the isolate's store: route tables
    // only, on the order of a millisecond of CPU.
    return createApp(dependencies(state, context)).fetch(request);
  },

  /** The cron trigger of wrangler.toml: the inbox recovery sweep (design.md "Platforms"). */
  async scheduled(_controller: ScheduledControllerLike, bindings: WorkerBindings, context: ExecutionContextLike): Promise<void> {
    let state: IsolateState;
    try {
      state = await isolate(bindings);
    } catch (error) {
      log({ level: "error", event: "worker_unavailable", error: errorLabel(error) });
      // Rethrown so the invocation shows as failed in the Cron Triggers log instead of as a quiet success.
      throw new Error(`scheduled: the Worker cannot serve (${errorLabel(error)})`);
    }
    const sessions = await sweepInbox(dependencies(state, context));
    if (sessions > 0) log({ level: "info", event: "inbox_swept", sessions });
  },
};
