// The session store port. One implementation over libSQL (an embedded file, :memory:, or a libSQL server);
// one contract suite (tests/state/store-contract.ts) runs against each.
import type { ChatMessage, JournalMessage, Usage } from "../agent/messages.ts";
import type { StoredRuntime } from "../agent/runtime.ts";
import type { ProviderAttempt } from "../errors.ts";

export interface SessionRecord {
  /** Internal key; never leaves the service. */
  pk: number;
  tenant: string;
  id: string;
  runtime: StoredRuntime;
  systemPrompt: string;
  metadata: Record<string, unknown>;
  /** Bumped by every update; updates are compare-and-set on it. */
  version: number;
  /** The system prompt assembled at the start of the current conversation; null until its first turn. */
  conversationPrompt: string | null;
  reasoning: "low" | "medium" | "high" | null;
  createdAt: string;
  updatedAt: string;
}

export type TurnStatus = "running" | "completed" | "failed" | "interrupted";

export interface TurnRecord {
  id: string;
  status: TurnStatus;
  provider: string | null;
  model: string | null;
  fallbackActivated: boolean;
  attempts: ProviderAttempt[];
  usage: Usage;
  startedAt: string;
  endedAt: string | null;
}

export interface SessionView extends SessionRecord {
  messageCount: number;
  lastTurn: TurnRecord | null;
}

export interface NewSession {
  tenant: string;
  id: string;
  runtime: StoredRuntime;
  systemPrompt: string;
  metadata: Record<string, unknown>;
  now: string;
}

export interface SessionPatch {
  runtime?: StoredRuntime;
  systemPrompt?: string;
  metadata?: Record<string, unknown>;
  reasoning?: "low" | "medium" | "high" | null;
  /** A runtime or system prompt change starts using a freshly assembled prompt at the next conversation turn. */
  resetConversationPrompt?: boolean;
}

export interface BeginTurnInput {
  tenant: string;
  sessionId: string;
  turnId: string;
  /** The user's message, appended in the same round trip as the lease; null to run on the existing journal (/retry). */
  userContent: string | null;
  now: string;
  nowMs: number;
  leaseMs: number;
  /** Text of the result written for each tool call whose outcome was lost (orphan repair). */
  orphanText: string;
}

export type BeginTurnResult =
  | { kind: "not_found" }
  | { kind: "busy"; retryAfterMs: number }
  | {
      kind: "started";
      session: SessionRecord;
      /** The active conversation, including the rows this call appended. */
      history: JournalMessage[];
      /** Rows appended by this call: repaired orphan results, then the user message. */
      appended: JournalMessage[];
      memory: string[];
    };

export interface FinishTurnInput {
  sessionPk: number;
  turnId: string;
  status: Exclude<TurnStatus, "running">;
  provider: string | null;
  model: string | null;
  fallbackActivated: boolean;
  attempts: ProviderAttempt[];
  usage: Usage;
  error: string | null;
  now: string;
  /** Stored with the release when the conversation's prompt was assembled in this turn. */
  conversationPrompt?: string;
}

export interface MessageQuery {
  after: number;
  limit: number;
  includeArchived: boolean;
}

export interface Store {
  /** Applies pending migrations; safe to call from several processes at once. */
  migrate(): Promise<void>;
  /** One trivial query; throws when the database cannot be reached. */
  ping(): Promise<void>;

  /** Null when the id is taken within the tenant. */
  createSession(input: NewSession): Promise<SessionView | null>;
  getSession(tenant: string, id: string): Promise<SessionView | null>;
  /** Ordered by id; `afterId` is exclusive. */
  listSessions(tenant: string, limit: number, afterId: string | null): Promise<SessionView[]>;
  /** Compare-and-set on `expectedVersion`; null when the session is gone or the version moved on. */
  updateSession(tenant: string, id: string, expectedVersion: number, patch: SessionPatch, now: string): Promise<SessionView | null>;
  deleteSession(tenant: string, id: string): Promise<boolean>;
  /** Archives the active conversation (kept, searchable, not sent to the model). False when the session is gone. */
  archiveConversation(tenant: string, id: string, now: string): Promise<boolean>;
  /** Null when the session does not exist. */
  listMessages(tenant: string, id: string, query: MessageQuery): Promise<JournalMessage[] | null>;
  listTurns(tenant: string, id: string, limit: number): Promise<TurnRecord[] | null>;

  /**
   * One round trip: takes the session lease (compare-and-set with expiry), marks turns left `running` by a dead
   * process `interrupted`, repairs orphan tool calls, appends the user message, records the turn as running, and
   * reads the session, its active conversation and its memory notes.
   */
  beginTurn(input: BeginTurnInput): Promise<BeginTurnResult>;
  /**
   * Appends messages at the given seqs in one round trip, extends the lease, and reads whether a stop was
   * requested (so a stop costs no extra round trip). Fails if a seq is taken.
   */
  appendMessages(sessionPk: number, turnId: string, firstSeq: number, messages: ChatMessage[], now: string, leaseExpiresAtMs: number, conversationPrompt?: string): Promise<{ written: JournalMessage[]; stopRequested: boolean }>;
  /** Idempotent per (session, tool_call_id): null when a result for that call already exists. */
  appendToolResult(sessionPk: number, turnId: string, seq: number, message: ChatMessage, now: string): Promise<JournalMessage | null>;
  /** One round trip: appends the final messages, records the turn's outcome and releases the lease. */
  finishTurn(input: FinishTurnInput, firstSeq: number, messages: ChatMessage[]): Promise<JournalMessage[]>;
  /** A turn's status and its last assistant text (the reply), or null when no such turn exists. */
  getTurnOutcome(turnId: string): Promise<{ status: TurnStatus; reply: string | null } | null>;
  /**
   * Compaction in one round trip: archives the active, non-summary rows with seq in [fromSeq, toSeq] and the
   * previous summary row, and appends the new summary at `seq`. Nothing is deleted.
   */
  compactConversation(sessionPk: number, turnId: string, range: { fromSeq: number; toSeq: number; previousSummarySeq: number | null }, seq: number, summary: ChatMessage, now: string): Promise<JournalMessage>;
  /**
   * Marks the last exchange (the last active user message and everything after it) archived and undone, unless
   * a turn holds the lease. Returns the user message's content, or null when there was nothing to undo;
   * "busy" while a turn runs.
   */
  undoLastExchange(tenant: string, id: string, nowMs: number): Promise<{ content: string; removed: number } | null | "busy">;
  /** Asks the running turn of the session to stop at its next step; false when no turn is running. */
  requestStop(tenant: string, id: string, nowMs: number): Promise<boolean>;
}
