/// <reference types="node" />
// A fresh libSQL file per test, migrated, with one session and a few journal rows inserted as plain SQL.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createClient, type Client } from "@libsql/client";
import { migrations } from "../../../src/state/schema.ts";
import { createNotesStore, type NotesStore } from "../../../src/state/notes.ts";
import type { ToolContext } from "../../../src/agent/tools/types.ts";

export interface TestDatabase {
  client: Client;
  notes: NotesStore;
  sessionPk: number;
  otherSessionPk: number;
  close(): void;
}

export async function openTestDatabase(): Promise<TestDatabase> {
  const folder = mkdtempSync(join(tmpdir(), "hermes-tools-"));
  const client = createClient({ url: `file:${join(folder, "test.db")}` });
  for (const migration of migrations) for (const statement of migration.statements) await client.execute(statement);

  const now = "2025-01-01T00:00:00.000Z";
  for (const [pk, id] of [[1, "s1"], [2, "s2"]] as const) {
    await client.execute({
      sql: "INSERT INTO sessions (pk, tenant, id, runtime, created_at, updated_at) VALUES (?, 't', ?, '{}', ?, ?)",
      args: [pk, id, now, now],
    });
  }
  return {
    client,
    notes: createNotesStore(client),
    sessionPk: 1,
    otherSessionPk: 2,
    close() {
      client.close();
      rmSync(folder, { recursive: true, force: true });
    },
  };
}

export async function insertMessage(
  client: Client,
  sessionPk: number,
  seq: number,
  role: string,
  content: string | null,
  flags: { archived?: boolean; undone?: boolean } = {},
): Promise<void> {
  await client.execute({
    sql: `INSERT INTO messages (session_pk, seq, role, content, archived, undone, created_at)
      VALUES (?, ?, ?, ?, ?, ?, '2025-01-01T00:00:00.000Z')`,
    args: [sessionPk, seq, role, content, flags.archived ? 1 : 0, flags.undone ? 1 : 0],
  });
}

export function toolContext(database: TestDatabase, overrides: Partial<ToolContext> = {}): ToolContext {
  return {
    sessionPk: database.sessionPk,
    notes: database.notes,
    fetch: globalThis.fetch,
    allowPrivateFetch: false,
    signal: new AbortController().signal,
    ...overrides,
  };
}
