// Telegram Bot API webhooks: the secret token header Telegram sends on every update (set with setWebhook's
// `secret_token`), text messages of private chats, groups and forum topics, replies with sendMessage.
import type { Config } from "../config.ts";
import { constantTimeEqual } from "../crypto.ts";
import { AppError, NotConfiguredError, ValidationError } from "../errors.ts";
import {
  asRecord,
  callPlatformApi,
  parseWebhookJson,
  PlatformSendError,
  retryAfterHeaderMs,
  safeReason,
  splitText,
  type ApiVerdict,
  type OutboundDependencies,
  type PlatformAdapter,
  type TelegramTarget,
  type WebhookParse,
} from "./types.ts";

/** sendMessage refuses text longer than 4096 characters. */
export const telegramMessageLimit = 4096;
// Telegram shows a chat action for 5 s or until the next message; renewing every 4 s keeps "typing..." steady.
const typingIntervalMs = 4000;

/** Telegram answers `{ok, result}` or `{ok: false, error_code, description, parameters: {retry_after}}`. */
function judgeTelegram(response: Response, body: unknown): ApiVerdict {
  const answer = asRecord(body);
  if (response.ok && answer?.ok === true) return { kind: "ok", body: answer.result };
  const code = typeof answer?.error_code === "number" ? answer.error_code : response.status;
  const reason = `${code} ${safeReason(answer?.description)}`.trim();
  if (code === 429) {
    const retryAfter = asRecord(answer?.parameters)?.retry_after;
    const waitMs = typeof retryAfter === "number" && retryAfter >= 0 ? retryAfter * 1000 : (retryAfterHeaderMs(response) ?? 1000);
    return { kind: "retry", waitMs, reason };
  }
  if (code >= 500) return { kind: "retry", waitMs: null, reason };
  return { kind: "fail", reason };
}

export function createTelegramAdapter(settings: Config["telegram"], outbound: OutboundDependencies): PlatformAdapter<TelegramTarget> {
  const call = (method: string, payload: Record<string, unknown>) => {
    if (!settings.botToken) throw new PlatformSendError(`telegram ${method} failed: TELEGRAM_BOT_TOKEN is not set`);
    // The token is part of the URL path, so this URL is never logged or put into an error message.
    const url = `${settings.apiBase}/bot${settings.botToken}/${method}`;
    return (signal: AbortSignal) => outbound.fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(payload), signal });
  };
  const address = (target: TelegramTarget) => ({ chat_id: target.chatId, ...(target.threadId === undefined ? {} : { message_thread_id: target.threadId }) });

  return {
    platform: "telegram",

    async verify(headers) {
      if (!settings.botToken || !settings.webhookSecret) {
        throw new NotConfiguredError("Telegram is not configured on this server (TELEGRAM_BOT_TOKEN and TELEGRAM_WEBHOOK_SECRET).");
      }
      const given = headers.get("x-telegram-bot-api-secret-token");
      if (given === null || !(await constantTimeEqual(given, settings.webhookSecret))) {
        throw new AppError("unauthorized", 401, "The Telegram secret token is missing or wrong.");
      }
    },

    parse(rawBody): WebhookParse {
      const update = asRecord(parseWebhookJson(rawBody));
      if (!update) throw new ValidationError("The update must be a JSON object.", { fields: [{ field: "body", message: "expected an object" }] });
      // Telegram redelivers any update that is not answered 2xx, so an update we do not handle is still a 200.
      const ignore: WebhookParse = { kind: "ignore", ack: null };
      const updateId = update.update_id;
      if (typeof updateId !== "number" || !Number.isInteger(updateId)) return ignore;
      const message = asRecord(update.message) ?? asRecord(update.edited_message);
      if (!message || typeof message.text !== "string" || message.text.trim() === "") return ignore;
      if (asRecord(message.from)?.is_bot === true) return ignore;
      const chatId = asRecord(message.chat)?.id;
      if (typeof chatId !== "number" || !Number.isInteger(chatId)) return ignore;
      // message_thread_id also marks reply threads of ordinary supergroups; only forum topics get their own session.
      const threadId = message.is_topic_message === true && typeof message.message_thread_id === "number" ? message.message_thread_id : undefined;
      const sessionId = `telegram:${chatId}${threadId === undefined ? "" : `:${threadId}`}`;
      return {
        kind: "message",
        ack: null,
        message: {
          platform: "telegram",
          eventId: String(updateId),
          sessionId,
          text: message.text,
          reply: { platform: "telegram", chatId, ...(threadId === undefined ? {} : { threadId }) },
        },
      };
    },

    async send(target, text) {
      // No parse_mode: the text goes out as plain text, so model output needs no escaping and can never be
      // refused as malformed Markdown/HTML.
      for (const part of splitText(text, telegramMessageLimit)) {
        await callPlatformApi(outbound, "telegram sendMessage", call("sendMessage", { ...address(target), text: part }), judgeTelegram);
      }
    },

    startTyping(target) {
      let stopped = false;
      let timer: ReturnType<typeof setTimeout> | undefined;
      const tick = () => {
        if (stopped) return;
        try {
          // One attempt, no retries: a missed indicator is cosmetic and must never delay the reply.
          void call("sendChatAction", { ...address(target), action: "typing" })(AbortSignal.timeout(typingIntervalMs))
            .then((response) => response.body?.cancel())
            .catch(() => undefined);
        } catch {
          return;
        }
        timer = setTimeout(tick, typingIntervalMs);
      };
      tick();
      return () => {
        stopped = true;
        if (timer !== undefined) clearTimeout(timer);
      };
    },
  };
}
