// Inbox processing (design.md "Platforms"): a webhook stores its event and acknowledges; the work happens
// here, after the response, one event at a time per session in arrival order. Delivery into the inbox is at
// least once; the lease-based claim makes it exactly once into a turn, and the recovery sweep picks up events
// whose processor died.
import { handleChatMessage, parseCommand } from "../agent/commands.ts";
import { toStoredRuntime } from "../agent/runtime-secrets.ts";
import { randomId, sha256Hex } from "../crypto.ts";
import { runTurn } from "../agent/turn.ts";
import type { AppDependencies } from "../deps.ts";
import { AppError, NotFoundError, ProviderChainError, SessionBusyError } from "../errors.ts";
import type { InboxEvent } from "../state/inbox.ts";
import { createDiscordAdapter } from "./discord.ts";
import { createSlackAdapter } from "./slack.ts";
import { createTelegramAdapter } from "./telegram.ts";
import { PlatformSendError, emptyReplyText, type InboundMessage, type OutboundDependencies, type PlatformAdapter, type PlatformName, type ReplyTarget } from "./types.ts";

/** Platform chats belong to the default tenant (api.md "Conventions"). */
export const platformTenant = "default";
// Five claims cover a provider outage of a few sweeps (30 s apart) without retrying a poisoned event forever.
export const maxInboxAttempts = 5;
// 32 waiting messages is minutes of turns already; beyond that a chat is flooding, and a refusal now beats
// an answer to a stale message much later.
export const maxPendingPerSession = 32;
/** Sessions one sweep works on (concurrently; each session stays sequential). */
export const sweepSessionLimit = 20;

export const providerFailedText = "Sorry, every model provider failed; try again later.";
export const queueFullText = "I'm still working on earlier messages; please wait a moment and send it again.";
export const notConfiguredText = "Sorry, this bot has no model configured yet (the server's HERMES_RUNTIME is not set).";
export const gaveUpText = "Sorry, I could not process your message after several attempts; please send it again.";

export function platformAdapter(deps: AppDependencies, platform: PlatformName): PlatformAdapter {
  const outbound: OutboundDependencies = { fetch: deps.fetch, now: deps.now, log: deps.log, ...(deps.sleep ? { sleep: deps.sleep } : {}) };
  // Each adapter is typed over its own target; readPayload checks that a stored target matches its platform.
  switch (platform) {
    case "telegram":
      return createTelegramAdapter(deps.config.telegram, outbound);
    case "slack":
      return createSlackAdapter(deps.config.slack, outbound);
    case "discord":
      return createDiscordAdapter(deps.config.discord, outbound);
  }
}

/** Only the error's class (and an AppError's code) is logged or stored: driver messages can quote SQL. */
function errorLabel(error: unknown): string {
  if (error instanceof AppError) return `${error.name}:${error.code}`;
  return error instanceof Error ? error.name : "unknown";
}

async function sendSafely(deps: AppDependencies, adapter: PlatformAdapter, target: ReplyTarget, text: string, context: Record<string, unknown>): Promise<boolean> {
  try {
    await adapter.send(target, text);
    return true;
  } catch (error) {
    deps.log({ level: "error", event: "platform_send_failed", ...context, error: errorLabel(error), ...(error instanceof PlatformSendError ? { reason: error.message } : {}) });
    return false;
  }
}

/**
 * Stores a verified message in the inbox. Null for a redelivery (nothing else happens). Over the queue cap
 * the event is stored as `refused`; `/stop` is stored as `stop` because it must reach the running turn now,
 * not after it. Either way the stored event keeps its place so redeliveries stay no-ops.
 */
export async function acceptInbound(deps: AppDependencies, message: InboundMessage): Promise<InboundMessage | null> {
  const pending = await deps.inbox.pendingCount(message.sessionId);
  let stored: InboundMessage = message;
  if (pending >= maxPendingPerSession) stored = { ...message, handled: "refused" };
  else if (parseCommand(message.text)?.name === "stop") stored = { ...message, handled: "stop" };
  const inserted = await deps.inbox.enqueue(
    { platform: stored.platform, eventId: stored.eventId, sessionId: stored.sessionId, payload: JSON.stringify(stored) },
    deps.now(),
  );
  return inserted ? stored : null;
}

