import { Hono } from "hono";
import type { AppDependencies } from "../deps.ts";
import { runTurn } from "../agent/turn.ts";
import type { AppEnv } from "./auth.ts";
import { readJsonBody, sessionIdParam } from "./http.ts";
import { PostMessageSchema } from "./schemas.ts";
import { messageJson, turnJson } from "./views.ts";

export function turnRoutes(deps: AppDependencies) {
  const routes = new Hono<AppEnv>();

  routes.post("/:id/messages", async (c) => {
    const sessionId = sessionIdParam(c);
    const body = await readJsonBody(c, PostMessageSchema);
    const outcome = await runTurn(deps, {
      tenant: c.get("tenant"),
      sessionId,
      content: body.content,
      reasoning: body.reasoning,
    });
    return c.json({ turn: turnJson(outcome.turn), reply: outcome.reply, messages: outcome.messages.map(messageJson) });
  });

  return routes;
}
