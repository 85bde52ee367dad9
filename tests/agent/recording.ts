/// <reference types="node" />
// Records every journal write and every tool dispatch in one ordered log, so ordering contracts can be
// asserted as exact sequences: removing any required write changes the sequence and fails the test.
import type { Tool } from "../../src/agent/tools/types.ts";
import type { Store } from "../../src/state/store.ts";

export type EventLog = string[];

export function recordingStore(store: Store, log: EventLog): Store {
  return {
    ...store,
    async beginTurn(input) {
      const result = await store.beginTurn(input);
      if (result.kind === "started") log.push(...result.appended.map((message) => (message.role === "user" ? "write:user" : `write:repair:${message.toolCallId}`)));
      return result;
    },
    async appendMessages(...args) {
      const appended = await store.appendMessages(...args);
      const written = appended.written;
      log.push(...written.map((message) => (message.toolCalls ? `write:assistant:${message.toolCalls.map((call) => call.id).join(",")}` : `write:${message.role}`)));
      return appended;
    },
    async appendToolResult(...args) {
      const written = await store.appendToolResult(...args);
      log.push(`write:result:${args[3].toolCallId}${written ? "" : ":duplicate"}`);
      return written;
    },
    async finishTurn(input, firstSeq, messages) {
      const written = await store.finishTurn(input, firstSeq, messages);
      log.push(`write:finish:${input.status}`);
      return written;
    },
  };
}

/** A tool that logs its dispatch and completion, and finishes when `release(name)` is called (or at once). */
export function recordingTool(name: string, log: EventLog, options: { parallelSafe: boolean; gated?: boolean }) {
  const gates = new Map<string, () => void>();
  const waiting = new Map<string, Promise<void>>();
  const gate = (key: string) => {
    if (!waiting.has(key)) waiting.set(key, new Promise<void>((resolve) => gates.set(key, resolve)));
    return waiting.get(key)!;
  };
  let dispatches = 0;
  const tool: Tool = {
    name,
    toolset: "test",
    description: `records calls (${name})`,
    parameters: { type: "object", properties: { key: { type: "string" } }, required: ["key"], additionalProperties: false },
    parallelSafe: options.parallelSafe,
    async execute(args) {
      const key = String(args.key);
      dispatches += 1;
      log.push(`dispatch:${key}`);
      if (options.gated) await gate(key);
      log.push(`done:${key}`);
      return { content: `${name} did ${key}` };
    },
  };
  return {
    tool,
    release: (key: string) => {
      gate(key);
      gates.get(key)!();
    },
    get dispatches() {
      return dispatches;
    },
  };
}

/** A fetch that logs each provider call before passing it on. */
export function recordingFetch(log: EventLog): typeof fetch {
  return async (input, init) => {
    log.push("provider");
    return fetch(input, init);
  };
}