/** The work after the acknowledgement: the immediate answer of a refused or `/stop` event, then the session's queue. */
export async function afterAccept(deps: AppDependencies, message: InboundMessage): Promise<void> {
  const context = { platform: message.platform, event_id: message.eventId, session_id: message.sessionId };
  if (message.handled) {
    const adapter = platformAdapter(deps, message.platform);
    let text = queueFullText;
    if (message.handled === "refused") {
      deps.log({ level: "warn", event: "inbox_queue_full", ...context, limit: maxPendingPerSession });
    } else {
      try {
        const result = await handleChatMessage(deps, { tenant: platformTenant, sessionId: message.sessionId, content: message.text });
        text = result.kind === "command" ? result.reply : result.outcome.reply;
      } catch (error) {
        text = error instanceof NotFoundError ? "Nothing is running." : "Sorry, the stop request failed; try again.";
        if (!(error instanceof NotFoundError)) deps.log({ level: "error", event: "platform_stop_failed", ...context, error: errorLabel(error) });
      }
    }
    await sendSafely(deps, adapter, message.reply, text, context);
  }
  await processSession(deps, message.sessionId);
}

/** Creates the platform chat's session with the default runtime; false when there is no default runtime. */
async function ensureSession(deps: AppDependencies, message: InboundMessage): Promise<boolean> {
  if (await deps.store.getSession(platformTenant, message.sessionId)) return true;
  const runtimeInput = deps.config.defaultRuntime;
  if (!runtimeInput) return false;
  // Null means another processor created it a moment ago, which is just as good.
  await deps.store.createSession({
    tenant: platformTenant,
    id: message.sessionId,
    runtime: await toStoredRuntime(runtimeInput, deps.config.secretKey),
    systemPrompt: "",
    metadata: { platform: message.platform },
    now: new Date(deps.now()).toISOString(),
  });
  return true;
}

function readPayload(event: InboxEvent): InboundMessage | null {
  try {
    const message = JSON.parse(event.payload) as InboundMessage;
    const valid = typeof message.text === "string" && typeof message.reply === "object" && message.reply !== null && message.reply.platform === event.platform;
    return valid ? message : null;
  } catch {
    return null;
  }
}

/** The turn id of an event's first turn: derived from the event, so a second claim can find it. */
export async function eventTurnId(event: Pick<InboxEvent, "platform" | "eventId">): Promise<string> {
  return `turn_ev_${(await sha256Hex(`${event.platform}:${event.eventId}`)).slice(0, 32)}`;
}

/**
 * Exactly once into a turn: the first claim runs the turn under the event's own turn id. A later claim (the
 * process died after the turn started) looks that turn up first: a finished turn's reply is sent again
 * without a second turn; a turn that died mid-way is continued on the journal as it stands (its user message
 * is already there, its orphaned tool calls get repaired), never started over with the message appended twice.
 */
async function runEventTurn(deps: AppDependencies, event: InboxEvent, message: InboundMessage): Promise<string> {
  const turnId = await eventTurnId(event);
  const request = { tenant: platformTenant, sessionId: message.sessionId, content: message.text, turnId };
  if (event.attempts > 1) {
    const earlier = await deps.store.getTurnOutcome(turnId);
    if (earlier?.status === "completed") return earlier.reply ?? emptyReplyText;
    if (earlier?.status === "failed") return providerFailedText;
    if (earlier) {
      const continued = await runTurn(deps, { ...request, content: null, turnId: `${turnId}_${event.attempts}` });
      return continued.reply || emptyReplyText;
    }
  }
  const result = await handleChatMessage(deps, request);
  return result.kind === "command" ? result.reply : result.outcome.reply || emptyReplyText;
}

