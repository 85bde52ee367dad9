// The SQL of the turn path. `beginTurn` is one write batch: every statement after the lease update is
// conditional on this turn owning the lease, so a busy session changes nothing.
import type { InStatement } from "@libsql/client";
import type { ChatMessage } from "../agent/messages.ts";
import type { BeginTurnInput } from "./store.ts";

export function messageInsert(sessionPk: number, turnId: string, seq: number, message: ChatMessage, now: string): { sql: string; args: (string | number | null)[] } {
  return {
    sql: `INSERT INTO messages (session_pk, seq, turn_id, role, kind, content, tool_calls, tool_call_id, name, is_error, effect, provider, model, created_at)
          VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    args: [
      sessionPk,
      seq,
      turnId,
      message.role,
      message.summary ? "summary" : "message",
      message.content,
      message.toolCalls && message.toolCalls.length > 0 ? JSON.stringify(message.toolCalls) : null,
      message.toolCallId ?? null,
      message.name ?? null,
      message.isError ? 1 : 0,
      message.effect ?? null,
      message.provider ?? null,
      message.model ?? null,
      now,
    ],
  };
}

type NamedArgs = Record<string, string | number | null>;

/** libSQL servers refuse named arguments a statement does not use, so each gets only its own. */
function statement(sql: string, all: NamedArgs): InStatement {
  const args: NamedArgs = {};
  for (const match of sql.matchAll(/:([a-z_]+)/g)) {
    const name = match[1]!;
    if (name in all) args[name] = all[name]!;
  }
  return { sql, args };
}

export function beginTurnStatements(
  input: BeginTurnInput,
  columns: { sessionColumns: string; messageColumns: string },
): { statements: InStatement[]; index: { repair: number; user: number; session: number; history: number; memory: number } } {
  // `owned` yields the session's pk only when this turn holds the lease; NULL matches no row.
  const owned = "(SELECT pk FROM sessions WHERE tenant = :tenant AND id = :id AND lease_owner = :turn)";
  const args: NamedArgs = { tenant: input.tenant, id: input.sessionId, turn: input.turnId, now: input.now, now_ms: input.nowMs, expires: input.nowMs + input.leaseMs, orphan: input.orphanText, content: input.userContent };
  const statements: InStatement[] = [
    statement(`UPDATE sessions SET lease_owner = :turn, lease_expires_at = :expires, stop_requested = 0
            WHERE tenant = :tenant AND id = :id AND (lease_owner IS NULL OR lease_expires_at <= :now_ms)`, args),
    // A turn still `running` under an expired lease belongs to a process that died.
    statement(`UPDATE turns SET status = 'interrupted', ended_at = :now WHERE session_pk = ${owned} AND status = 'running'`, args),
    // Orphan repair: every call of the last assistant message that has no result gets one with effect
    // "unknown", in call order, and is never run again.
    statement(`INSERT INTO messages (session_pk, seq, turn_id, role, content, tool_call_id, name, is_error, effect, created_at)
            SELECT a.session_pk,
                   (SELECT MAX(seq) FROM messages WHERE session_pk = a.session_pk) + ROW_NUMBER() OVER (ORDER BY CAST(j.key AS INTEGER)),
                   a.turn_id, 'tool', :orphan, json_extract(j.value, '$.id'), json_extract(j.value, '$.name'), 1, 'unknown', :now
            FROM messages a, json_each(a.tool_calls) j
            WHERE a.session_pk = ${owned}
              -- Not correlated with a, so it is computed once and a is a primary-key lookup, not a scan.
              AND a.seq = (SELECT seq FROM messages INDEXED BY messages_active WHERE session_pk = ${owned} AND archived = 0 AND role = 'assistant' ORDER BY seq DESC LIMIT 1)
              AND a.tool_calls IS NOT NULL
              AND NOT EXISTS (SELECT 1 FROM messages t WHERE t.session_pk = a.session_pk AND t.role = 'tool' AND t.archived = 0 AND t.tool_call_id = json_extract(j.value, '$.id'))`, args),
  ];
  const repair = 2;
  let user = -1;
  if (input.userContent !== null) {
    user = statements.length;
    statements.push(statement(`INSERT INTO messages (session_pk, seq, turn_id, role, content, created_at)
            SELECT s.pk, COALESCE((SELECT MAX(m.seq) FROM messages m WHERE m.session_pk = s.pk), 0) + 1, :turn, 'user', :content, :now
            FROM sessions s WHERE s.tenant = :tenant AND s.id = :id AND s.lease_owner = :turn`, args));
  }
  statements.push(statement(`INSERT INTO turns (id, session_pk, status, started_at) SELECT :turn, pk, 'running', :now FROM sessions WHERE tenant = :tenant AND id = :id AND lease_owner = :turn`, args));
  const session = statements.length;
  statements.push(statement(`SELECT ${columns.sessionColumns}, lease_owner, lease_expires_at FROM sessions WHERE tenant = :tenant AND id = :id`, args));
  const history = statements.length;
  // The whole active conversation as one JSON text: SQLite builds it in C and JSON.parse reads it natively,
  // about 2 µs a message against 10 µs for materializing one driver row object per message.
  statements.push(
    statement(
      `SELECT json_group_array(json_array(${columns.messageColumns})) AS history
       FROM (SELECT ${columns.messageColumns} FROM messages INDEXED BY messages_active WHERE session_pk = ${owned} AND archived = 0 ORDER BY seq)`,
      args,
    ),
  );
  const memory = statements.length;
  statements.push(statement(`SELECT content FROM session_notes WHERE session_pk = ${owned} AND kind = 'memory' ORDER BY id`, args));
  return { statements, index: { repair, user, session, history, memory } };
}
