// The tool port: what a built-in tool is, and what the turn engine hands it for one call.
import type { NotesStore } from "../../state/notes.ts";

export interface ToolContext {
  /** Internal session key (sessions.pk); tools never see the public session id. */
  sessionPk: number;
  /** Durable memory and todo notes of the session, plus journal search. */
  notes: NotesStore;
  /** Injected so tests, Workers and every runtime share one network path. */
  fetch: typeof fetch;
  /** HERMES_FETCH_ALLOW_PRIVATE: lets web_fetch reach loopback, private and link-local addresses. */
  allowPrivateFetch: boolean;
  /** DNS lookup injected by the Node/Bun/Deno entry; absent on Workers, where the platform blocks private ranges. */
  resolveHost?: (hostname: string) => Promise<string[]>;
  /** Aborted on tool timeout or when the turn is stopped. */
  signal: AbortSignal;
}

export interface ToolOutput {
  /** Text shown to the model as the tool result. */
  content: string;
  /** True when the result reports a failure the model should react to. */
  isError?: boolean;
}

export interface Tool {
  name: string;
  toolset: string;
  description: string;
  /** JSON Schema (the subset json-schema.ts validates) of the arguments object. */
  parameters: Record<string, unknown>;
  /** True when calls may run concurrently with other parallel-safe calls of the same batch. */
  parallelSafe: boolean;
  /** Overrides the engine's default per-call timeout. */
  timeoutMs?: number;
  /** Arguments were validated against `parameters` before this is called. */
  execute(args: Record<string, unknown>, context: ToolContext): Promise<ToolOutput>;
}
