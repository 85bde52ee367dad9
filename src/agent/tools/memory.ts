// memory: durable notes of the session. Notes written in one conversation reach the system prompt of the
// next one (the current prompt stays byte-identical for prefix caching), so the tool says so when it saves.
import type { Note, NoteChange } from "../../state/notes.ts";
import type { Tool, ToolOutput } from "./types.ts";

/** Memory is injected into every later system prompt: 50 notes of 2,000 characters keep it under ~25k tokens. */
export const MEMORY_MAX_NOTES = 50;
export const MEMORY_MAX_NOTE_CHARS = 2_000;

export const memoryTool: Tool = {
  name: "memory",
  toolset: "memory",
  description:
    "Durable notes about this session (user preferences, facts, decisions) that are shown to you in later " +
    "conversations. Actions: add (content), replace (old: a substring of one note, content: its new text), " +
    `remove (old: a substring of one note), list. At most ${MEMORY_MAX_NOTES} notes of ` +
    `${MEMORY_MAX_NOTE_CHARS} characters.`,
  parameters: {
    type: "object",
    properties: {
      action: { type: "string", enum: ["add", "replace", "remove", "list"] },
      content: { type: "string", minLength: 1, maxLength: MEMORY_MAX_NOTE_CHARS, description: "Note text (add, replace)." },
      old: {
        type: "string",
        minLength: 1,
        maxLength: MEMORY_MAX_NOTE_CHARS,
        description: "A substring identifying exactly one existing note (replace, remove).",
      },
    },
    required: ["action"],
    additionalProperties: false,
  },
  parallelSafe: false,
  async execute(args, context): Promise<ToolOutput> {
    const { notes, sessionPk } = context;
    const content = typeof args.content === "string" ? args.content.trim() : undefined;
    const old = typeof args.old === "string" ? args.old : undefined;

    switch (args.action) {
      case "list": {
        const list = await notes.listNotes(sessionPk, "memory");
        if (list.length === 0) return { content: "Memory is empty." };
        const lines = list.map((note) => `- ${note.content}`);
        return { content: `Memory (${list.length}/${MEMORY_MAX_NOTES} notes):\n${lines.join("\n")}` };
      }
      case "add": {
        if (content === undefined || content === "") return missing("add", "content");
        const change = await notes.addNote(sessionPk, "memory", content, MEMORY_MAX_NOTES);
        return describe(change, "Saved to memory; it will be shown in later conversations.", "");
      }
      case "replace": {
        if (old === undefined) return missing("replace", "old");
        if (content === undefined || content === "") return missing("replace", "content");
        const change = await notes.replaceNote(sessionPk, "memory", old, content);
        return describe(change, "Memory note replaced.", old);
      }
      case "remove": {
        // Models often put the text to remove in `content`; accept it rather than fail the call.
        const match = old ?? content;
        if (match === undefined || match === "") return missing("remove", "old");
        const change = await notes.removeNote(sessionPk, "memory", match);
        return describe(change, "Memory note removed.", match);
      }
      default:
        return { content: `Unknown action ${JSON.stringify(args.action)}; use add, replace, remove or list.`, isError: true };
    }
  },
};

function missing(action: string, field: string): ToolOutput {
  return { content: `The ${action} action needs arguments.${field}.`, isError: true };
}

function describe(change: NoteChange, success: string, needle: string): ToolOutput {
  if (change.ok) return { content: `${success}\n- ${change.note.content}` };
  switch (change.reason) {
    case "full":
      return {
        content: `Memory is full (${MEMORY_MAX_NOTES} notes); replace or remove a note first.`,
        isError: true,
      };
    case "not_found":
      return { content: `No memory note contains ${JSON.stringify(needle)}; use list to see the notes.`, isError: true };
    case "ambiguous":
      return {
        content:
          `${change.matches.length} memory notes contain ${JSON.stringify(needle)}; use a longer substring that ` +
          `matches only one:\n${change.matches.map(quoteNote).join("\n")}`,
        isError: true,
      };
  }
}

function quoteNote(note: Note): string {
  return `- ${note.content}`;
}