/** Runs one claimed event. False stops the session's loop (the event was released for a later attempt). */
async function processEvent(deps: AppDependencies, event: InboxEvent, owner: string): Promise<boolean> {
  const context = { platform: event.platform, event_id: event.eventId, session_id: event.sessionId, attempt: event.attempts };
  const message = readPayload(event);
  if (!message) {
    // A payload this code cannot read will not become readable on a retry: fail it for good.
    await deps.inbox.fail(event.platform, event.eventId, owner, "unreadable payload", deps.now(), event.attempts);
    deps.log({ level: "error", event: "inbox_event_failed", ...context, error: "unreadable payload" });
    return true;
  }
  if (message.handled) {
    await deps.inbox.complete(event.platform, event.eventId, owner, deps.now());
    return true;
  }

  const adapter = platformAdapter(deps, message.platform);
  const stopTyping = adapter.startTyping?.(message.reply) ?? (() => undefined);
  let reply: string;
  try {
    if (!(await ensureSession(deps, message))) {
      reply = notConfiguredText;
    } else {
      reply = await runEventTurn(deps, event, message);
    }
  } catch (error) {
    stopTyping();
    if (error instanceof ProviderChainError) {
      // The user message stays in the journal and the turn is recorded failed; a retry would run a second turn.
      reply = providerFailedText;
      deps.log({ level: "warn", event: "platform_turn_failed", ...context, error: errorLabel(error) });
    } else {
      // SessionBusyError: a turn started over the API holds the session; this event waits for a later claim
      // (the next webhook of the chat or the sweep). Anything else is retried the same way, up to the limit.
      const busy = error instanceof SessionBusyError;
      if (busy) {
        await deps.inbox.release(event.platform, event.eventId, owner, deps.now());
        deps.log({ level: "info", event: "inbox_session_busy", ...context });
        return false;
      }
      await deps.inbox.fail(event.platform, event.eventId, owner, errorLabel(error), deps.now(), maxInboxAttempts);
      const final = event.attempts >= maxInboxAttempts;
      deps.log({ level: final ? "error" : "warn", event: final ? "inbox_event_failed" : busy ? "inbox_session_busy" : "inbox_event_retry", ...context, error: errorLabel(error) });
      if (final) await sendSafely(deps, adapter, message.reply, gaveUpText, context);
      return false;
    }
  }
  stopTyping();
  // The turn has run: a reply that cannot be delivered is logged, never a reason to run the turn again.
  await sendSafely(deps, adapter, message.reply, reply, context);
  await deps.inbox.complete(event.platform, event.eventId, owner, deps.now());
  return true;
}

/**
 * Works through the session's inbox until nothing is claimable: one event at a time, oldest first. Returns
 * quietly when another processor holds the session (it keeps looping and will reach newer events itself).
 * Never rejects; failures are logged.
 */
export async function processSession(deps: AppDependencies, sessionId: string): Promise<void> {
  const owner = randomId("inbox");
  try {
    for (;;) {
      const event = await deps.inbox.claimNext(sessionId, owner, deps.now(), deps.config.leaseMs, maxInboxAttempts);
      if (!event) return;
      if (!(await processEvent(deps, event, owner))) return;
    }
  } catch (error) {
    deps.log({ level: "error", event: "inbox_process_error", session_id: sessionId, error: errorLabel(error) });
  }
}

/**
 * Recovery: processes every session with claimable events (waiting, or held under an expired lease by a
 * processor that died). Called by a 30 s timer on Node and by the Workers `scheduled` handler. Returns the
 * number of sessions it worked on.
 */
export async function sweepInbox(deps: AppDependencies, limit = sweepSessionLimit): Promise<number> {
  let sessions: string[];
  try {
    sessions = await deps.inbox.sessionsNeedingWork(deps.now(), maxInboxAttempts, limit);
  } catch (error) {
    deps.log({ level: "error", event: "inbox_sweep_error", error: errorLabel(error) });
    return 0;
  }
  await Promise.all(sessions.map((sessionId) => processSession(deps, sessionId)));
  return sessions.length;
}
