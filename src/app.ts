// Builds the Hono app from injected dependencies; the entries in src/entry/ only wire a runtime to it.
import { Hono } from "hono";
import { bodyLimit } from "hono/body-limit";
import type { AppDependencies } from "./deps.ts";
import { AppError } from "./errors.ts";
import { bearerAuth, type AppEnv } from "./routes/auth.ts";
import { healthRoutes } from "./routes/health.ts";
import { errorResponse } from "./routes/http.ts";
import { sessionRoutes } from "./routes/sessions.ts";
import { turnRoutes } from "./routes/turns.ts";
import { webhookRoutes } from "./routes/webhooks.ts";
import { openaiCompatRoutes } from "./routes/openai-compat.ts";
import { docsRoutes } from "./routes/docs.ts";

const requestIdPattern = /^[A-Za-z0-9._:-]{1,128}$/;

export function createApp(deps: AppDependencies) {
  const app = new Hono<AppEnv>();

  app.use(async (c, next) => {
    const given = c.req.header("x-request-id");
    const requestId = given && requestIdPattern.test(given) ? given : crypto.randomUUID();
    c.set("requestId", requestId);
    await next();
    c.res.headers.set("X-Request-Id", requestId);
  });

  app.use(
    bodyLimit({
      maxSize: deps.config.maxBodyBytes,
      onError: (c) => errorResponse(c, new AppError("payload_too_large", 413, `The body is larger than ${deps.config.maxBodyBytes} bytes.`)),
    }),
  );

  app.route("/", healthRoutes(deps));
  // Documentation and signed webhooks are the only routes reachable without an API key.
  app.route("/", docsRoutes(deps));
  app.route("/webhooks", webhookRoutes(deps));
  app.use("/v1/*", bearerAuth(deps.config.apiKeys));
  app.route("/v1/sessions", sessionRoutes(deps));
  app.route("/v1/sessions", turnRoutes(deps));
  app.route("/v1", openaiCompatRoutes(deps));

  app.notFound((c) => errorResponse(c, new AppError("not_found", 404, "No such route.")));
  app.onError((error, c) => {
    if (error instanceof AppError) return errorResponse(c, error);
    // Only the error's class reaches the log: messages of driver or SDK errors can quote SQL or secrets.
    deps.log({ level: "error", event: "unhandled_error", request_id: c.get("requestId"), error: error.name });
    return errorResponse(c, new AppError("internal", 500, "Internal error."));
  });
  return app;
}
