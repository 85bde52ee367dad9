// todo: the session's task list, so a long piece of work survives across turns and conversations.
import type { Note, NoteChange } from "../../state/notes.ts";
import type { Tool, ToolOutput } from "./types.ts";

/** A plan longer than this is better split; the cap also bounds what `list` puts into the context. */
export const TODO_MAX_ITEMS = 100;
export const TODO_MAX_ITEM_CHARS = 500;

export const todoTool: Tool = {
  name: "todo",
  toolset: "todo",
  description:
    "The session's task list. Actions: add (item), done (id), remove (id, or item: a substring of one " +
    `item), list. At most ${TODO_MAX_ITEMS} items.`,
  parameters: {
    type: "object",
    properties: {
      action: { type: "string", enum: ["add", "done", "remove", "list"] },
      item: { type: "string", minLength: 1, maxLength: TODO_MAX_ITEM_CHARS, description: "Task text (add), or a substring of one task (remove)." },
      id: { type: "integer", minimum: 1, description: "Task id as shown by list (done, remove)." },
    },
    required: ["action"],
    additionalProperties: false,
  },
  parallelSafe: false,
  async execute(args, context): Promise<ToolOutput> {
    const { notes, sessionPk } = context;
    const item = typeof args.item === "string" ? args.item.trim() : undefined;
    const id = typeof args.id === "number" ? args.id : undefined;

    switch (args.action) {
      case "list": {
        const list = await notes.listNotes(sessionPk, "todo");
        if (list.length === 0) return { content: "The todo list is empty." };
        const open = list.filter((note) => !note.done).length;
        return { content: `Todo (${open} open, ${list.length - open} done):\n${list.map(formatItem).join("\n")}` };
      }
      case "add": {
        if (item === undefined || item === "") return missing("add", "item");
        const change = await notes.addNote(sessionPk, "todo", item, TODO_MAX_ITEMS);
        return describe(change, "Added", JSON.stringify(item));
      }
      case "done": {
        if (id === undefined) return missing("done", "id");
        return describe(await notes.setTodoDone(sessionPk, id), "Done", `#${id}`);
      }
      case "remove": {
        const match = id ?? item;
        if (match === undefined || match === "") return missing("remove", "id");
        const change = await notes.removeNote(sessionPk, "todo", match);
        return describe(change, "Removed", typeof match === "number" ? `#${match}` : JSON.stringify(match));
      }
      default:
        return { content: `Unknown action ${JSON.stringify(args.action)}; use add, done, remove or list.`, isError: true };
    }
  },
};

function formatItem(note: Note): string {
  return `${note.done ? "[x]" : "[ ]"} ${note.id}. ${note.content}`;
}

function missing(action: string, field: string): ToolOutput {
  return { content: `The ${action} action needs arguments.${field}.`, isError: true };
}

function describe(change: NoteChange, verb: string, target: string): ToolOutput {
  if (change.ok) return { content: `${verb}: ${formatItem(change.note)}` };
  switch (change.reason) {
    case "full":
      return { content: `The todo list is full (${TODO_MAX_ITEMS} items); remove finished items first.`, isError: true };
    case "not_found":
      return { content: `No todo item matches ${target}; use list to see the ids.`, isError: true };
    case "ambiguous":
      return {
        content: `${change.matches.length} todo items match ${target}; use the id:\n${change.matches.map(formatItem).join("\n")}`,
        isError: true,
      };
  }
}
