import { Hono } from "hono";
import type { AppDependencies } from "../deps.ts";

export function healthRoutes(deps: AppDependencies) {
  const routes = new Hono();
  routes.get("/health", async (c) => {
    let db: "ok" | "unreachable" = "ok";
    try {
      await deps.store.ping();
    } catch {
      db = "unreachable";
    }
    const body = { status: db === "ok" ? "ok" : "degraded", version: deps.version, runtime: deps.runtimeName, db };
    return c.json(body, db === "ok" ? 200 : 503);
  });
  return routes;
}
