// session_search: full-text search over this session's journal, including rows archived by compaction or
// /new, so the model can recover details that no longer fit in its context.
import type { Tool, ToolOutput } from "./types.ts";

const DEFAULT_LIMIT = 10;
export const SESSION_SEARCH_MAX_LIMIT = 50;
/** Per hit; a few hundred characters identify a message, and `limit` hits must fit comfortably in context. */
const MAX_HIT_CHARS = 500;

export const sessionSearchTool: Tool = {
  name: "session_search",
  toolset: "session",
  description:
    "Full-text search over this session's past messages, including archived (compacted) ones. Returns the " +
    "best matches with their sequence number and role. All words must match; quotes and operators are literal.",
  parameters: {
    type: "object",
    properties: {
      query: { type: "string", minLength: 1, maxLength: 500, description: "Words to search for." },
      limit: {
        type: "integer",
        minimum: 1,
        maximum: SESSION_SEARCH_MAX_LIMIT,
        description: `Most results to return (default ${DEFAULT_LIMIT}).`,
      },
    },
    required: ["query"],
    additionalProperties: false,
  },
  parallelSafe: true,
  async execute(args, context): Promise<ToolOutput> {
    const query = String(args.query);
    const limit = typeof args.limit === "number" ? args.limit : DEFAULT_LIMIT;
    const hits = await context.notes.searchJournal(context.sessionPk, query, limit);
    if (hits.length === 0) return { content: `No messages match ${JSON.stringify(query)}.` };

    const lines = hits.map((hit) => {
      const marker = hit.archived ? " [archived]" : "";
      return `#${hit.seq} ${hit.role}${marker}: ${excerpt(hit.content)}`;
    });
    const noun = hits.length === 1 ? "message matches" : "messages match";
    return { content: `${hits.length} ${noun} ${JSON.stringify(query)}:\n${lines.join("\n")}` };
  },
};

function excerpt(content: string): string {
  const flat = content.replace(/\s+/gu, " ").trim();
  return flat.length <= MAX_HIT_CHARS ? flat : `${flat.slice(0, MAX_HIT_CHARS)}…`;
}
