// Platform webhooks (api.md "Platforms"), reachable without an API key because each is verified by its
// platform's own signature. Order per design.md: verify, parse, store in the inbox, acknowledge; the turn
// runs after the response.
import { Hono, type Context } from "hono";
import type { AppDependencies } from "../deps.ts";
import { acceptInbound, afterAccept, platformAdapter } from "../platforms/processor.ts";
import type { PlatformName } from "../platforms/types.ts";
import type { AppEnv } from "./auth.ts";

const platforms: readonly PlatformName[] = ["telegram", "slack", "discord"];

/** An acknowledgement body, or an empty 200 where the platform expects nothing (Telegram, Slack). */
function acknowledge(c: Context<AppEnv>, body: unknown): Response {
  return body === null ? c.body(null, 200) : c.json(body, 200);
}

export function webhookRoutes(deps: AppDependencies) {
  const routes = new Hono<AppEnv>();

  for (const platform of platforms) {
    routes.post(`/${platform}`, async (c) => {
      const adapter = platformAdapter(deps, platform);
      // Read once: signatures cover the exact bytes, and the same text is then parsed.
      const rawBody = await c.req.text();
      await adapter.verify(c.req.raw.headers, rawBody);
      const parsed = adapter.parse(rawBody);
      if (parsed.kind === "respond") return c.json(parsed.body, 200);
      if (parsed.kind === "ignore") return acknowledge(c, parsed.ack);
      const stored = await acceptInbound(deps, parsed.message);
      // A redelivery (Telegram retries, Slack's X-Slack-Retry-Num) is acknowledged and changes nothing.
      if (stored) deps.waitUntil(afterAccept(deps, stored));
      return acknowledge(c, parsed.ack);
    });
  }

  return routes;
}
