/// <reference types="node" />
// Security properties end to end: every /v1 route of /openapi.json needs a key (only /health, /openapi.json,
// /docs and the signed webhooks answer without one); bad webhook signatures are 401 and store nothing; one
// tenant never reaches another's session through id spellings; web_fetch refuses private, loopback,
// link-local and metadata targets, including through a redirect from a public host and through a name that
// resolves to 127.0.0.1; secrets never appear in responses, logs or the database file (-wal included).
import { createHmac } from "node:crypto";
import { createServer, type Server } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { TestApp } from "../support/app.ts";
import type { FakeProvider, ScriptStep } from "../support/fake-provider.ts";
import {
  discordApplicationId,
  slackBotToken,
  slackSigningSecret,
  telegramSecret,
  telegramToken,
  type FakePlatform,
} from "../support/fake-platforms.ts";
import {
  buildAppOver,
  startScriptedFakes,
  databaseFingerprint,
  databasePath,
  leakedSecrets,
  otherTenantKey,
  responseText,
  secretsInDatabaseFiles,
  testApiKey,
  testSecretKey,
} from "../support/reliability.ts";

const envProviderKey = "sk-security-env-key-0123456789abcdef";
const inlineProviderKey = "sk-security-inline-key-0123456789abcdef";
const fallbackInlineKey = "sk-security-fallback-inline-key-0123456789";
const discordBotToken = "discord-security-bot-token-0123456789";
const libsqlAuthToken = "libsql-security-auth-token-0123456789";
const secrets = [testApiKey, otherTenantKey, testSecretKey, envProviderKey, inlineProviderKey, fallbackInlineKey, telegramToken, telegramSecret, slackSigningSecret, slackBotToken, discordBotToken, libsqlAuthToken];
const toHex = (bytes: ArrayBuffer) => Buffer.from(bytes).toString("hex");

let provider: FakeProvider;
let telegram: FakePlatform;
let slack: FakePlatform;
let discord: FakePlatform;
let discordKeys: CryptoKeyPair;
let scripted: Awaited<ReturnType<typeof startScriptedFakes>> | undefined;
let site: Server;
let siteUrl: string;
let h: TestApp;
const siteHits: string[] = [];
/** Every URL the app's fetch was asked for, other than the fakes. */
const fetched: string[] = [];
const scripts = new Map<string, ScriptStep>();
const pending: Promise<unknown>[] = [];
const settle = async () => {
  while (pending.length > 0) await Promise.all(pending.splice(0));
};
/** Every response of this file, scanned for secrets at the end as well as where it is read. */
const transcripts: string[] = [];
async function record(response: Response): Promise<string> {
  const text = await responseText(response);
  transcripts.push(text);
  return text;
}

// Names the fake DNS knows: a public host (served by the local site) and names that point inside.
const dns: Record<string, string[]> = {
  "public.example": ["93.184.216.34"],
  "rebind.example": ["127.0.0.1"],
  "mixed.example": ["93.184.216.34", "10.0.0.5"],
  "v6-loopback.example": ["::1"],
  "mapped.example": ["::ffff:127.0.0.1"],
  "metadata.example": ["169.254.169.254"],
};

