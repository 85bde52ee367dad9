/// <reference types="node" />
// Real libSQL databases for tests: a temp file, :memory:, or a sqld server; plus a round-trip counter.
import { createClient, type Client } from "@libsql/client";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

export interface TestDatabase {
  url: string;
  client: Client;
  close(): Promise<void>;
}

export function tempFileDatabase(): TestDatabase {
  const directory = mkdtempSync(join(tmpdir(), "hermes-db-"));
  const url = `file:${join(directory, "test.db")}`;
  const client = createClient({ url });
  return {
    url,
    client,
    async close() {
      client.close();
      rmSync(directory, { recursive: true, force: true });
    },
  };
}

/**
 * Wraps a client so every `execute` / `batch` / `executeMultiple` call (one network round trip on a libSQL
 * server) is counted, with the number of statements it carried.
 */
export function countingClient(client: Client): { client: Client; counts: { roundTrips: number; statements: number }; reset(): void } {
  const counts = { roundTrips: 0, statements: 0 };
  const wrapped = new Proxy(client, {
    get(target, property, receiver) {
      const value = Reflect.get(target, property, receiver);
      if (property === "execute" || property === "batch" || property === "executeMultiple" || property === "migrate") {
        return (...args: unknown[]) => {
          counts.roundTrips += 1;
          counts.statements += property === "batch" && Array.isArray(args[0]) ? args[0].length : 1;
          return (value as (...inner: unknown[]) => unknown).apply(target, args);
        };
      }
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
  return {
    client: wrapped,
    counts,
    reset() {
      counts.roundTrips = 0;
      counts.statements = 0;
    },
  };
}
