import { Hono } from "hono";
import { mergeRuntime, toStoredRuntime } from "../agent/runtime-secrets.ts";
import { randomId } from "../crypto.ts";
import { invalidateSessionCache } from "../agent/commands.ts";
import type { AppDependencies } from "../deps.ts";
import { ConflictError, NotFoundError, ValidationError } from "../errors.ts";
import type { SessionPatch } from "../state/store.ts";
import { booleanQuery, integerQuery, readJsonBody, sessionIdParam } from "./http.ts";
import { CreateSessionSchema, PatchSessionSchema } from "./schemas.ts";
import { messageJson, sessionJson, turnJson } from "./views.ts";
import type { AppEnv } from "./auth.ts";

function decodeCursor(cursor: string | undefined): string | null {
  if (!cursor) return null;
  try {
    const id = atob(cursor.replace(/-/g, "+").replace(/_/g, "/"));
    if (/^[A-Za-z0-9:._-]{1,128}$/.test(id)) return id;
  } catch {
    // fall through to the validation error
  }
  throw new ValidationError("Invalid cursor.", { fields: [{ field: "cursor", message: "not a cursor returned by this API" }] });
}

const encodeCursor = (id: string) => btoa(id).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");

export function sessionRoutes(deps: AppDependencies) {
  const routes = new Hono<AppEnv>();
  const iso = () => new Date(deps.now()).toISOString();

  routes.post("/", async (c) => {
    const body = await readJsonBody(c, CreateSessionSchema);
    const runtimeInput = body.runtime ?? deps.config.defaultRuntime;
    if (!runtimeInput) {
      throw new ValidationError("Give a runtime: this server has no HERMES_RUNTIME default.", { fields: [{ field: "runtime", message: "required when HERMES_RUNTIME is not set" }] });
    }
    const runtime = await toStoredRuntime(runtimeInput, deps.config.secretKey);
    const session = await deps.store.createSession({
      tenant: c.get("tenant"),
      id: body.id ?? randomId("ses"),
      runtime,
      systemPrompt: body.system_prompt ?? "",
      metadata: body.metadata ?? {},
      now: iso(),
    });
    if (!session) throw new ConflictError("A session with this id exists.");
    return c.json(sessionJson(session), 201);
  });

  routes.get("/", async (c) => {
    const limit = integerQuery(c, "limit", 50, 1, 200);
    const after = decodeCursor(c.req.query("cursor"));
    const sessions = await deps.store.listSessions(c.get("tenant"), limit + 1, after);
    const page = sessions.slice(0, limit);
    const last = page[page.length - 1];
    return c.json({ sessions: page.map(sessionJson), next_cursor: sessions.length > limit && last ? encodeCursor(last.id) : null });
  });

  routes.get("/:id", async (c) => {
    const session = await deps.store.getSession(c.get("tenant"), sessionIdParam(c));
    if (!session) throw new NotFoundError("Session not found.");
    return c.json(sessionJson(session));
  });

  routes.patch("/:id", async (c) => {
    const id = sessionIdParam(c);
    const body = await readJsonBody(c, PatchSessionSchema);
    const tenant = c.get("tenant");
    // Compare-and-set on the version: a concurrent update makes this one re-read and re-apply, never overwrite.
    for (let attempt = 0; attempt < 5; attempt++) {
      const current = await deps.store.getSession(tenant, id);
      if (!current) throw new NotFoundError("Session not found.");
      const patch: SessionPatch = {};
      if (body.runtime) patch.runtime = await mergeRuntime(current.runtime, body.runtime, deps.config.secretKey);
      if (body.system_prompt !== undefined) patch.systemPrompt = body.system_prompt;
      if (body.metadata !== undefined) patch.metadata = body.metadata;
      if (body.system_prompt !== undefined && body.system_prompt !== current.systemPrompt) patch.resetConversationPrompt = true;
      const updated = await deps.store.updateSession(tenant, id, current.version, patch, iso());
      if (updated) {
        if (patch.runtime) await invalidateSessionCache(deps, tenant, id);
        return c.json(sessionJson(updated));
      }
    }
    throw new ConflictError("The session changed concurrently; retry the update.");
  });

  routes.delete("/:id", async (c) => {
    const deleted = await deps.store.deleteSession(c.get("tenant"), sessionIdParam(c));
    if (!deleted) throw new NotFoundError("Session not found.");
    return c.body(null, 204);
  });

  routes.post("/:id/reset", async (c) => {
    const id = sessionIdParam(c);
    const tenant = c.get("tenant");
    if (!(await deps.store.archiveConversation(tenant, id, iso()))) throw new NotFoundError("Session not found.");
    await invalidateSessionCache(deps, tenant, id);
    const session = await deps.store.getSession(tenant, id);
    if (!session) throw new NotFoundError("Session not found.");
    return c.json(sessionJson(session));
  });

  routes.get("/:id/messages", async (c) => {
    const id = sessionIdParam(c);
    const limit = integerQuery(c, "limit", 100, 1, 1000);
    const messages = await deps.store.listMessages(c.get("tenant"), id, {
      after: integerQuery(c, "after", 0, 0, Number.MAX_SAFE_INTEGER),
      limit: limit + 1,
      includeArchived: booleanQuery(c, "archived"),
    });
    if (!messages) throw new NotFoundError("Session not found.");
    const page = messages.slice(0, limit);
    const last = page[page.length - 1];
    return c.json({ messages: page.map(messageJson), next_after: messages.length > limit && last ? last.seq : null });
  });

  routes.get("/:id/turns", async (c) => {
    const turns = await deps.store.listTurns(c.get("tenant"), sessionIdParam(c), integerQuery(c, "limit", 50, 1, 500));
    if (!turns) throw new NotFoundError("Session not found.");
    return c.json({ turns: turns.map(turnJson) });
  });

  return routes;
}
