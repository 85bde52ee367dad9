import { Hono } from "hono";
import type { AppDependencies } from "../deps.ts";
import { handleChatMessage } from "../agent/commands.ts";
import type { AppEnv } from "./auth.ts";
import { readJsonBody, sessionIdParam } from "./http.ts";
import { PostMessageSchema } from "./schemas.ts";
import { messageJson, turnJson } from "./views.ts";

export function turnRoutes(deps: AppDependencies) {
  const routes = new Hono<AppEnv>();

  routes.post("/:id/messages", async (c) => {
    const sessionId = sessionIdParam(c);
    const body = await readJsonBody(c, PostMessageSchema);
    const tenant = c.get("tenant");
    const result = await handleChatMessage(deps, { tenant, sessionId, content: body.content, reasoning: body.reasoning });
    if (result.kind === "command") return c.json({ turn: null, reply: result.reply, messages: [], command: result.command });
    const { outcome } = result;
    return c.json({ turn: turnJson(outcome.turn), reply: outcome.reply, messages: outcome.messages.map(messageJson) });
  });

  return routes;
}
