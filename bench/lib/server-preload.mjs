// Preloaded into the benchmark's server processes (`node --import ./bench/lib/server-preload.mjs ...`).
// 1. The server logs only the class of an unhandled error ("LibsqlError"), so the libSQL error code and message
//    of every failed execute/batch go to stderr as one JSON line. No SQL or arguments are written. Cost on the
//    success path: one extra async frame per round trip.
// 2. On SIGUSR2 it writes process.memoryUsage() as one JSON line, after a full GC when the process runs with
//    --expose-gc, so the memory phase can tell retained heap from garbage not yet collected.
import { HttpClient } from "@libsql/client/http";
import { Sqlite3Client } from "@libsql/client/sqlite3";

const trace = (entry) => process.stderr.write(`${JSON.stringify({ bench_trace: entry.kind, ...entry })}\n`);

for (const [client, Client] of [["http", HttpClient], ["file", Sqlite3Client]]) {
  for (const method of ["execute", "batch"]) {
    const original = Client.prototype[method];
    Client.prototype[method] = async function traced(...args) {
      try {
        return await original.apply(this, args);
      } catch (error) {
        trace({ kind: "libsql_error", client, method, code: error?.code ?? null, message: String(error?.message ?? error).slice(0, 200) });
        throw error;
      }
    };
  }
}

process.on("SIGUSR2", () => {
  if (typeof globalThis.gc === "function") globalThis.gc();
  trace({ kind: "memory", gc: typeof globalThis.gc === "function", ...process.memoryUsage() });
});
