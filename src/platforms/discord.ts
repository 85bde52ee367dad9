// Discord interactions over HTTP (the serverless path; plain channel messages need the gateway socket):
// Ed25519 signatures, PING, slash commands answered with a deferred response and then follow-up messages.
import type { Config } from "../config.ts";
import { AppError, NotConfiguredError, ValidationError } from "../errors.ts";
import {
  asRecord,
  callPlatformApi,
  parseWebhookJson,
  retryAfterHeaderMs,
  safeReason,
  splitText,
  type ApiVerdict,
  type DiscordTarget,
  type OutboundDependencies,
  type PlatformAdapter,
  type WebhookParse,
} from "./types.ts";

/** A message's content is limited to 2000 characters. */
export const discordMessageLimit = 2000;
// Discord does not require a replay window, but the design does for every platform; interactions arrive within
// about a second of being sent, and their tokens die after 15 minutes anyway.
const replayWindowSeconds = 5 * 60;

const interactionType = { ping: 1, applicationCommand: 2, autocomplete: 4 } as const;
const responseType = { pong: 1, channelMessage: 4, deferredChannelMessage: 5, autocompleteResult: 8 } as const;
// Only the user who ran the command sees an ephemeral message.
const ephemeralFlag = 64;

const encoder = new TextEncoder();

function hexBytes(hex: string, length: number): Uint8Array<ArrayBuffer> | null {
  if (hex.length !== length * 2 || !/^[0-9a-fA-F]+$/.test(hex)) return null;
  const bytes = new Uint8Array(length);
  for (let index = 0; index < length; index++) bytes[index] = Number.parseInt(hex.slice(index * 2, index * 2 + 2), 16);
  return bytes;
}

// Importing the key is the slow half of a verification; one import per public key serves every request.
const importedKeys = new Map<string, Promise<CryptoKey>>();

function publicKeyFor(hex: string): Promise<CryptoKey> {
  let key = importedKeys.get(hex);
  if (!key) {
    const bytes = hexBytes(hex, 32);
    if (!bytes) return Promise.reject(new NotConfiguredError("DISCORD_PUBLIC_KEY must be the application's public key: 64 hex characters."));
    key = crypto.subtle.importKey("raw", bytes, { name: "Ed25519" }, false, ["verify"]);
    key.catch(() => importedKeys.delete(hex));
    importedKeys.set(hex, key);
  }
  return key;
}

function ephemeral(content: string): WebhookParse {
  return { kind: "respond", body: { type: responseType.channelMessage, data: { content, flags: ephemeralFlag } } };
}

function optionValue(data: Record<string, unknown>, name: string): string | null {
  const options = Array.isArray(data.options) ? data.options : [];
  for (const option of options) {
    const entry = asRecord(option);
    if (entry?.name === name && (typeof entry.value === "string" || typeof entry.value === "number")) return String(entry.value);
  }
  return null;
}

/** The chat text a slash command stands for: `ask` is the prompt itself, the others are chat commands. */
function commandText(name: string, data: Record<string, unknown>): string | null {
  switch (name) {
    case "ask":
      return optionValue(data, "prompt");
    case "model":
      return `/model ${optionValue(data, "model") ?? ""}`.trim();
    case "reasoning":
      return `/reasoning ${optionValue(data, "effort") ?? ""}`.trim();
    case "new":
    case "status":
    case "retry":
    case "undo":
    case "stop":
    case "help":
      return `/${name}`;
    default:
      return null;
  }
}

/** 429 bodies carry `retry_after` in seconds, as a float; the header is the fallback. */
function judgeDiscord(response: Response, body: unknown): ApiVerdict {
  const answer = asRecord(body);
  if (response.ok) return { kind: "ok", body: answer };
  const reason = `${response.status} ${safeReason(answer?.code ?? "")} ${safeReason(answer?.message ?? "")}`.trim();
  if (response.status === 429) {
    const retryAfter = answer?.retry_after;
    const waitMs = typeof retryAfter === "number" && retryAfter >= 0 ? Math.ceil(retryAfter * 1000) : (retryAfterHeaderMs(response) ?? 1000);
    return { kind: "retry", waitMs, reason };
  }
  if (response.status >= 500) return { kind: "retry", waitMs: null, reason };
  return { kind: "fail", reason };
}