beforeAll(async () => {
  scripted = await startScriptedFakes(scripts, discordBotToken);
  ({ provider, telegram, slack, discord, discordKeys } = scripted);
  site = createServer((request, response) => {
    const path = request.url ?? "/";
    siteHits.push(path);
    const port = (site.address() as { port: number }).port;
    const redirects: Record<string, string> = {
      "/redirect-to-loopback": `http://127.0.0.1:${port}/secret`,
      "/redirect-to-metadata": "http://169.254.169.254/latest/meta-data/iam/security-credentials/",
      "/redirect-to-rebind": `http://rebind.example:${port}/secret`,
      "/redirect-chain": "http://public.example/redirect-to-loopback",
      "/redirect-to-v6": `http://[::1]:${port}/secret`,
    };
    if (redirects[path]) {
      response.writeHead(302, { location: redirects[path] }).end();
      return;
    }
    response.writeHead(200, { "content-type": "text/plain" }).end(path === "/ok" ? "public page" : "INTERNAL SECRET PAGE");
  });
  await new Promise<void>((done) => site.listen(0, "127.0.0.1", done));
  siteUrl = `http://127.0.0.1:${(site.address() as { port: number }).port}`;
  const fakes = [provider.url, telegram.url, slack.url, discord.url].map((url) => new URL(url).origin);
  // The app's network: the fakes pass; public.example is served by the local site (as a public host would be);
  // anything else is recorded and never connected.
  const routedFetch: typeof fetch = async (input, init) => {
    const raw = typeof input === "string" ? input : input instanceof URL ? input.href : input.url;
    const url = new URL(raw);
    if (fakes.includes(url.origin)) return globalThis.fetch(input, init);
    fetched.push(url.href);
    if (url.hostname === "public.example") return globalThis.fetch(`${siteUrl}${url.pathname}${url.search}`, init);
    throw new TypeError("fetch failed (the test's network stops here)");
  };
  h = await buildAppOver({
    env: {
      HERMES_FETCH_ALLOW_PRIVATE: "0",
      OPENAI_API_KEY: envProviderKey,
      HERMES_RUNTIME: JSON.stringify({ provider: "openai", model: "gpt-sec", base_url: provider.url, retry: { max_retries: 0, time_scale: 0 } }),
      ...scripted.platformEnv,
      LIBSQL_AUTH_TOKEN: libsqlAuthToken,
    },
    overrides: {
      fetch: routedFetch,
      resolveHost: async (hostname) => {
        const addresses = dns[hostname];
        if (!addresses) throw new Error(`getaddrinfo ENOTFOUND ${hostname}`);
        return addresses;
      },
      waitUntil: (work) => void pending.push(work.catch(() => undefined)),
      sleep: async () => undefined,
    },
  });
  const runtime = { provider: "openai", model: "gpt-sec", base_url: provider.url, retry: { max_retries: 0, time_scale: 0 } };
  expect((await h.call("POST", "/v1/sessions", { id: "support", runtime })).status).toBe(201);
  expect((await h.call("POST", "/v1/sessions/support/messages", { content: "tenant default's private words" })).status).toBe(200);
}, 30_000);

afterAll(async () => {
  await settle();
  await h?.close();
  site?.closeAllConnections();
  site?.close();
  await scripted?.close();
});

