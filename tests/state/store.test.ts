/// <reference types="node" />
import { createClient } from "@libsql/client";
import { afterAll, beforeAll } from "vitest";
import { startSqld, type SqldServer } from "../support/sqld.ts";
import { tempFileDatabase } from "../support/db.ts";
import { describeStoreContract } from "./store-contract.ts";

describeStoreContract("libSQL file", async () => {
  const database = tempFileDatabase();
  const others: ReturnType<typeof createClient>[] = [];
  return {
    client: database.client,
    url: database.url,
    secondClient: () => {
      const other = createClient({ url: database.url });
      others.push(other);
      return other;
    },
    close: async () => {
      for (const other of others) other.close();
      await database.close();
    },
  };
});

describeStoreContract(":memory:", async () => {
  const client = createClient({ url: ":memory:" });
  return { client, url: ":memory:", secondClient: () => client, close: async () => client.close() };
});

let sqld: SqldServer;
beforeAll(async () => {
  sqld = await startSqld();
}, 30_000);
afterAll(async () => sqld?.stop());

describeStoreContract("libSQL server (sqld)", async () => {
  // One server for the file; each test starts from empty tables by dropping what the previous one made.
  const client = createClient({ url: sqld.url });
  const objects = await client.execute("SELECT name, type FROM sqlite_master WHERE type IN ('table', 'trigger') AND name NOT LIKE 'sqlite_%' AND name NOT LIKE '\\_%' ESCAPE '\\'");
  for (const row of objects.rows.filter((row) => row.type === "trigger")) await client.execute(`DROP TRIGGER IF EXISTS "${String(row.name)}"`);
  for (const row of objects.rows.filter((row) => row.type === "table" && !String(row.name).startsWith("messages_fts_"))) {
    await client.execute(`DROP TABLE IF EXISTS "${String(row.name)}"`);
  }
  const others: ReturnType<typeof createClient>[] = [];
  return {
    client,
    url: sqld.url,
    secondClient: () => {
      const other = createClient({ url: sqld.url });
      others.push(other);
      return other;
    },
    close: async () => {
      for (const other of others) other.close();
      client.close();
    },
  };
});
