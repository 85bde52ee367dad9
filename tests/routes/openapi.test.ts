/// <reference types="node" />
// GET /openapi.json is a valid OpenAPI 3.1 document that lists every route of api.md and every route the app
// registers, with request bodies taken from the validating schemas; GET /docs renders it without external assets.
import { Validator } from "@seriousme/openapi-schema-validator";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { ChatCompletionRequestSchema } from "../../src/routes/openai-compat.ts";
import { CreateSessionSchema, PatchSessionSchema, PostMessageSchema } from "../../src/routes/schemas.ts";
import { buildTestApp, type TestApp } from "../support/app.ts";

/** api.md's routes, method and path. */
const contractRoutes = [
  ["get", "/health"],
  ["get", "/openapi.json"],
  ["get", "/docs"],
  ["post", "/v1/sessions"],
  ["get", "/v1/sessions"],
  ["get", "/v1/sessions/{id}"],
  ["patch", "/v1/sessions/{id}"],
  ["delete", "/v1/sessions/{id}"],
  ["post", "/v1/sessions/{id}/reset"],
  ["post", "/v1/sessions/{id}/messages"],
  ["get", "/v1/sessions/{id}/messages"],
  ["get", "/v1/sessions/{id}/turns"],
  ["post", "/v1/chat/completions"],
  ["get", "/v1/models"],
  ["post", "/webhooks/telegram"],
  ["post", "/webhooks/slack"],
  ["post", "/webhooks/discord"],
] as const;

describe("OpenAPI document and /docs", () => {
  let harness: TestApp;
  let document: any;

  beforeEach(async () => {
    harness = await buildTestApp();
    const response = await harness.app.request("/openapi.json");
    expect(response.status).toBe(200);
    document = await response.json();
  });
  afterEach(async () => harness.close());

  it("validates as OpenAPI 3.1", async () => {
    const result = await new Validator().validate(document);
    expect(result.errors).toBeUndefined();
    expect(result.valid).toBe(true);
    expect(document.openapi).toBe("3.1.0");
  });

  it("lists every route of api.md, with bearerAuth except on the public ones", () => {
    for (const [method, path] of contractRoutes) {
      const operation = document.paths[path]?.[method];
      expect(operation, `${method.toUpperCase()} ${path}`).toBeDefined();
      const isPublic = !path.startsWith("/v1/");
      expect(operation.security, `${method.toUpperCase()} ${path}`).toEqual(isPublic ? [] : undefined);
    }
    expect(document.security).toEqual([{ bearerAuth: [] }]);
    expect(document.components.securitySchemes.bearerAuth).toMatchObject({ type: "http", scheme: "bearer" });
    const documented = Object.entries(document.paths).flatMap(([path, methods]) => Object.keys(methods as object).map((method) => `${method} ${path}`));
    expect(documented.sort()).toEqual(contractRoutes.map(([method, path]) => `${method} ${path}`).sort());
  });

  it("documents every route the app registers", () => {
    const registered = harness.app.routes
      .filter((route) => route.method !== "ALL")
      .map((route) => `${route.method.toLowerCase()} ${route.path.replace(/:(\w+)/g, "{$1}").replace(/(.)\/$/, "$1")}`);
    const documented = new Set(Object.entries(document.paths).flatMap(([path, methods]) => Object.keys(methods as object).map((method) => `${method} ${path}`)));
    expect(registered.length).toBeGreaterThan(10);
    for (const route of registered) expect(documented.has(route), route).toBe(true);
  });

  it("takes request bodies from the schemas that validate the requests, and documents the error body", () => {
    const schemas = document.components.schemas;
    const bodies = [
      ["/v1/sessions", "post", "CreateSessionRequest", CreateSessionSchema],
      ["/v1/sessions/{id}", "patch", "PatchSessionRequest", PatchSessionSchema],
      ["/v1/sessions/{id}/messages", "post", "PostMessageRequest", PostMessageSchema],
      ["/v1/chat/completions", "post", "ChatCompletionRequest", ChatCompletionRequestSchema],
    ] as const;
    for (const [path, method, name, schema] of bodies) {
      expect(document.paths[path][method].requestBody.content["application/json"].schema).toEqual({ $ref: `#/components/schemas/${name}` });
      expect(Object.keys(schemas[name].properties).sort()).toEqual(Object.keys(schema.entries).sort());
    }
    expect(schemas.PostMessageRequest).toMatchObject({ required: ["content"], additionalProperties: false });
    expect(schemas.CreateSessionRequest.properties.runtime).toEqual({ $ref: "#/components/schemas/RuntimeInput" });
    expect(schemas.ErrorBody.properties.error.properties.code.enum).toContain("session_busy");
    const messages = document.paths["/v1/sessions/{id}/messages"].post;
    expect(Object.keys(messages.responses)).toEqual(["200", "400", "401", "404", "409", "413", "415", "502", "503"]);
    expect(Object.keys(messages.responses["200"].content)).toEqual(["application/json", "text/event-stream"]);
    expect(messages.parameters.map((parameter: { name: string }) => parameter.name)).toContain("Idempotency-Key");
    expect(document.components.responses.Error409.content["application/json"].schema).toEqual({ $ref: "#/components/schemas/ErrorBody" });
  });

  it("serves /docs without auth as one self-contained page listing every route", async () => {
    const response = await harness.app.request("/docs");
    expect(response.status).toBe(200);
    expect(response.headers.get("content-type")).toMatch(/^text\/html/);
    const html = await response.text();
    for (const [method, path] of contractRoutes) expect(html).toContain(`${method.toUpperCase()}</td><td><code>${path}</code>`);
    expect(html).not.toMatch(/<script|<link|src=|https?:\/\//i);
  });
});
