// The durable platform inbox (design.md "Platforms"): verify -> insert (unique per platform event id) ->
// acknowledge; processing claims events per session in arrival order under a lease, so a redelivered event
// is a no-op and an event whose processing died is claimed again by the recovery sweep.
import type { Client } from "@libsql/client";

export interface InboxEvent {
  platform: string;
  eventId: string;
  sessionId: string;
  /** The parsed inbound message as JSON (platform-specific reply target included). */
  payload: string;
  attempts: number;
}

export interface InboxStore {
  /** Inserts the event once; false when (platform, eventId) is already there (a redelivery). */
  enqueue(event: { platform: string; eventId: string; sessionId: string; payload: string }, nowMs: number): Promise<boolean>;
  /** Events of the session still waiting or being processed (the per-session queue length). */
  pendingCount(sessionId: string): Promise<number>;
  /**
   * Claims the oldest waiting event of the session, unless another event of that session is being processed
   * under a live lease (per-session order). An event whose lease expired is claimable again. Events that
   * have used `maxAttempts` claims are not claimed. Null when there is nothing to claim.
   */
  claimNext(sessionId: string, owner: string, nowMs: number, leaseMs: number, maxAttempts: number): Promise<InboxEvent | null>;
  /** Marks a claimed event done (only while `owner` holds it). */
  complete(platform: string, eventId: string, owner: string, nowMs: number): Promise<void>;
  /** Releases a claimed event for another attempt, or marks it `failed` once `attempts >= maxAttempts`. */
  fail(platform: string, eventId: string, owner: string, error: string, nowMs: number, maxAttempts: number): Promise<void>;
  /**
   * Puts a claimed event back without spending an attempt: the session was busy with a turn started over the
   * API, which says nothing about this event.
   */
  release(platform: string, eventId: string, owner: string, nowMs: number): Promise<void>;
  /** Sessions with claimable events (waiting, or processing under an expired lease), oldest first. */
  sessionsNeedingWork(nowMs: number, maxAttempts: number, limit: number): Promise<string[]>;
  /** Status and attempts of one event, for tests and /status. */
  get(platform: string, eventId: string): Promise<{ status: string; attempts: number } | null>;
}

export function createInboxStore(client: Client): InboxStore {
  return {
    async enqueue(event, nowMs) {
      const result = await client.execute({
        sql: `INSERT INTO inbox (platform, event_id, session_id, payload, received_at, updated_at) VALUES (?, ?, ?, ?, ?, ?)
              ON CONFLICT (platform, event_id) DO NOTHING`,
        args: [event.platform, event.eventId, event.sessionId, event.payload, nowMs, nowMs],
      });
      return result.rowsAffected > 0;
    },

    async pendingCount(sessionId) {
      const result = await client.execute({ sql: "SELECT COUNT(*) AS n FROM inbox WHERE session_id = ? AND status IN ('pending', 'processing')", args: [sessionId] });
      return Number(result.rows[0]?.n ?? 0);
    },

    async claimNext(sessionId, owner, nowMs, leaseMs, maxAttempts) {
      const result = await client.execute({
        sql: `UPDATE inbox SET status = 'processing', lease_owner = :owner, lease_expires_at = :expires, attempts = attempts + 1, updated_at = :now
              WHERE rowid = (
                SELECT rowid FROM inbox WHERE session_id = :session AND attempts < :max
                  AND (status = 'pending' OR (status = 'processing' AND lease_expires_at <= :now))
                ORDER BY rowid LIMIT 1)
              AND NOT EXISTS (SELECT 1 FROM inbox WHERE session_id = :session AND status = 'processing' AND lease_expires_at > :now)
              RETURNING platform, event_id, session_id, payload, attempts`,
        args: { owner, expires: nowMs + leaseMs, now: nowMs, session: sessionId, max: maxAttempts },
      });
      const row = result.rows[0];
      if (!row) return null;
      return { platform: String(row.platform), eventId: String(row.event_id), sessionId: String(row.session_id), payload: String(row.payload), attempts: Number(row.attempts) };
    },

    async complete(platform, eventId, owner, nowMs) {
      await client.execute({
        sql: "UPDATE inbox SET status = 'done', lease_owner = NULL, lease_expires_at = 0, updated_at = ? WHERE platform = ? AND event_id = ? AND lease_owner = ?",
        args: [nowMs, platform, eventId, owner],
      });
    },

    async fail(platform, eventId, owner, error, nowMs, maxAttempts) {
      await client.execute({
        sql: `UPDATE inbox SET status = CASE WHEN attempts >= ? THEN 'failed' ELSE 'pending' END, lease_owner = NULL, lease_expires_at = 0, error = ?, updated_at = ?
              WHERE platform = ? AND event_id = ? AND lease_owner = ?`,
        args: [maxAttempts, error.slice(0, 500), nowMs, platform, eventId, owner],
      });
    },

    async release(platform, eventId, owner, nowMs) {
      await client.execute({
        sql: `UPDATE inbox SET status = 'pending', attempts = MAX(attempts - 1, 0), lease_owner = NULL, lease_expires_at = 0, updated_at = ?
              WHERE platform = ? AND event_id = ? AND lease_owner = ?`,
        args: [nowMs, platform, eventId, owner],
      });
    },

    async sessionsNeedingWork(nowMs, maxAttempts, limit) {
      const result = await client.execute({
        sql: `SELECT session_id FROM inbox WHERE attempts < ? AND (status = 'pending' OR (status = 'processing' AND lease_expires_at <= ?))
              GROUP BY session_id ORDER BY MIN(rowid) LIMIT ?`,
        args: [maxAttempts, nowMs, limit],
      });
      return result.rows.map((row) => String(row.session_id));
    },

    async get(platform, eventId) {
      const result = await client.execute({ sql: "SELECT status, attempts FROM inbox WHERE platform = ? AND event_id = ?", args: [platform, eventId] });
      const row = result.rows[0];
      return row ? { status: String(row.status), attempts: Number(row.attempts) } : null;
    },
  };
}