describe("authentication", () => {
  const publicPaths = ["/health", "/openapi.json", "/docs"];
  const webhookPaths = ["/webhooks/telegram", "/webhooks/slack", "/webhooks/discord"];

  it("refuses every /v1 route of /openapi.json without a valid key (401), and only the documented routes are public", async () => {
    const document = await (await h.app.request("/openapi.json")).json();
    const operations = Object.entries(document.paths as Record<string, Record<string, unknown>>).flatMap(([path, methods]) =>
      Object.keys(methods)
        .filter((method) => ["get", "post", "put", "patch", "delete"].includes(method))
        .map((method) => ({ path, method: method.toUpperCase() })),
    );
    expect(operations.length).toBeGreaterThan(10);
    // Outside /v1 there are only the public and webhook routes.
    expect([...new Set(operations.map((operation) => operation.path).filter((path) => !path.startsWith("/v1/")))].sort()).toEqual([...publicPaths, ...webhookPaths].sort());
    const badCredentials: (Record<string, string> | undefined)[] = [
      undefined,
      { authorization: "" },
      { authorization: "Bearer" },
      { authorization: "Bearer " },
      { authorization: "Bearer wrong-key-0123456789abcdef" },
      { authorization: `Bearer ${testApiKey}x` },
      { authorization: `Bearer ${testApiKey.slice(0, -1)}` },
      { authorization: `Basic ${btoa(`user:${testApiKey}`)}` },
      { authorization: `Token ${testApiKey}` },
      { authorization: `Bearer ${testApiKey} ${testApiKey}` },
      { "x-api-key": testApiKey },
    ];
    const before = await databaseFingerprint(h.database.client);
    for (const { path, method } of operations.filter((operation) => operation.path.startsWith("/v1/"))) {
      const concrete = path.replace("{id}", "support");
      for (const headers of badCredentials) {
        const response = await h.app.request(concrete, {
          method,
          headers: { "content-type": "application/json", ...headers },
          ...(method === "GET" || method === "DELETE" ? {} : { body: JSON.stringify({ content: "hi", model: "m", messages: [{ role: "user", content: "hi" }] }) }),
        });
        const text = await record(response);
        expect(response.status, `${method} ${concrete} ${JSON.stringify(headers)}: ${text.slice(0, 200)}`).toBe(401);
        expect(response.headers.get("www-authenticate")).toBe("Bearer");
        expect(JSON.parse(text.slice(text.indexOf("\n\n") + 2)).error.code).toBe("unauthorized");
        expect(text).not.toContain("private words");
      }
    }
    expect(await databaseFingerprint(h.database.client)).toBe(before);
    for (const path of publicPaths) expect((await h.app.request(path)).status, path).toBe(200);
  }, 30_000);

  it("reaches nothing through path spellings without a key: 401 or 404, never data", async () => {
    const spellings = ["/v1/sessions", "/v1/sessions/", "//v1/sessions", "/v1//sessions", "/v1/./sessions", "/v1/x/../sessions", "/v1/%2e%2e/v1/sessions", "/V1/sessions", "/v1/Sessions", "/v1/%73essions", "/v1/sessions%2F", "/v1/sessions/support", "/v1/sessions/support/messages", "/v1/sessions/support/messages/", "/v1/sessions/support%2Fmessages", "/v1", "/v1/", "/v1/models", "/v1/chat/completions", "/health/../v1/sessions", "/docs/../v1/sessions/support", "/webhooks/../v1/sessions", "/%76%31/sessions"];
    for (const path of spellings) {
      for (const method of ["GET", "POST", "DELETE"]) {
        const response = await h.app.request(path, { method });
        const text = await record(response);
        expect([401, 404], `${method} ${path}: ${text.slice(0, 200)}`).toContain(response.status);
        expect(text).not.toContain("private words");
        expect(text).not.toContain('"sessions"');
      }
    }
  }, 30_000);

  it("refuses webhooks with a missing or bad signature (401) and stores nothing", async () => {
    const before = await databaseFingerprint(h.database.client);
    const update = JSON.stringify({ update_id: 1, message: { message_id: 1, date: 0, chat: { id: 1, type: "private" }, from: { id: 2, is_bot: false }, text: "forged" } });
    const now = Math.floor(Date.now() / 1000);
    const slackBody = JSON.stringify({ type: "event_callback", event_id: "Ev1", event: { type: "message", user: "U1", channel: "C1", ts: "1.1", text: "forged" } });
    const slackSign = (secret: string, timestamp: number, body: string) => `v0=${createHmac("sha256", secret).update(`v0:${timestamp}:${body}`).digest("hex")}`;
    const interaction = JSON.stringify({ type: 2, id: "1", token: "t", application_id: discordApplicationId, channel_id: "5", data: { name: "ask", options: [{ name: "prompt", type: 3, value: "forged" }] } });
    const discordSign = async (timestamp: number, body: string) => toHex(await crypto.subtle.sign("Ed25519", discordKeys.privateKey, new TextEncoder().encode(`${timestamp}${body}`)));
    const otherKeys = (await crypto.subtle.generateKey({ name: "Ed25519" }, true, ["sign", "verify"])) as CryptoKeyPair;
    const attempts: [string, Record<string, string>, string][] = [
      ["/webhooks/telegram", {}, update],
      ["/webhooks/telegram", { "x-telegram-bot-api-secret-token": "" }, update],
      ["/webhooks/telegram", { "x-telegram-bot-api-secret-token": `${telegramSecret}x` }, update],
      ["/webhooks/telegram", { "x-telegram-bot-api-secret-token": telegramSecret.toUpperCase() }, update],
      ["/webhooks/telegram", { "x-telegram-bot-api-secret-token": telegramToken }, update],
      ["/webhooks/slack", {}, slackBody],
      ["/webhooks/slack", { "x-slack-request-timestamp": String(now), "x-slack-signature": slackSign("wrong-secret", now, slackBody) }, slackBody],
      ["/webhooks/slack", { "x-slack-request-timestamp": String(now), "x-slack-signature": slackSign(slackSigningSecret, now, `${slackBody} `) }, slackBody],
      ["/webhooks/slack", { "x-slack-request-timestamp": String(now - 600), "x-slack-signature": slackSign(slackSigningSecret, now - 600, slackBody) }, slackBody],
      ["/webhooks/slack", { "x-slack-request-timestamp": String(now + 600), "x-slack-signature": slackSign(slackSigningSecret, now + 600, slackBody) }, slackBody],
      ["/webhooks/slack", { "x-slack-request-timestamp": `${now}.5`, "x-slack-signature": slackSign(slackSigningSecret, now, slackBody) }, slackBody],
      ["/webhooks/discord", {}, interaction],
      ["/webhooks/discord", { "x-signature-timestamp": String(now), "x-signature-ed25519": "00".repeat(64) }, interaction],
      ["/webhooks/discord", { "x-signature-timestamp": String(now), "x-signature-ed25519": await discordSign(now, `${interaction} `) }, interaction],
      ["/webhooks/discord", { "x-signature-timestamp": String(now - 600), "x-signature-ed25519": await discordSign(now - 600, interaction) }, interaction],
      ["/webhooks/discord", { "x-signature-timestamp": String(now), "x-signature-ed25519": toHex(await crypto.subtle.sign("Ed25519", otherKeys.privateKey, new TextEncoder().encode(`${now}${interaction}`))) }, interaction],
      ["/webhooks/discord", { "x-signature-timestamp": String(now), "x-signature-ed25519": "zz" }, interaction],
    ];
    for (const [path, headers, body] of attempts) {
      const response = await h.app.request(path, { method: "POST", headers: { "content-type": "application/json", ...headers }, body });
      const text = await record(response);
      expect(response.status, `${path} ${JSON.stringify(headers)}: ${text}`).toBe(401);
      expect(JSON.parse(text.slice(text.indexOf("\n\n") + 2)).error.code).toBe("unauthorized");
    }
    await settle();
    expect(await databaseFingerprint(h.database.client)).toBe(before);
    expect(provider.requests.some((request) => JSON.stringify(request.body).includes("forged"))).toBe(false);
  }, 30_000);
});

