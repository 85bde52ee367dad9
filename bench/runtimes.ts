/// <reference types="node" />
// 9. Throughput per runtime: `/health` and a 0-tool turn on Node, Bun, Deno (libSQL file) and workerd (`wrangler
// dev` over a local sqld: a Worker has no file store), each server started the way the conformance suite starts
// it, all in one run so the ratios hold. A fixed number of clients send back to back for a fixed time.
import { startSqld } from "../tests/support/sqld.ts";
import { startRuntimeServer, type RuntimeUnderTest } from "../tests/conformance/servers.ts";
import { JsonClient } from "./lib/http.ts";
import { removeDirectory, tempDirectory } from "./lib/proc.ts";
import { serverEnv } from "./lib/setup.ts";
import { apiKey } from "./lib/setup.ts";

export interface RuntimeRow {
  runtime: RuntimeUnderTest;
  store: string;
  healthPerSecond: number;
  turnPerSecond: number;
  turnP50: number;
  errors: number;
}

async function drive(clients: number, seconds: number, send: (client: number) => Promise<{ ok: boolean; ms: number }>): Promise<{ perSecond: number; p50: number; errors: number }> {
  const deadline = performance.now() + seconds * 1000;
  const times: number[] = [];
  let errors = 0;
  await Promise.all(
    Array.from({ length: clients }, async (_, client) => {
      while (performance.now() < deadline) {
        const result = await send(client).catch(() => ({ ok: false, ms: 0 }));
        if (result.ok) times.push(result.ms);
        else errors += 1;
      }
    }),
  );
  times.sort((left, right) => left - right);
  return { perSecond: times.length / seconds, p50: times[Math.floor(times.length / 2)] ?? Number.NaN, errors };
}

export async function measureRuntimes(fakeUrl: string, options: { seconds: number; clients: number }): Promise<RuntimeRow[]> {
  const rows: RuntimeRow[] = [];
  const sqld = await startSqld();
  try {
    for (const runtime of ["node", "bun", "deno", "workerd"] as const) {
      const workDir = tempDirectory(`runtime-${runtime}`);
      const libsqlUrl = runtime === "workerd" ? sqld.url : `file:${workDir}/bench.db`;
      const server = await startRuntimeServer(runtime, serverEnv(libsqlUrl, fakeUrl), workDir);
      try {
        const client = new JsonClient(server.url, apiKey);
        const sessions: string[] = [];
        for (let index = 0; index < options.clients; index++) {
          const created = await client.send("POST", "/v1/sessions", {});
          sessions.push(String(created.body.id));
        }
        // Warm-up: JIT, connections, the isolate's store.
        await drive(options.clients, 1, async () => {
          const reply = await client.send("GET", "/health");
          return { ok: reply.status === 200, ms: reply.ms };
        });
        const health = await drive(options.clients, options.seconds, async () => {
          const reply = await client.send("GET", "/health");
          return { ok: reply.status === 200, ms: reply.ms };
        });
        const turns = await drive(options.clients, options.seconds, async (index) => {
          const reply = await client.send("POST", `/v1/sessions/${sessions[index]}/messages`, { content: "bench:none:0" });
          return { ok: reply.status === 200, ms: reply.ms };
        });
        rows.push({ runtime, store: runtime === "workerd" ? "sqld" : "file", healthPerSecond: health.perSecond, turnPerSecond: turns.perSecond, turnP50: turns.p50, errors: health.errors + turns.errors });
      } finally {
        await server.stop();
        removeDirectory(workDir);
      }
    }
  } finally {
    await sqld.stop();
  }
  return rows;
}

export function runtimeTable(rows: RuntimeRow[], options: { seconds: number; clients: number }): string {
  const lines = [
    "### 9. Throughput per runtime",
    "",
    "| runtime | store | /health req/s | 0-tool turns/s | turn p50 ms | errors |",
    "|---|---|---|---|---|---|",
    ...rows.map((row) => `| ${row.runtime} | ${row.store} | ${row.healthPerSecond.toFixed(0)} | ${row.turnPerSecond.toFixed(0)} | ${row.turnP50.toFixed(2)} | ${row.errors} |`),
    "",
    `_${options.clients} keep-alive clients back to back for ${options.seconds} s per column after a 1 s warm-up; each client has its own session; Node runs through tsx, workerd through \`wrangler dev --local\` (sqld, since a Worker has no file store)._`,
    "",
  ];
  return lines.join("\n");
}
