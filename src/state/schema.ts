// Forward-only migrations. Each entry runs once, in order, inside one write transaction together with the
// bump of `schema_version`, so two processes starting at once cannot both apply it (the loser's transaction
// sees the new version and skips).

export interface Migration {
  version: number;
  statements: string[];
}

export const migrations: Migration[] = [
  {
    version: 1,
    statements: [
      `CREATE TABLE sessions (
        pk INTEGER PRIMARY KEY,
        tenant TEXT NOT NULL,
        id TEXT NOT NULL,
        runtime TEXT NOT NULL,
        system_prompt TEXT NOT NULL DEFAULT '',
        metadata TEXT NOT NULL DEFAULT '{}',
        version INTEGER NOT NULL DEFAULT 1,
        conversation_prompt TEXT,
        reasoning TEXT,
        lease_owner TEXT,
        lease_expires_at INTEGER NOT NULL DEFAULT 0,
        stop_requested INTEGER NOT NULL DEFAULT 0,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        UNIQUE (tenant, id)
      )`,
      `CREATE TABLE messages (
        session_pk INTEGER NOT NULL REFERENCES sessions(pk) ON DELETE CASCADE,
        seq INTEGER NOT NULL,
        turn_id TEXT,
        role TEXT NOT NULL,
        kind TEXT NOT NULL DEFAULT 'message',
        content TEXT,
        tool_calls TEXT,
        tool_call_id TEXT,
        name TEXT,
        is_error INTEGER NOT NULL DEFAULT 0,
        effect TEXT,
        provider TEXT,
        model TEXT,
        archived INTEGER NOT NULL DEFAULT 0,
        undone INTEGER NOT NULL DEFAULT 0,
        created_at TEXT NOT NULL,
        PRIMARY KEY (session_pk, seq)
      ) WITHOUT ROWID`,
      // Loading a turn reads only the active rows, so its cost does not grow with archived history.
      `CREATE INDEX messages_active ON messages (session_pk, seq) WHERE archived = 0`,
      // One result per tool call, ever: a retried or duplicated write is a no-op (INSERT OR IGNORE).
      `CREATE UNIQUE INDEX messages_tool_result ON messages (session_pk, tool_call_id) WHERE role = 'tool'`,
      `CREATE TABLE turns (
        id TEXT PRIMARY KEY,
        session_pk INTEGER NOT NULL REFERENCES sessions(pk) ON DELETE CASCADE,
        status TEXT NOT NULL,
        provider TEXT,
        model TEXT,
        fallback_activated INTEGER NOT NULL DEFAULT 0,
        attempts TEXT NOT NULL DEFAULT '[]',
        input_tokens INTEGER NOT NULL DEFAULT 0,
        output_tokens INTEGER NOT NULL DEFAULT 0,
        error TEXT,
        started_at TEXT NOT NULL,
        ended_at TEXT
      )`,
      `CREATE INDEX turns_session ON turns (session_pk, started_at)`,
      `CREATE TABLE inbox (
        platform TEXT NOT NULL,
        event_id TEXT NOT NULL,
        session_id TEXT NOT NULL,
        payload TEXT NOT NULL,
        status TEXT NOT NULL DEFAULT 'pending',
        attempts INTEGER NOT NULL DEFAULT 0,
        lease_owner TEXT,
        lease_expires_at INTEGER NOT NULL DEFAULT 0,
        error TEXT,
        received_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL,
        PRIMARY KEY (platform, event_id)
      )`,
      `CREATE INDEX inbox_pending ON inbox (status, session_id, received_at)`,
      `CREATE TABLE session_notes (
        session_pk INTEGER NOT NULL REFERENCES sessions(pk) ON DELETE CASCADE,
        kind TEXT NOT NULL,
        id INTEGER NOT NULL,
        content TEXT NOT NULL,
        done INTEGER NOT NULL DEFAULT 0,
        created_at TEXT NOT NULL,
        PRIMARY KEY (session_pk, kind, id)
      ) WITHOUT ROWID`,
      `CREATE TABLE secrets (
        name TEXT PRIMARY KEY,
        value TEXT NOT NULL
      )`,
      // Full-text search over the journal for the session_search tool; archived rows stay searchable.
      `CREATE VIRTUAL TABLE messages_fts USING fts5 (content, session_pk UNINDEXED, seq UNINDEXED, tokenize = 'unicode61')`,
      `CREATE TRIGGER messages_fts_insert AFTER INSERT ON messages WHEN new.content IS NOT NULL AND new.content <> '' BEGIN
        INSERT INTO messages_fts (content, session_pk, seq) VALUES (new.content, new.session_pk, new.seq);
      END`,
      `CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages BEGIN
        DELETE FROM messages_fts WHERE session_pk = old.session_pk AND seq = old.seq;
      END`,
    ],
  },
  {
    version: 2,
    statements: [
      // Idempotency-Key results (api.md "Turns"): one row per (tenant, key), replayed for 24 h. `owner` is the
      // random token of the request holding the claim, so only that request can store or drop its result.
      `CREATE TABLE idempotency (
        tenant TEXT NOT NULL,
        key TEXT NOT NULL,
        request_hash TEXT NOT NULL,
        status TEXT NOT NULL DEFAULT 'running',
        owner TEXT NOT NULL,
        response_status INTEGER,
        response_headers TEXT,
        response_body TEXT,
        created_at INTEGER NOT NULL,
        PRIMARY KEY (tenant, key)
      )`,
      // Expired rows are purged a few at a time by later claims, oldest first.
      `CREATE INDEX idempotency_created ON idempotency (created_at)`,
    ],
  },
  {
    version: 3,
    statements: [
      // A tool result is unique per tool call id among the active rows only: providers may reuse ids across
      // conversations (some number them call_0, call_1 in every response), and a result for a reused id must
      // not be dropped because an archived conversation used the same id. Within the active conversation the
      // engine renames a colliding id before the call is journaled.
      `DROP INDEX messages_tool_result`,
      `CREATE UNIQUE INDEX messages_tool_result ON messages (session_pk, tool_call_id) WHERE role = 'tool' AND archived = 0`,
    ],
  },
  {
    version: 4,
    statements: [
      // Every turn start marks a dead turn of its session `interrupted`; this keeps that a lookup, not a scan of
      // every turn the session ever had.
      `CREATE INDEX turns_running ON turns (session_pk) WHERE status = 'running'`,
    ],
  },
];