describe("tenant isolation", () => {
  const asOther = { authorization: `Bearer ${otherTenantKey}` };

  it("never lets another tenant reach a session through id spellings", async () => {
    const mine = async () => ({
      session: await (await h.call("GET", "/v1/sessions/support")).text(),
      messages: await (await h.call("GET", "/v1/sessions/support/messages?archived=true")).text(),
      turns: await (await h.call("GET", "/v1/sessions/support/turns")).text(),
    });
    const before = await mine();
    const spellings = ["support", "%73upport", "%73%75%70%70%6f%72%74", "Support", "SUPPORT", "support.", "support..", "support%2e", ".support", "support%00", "support%2F", "support%2f..", "support%20", "support%09", "%20support", "support;", "support%3B", "support%23", "..%2Fsupport", "%2e%2e%2fsupport", "default%3Asupport", "default:support", "support%C0%AE", "ſupport", "support%E2%80%8B"];
    for (const id of spellings) {
      const requests: [string, string, unknown?][] = [
        ["GET", `/v1/sessions/${id}`],
        ["GET", `/v1/sessions/${id}/messages?archived=true`],
        ["GET", `/v1/sessions/${id}/turns`],
        ["PATCH", `/v1/sessions/${id}`, { system_prompt: "hijacked" }],
        ["POST", `/v1/sessions/${id}/reset`],
        ["POST", `/v1/sessions/${id}/messages`, { content: "/undo" }],
        ["POST", `/v1/sessions/${id}/messages`, { content: "hijack" }],
        ["DELETE", `/v1/sessions/${id}`],
      ];
      for (const [method, path, body] of requests) {
        const response = await h.call(method, path, body, asOther);
        const text = await record(response);
        expect([400, 404], `${method} ${path}: ${text.slice(0, 200)}`).toContain(response.status);
        expect(text).not.toContain("private words");
      }
    }
    // X-Session-Id of another tenant's session opens the caller's own session of that name, never the other one.
    scripts.set("from the other tenant", { type: "text", text: "other tenant's answer" });
    const completion = await h.call("POST", "/v1/chat/completions", { model: "m", messages: [{ role: "user", content: "from the other tenant" }] }, { ...asOther, "x-session-id": "support" });
    expect(completion.status).toBe(200);
    expect(await record(completion)).not.toContain("private words");
    expect(provider.requests.filter((request) => JSON.stringify(request.body).includes("from the other tenant")).every((request) => !JSON.stringify(request.body).includes("private words"))).toBe(true);
    // The same Idempotency-Key under another tenant is another key: no replay of this tenant's result (the
    // other tenant now has its own "support", made by its X-Session-Id above, and gets its own turn there).
    const keyed = await h.call("POST", "/v1/sessions/support/messages", { content: "keyed" }, { "idempotency-key": "shared-key-1" });
    expect(keyed.status).toBe(200);
    const keyedTurn = (await keyed.json()).turn.id;
    const replayAttempt = await h.call("POST", "/v1/sessions/support/messages", { content: "keyed" }, { ...asOther, "idempotency-key": "shared-key-1" });
    expect(replayAttempt.status).toBe(200);
    expect(replayAttempt.headers.get("idempotent-replayed")).toBeNull();
    const otherBody = await replayAttempt.json();
    expect(otherBody.turn.id).not.toBe(keyedTurn);
    expect(otherBody.messages[0].seq).toBe(3);
    // Listing shows only the caller's sessions.
    const listed = await (await h.call("GET", "/v1/sessions?limit=200", undefined, asOther)).json();
    expect(listed.sessions.map((session: { id: string }) => session.id)).toEqual(["support"]);
    expect(JSON.stringify(listed)).not.toContain("private words");
    // This tenant's session is as it was, apart from the one keyed turn it ran itself.
    const after = await mine();
    expect(after.session.includes("hijacked")).toBe(false);
    expect(JSON.parse(after.messages).messages.slice(0, 2)).toEqual(JSON.parse(before.messages).messages);
    expect(JSON.parse(after.messages).messages.map((message: { content: string }) => message.content).slice(2)).toEqual(["keyed", "ok"]);
  }, 30_000);
});

