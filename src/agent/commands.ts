// Chat commands (api.md "Commands"), typed in a chat or sent as message content over the API. A command
// answers directly; only /retry runs a turn.
import { ConflictError, NotFoundError, SessionBusyError } from "../errors.ts";
import type { SessionView } from "../state/store.ts";
import { mergeRuntime } from "./runtime-secrets.ts";
import { providerDefaults } from "./runtime.ts";
import type { EdgeCache } from "../kv/cache.ts";
import { sessionScope } from "../kv/keys.ts";
import { runTurn, type TurnDependencies, type TurnOutcome, type TurnRequest } from "./turn.ts";

export const helpText = [
  "Commands:",
  "/new (or /reset) - start a new conversation (the old one is kept, not sent to the model)",
  "/model <provider>:<model> - change the model from the next turn",
  "/reasoning <low|medium|high|default> - reasoning effort for later turns",
  "/status - model, provider of the last turn, fallback, message count, usage",
  "/retry - run your last message again",
  "/undo - take back the last exchange",
  "/stop - stop the running turn at its next step",
  "/help - this list",
].join("\n");

export type ChatOutcome = { kind: "turn"; outcome: TurnOutcome } | { kind: "command"; command: string; reply: string };

const commandPattern = /^\/([a-z]+)(?:@[A-Za-z0-9_]+)?(?:\s+([\s\S]*))?$/;
const known = new Set(["new", "reset", "model", "reasoning", "status", "retry", "undo", "stop", "help", "start"]);

/** Splits `/model openai:gpt-4o` (also Telegram's `/model@BotName ...`) into a known command and its argument. */
export function parseCommand(content: string): { name: string; argument: string } | null {
  const match = commandPattern.exec(content.trim());
  if (!match || !known.has(match[1]!)) return null;
  return { name: match[1]!, argument: (match[2] ?? "").trim() };
}

function statusText(session: SessionView): string {
  const turn = session.lastTurn;
  const lines = [
    `Model: ${session.runtime.provider}:${session.runtime.model}`,
    `Messages in this conversation: ${session.messageCount}`,
    `Reasoning: ${session.reasoning ?? "default"}`,
  ];
  if (turn) {
    lines.push(
      `Last turn: ${turn.status}${turn.provider ? ` on ${turn.provider}:${turn.model}` : ""}`,
      `Fallback used: ${turn.fallbackActivated ? "yes" : "no"}`,
      `Attempts: ${turn.attempts.map((attempt) => `${attempt.provider}:${attempt.model} ${attempt.outcome === "ok" ? "ok" : `${attempt.reason ?? "error"}${attempt.status ? ` ${attempt.status}` : ""}`}`).join(" -> ") || "none"}`,
      `Usage: ${turn.usage.inputTokens} input / ${turn.usage.outputTokens} output tokens`,
    );
  } else {
    lines.push("Last turn: none yet");
  }
  return lines.join("\n");
}

async function updateWithRetry(deps: TurnDependencies, tenant: string, id: string, change: (session: SessionView) => Promise<Parameters<TurnDependencies["store"]["updateSession"]>[3]>): Promise<SessionView | null> {
  for (let attempt = 0; attempt < 5; attempt++) {
    const session = await deps.store.getSession(tenant, id);
    if (!session) return null;
    const updated = await deps.store.updateSession(tenant, id, session.version, await change(session), new Date(deps.now()).toISOString());
    if (updated) return updated;
  }
  throw new ConflictError("The session changed concurrently; try the command again.");
}

/** Drops what the edge cache holds for the session; a cache failure is harmless (entries expire anyway). */
export async function invalidateSessionCache(deps: { cache?: EdgeCache }, tenant: string, sessionId: string): Promise<void> {
  if (deps.cache) await sessionScope(deps.cache, tenant, sessionId).invalidate().catch(() => undefined);
}

/** Runs a message: a known command, or a turn. The session must exist. */
export async function handleChatMessage(deps: TurnDependencies, request: TurnRequest & { content: string }): Promise<ChatOutcome> {
  const command = parseCommand(request.content);
  if (!command) return { kind: "turn", outcome: await runTurn(deps, request) };
  const { tenant, sessionId } = request;
  // A turn finds out in its first round trip; a command checks here, before it changes anything.
  const current = await deps.store.getSession(tenant, sessionId);
  if (!current) throw new NotFoundError("Session not found.");
  const reply = (text: string): ChatOutcome => ({ kind: "command", command: command.name, reply: text });
  const nowIso = () => new Date(deps.now()).toISOString();

  switch (command.name) {
    case "help":
    case "start":
      return reply(helpText);
    case "new":
    case "reset":
      await deps.store.archiveConversation(tenant, sessionId, nowIso());
      await invalidateSessionCache(deps, tenant, sessionId);
      return reply("Started a new conversation. The previous one is kept and still searchable.");
    case "status": {
      return reply(statusText(current));
    }
    case "model": {
      const match = /^([A-Za-z0-9._-]{1,64}):(\S{1,200})$/.exec(command.argument);
      if (!match) return reply("Usage: /model <provider>:<model>, for example /model openai:gpt-4o-mini");
      const [, provider, model] = match as unknown as [string, string, string];
      if (!providerDefaults[provider] || provider === "custom") {
        return reply(`Unknown provider "${provider}". Known: ${Object.keys(providerDefaults).filter((name) => name !== "custom").join(", ")}.`);
      }
      await updateWithRetry(deps, tenant, sessionId, async (session) => ({ runtime: await mergeRuntime(session.runtime, { provider, model }, deps.config.secretKey) }));
      await invalidateSessionCache(deps, tenant, sessionId);
      return reply(`Model set to ${provider}:${model} from the next message.`);
    }
    case "reasoning": {
      const value = command.argument.toLowerCase();
      if (!["low", "medium", "high", "default", "off"].includes(value)) return reply("Usage: /reasoning <low|medium|high|default>");
      const effort = value === "low" || value === "medium" || value === "high" ? value : null;
      await updateWithRetry(deps, tenant, sessionId, async () => ({ reasoning: effort }));
      return reply(effort ? `Reasoning effort set to ${effort}.` : "Reasoning effort back to the model's default.");
    }
    case "stop": {
      const stopping = await deps.store.requestStop(tenant, sessionId, deps.now());
      return reply(stopping ? "Stopping the running turn at its next step." : "Nothing is running.");
    }
    case "undo": {
      const undone = await deps.store.undoLastExchange(tenant, sessionId, deps.now());
      if (undone === "busy") throw new SessionBusyError(5);
      return reply(undone ? `Took back the last exchange (${undone.removed} messages).` : "Nothing to undo.");
    }
    case "retry": {
      const undone = await deps.store.undoLastExchange(tenant, sessionId, deps.now());
      if (undone === "busy") throw new SessionBusyError(5);
      if (!undone) return reply("Nothing to retry.");
      return { kind: "turn", outcome: await runTurn(deps, { ...request, content: undone.content }) };
    }
    default:
      return reply(helpText);
  }
}
