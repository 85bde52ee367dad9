/// <reference types="node" />
// Conformance of the Workers entry (src/entry/worker.ts) under workerd via `wrangler dev`; a Worker has no
// file system, so only the libSQL server store applies. Beside the shared suite: what only the Worker does
// (no generated key, no file store, the cron handler).
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startSqld, type SqldServer } from "../support/sqld.ts";
import { startRuntimeServer, type RunningServer } from "./servers.ts";
import { defineConformanceSuite } from "./suite.ts";

defineConformanceSuite("workerd", ["sqld"]);

describe("workerd server without an API key", () => {
  let workDir = "";
  let sqld: SqldServer | undefined;
  let server: RunningServer | undefined;

  beforeAll(async () => {
    workDir = mkdtempSync(join(tmpdir(), "hermes-conformance-workerd-"));
    sqld = await startSqld();
    server = await startRuntimeServer("workerd", { LIBSQL_URL: sqld.url }, workDir);
  }, 120_000);

  afterAll(async () => {
    await server?.stop();
    await sqld?.stop();
    if (workDir) rmSync(workDir, { recursive: true, force: true });
  }, 30_000);

  it("refuses /v1/* with 503 not_configured instead of generating a key", async () => {
    const response = await fetch(`${server!.url}/v1/sessions`, { headers: { authorization: "Bearer anything-0123456789abcdef" } });
    expect(response.status).toBe(503);
    expect(await response.json()).toMatchObject({ error: { code: "not_configured", message: expect.stringContaining("HERMES_API_KEYS") } });
  });

  it("runs the cron handler (the inbox sweep) without an error", async () => {
    // wrangler dev exposes the scheduled handler here; it answers 500 when the handler throws.
    const response = await fetch(`${server!.url}/cdn-cgi/handler/scheduled?cron=*/1+*+*+*+*`);
    expect(response.status).toBe(200);
  });
});

describe("workerd server with a file LIBSQL_URL", () => {
  let workDir = "";
  let server: RunningServer | undefined;

  beforeAll(async () => {
    workDir = mkdtempSync(join(tmpdir(), "hermes-conformance-workerd-"));
    server = await startRuntimeServer("workerd", { LIBSQL_URL: `file:${join(workDir, "hermes.db")}`, HERMES_API_KEYS: "conformance-key-0123456789abcdef" }, workDir, {
      readyStatus: 503,
    });
  }, 120_000);

  afterAll(async () => {
    await server?.stop();
    if (workDir) rmSync(workDir, { recursive: true, force: true });
  }, 30_000);

  it("answers every route with 503 and a body naming LIBSQL_URL", async () => {
    for (const path of ["/health", "/v1/sessions"]) {
      const response = await fetch(`${server!.url}${path}`);
      expect(response.status).toBe(503);
      const body = await response.json();
      expect(body).toMatchObject({ error: { code: "not_configured", message: expect.stringContaining("LIBSQL_URL") } });
      expect(body.error.message).not.toContain(workDir);
    }
  });
});