describe("web_fetch address guard (HERMES_FETCH_ALLOW_PRIVATE off)", () => {
  it("refuses private, loopback, link-local and metadata targets, directly, by redirect and by DNS", async () => {
    const port = new URL(siteUrl).port;
    const refused = [
      `${siteUrl}/direct`,
      `http://localhost:${port}/secret`,
      `http://LOCALHOST.:${port}/secret`,
      `http://app.localhost:${port}/secret`,
      `http://[::1]:${port}/secret`,
      `http://[::ffff:127.0.0.1]:${port}/secret`,
      `http://[::ffff:7f00:1]:${port}/secret`,
      `http://2130706433:${port}/secret`,
      `http://0x7f.1:${port}/secret`,
      `http://0177.0.0.1:${port}/secret`,
      `http://127.1:${port}/secret`,
      `http://0:${port}/secret`,
      "http://169.254.169.254/latest/meta-data/",
      "http://[fe80::1]/",
      "http://metadata.google.internal/computeMetadata/v1/",
      "http://10.0.0.1/",
      "http://172.16.5.4/",
      "http://192.168.1.1/",
      "http://100.64.0.1/",
      "http://intranet/",
      "http://printer.local/",
      `http://rebind.example:${port}/secret`,
      "http://mixed.example/",
      `http://v6-loopback.example:${port}/secret`,
      `http://mapped.example:${port}/secret`,
      "http://metadata.example/latest/meta-data/",
      "http://public.example/redirect-to-loopback",
      "http://public.example/redirect-to-metadata",
      "http://public.example/redirect-to-rebind",
      "http://public.example/redirect-chain",
      "http://public.example/redirect-to-v6",
      `file:///etc/passwd`,
      `ftp://127.0.0.1:${port}/`,
    ];
    const calls = [...refused, "http://public.example/ok"].map((url, index) => ({ id: `call_ssrf_${index}`, name: "web_fetch", arguments: JSON.stringify({ url }) }));
    expect((await h.call("POST", "/v1/sessions", { id: "fetcher", runtime: { provider: "openai", model: "gpt-sec", base_url: provider.url, toolsets: ["web"], retry: { max_retries: 0, time_scale: 0 } } })).status).toBe(201);
    scripts.set("fetch them all", { type: "tool_calls", calls });
    const response = await h.call("POST", "/v1/sessions/fetcher/messages", { content: "fetch them all" });
    const text = await record(response);
    expect(response.status, text.slice(0, 300)).toBe(200);
    const results = (JSON.parse(text.slice(text.indexOf("\n\n") + 2)).messages as { role: string; tool_call_id: string; content: string; is_error?: boolean }[]).filter((message) => message.role === "tool");
    expect(results).toHaveLength(calls.length);
    for (const [index, url] of refused.entries()) {
      const result = results.find((entry) => entry.tool_call_id === `call_ssrf_${index}`)!;
      expect(result.is_error, `${url}: ${result.content}`).toBe(true);
      expect(result.content, url).toMatch(/^Refused to fetch/);
      expect(result.content).not.toContain("INTERNAL SECRET PAGE");
    }
    const allowed = results.find((entry) => entry.tool_call_id === `call_ssrf_${refused.length}`)!;
    expect(allowed.is_error).toBeUndefined();
    expect(allowed.content).toContain("public page");
    // Nothing private was ever requested: the only hops that went out were to the public host.
    expect(fetched.filter((url) => new URL(url).hostname !== "public.example")).toEqual([]);
    expect(siteHits.filter((path) => path === "/secret" || path === "/direct")).toEqual([]);
  }, 30_000);
});

