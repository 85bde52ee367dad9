// Session notes (memory and todo) and journal search over libSQL. Works with the clients of both
// `@libsql/client` and `@libsql/client/web`: only `execute` and `batch` are used, and every method costs one
// round trip (a `batch` travels as one pipelined request over HTTP).
import type { Client, Row } from "@libsql/client";

export type NoteKind = "memory" | "todo";

export interface Note {
  /** Per-(session, kind) counter starting at 1; an id freed by removing the newest note is reused. */
  id: number;
  content: string;
  /** Todo only; always false for memory. */
  done: boolean;
  createdAt: string;
}

export type NoteChange =
  | { ok: true; note: Note }
  /** `not_found`: nothing matched; `ambiguous`: several notes matched (listed); `full`: the kind's cap is reached. */
  | { ok: false; reason: "not_found" | "full" }
  | { ok: false; reason: "ambiguous"; matches: Note[] };

export interface JournalHit {
  seq: number;
  role: string;
  content: string;
  archived: boolean;
}

export interface NotesStore {
  /** All notes of one kind, oldest first. */
  listNotes(sessionPk: number, kind: NoteKind): Promise<Note[]>;
  /** Appends a note with id MAX(id)+1, atomically; `full` when the kind already holds `maxNotes` (default unlimited). */
  addNote(sessionPk: number, kind: NoteKind, content: string, maxNotes?: number): Promise<NoteChange>;
  /** Replaces the content of the one note containing `old` (case-sensitive substring), atomically. */
  replaceNote(sessionPk: number, kind: NoteKind, old: string, content: string): Promise<NoteChange>;
  /** Removes the note with this id (number) or the one note containing this substring (string). */
  removeNote(sessionPk: number, kind: NoteKind, match: string | number): Promise<NoteChange>;
  /** Marks a todo done; `not_found` when no todo has this id. Idempotent. */
  setTodoDone(sessionPk: number, id: number): Promise<NoteChange>;
  /**
   * Full-text search over the session's journal, archived rows included, undone rows excluded, best rank
   * first, at most `limit` hits. Any user text is accepted: it is turned into a quoted FTS5 expression.
   */
  searchJournal(sessionPk: number, query: string, limit: number): Promise<JournalHit[]>;
}

export interface NotesStoreOptions {
  /** Clock for `created_at`; injected so tests can pin it. */
  now?: () => Date;
}

const NOTE_COLUMNS = "id, content, done, created_at";

