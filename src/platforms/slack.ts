// Slack Events API: v0 request signatures, url_verification, user messages and app mentions, replies in the
// message's thread with chat.postMessage.
import type { Config } from "../config.ts";
import { constantTimeEqual, toHex } from "../crypto.ts";
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
  type SlackTarget,
  type WebhookParse,
} from "./types.ts";

/** Slack truncates past 40,000 characters and recommends at most 4,000 per message. */
export const slackMessageLimit = 4000;
// Slack's own guidance: refuse requests whose timestamp is more than 5 minutes from now (replay window).
const replayWindowSeconds = 5 * 60;

const encoder = new TextEncoder();

async function hmacSha256Hex(secret: string, text: string): Promise<string> {
  const key = await crypto.subtle.importKey("raw", encoder.encode(secret), { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
  return toHex(new Uint8Array(await crypto.subtle.sign("HMAC", key, encoder.encode(text))));
}

/** Slack sends `&`, `<`, `>` escaped and mentions as `<@U123>`; the model gets the text a person typed. */
function readableText(text: string): string {
  return text
    .replace(/^(\s*<@[A-Z0-9]+>)+\s*/, "")
    .replace(/&lt;/g, "<")
    .replace(/&gt;/g, ">")
    .replace(/&amp;/g, "&");
}

/** Slack's mrkdwn treats `<...>` as links and mentions (`<!channel>` pings everyone), so model text is escaped. */
function escapeForSlack(text: string): string {
  return text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
}

/** Slack answers HTTP 200 `{ok: false, error}` for most failures, and HTTP 429 with Retry-After when rate limited. */
function judgeSlack(response: Response, body: unknown): ApiVerdict {
  const answer = asRecord(body);
  if (response.status === 429) return { kind: "retry", waitMs: retryAfterHeaderMs(response) ?? 1000, reason: "429 ratelimited" };
  if (response.status >= 500) return { kind: "retry", waitMs: null, reason: `${response.status}` };
  if (response.ok && answer?.ok === true) return { kind: "ok", body: answer };
  return { kind: "fail", reason: `${response.status} ${safeReason(answer?.error ?? "not ok")}` };
}

/** The user id the app posts as, from the event's authorizations (present on every event_callback). */
function ownUserIds(payload: Record<string, unknown>): Set<string> {
  const ids = new Set<string>();
  const authorizations = Array.isArray(payload.authorizations) ? payload.authorizations : [];
  for (const entry of authorizations) {
    const userId = asRecord(entry)?.user_id;
    if (asRecord(entry)?.is_bot === true && typeof userId === "string") ids.add(userId);
  }
  return ids;
}

export function createSlackAdapter(settings: Config["slack"], outbound: OutboundDependencies): PlatformAdapter<SlackTarget> {
  return {
    platform: "slack",

    async verify(headers, rawBody) {
      if (!settings.signingSecret || !settings.botToken) {
        throw new NotConfiguredError("Slack is not configured on this server (SLACK_SIGNING_SECRET and SLACK_BOT_TOKEN).");
      }
      const unauthorized = (why: string) => new AppError("unauthorized", 401, `The Slack request signature ${why}.`);
      const timestamp = headers.get("x-slack-request-timestamp") ?? "";
      const signature = headers.get("x-slack-signature") ?? "";
      if (!/^\d{1,12}$/.test(timestamp) || signature === "") throw unauthorized("is missing");
      if (Math.abs(outbound.now() / 1000 - Number(timestamp)) > replayWindowSeconds) throw unauthorized("is too old (more than 5 minutes)");
      const expected = `v0=${await hmacSha256Hex(settings.signingSecret, `v0:${timestamp}:${rawBody}`)}`;
      if (!(await constantTimeEqual(signature, expected))) throw unauthorized("is not valid");
    },

    parse(rawBody): WebhookParse {
      const payload = asRecord(parseWebhookJson(rawBody));
      if (!payload) throw new ValidationError("The event must be a JSON object.", { fields: [{ field: "body", message: "expected an object" }] });
      const ignore: WebhookParse = { kind: "ignore", ack: null };
      if (payload.type === "url_verification") return { kind: "respond", body: { challenge: typeof payload.challenge === "string" ? payload.challenge : "" } };
      if (payload.type !== "event_callback") return ignore;
      const event = asRecord(payload.event);
      if (!event || (event.type !== "message" && event.type !== "app_mention")) return ignore;
      // Edits, deletions, joins and bot posts arrive as subtypes; thread_broadcast is a user's reply also sent to the channel.
      if (event.subtype !== undefined && event.subtype !== "thread_broadcast") return ignore;
      if (event.bot_id !== undefined || (typeof payload.api_app_id === "string" && event.app_id === payload.api_app_id)) return ignore;
      const { user, channel, ts, text } = event;
      if (typeof user !== "string" || ownUserIds(payload).has(user)) return ignore;
      if (typeof channel !== "string" || typeof ts !== "string" || typeof text !== "string") return ignore;
      const content = readableText(text);
      if (content.trim() === "") return ignore;
      const threadTs = typeof event.thread_ts === "string" ? event.thread_ts : ts;
      return {
        kind: "message",
        ack: null,
        message: {
          platform: "slack",
          // Keyed by the message, not by event_id: a message that mentions the app arrives twice, as `message`
          // and as `app_mention`, with different event ids; Slack's retries repeat both, so this dedupes all.
          eventId: `${channel}:${ts}`,
          sessionId: `slack:${channel}:${threadTs}`,
          text: content,
          reply: { platform: "slack", channel, threadTs },
        },
      };
    },

    async send(target, text) {
      if (!settings.botToken) throw new PlatformSendError("slack chat.postMessage failed: SLACK_BOT_TOKEN is not set");
      const token = settings.botToken;
      for (const part of splitText(text, slackMessageLimit)) {
        const body = JSON.stringify({ channel: target.channel, thread_ts: target.threadTs, text: escapeForSlack(part) });
        await callPlatformApi(
          outbound,
          "slack chat.postMessage",
          (signal) =>
            outbound.fetch(`${settings.apiBase}/chat.postMessage`, {
              method: "POST",
              headers: { "content-type": "application/json; charset=utf-8", authorization: `Bearer ${token}` },
              body,
              signal,
            }),
          judgeSlack,
        );
      }
    },
  };
}
