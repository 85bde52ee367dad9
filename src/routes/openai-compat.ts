import { Hono } from "hono";
import type { AppDependencies } from "../deps.ts";
import type { AppEnv } from "./auth.ts";

export function openaiCompatRoutes(_deps: AppDependencies) {
  const routes = new Hono<AppEnv>();
  return routes;
}