export function createNotesStore(client: Client, options: NotesStoreOptions = {}): NotesStore {
  const now = options.now ?? (() => new Date());

  return {
    async listNotes(sessionPk, kind) {
      const result = await client.execute({
        sql: `SELECT ${NOTE_COLUMNS} FROM session_notes WHERE session_pk = :session AND kind = :kind ORDER BY id`,
        args: { session: sessionPk, kind },
      });
      return result.rows.map(toNote);
    },

    async addNote(sessionPk, kind, content, maxNotes) {
      // MAX(id)+1 and the cap check live in the INSERT itself, so two writers cannot take the same id or
      // both slip past the cap: SQLite runs the whole statement under the write lock.
      const result = await client.execute({
        sql: `INSERT INTO session_notes (session_pk, kind, id, content, done, created_at)
          SELECT :session, :kind, next_id, :content, 0, :created_at FROM (
            SELECT COALESCE(MAX(id), 0) + 1 AS next_id, COUNT(*) AS note_count
            FROM session_notes WHERE session_pk = :session AND kind = :kind
          ) WHERE :max_notes IS NULL OR note_count < :max_notes
          RETURNING ${NOTE_COLUMNS}`,
        args: {
          session: sessionPk,
          kind,
          content,
          created_at: now().toISOString(),
          max_notes: maxNotes ?? null,
        },
      });
      const row = result.rows[0];
      return row === undefined ? { ok: false, reason: "full" } : { ok: true, note: toNote(row) };
    },

    async replaceNote(sessionPk, kind, old, content) {
      return changeOneMatching(client, sessionPk, kind, old, {
        sql: `UPDATE session_notes SET content = :content`,
        args: { content },
      });
    },

    async removeNote(sessionPk, kind, match) {
      if (typeof match === "number") {
        const result = await client.execute({
          sql: `DELETE FROM session_notes WHERE session_pk = :session AND kind = :kind AND id = :id
            RETURNING ${NOTE_COLUMNS}`,
          args: { session: sessionPk, kind, id: match },
        });
        const row = result.rows[0];
        return row === undefined ? { ok: false, reason: "not_found" } : { ok: true, note: toNote(row) };
      }
      return changeOneMatching(client, sessionPk, kind, match, { sql: "DELETE FROM session_notes", args: {} });
    },

    async setTodoDone(sessionPk, id) {
      const result = await client.execute({
        sql: `UPDATE session_notes SET done = 1 WHERE session_pk = :session AND kind = 'todo' AND id = :id
          RETURNING ${NOTE_COLUMNS}`,
        args: { session: sessionPk, id },
      });
      const row = result.rows[0];
      return row === undefined ? { ok: false, reason: "not_found" } : { ok: true, note: toNote(row) };
    },

    async searchJournal(sessionPk, query, limit) {
      const expression = toFtsExpression(query);
      if (expression === null) return [];
      // Undone rows were retracted by the user (/undo), so they are not offered back to the model.
      const result = await client.execute({
        sql: `SELECT m.seq AS seq, m.role AS role, m.content AS content, m.archived AS archived
          FROM messages_fts AS f
          JOIN messages AS m ON m.session_pk = f.session_pk AND m.seq = f.seq
          WHERE messages_fts MATCH :expression AND f.session_pk = :session AND m.undone = 0
          ORDER BY f.rank
          LIMIT :limit`,
        args: { expression, session: sessionPk, limit },
      });
      return result.rows.map((row) => ({
        seq: Number(row.seq),
        role: String(row.role),
        content: String(row.content ?? ""),
        archived: Number(row.archived) !== 0,
      }));
    },
  };
}

/**
 * Applies `change` ("UPDATE … SET …" or "DELETE FROM …") to the one note containing `needle`. The lookup
 * and the guarded change run in one write batch (one round trip, one transaction): the change only fires
 * when exactly one note matches, and the lookup tells "none" from "several" for the model.
 */
async function changeOneMatching(
  client: Client,
  sessionPk: number,
  kind: NoteKind,
  needle: string,
  change: { sql: string; args: Record<string, string> },
): Promise<NoteChange> {
  const matching = "session_pk = :session AND kind = :kind AND instr(content, :needle) > 0";
  const args = { session: sessionPk, kind, needle };
  const [lookup, changed] = await client.batch(
    [
      { sql: `SELECT ${NOTE_COLUMNS} FROM session_notes WHERE ${matching} ORDER BY id`, args },
      {
        sql: `${change.sql} WHERE ${matching}
          AND (SELECT COUNT(*) FROM session_notes WHERE ${matching}) = 1
          RETURNING ${NOTE_COLUMNS}`,
        args: { ...args, ...change.args },
      },
    ],
    "write",
  );
  const row = changed?.rows[0];
  if (row !== undefined) return { ok: true, note: toNote(row) };
  const matches = (lookup?.rows ?? []).map(toNote);
  return matches.length === 0 ? { ok: false, reason: "not_found" } : { ok: false, reason: "ambiguous", matches };
}

function toNote(row: Row): Note {
  return {
    id: Number(row.id),
    content: String(row.content),
    done: Number(row.done) !== 0,
    createdAt: String(row.created_at),
  };
}

/**
 * Turns free text into an FTS5 expression that cannot be a syntax error: every whitespace-separated token
 * becomes a double-quoted string (inner quotes doubled), so `"`, `*`, `:`, `-`, parentheses, AND/OR/NOT
 * and NEAR are plain text. Tokens without a letter or digit are dropped: the unicode61 tokenizer would
 * reduce them to an empty phrase anyway. Quoted strings separated by spaces are an implicit AND.
 * Returns null when nothing searchable is left.
 */
export function toFtsExpression(query: string): string | null {
  const tokens = query
    .split(/\s+/u)
    .filter((token) => /[\p{L}\p{N}]/u.test(token))
    .slice(0, 32);
  if (tokens.length === 0) return null;
  return tokens.map((token) => `"${token.replaceAll('"', '""')}"`).join(" ");
}
