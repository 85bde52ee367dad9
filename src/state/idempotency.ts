// Idempotency-Key results (api.md "Turns"): a turn-creating request claims (tenant, key) before its turn starts
// and stores its final response; a retry with the same key and request replays that response instead of running
// a second turn. Durable in libSQL, because a client retrying after a timeout may reach another instance.
import type { Client } from "@libsql/client";

export interface StoredResponse {
  status: number;
  /** Headers the replay must carry again (e.g. `X-Session-Id` of a session created by the first request). */
  headers: Record<string, string>;
  /** The JSON body as sent. */
  body: string;
}

export type IdempotencyClaim =
  /** This request owns the key now; it must `complete` or `release` it with this owner token. */
  | { kind: "claimed"; owner: string }
  /** The key was used for the same request and its response is stored. */
  | { kind: "replay"; response: StoredResponse }
  /** The key was used (within the TTL) for a different request. */
  | { kind: "mismatch" }
  /** The first request with this key and body is still running. */
  | { kind: "in_progress" };

export interface ClaimInput {
  tenant: string;
  key: string;
  /** SHA-256 (hex) of what identifies the request: method, path, body. */
  requestHash: string;
  nowMs: number;
  /** Entries older than this are ignored and overwritten (24 h in the API). */
  ttlMs: number;
  /**
   * A claim still `running` after this long belongs to a request whose process died (its turn's lease has
   * expired too), so the same request may take it over instead of waiting out the whole TTL.
   */
  staleRunningMs: number;
}

export interface IdempotencyStore {
  /** One round trip (one write transaction): purges a few expired rows, then claims or reads the key. */
  claim(input: ClaimInput): Promise<IdempotencyClaim>;
  /** Stores the final response of a claim; a no-op when `owner` no longer holds it. */
  complete(tenant: string, key: string, owner: string, response: StoredResponse): Promise<void>;
  /** Drops a claim whose request never started its work (404, 409 busy), so a retry can run it. */
  release(tenant: string, key: string, owner: string): Promise<void>;
}

/** Rows purged per claim: enough to keep up with the claim rate, small enough to keep each claim cheap. */
const purgeBatch = 50;

export function createIdempotencyStore(client: Client): IdempotencyStore {
  return {
    async claim(input) {
      const owner = crypto.randomUUID();
      const expiredBefore = input.nowMs - input.ttlMs;
      const staleBefore = input.nowMs - input.staleRunningMs;
      const [, inserted, read] = await client.batch(
        [
          {
            sql: "DELETE FROM idempotency WHERE rowid IN (SELECT rowid FROM idempotency WHERE created_at <= ? ORDER BY created_at LIMIT ?)",
            args: [expiredBefore, purgeBatch],
          },
          {
            sql: `INSERT INTO idempotency (tenant, key, request_hash, status, owner, created_at) VALUES (?, ?, ?, 'running', ?, ?)
                  ON CONFLICT (tenant, key) DO UPDATE SET request_hash = excluded.request_hash, status = 'running', owner = excluded.owner,
                    response_status = NULL, response_headers = NULL, response_body = NULL, created_at = excluded.created_at
                  WHERE idempotency.created_at <= ?
                    OR (idempotency.status = 'running' AND idempotency.created_at <= ? AND idempotency.request_hash = excluded.request_hash)
                  RETURNING owner`,
            args: [input.tenant, input.key, input.requestHash, owner, input.nowMs, expiredBefore, staleBefore],
          },
          {
            sql: "SELECT request_hash, status, response_status, response_headers, response_body FROM idempotency WHERE tenant = ? AND key = ?",
            args: [input.tenant, input.key],
          },
        ],
        "write",
      );
      if (inserted?.rows[0]?.owner === owner) return { kind: "claimed", owner };
      const row = read?.rows[0];
      // The row cannot vanish inside the transaction; treat the impossible case like a running request.
      if (!row) return { kind: "in_progress" };
      if (String(row.request_hash) !== input.requestHash) return { kind: "mismatch" };
      if (row.status !== "done") return { kind: "in_progress" };
      return {
        kind: "replay",
        response: {
          status: Number(row.response_status),
          headers: row.response_headers ? (JSON.parse(String(row.response_headers)) as Record<string, string>) : {},
          body: String(row.response_body ?? ""),
        },
      };
    },

    async complete(tenant, key, owner, response) {
      await client.execute({
        sql: `UPDATE idempotency SET status = 'done', response_status = ?, response_headers = ?, response_body = ?
              WHERE tenant = ? AND key = ? AND owner = ?`,
        args: [response.status, JSON.stringify(response.headers), response.body, tenant, key, owner],
      });
    },

    async release(tenant, key, owner) {
      await client.execute({ sql: "DELETE FROM idempotency WHERE tenant = ? AND key = ? AND owner = ? AND status = 'running'", args: [tenant, key, owner] });
    },
  };
}
