// The built-in tools, their selection by toolset, argument parsing, and the one place a tool call runs:
// with a timeout, with its errors turned into results the model can read.
import type { ToolSpec } from "../providers/types.ts";
import { validateJson, type JsonSchema } from "./json-schema.ts";
import { memoryTool } from "./memory.ts";
import { sessionSearchTool } from "./session-search.ts";
import { todoTool } from "./todo.ts";
import type { Tool, ToolContext, ToolOutput } from "./types.ts";
import { webFetchTool } from "./web-fetch.ts";

export const builtinTools: Tool[] = [webFetchTool, memoryTool, sessionSearchTool, todoTool];

/** Raw argument strings beyond this are refused before parsing: no schema here accepts anything near it. */
const MAX_RAW_ARGUMENTS_CHARS = 1_000_000;
/** Error messages reach the model verbatim; a runaway message must not flood its context. */
const MAX_ERROR_MESSAGE_CHARS = 2_000;

/** The tools of the given toolsets, in registry order; undefined means every available tool. */
export function selectTools(toolsets: string[] | undefined, available: readonly Tool[] = builtinTools): Tool[] {
  if (toolsets === undefined) return [...available];
  const wanted = new Set(toolsets);
  return available.filter((tool) => wanted.has(tool.toolset));
}

export function findTool(tools: readonly Tool[], name: string): Tool | undefined {
  return tools.find((tool) => tool.name === name);
}

export function toolSpecs(tools: readonly Tool[]): ToolSpec[] {
  return tools.map((tool) => ({ name: tool.name, description: tool.description, parameters: tool.parameters }));
}

/** The result for a call to a tool this agent does not have (the model invented it, or a toolset was removed). */
export function unknownToolOutput(name: string): ToolOutput {
  return { content: `Unknown tool "${name.slice(0, 100)}"; use only the tools listed for this conversation.`, isError: true };
}

/**
 * Parses the model's raw argument string and validates it against the tool's schema. An empty string counts
 * as `{}`: some providers send it for calls without arguments.
 */
export function parseToolArguments(
  tool: Tool,
  raw: string,
): { ok: true; value: Record<string, unknown> } | { ok: false; error: string } {
  const prefix = `Invalid arguments for ${tool.name}`;
  if (raw.length > MAX_RAW_ARGUMENTS_CHARS) {
    return { ok: false, error: `${prefix}: arguments are ${raw.length} characters, more than the ${MAX_RAW_ARGUMENTS_CHARS} allowed.` };
  }
  let value: unknown;
  try {
    value = raw.trim() === "" ? {} : JSON.parse(raw);
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    return { ok: false, error: `${prefix}: not valid JSON (${truncate(reason, 200)}). Send one JSON object.` };
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    const got = value === null ? "null" : Array.isArray(value) ? "array" : typeof value;
    return { ok: false, error: `${prefix}: arguments: expected object, got ${got}.` };
  }
  // Tool schemas are written in this repository in the subset json-schema.ts supports.
  const errors = validateJson(value, tool.parameters as JsonSchema);
  if (errors.length > 0) return { ok: false, error: `${prefix}: ${errors.join("; ")}.` };
  return { ok: true, value: value as Record<string, unknown> };
}

/**
 * Runs one validated call. The tool gets its own signal, aborted on timeout or when the turn is stopped; the
 * call is not awaited past that point, because a tool that ignores its signal must not hold the turn. Its
 * side effects may still land, so the result says the outcome is unknown (journaled with effect "unknown",
 * and never re-run).
 */
export async function executeTool(
  tool: Tool,
  args: Record<string, unknown>,
  context: ToolContext,
  defaultTimeoutMs: number,
): Promise<ToolOutput & { effect?: "unknown" }> {
  const timeoutMs = tool.timeoutMs ?? defaultTimeoutMs;
  const controller = new AbortController();
  let timer: ReturnType<typeof setTimeout> | undefined;
  let onStop: (() => void) | undefined;

  const interrupted = new Promise<"timeout" | "stopped">((resolve) => {
    timer = setTimeout(() => resolve("timeout"), timeoutMs);
    onStop = () => resolve("stopped");
    if (context.signal.aborted) onStop();
    else context.signal.addEventListener("abort", onStop, { once: true });
  });

  const running = (async () => tool.execute(args, { ...context, signal: controller.signal }))();
  // The promise may settle after we stopped waiting for it; that late rejection is expected, not unhandled.
  running.catch(() => undefined);

  try {
    const outcome = await Promise.race([
      running.then((output) => ({ kind: "done" as const, output })),
      interrupted.then((kind) => ({ kind })),
    ]);
    if (outcome.kind === "done") return outcome.output;
    if (outcome.kind === "timeout") {
      controller.abort(new DOMException(`${tool.name} timed out after ${timeoutMs} ms`, "TimeoutError"));
      return {
        content: `Tool timed out after ${timeoutMs} ms; its outcome is unknown and must not be assumed.`,
        isError: true,
        effect: "unknown",
      };
    }
    controller.abort(context.signal.reason);
    return {
      content: "Tool was stopped before it finished; its outcome is unknown and must not be assumed.",
      isError: true,
      effect: "unknown",
    };
  } catch (error) {
    return { content: `Error: ${describeError(error)}`, isError: true };
  } finally {
    clearTimeout(timer);
    if (onStop !== undefined) context.signal.removeEventListener("abort", onStop);
  }
}

/**
 * The message only: stacks reveal internals and cost context without helping the model. Errors of the store
 * (libSQL driver or server) are replaced by a fixed sentence: their messages can quote SQL, and they reach the
 * model, the journal and API responses.
 */
function describeError(error: unknown): string {
  if (isStoreError(error)) return "the session store is busy or unavailable; try again later";
  const message = error instanceof Error ? error.message : typeof error === "string" ? error : safeStringify(error);
  return truncate(message === "" ? "the tool failed without a message" : message, MAX_ERROR_MESSAGE_CHARS);
}

function isStoreError(error: unknown): boolean {
  if (!(error instanceof Error)) return false;
  const code = (error as { code?: unknown }).code;
  return /^Libsql|^Hrana/.test(error.name) || (typeof code === "string" && /^(SQLITE_|HRANA_|SERVER_ERROR|ARGS_INVALID)/.test(code));
}

function safeStringify(value: unknown): string {
  try {
    return JSON.stringify(value) ?? String(value);
  } catch {
    return String(value);
  }
}

function truncate(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max)}…`;
}
