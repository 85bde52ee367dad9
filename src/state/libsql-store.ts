// The Store over libSQL: an embedded file (WAL), :memory:, or a libSQL server (sqld, Turso) over HTTP.
// Every method is one round trip (one `execute` or one `batch`), which the tests count.
import type { Client, InStatement, Row } from "@libsql/client";
import type { ChatMessage, JournalMessage } from "../agent/messages.ts";
import { migrations } from "./schema.ts";
import { toJournalMessage, toSessionRecord, toTurnRecord } from "./rows.ts";
import { beginTurnStatements, messageInsert } from "./turn-statements.ts";
import type { BeginTurnInput, BeginTurnResult, FinishTurnInput, MessageQuery, NewSession, SessionPatch, SessionRecord, SessionView, Store, TurnRecord, TurnStatus } from "./store.ts";

const sessionColumns = "pk, tenant, id, runtime, system_prompt, metadata, version, conversation_prompt, reasoning, created_at, updated_at";
const messageColumns = "seq, turn_id, role, kind, content, tool_calls, tool_call_id, name, is_error, effect, provider, model, archived, created_at";
const turnColumns = "id, status, provider, model, fallback_activated, attempts, input_tokens, output_tokens, started_at, ended_at";

export function createLibsqlStore(client: Client, options: { file: boolean }): Store {
  async function sessionViews(where: string, args: (string | number)[], suffix = ""): Promise<SessionView[]> {
    // Count and last turn come from correlated subqueries so a listing stays one statement.
    const result = await client.execute({
      sql: `SELECT ${sessionColumns},
              (SELECT COUNT(*) FROM messages m WHERE m.session_pk = s.pk AND m.archived = 0) AS message_count,
              (SELECT json_array(${turnColumns.split(", ").map((column) => `t.${column}`).join(", ")}) FROM turns t
                 WHERE t.session_pk = s.pk ORDER BY t.started_at DESC, t.rowid DESC LIMIT 1) AS last_turn
            FROM sessions s WHERE ${where} ${suffix}`,
      args,
    });
    return result.rows.map((row) => {
      const lastTurnColumns = row.last_turn ? (JSON.parse(String(row.last_turn)) as unknown[]) : null;
      const lastTurnRow = lastTurnColumns ? Object.fromEntries(turnColumns.split(", ").map((column, index) => [column, lastTurnColumns[index]])) : null;
      return {
        ...toSessionRecord(row),
        messageCount: Number(row.message_count),
        lastTurn: lastTurnRow ? toTurnRecord(lastTurnRow as never) : null,
      };
    });
  }

  const store: Store = {
    async migrate() {
      if (options.file) {
        // WAL lets readers proceed while a turn writes; busy_timeout makes a second process wait, not fail.
        await client.execute("PRAGMA journal_mode = WAL");
        // In WAL mode NORMAL fsyncs at checkpoints, not at every commit: a committed write survives a crash or
        // kill of the process (it is in the WAL file the OS holds), and only an OS crash or power loss can drop
        // the last commits. That takes a commit from 0.34 ms to 0.03 ms on this disk, seven times per 2-tool turn.
        await client.execute("PRAGMA synchronous = NORMAL");
        await client.execute("PRAGMA busy_timeout = 5000");
      }
      await client.execute("PRAGMA foreign_keys = ON");
      await client.execute("CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL)");
      for (const migration of migrations) {
        const applied = await client.execute({ sql: "SELECT 1 FROM schema_migrations WHERE version = ?", args: [migration.version] });
        if (applied.rows.length > 0) continue;
        try {
          // The version row goes first: a second process racing on the same migration fails on its primary key
          // and its whole batch rolls back.
          await client.batch(
            [{ sql: "INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)", args: [migration.version, new Date().toISOString()] }, ...migration.statements],
            "write",
          );
        } catch (error) {
          const again = await client.execute({ sql: "SELECT 1 FROM schema_migrations WHERE version = ?", args: [migration.version] });
          if (again.rows.length === 0) throw error;
        }
      }
    },

    async ping() {
      await client.execute("SELECT 1");
    },

    async createSession(input: NewSession) {
      const inserted = await client.execute({
        sql: `INSERT INTO sessions (tenant, id, runtime, system_prompt, metadata, created_at, updated_at)
              VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (tenant, id) DO NOTHING RETURNING ${sessionColumns}`,
        args: [input.tenant, input.id, JSON.stringify(input.runtime), input.systemPrompt, JSON.stringify(input.metadata), input.now, input.now],
      });
      const row = inserted.rows[0];
      return row ? { ...toSessionRecord(row), messageCount: 0, lastTurn: null } : null;
    },

    async getSession(tenant, id) {
      return (await sessionViews("s.tenant = ? AND s.id = ?", [tenant, id]))[0] ?? null;
    },

    async listSessions(tenant, limit, afterId) {
      return afterId === null
        ? sessionViews("s.tenant = ?", [tenant], `ORDER BY s.id LIMIT ${Math.trunc(limit)}`)
        : sessionViews("s.tenant = ? AND s.id > ?", [tenant, afterId], `ORDER BY s.id LIMIT ${Math.trunc(limit)}`);
    },

    async updateSession(tenant, id, expectedVersion, patch: SessionPatch, now) {
      const sets = ["version = version + 1", "updated_at = ?"];
      const args: (string | number | null)[] = [now];
      if (patch.runtime) (sets.push("runtime = ?"), args.push(JSON.stringify(patch.runtime)));
      if (patch.systemPrompt !== undefined) (sets.push("system_prompt = ?"), args.push(patch.systemPrompt));
      if (patch.metadata !== undefined) (sets.push("metadata = ?"), args.push(JSON.stringify(patch.metadata)));
      if (patch.reasoning !== undefined) (sets.push("reasoning = ?"), args.push(patch.reasoning));
      if (patch.resetConversationPrompt) sets.push("conversation_prompt = NULL");
      const updated = await client.execute({
        sql: `UPDATE sessions SET ${sets.join(", ")} WHERE tenant = ? AND id = ? AND version = ? RETURNING pk`,
        args: [...args, tenant, id, expectedVersion],
      });
      if (updated.rows.length === 0) return null;
      return store.getSession(tenant, id);
    },

    async deleteSession(tenant, id) {
      const pk = "(SELECT pk FROM sessions WHERE tenant = ? AND id = ?)";
      // Children first: foreign-key cascades are off on some libSQL servers, and FTS rows are not covered by them.
      const results = await client.batch(
        [
          { sql: `DELETE FROM messages_fts WHERE session_pk = ${pk}`, args: [tenant, id] },
          { sql: `DELETE FROM messages WHERE session_pk = ${pk}`, args: [tenant, id] },
          { sql: `DELETE FROM turns WHERE session_pk = ${pk}`, args: [tenant, id] },
          { sql: `DELETE FROM session_notes WHERE session_pk = ${pk}`, args: [tenant, id] },
          { sql: "DELETE FROM sessions WHERE tenant = ? AND id = ?", args: [tenant, id] },
        ],
        "write",
      );
      return (results[4]?.rowsAffected ?? 0) > 0;
    },

    async archiveConversation(tenant, id, now) {
      const results = await client.batch(
        [
          { sql: "UPDATE messages SET archived = 1 WHERE session_pk = (SELECT pk FROM sessions WHERE tenant = ? AND id = ?) AND archived = 0", args: [tenant, id] },
          { sql: "UPDATE sessions SET conversation_prompt = NULL, version = version + 1, updated_at = ? WHERE tenant = ? AND id = ?", args: [now, tenant, id] },
        ],
        "write",
      );
      return (results[1]?.rowsAffected ?? 0) > 0;
    },

    async listMessages(tenant, id, query: MessageQuery) {
      const results = await client.batch(
        [
          { sql: "SELECT pk FROM sessions WHERE tenant = ? AND id = ?", args: [tenant, id] },
          {
            sql: `SELECT ${messageColumns} FROM messages WHERE session_pk = (SELECT pk FROM sessions WHERE tenant = ? AND id = ?)
                  AND seq > ? ${query.includeArchived ? "" : "AND archived = 0"} ORDER BY seq LIMIT ?`,
            args: [tenant, id, query.after, query.limit],
          },
        ],
        "read",
      );
      if ((results[0]?.rows.length ?? 0) === 0) return null;
      return (results[1]?.rows ?? []).map(toJournalMessage);
    },

    async listTurns(tenant, id, limit) {
      const results = await client.batch(
        [
          { sql: "SELECT pk FROM sessions WHERE tenant = ? AND id = ?", args: [tenant, id] },
          {
            sql: `SELECT ${turnColumns} FROM turns WHERE session_pk = (SELECT pk FROM sessions WHERE tenant = ? AND id = ?)
                  ORDER BY started_at DESC, rowid DESC LIMIT ?`,
            args: [tenant, id, limit],
          },
        ],
        "read",
      );
      if ((results[0]?.rows.length ?? 0) === 0) return null;
      return (results[1]?.rows ?? []).map(toTurnRecord) as TurnRecord[];
    },

    async beginTurn(input: BeginTurnInput): Promise<BeginTurnResult> {
      const { statements, index } = beginTurnStatements(input, { sessionColumns, messageColumns });
      const results = await client.batch(statements, "write");
      const sessionRow = results[index.session]?.rows[0];
      if (!sessionRow) return { kind: "not_found" };
      if (sessionRow.lease_owner !== input.turnId) {
        return { kind: "busy", retryAfterMs: Math.max(1000, Number(sessionRow.lease_expires_at) - input.nowMs) };
      }
      let session: SessionRecord;
      let history: JournalMessage[];
      try {
        session = toSessionRecord(sessionRow);
        history = parseHistory(results[index.history]?.rows[0]?.history);
      } catch (error) {
        // The batch has committed: a row that fails validation must not leave the turn running and the session
        // leased until HERMES_LEASE_MS runs out. The user message stays journaled.
        await client.batch(
          [
            { sql: "UPDATE turns SET status = 'failed', error = 'corrupt_row', ended_at = ? WHERE id = ?", args: [input.now, input.turnId] },
            { sql: "UPDATE sessions SET lease_owner = NULL, lease_expires_at = 0 WHERE tenant = ? AND id = ? AND lease_owner = ?", args: [input.tenant, input.sessionId, input.turnId] },
          ],
          "write",
        );
        throw error;
      }
      const appendedCount = (results[index.repair]?.rowsAffected ?? 0) + (results[index.user]?.rowsAffected ?? 0);
      return {
        kind: "started",
        session,
        history,
        appended: appendedCount > 0 ? history.slice(-appendedCount) : [],
        memory: (results[index.memory]?.rows ?? []).map((row) => String(row.content)),
      };
    },

    async appendMessages(sessionPk, turnId, firstSeq, messages, now, leaseExpiresAtMs, conversationPrompt) {
      const statements: InStatement[] = messages.map((message, offset) => messageInsert(sessionPk, turnId, firstSeq + offset, message, now));
      statements.push(
        conversationPrompt === undefined
          ? { sql: "UPDATE sessions SET lease_expires_at = ? WHERE pk = ? AND lease_owner = ?", args: [leaseExpiresAtMs, sessionPk, turnId] }
          : { sql: "UPDATE sessions SET lease_expires_at = ?, conversation_prompt = ? WHERE pk = ? AND lease_owner = ?", args: [leaseExpiresAtMs, conversationPrompt, sessionPk, turnId] },
      );
      statements.push({ sql: "SELECT stop_requested FROM sessions WHERE pk = ?", args: [sessionPk] });
      const results = await client.batch(statements, "write");
      return {
        written: messages.map((message, offset) => journaled(message, firstSeq + offset, turnId, now)),
        stopRequested: Number(results[results.length - 1]?.rows[0]?.stop_requested ?? 0) === 1,
      };
    },

    async appendToolResult(sessionPk, turnId, seq, message, now) {
      const statement = messageInsert(sessionPk, turnId, seq, message, now);
      // The conflict target is the partial unique index on (session_pk, tool_call_id): a retried write is a
      // no-op, while a clash on seq (another writer) still fails loudly.
      const result = await client.execute({ sql: `${statement.sql} ON CONFLICT (session_pk, tool_call_id) WHERE role = 'tool' AND archived = 0 DO NOTHING`, args: statement.args });
      return result.rowsAffected > 0 ? journaled(message, seq, turnId, now) : null;
    },

    async finishTurn(input: FinishTurnInput, firstSeq, messages) {
      const statements: InStatement[] = messages.map((message, offset) => messageInsert(input.sessionPk, input.turnId, firstSeq + offset, message, input.now));
      statements.push(
        {
          sql: `UPDATE turns SET status = ?, provider = ?, model = ?, fallback_activated = ?, attempts = ?, input_tokens = ?, output_tokens = ?, error = ?, ended_at = ?
                WHERE id = ?`,
          args: [input.status, input.provider, input.model, input.fallbackActivated ? 1 : 0, JSON.stringify(input.attempts), input.usage.inputTokens, input.usage.outputTokens, input.error, input.now, input.turnId],
        },
        {
          sql: `UPDATE sessions SET lease_owner = NULL, lease_expires_at = 0, stop_requested = 0, updated_at = ?,
                conversation_prompt = COALESCE(?, conversation_prompt) WHERE pk = ? AND lease_owner = ?`,
          args: [input.now, input.conversationPrompt ?? null, input.sessionPk, input.turnId],
        },
      );
      await client.batch(statements, "write");
      return messages.map((message, offset) => journaled(message, firstSeq + offset, input.turnId, input.now));
    },

    async getTurnOutcome(turnId) {
      const result = await client.execute({
        sql: `SELECT t.status, (SELECT m.content FROM messages m WHERE m.session_pk = t.session_pk AND m.turn_id = t.id AND m.role = 'assistant'
                ORDER BY m.seq DESC LIMIT 1) AS reply FROM turns t WHERE t.id = ?`,
        args: [turnId],
      });
      const row = result.rows[0];
      return row ? { status: String(row.status) as TurnStatus, reply: row.reply === null || row.reply === undefined ? null : String(row.reply) } : null;
    },

    async compactConversation(sessionPk, turnId, range, seq, summary, now) {
      await client.batch(
        [
          {
            sql: `UPDATE messages SET archived = 1 WHERE session_pk = ? AND archived = 0 AND ((seq BETWEEN ? AND ? AND kind <> 'summary') OR seq = ?)`,
            args: [sessionPk, range.fromSeq, range.toSeq, range.previousSummarySeq ?? -1],
          },
          messageInsert(sessionPk, turnId, seq, { ...summary, summary: true }, now),
        ],
        "write",
      );
      return journaled({ ...summary, summary: true }, seq, turnId, now);
    },

    async undoLastExchange(tenant, id, nowMs) {
      const session = "(SELECT pk FROM sessions WHERE tenant = :tenant AND id = :id AND (lease_owner IS NULL OR lease_expires_at <= :now))";
      const lastUser = `(SELECT seq FROM messages WHERE session_pk = ${session} AND role = 'user' AND archived = 0 ORDER BY seq DESC LIMIT 1)`;
      const args = { tenant, id, now: nowMs };
      const results = await client.batch(
        [
          { sql: "SELECT lease_owner, lease_expires_at FROM sessions WHERE tenant = :tenant AND id = :id", args: { tenant, id } },
          { sql: `SELECT content FROM messages WHERE session_pk = ${session} AND seq = ${lastUser}`, args },
          { sql: `UPDATE messages SET archived = 1, undone = 1 WHERE session_pk = ${session} AND archived = 0 AND seq >= ${lastUser}`, args },
        ],
        "write",
      );
      const sessionRow = results[0]?.rows[0];
      if (!sessionRow) return null;
      if (sessionRow.lease_owner !== null && Number(sessionRow.lease_expires_at) > nowMs) return "busy";
      const content = results[1]?.rows[0]?.content;
      return content === undefined || content === null ? null : { content: String(content), removed: results[2]?.rowsAffected ?? 0 };
    },

    async requestStop(tenant, id, nowMs) {
      const result = await client.execute({
        sql: "UPDATE sessions SET stop_requested = 1 WHERE tenant = ? AND id = ? AND lease_owner IS NOT NULL AND lease_expires_at > ?",
        args: [tenant, id, nowMs],
      });
      return result.rowsAffected > 0;
    },
  };
  return store;
}

const messageColumnNames = messageColumns.split(", ");

/**
 * Reads the JSON array of column arrays that the turn's load statement builds. The aggregate keeps its ordered
 * subquery's order in practice; the sort makes it a guarantee (linear on input that is already sorted). The
 * aggregate's own ORDER BY would do it in SQL, but libSQL servers' SQL parser refuses that syntax.
 */
function parseHistory(json: unknown): JournalMessage[] {
  if (typeof json !== "string") return [];
  const rows = (JSON.parse(json) as unknown[][]).sort((left, right) => Number(left[0]) - Number(right[0]));
  return rows.map((values) => toJournalMessage(Object.fromEntries(messageColumnNames.map((name, index) => [name, values[index]])) as unknown as Row));
}

function journaled(message: ChatMessage, seq: number, turnId: string, now: string): JournalMessage {
  return { ...message, seq, turnId, createdAt: now, archived: false };
}
