import type { MiddlewareHandler } from "hono";
import type { ApiKey } from "../config.ts";
import { constantTimeEqual } from "../crypto.ts";
import { AppError } from "../errors.ts";

export interface AppEnv {
  Variables: { tenant: string; requestId: string };
}

/**
 * Bearer auth for /v1/*. Every configured key is compared (no early exit), each in constant time, so the
 * response time tells nothing about which key or how much of it matched.
 */
export function bearerAuth(keys: ApiKey[]): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    if (keys.length === 0) throw new AppError("not_configured", 503, "No API key is configured on this server (HERMES_API_KEYS).");
    const header = c.req.header("authorization") ?? "";
    const match = /^Bearer\s+(\S{1,512})$/i.exec(header);
    if (!match) throw new AppError("unauthorized", 401, "Send Authorization: Bearer <key>.", { headers: { "WWW-Authenticate": "Bearer" } });
    const given = match[1]!;
    let tenant: string | null = null;
    for (const key of keys) {
      if ((await constantTimeEqual(given, key.key)) && tenant === null) tenant = key.tenant;
    }
    if (tenant === null) throw new AppError("unauthorized", 401, "The API key is not valid.", { headers: { "WWW-Authenticate": "Bearer" } });
    c.set("tenant", tenant);
    await next();
  };
}
