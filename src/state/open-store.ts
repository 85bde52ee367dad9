// Creates the store over an already-built libSQL client; the entry picks the client flavour
// (`@libsql/client` for files and servers, `@libsql/client/web` for servers on Workers).
import type { Client } from "@libsql/client";
import { retryWhenBusy } from "./busy-retry.ts";
import { createLibsqlStore } from "./libsql-store.ts";
import { createNotesStore, type NotesStore } from "./notes.ts";
import type { Store } from "./store.ts";
import { createInboxStore, type InboxStore } from "./inbox.ts";
import { createIdempotencyStore, type IdempotencyStore } from "./idempotency.ts";

export async function openStore(rawClient: Client, url: string): Promise<{ store: Store; notes: NotesStore; inbox: InboxStore; idempotency: IdempotencyStore }> {
  const client = retryWhenBusy(rawClient);
  const store = createLibsqlStore(client, { file: url.startsWith("file:") });
  await store.migrate();
  return { store, notes: createNotesStore(client), inbox: createInboxStore(client), idempotency: createIdempotencyStore(client) };
}