export function createDiscordAdapter(settings: Config["discord"], outbound: OutboundDependencies): PlatformAdapter<DiscordTarget> {
  return {
    platform: "discord",

    async verify(headers, rawBody) {
      if (!settings.publicKey) throw new NotConfiguredError("Discord is not configured on this server (DISCORD_PUBLIC_KEY).");
      const unauthorized = (why: string) => new AppError("unauthorized", 401, `The Discord request signature ${why}.`);
      const signature = hexBytes(headers.get("x-signature-ed25519") ?? "", 64);
      const timestamp = headers.get("x-signature-timestamp") ?? "";
      if (!signature || !/^\d{1,12}$/.test(timestamp)) throw unauthorized("is missing");
      if (Math.abs(outbound.now() / 1000 - Number(timestamp)) > replayWindowSeconds) throw unauthorized("is too old (more than 5 minutes)");
      const key = await publicKeyFor(settings.publicKey);
      const valid = await crypto.subtle.verify("Ed25519", key, signature, encoder.encode(timestamp + rawBody));
      if (!valid) throw unauthorized("is not valid");
    },

    parse(rawBody): WebhookParse {
      const interaction = asRecord(parseWebhookJson(rawBody));
      if (!interaction) throw new ValidationError("The interaction must be a JSON object.", { fields: [{ field: "body", message: "expected an object" }] });
      if (interaction.type === interactionType.ping) return { kind: "respond", body: { type: responseType.pong } };
      if (interaction.type === interactionType.autocomplete) return { kind: "respond", body: { type: responseType.autocompleteResult, data: { choices: [] } } };
      // Discord shows "interaction failed" for an empty 200, so even what we do not handle gets a visible answer.
      if (interaction.type !== interactionType.applicationCommand) return ephemeral("This interaction is not supported.");
      const data = asRecord(interaction.data) ?? {};
      const name = typeof data.name === "string" ? data.name : "";
      const text = commandText(name, data);
      if (text === null) return ephemeral(`Unknown command "${safeReason(name).slice(0, 40)}". Try /help.`);
      if (text.trim() === "") return ephemeral("Give a prompt, for example /ask prompt: What is new today?");
      const channelId = typeof interaction.channel_id === "string" ? interaction.channel_id : asRecord(interaction.channel)?.id;
      const applicationId = typeof interaction.application_id === "string" ? interaction.application_id : settings.applicationId;
      const { id, token } = interaction;
      if (typeof channelId !== "string" || typeof applicationId !== "string" || typeof id !== "string" || typeof token !== "string") {
        return ephemeral("This interaction lacks a channel; try the command in a channel or a direct message.");
      }
      return {
        kind: "message",
        ack: { type: responseType.deferredChannelMessage },
        message: {
          platform: "discord",
          eventId: id,
          sessionId: `discord:${channelId}`,
          text,
          reply: { platform: "discord", applicationId, token },
        },
      };
    },

    async send(target, text) {
      // The interaction token authenticates follow-ups by itself; no bot token is sent. The URL holds the
      // token, so it is never logged.
      const url = `${settings.apiBase}/webhooks/${encodeURIComponent(target.applicationId)}/${encodeURIComponent(target.token)}`;
      for (const part of splitText(text, discordMessageLimit)) {
        // parse: [] keeps model text from pinging @everyone, roles or users.
        const body = JSON.stringify({ content: part, allowed_mentions: { parse: [] } });
        await callPlatformApi(
          outbound,
          "discord follow-up",
          (signal) => outbound.fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body, signal }),
          judgeDiscord,
        );
      }
    },
  };
}