describe("secrets", () => {
  // A runtime names the variable its provider key is read from (api_key_env), and base_url may point anywhere:
  // naming one of the server's own secrets sends it as the bearer key to whatever host the caller chose. Any
  // holder of an API key (any tenant) could read HERMES_SECRET_KEY, every tenant's API key, the platform tokens.
  it("cannot be read through a runtime's api_key_env and sent to a base_url", async () => {
    const serverSecrets = ["HERMES_SECRET_KEY", "HERMES_API_KEYS", "TELEGRAM_BOT_TOKEN", "TELEGRAM_WEBHOOK_SECRET", "SLACK_SIGNING_SECRET", "SLACK_BOT_TOKEN", "DISCORD_BOT_TOKEN", "LIBSQL_AUTH_TOKEN"];
    const asOther = { authorization: `Bearer ${otherTenantKey}` };
    const seen = provider.requests.length;
    for (const [index, variable] of serverSecrets.entries()) {
      const id = `exfiltrate-${index}`;
      const attempts = [
        { id, runtime: { provider: "custom", model: "m", base_url: provider.url, api_key_env: variable, retry: { max_retries: 0, time_scale: 0 } } },
        { id: `${id}-fallback`, runtime: { provider: "custom", model: "m", base_url: "http://127.0.0.1:9/v1", retry: { max_retries: 0, time_scale: 0 }, fallback: [{ provider: "custom", model: "n", base_url: provider.url, api_key_env: variable }] } },
      ];
      for (const body of attempts) {
        const created = await h.call("POST", "/v1/sessions", body, asOther);
        await record(created);
        if (created.status !== 201) {
          expect(created.status).toBe(400);
          continue;
        }
        await record(await h.call("POST", `/v1/sessions/${body.id}/messages`, { content: "who am I" }, asOther));
      }
      // The same through PATCH of an existing session.
      await h.call("POST", "/v1/sessions", { id: `${id}-patched`, runtime: { provider: "custom", model: "m", base_url: provider.url, retry: { max_retries: 0, time_scale: 0 } } }, asOther);
      const patched = await h.call("PATCH", `/v1/sessions/${id}-patched`, { runtime: { api_key_env: variable } }, asOther);
      await record(patched);
      if (patched.status === 200) await record(await h.call("POST", `/v1/sessions/${id}-patched/messages`, { content: "who am I" }, asOther));
    }
    const sent = provider.requests.slice(seen).map((request) => JSON.stringify(request.headers));
    expect([...new Set(sent.flatMap((headers) => leakedSecrets(headers, secrets)))]).toEqual([]);
  }, 30_000);

  it("never appear in responses, logs or the database file", async () => {
    const runtime = {
      provider: "openai",
      model: "gpt-sec",
      base_url: provider.url,
      api_key: inlineProviderKey,
      fallback: [{ provider: "openai", model: "gpt-fallback", base_url: provider.url, api_key: fallbackInlineKey }],
      retry: { max_retries: 0, time_scale: 0 },
    };
    const created = await h.call("POST", "/v1/sessions", { id: "vault", runtime });
    expect(created.status).toBe(201);
    const createdText = await record(created);
    expect(JSON.parse(createdText.slice(createdText.indexOf("\n\n") + 2)).runtime).toMatchObject({ api_key_set: true, fallback: [{ api_key_set: true }] });
    await record(await h.call("GET", "/v1/sessions/vault"));
    await record(await h.call("GET", "/v1/sessions?limit=200"));
    await record(await h.call("PATCH", "/v1/sessions/vault", { runtime: { model: "gpt-sec-2" } }));
    // The inline key reaches the provider, and only the provider.
    scripts.set("use the key", { type: "text", text: "used" });
    expect((await h.call("POST", "/v1/sessions/vault/messages", { content: "use the key" })).status).toBe(200);
    expect(provider.requests.at(-1)!.headers.authorization).toBe(`Bearer ${inlineProviderKey}`);
    // Providers that echo the key (and the bearer header) in their error bodies: the 502 and the logs stay clean.
    const echo = (key: string): ScriptStep => ({ type: "error", status: 401, body: { error: { message: `Incorrect API key provided: ${key}. Authorization: Bearer ${key}`, type: "invalid_request_error", code: "invalid_api_key" } } });
    scripts.set("echo the key", echo(inlineProviderKey));
    const failed = await h.call("POST", "/v1/sessions/vault/messages", { content: "echo the key" });
    expect(failed.status).toBe(502);
    await record(failed);
    const streamed = await h.call("POST", "/v1/sessions/vault/messages", { content: "echo the key", stream: true });
    expect(streamed.status).toBe(200);
    expect(await record(streamed)).toContain("event: error");
    scripts.set("echo on completions", echo(envProviderKey));
    await record(await h.call("POST", "/v1/chat/completions", { model: "m", messages: [{ role: "user", content: "echo on completions" }] }));
    await record(await h.call("POST", "/v1/chat/completions", { model: "m", stream: true, messages: [{ role: "user", content: "echo on completions" }] }));
    await record(await h.call("GET", "/v1/models"));
    await record(await h.call("POST", "/v1/sessions/vault/messages", { content: "/status" }));
    // Platform sends that fail (the token is in Telegram's URL path, Slack's bearer header): logged without it.
    telegram.fault("sendMessage", { type: "reset" }, { type: "reset" }, { type: "reset" }, { type: "reset" }, { type: "error", status: 500 });
    slack.fault("chat.postMessage", { type: "error", status: 500 }, { type: "error", status: 500 }, { type: "error", status: 500 }, { type: "error", status: 500 });
    const update = { update_id: 424_242, message: { message_id: 1, date: 0, chat: { id: 4242, type: "private" }, from: { id: 7, is_bot: false }, text: "hello from telegram" } };
    await record(await h.app.request("/webhooks/telegram", { method: "POST", headers: { "content-type": "application/json", "x-telegram-bot-api-secret-token": telegramSecret }, body: JSON.stringify(update) }));
    const slackBody = JSON.stringify({ type: "event_callback", event_id: "EvSecret", event: { type: "message", user: "U1", channel: "C1", ts: "1700000000.000100", text: "hello from slack" } });
    const now = Math.floor(Date.now() / 1000);
    await record(await h.app.request("/webhooks/slack", { method: "POST", headers: { "content-type": "application/json", "x-slack-request-timestamp": String(now), "x-slack-signature": `v0=${createHmac("sha256", slackSigningSecret).update(`v0:${now}:${slackBody}`).digest("hex")}` }, body: slackBody }));
    await settle();
    expect(h.logs.some((entry) => entry.event === "platform_send_failed")).toBe(true);

    for (const transcript of transcripts) expect(leakedSecrets(transcript, secrets), transcript.slice(0, 300)).toEqual([]);
    expect(leakedSecrets(JSON.stringify(h.logs), secrets)).toEqual([]);
    expect(secretsInDatabaseFiles(databasePath(h.database.url), secrets)).toEqual([]);
  }, 30_000);
});
