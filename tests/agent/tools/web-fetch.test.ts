/// <reference types="node" />
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { executeTool, parseToolArguments } from "../../../src/agent/tools/registry.ts";
import type { ToolContext } from "../../../src/agent/tools/types.ts";
import { createWebFetchTool, htmlToText, webFetchTool } from "../../../src/agent/tools/web-fetch.ts";
import type { NotesStore } from "../../../src/state/notes.ts";

const PAGE = `<!doctype html><html><head><title>Tide &amp; Times</title>
<style>body { color: red }</style><script>alert("hidden")</script></head>
<body><h1>Harbour&nbsp;report</h1><p>High tide at <b>06:12</b>,   low tide at 12:30.</p>
<!-- a comment --><ul><li>Wind: 5 &lt; 10 knots</li><li>Swell &#8212; calm &#x1F30A;</li></ul>
<noscript>enable scripts</noscript></body></html>`;

let server: Server;
let origin: string;
let requests: string[] = [];

function route(request: IncomingMessage, response: ServerResponse): void {
  requests.push(request.url ?? "");
  switch (request.url) {
    case "/page":
      response.writeHead(200, { "content-type": "text/html; charset=utf-8" });
      response.end(PAGE);
      return;
    case "/redirect":
      response.writeHead(302, { location: "/page" });
      response.end();
      return;
    case "/loop":
      response.writeHead(301, { location: "/loop" });
      response.end();
      return;
    case "/big":
      // 5 MB of text in 64 KB chunks; the tool must stop reading long before the end.
      response.writeHead(200, { "content-type": "text/plain" });
      for (let index = 0; index < 80; index++) response.write("a".repeat(65_536));
      response.end();
      return;
    case "/latin1":
      response.writeHead(200, { "content-type": "text/plain; charset=iso-8859-1" });
      response.end(Buffer.from([0x63, 0x61, 0x66, 0xe9]));
      return;
    case "/image":
      response.writeHead(200, { "content-type": "image/png" });
      response.end(Buffer.alloc(1024));
      return;
    case "/missing":
      response.writeHead(404, { "content-type": "text/plain" });
      response.end("no such page");
      return;
    default:
      response.writeHead(200, { "content-type": "text/plain" });
      response.end("secret internal data");
  }
}

beforeAll(async () => {
  server = createServer(route);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});
beforeEach(() => {
  requests = [];
});

function context(overrides: Partial<ToolContext> = {}): ToolContext {
  return {
    sessionPk: 1,
    notes: {} as NotesStore, // web_fetch never touches the store
    fetch: globalThis.fetch,
    allowPrivateFetch: false,
    signal: new AbortController().signal,
    ...overrides,
  };
}

async function fetchTool(args: Record<string, unknown>, overrides: Partial<ToolContext> = {}, tool = webFetchTool) {
  const parsed = parseToolArguments(tool, JSON.stringify(args));
  if (!parsed.ok) throw new Error(parsed.error);
  return executeTool(tool, parsed.value, context(overrides), 10_000);
}

describe("web_fetch against private addresses", () => {
  it.each(["/page", "/secret"])("refuses %s on 127.0.0.1 without sending a request", async (path) => {
    const result = await fetchTool({ url: `${origin}${path}` });
    expect(result.isError).toBe(true);
    expect(result.content).toMatch(/^Refused to fetch http:\/\/127\.0\.0\.1:\d+\/\w+: 127\.0\.0\.1 is a loopback address\.$/u);
    expect(requests).toEqual([]);
  });

  it("refuses the same server spelled as a number, in hex, or as localhost", async () => {
    const port = new URL(origin).port;
    for (const host of ["2130706433", "0x7f.1", "localhost", "[::ffff:127.0.0.1]"]) {
      expect((await fetchTool({ url: `http://${host}:${port}/secret` })).isError).toBe(true);
    }
    expect(requests).toEqual([]);
  });

  it("refuses a public-looking name that resolves to loopback", async () => {
    const port = new URL(origin).port;
    const resolveHost = async () => ["127.0.0.1"];
    const fetchThroughName: typeof fetch = (input, init) =>
      globalThis.fetch(String(input).replace("innocent.example", "127.0.0.1"), init);
    const result = await fetchTool({ url: `http://innocent.example:${port}/secret` }, { resolveHost, fetch: fetchThroughName });
    expect(result.content).toContain("innocent.example resolves to 127.0.0.1, a loopback address");
    expect(requests).toEqual([]);
  });

  it("refuses a redirect from an allowed public host to a private address", async () => {
    const hops: string[] = [];
    // Stands in for a real public server whose answer is a redirect into our network.
    const publicThenLocal: typeof fetch = async (input, init) => {
      const url = String(input);
      hops.push(url);
      if (url.startsWith("https://public.example/")) {
        expect(init?.redirect).toBe("manual");
        return new Response(null, { status: 302, headers: { location: `${origin}/secret` } });
      }
      return globalThis.fetch(input, init);
    };
    const resolveHost = async (hostname: string) => (hostname === "public.example" ? ["93.184.216.34"] : []);
    const result = await fetchTool({ url: "https://public.example/start" }, { fetch: publicThenLocal, resolveHost });
    expect(result).toEqual({
      content: `Refused to fetch ${origin}/secret (reached by redirect 1): 127.0.0.1 is a loopback address.`,
      isError: true,
    });
    expect(hops).toEqual(["https://public.example/start"]);
    expect(requests).toEqual([]);
  });

  it("refuses a redirect to the metadata service", async () => {
    const redirectToMetadata: typeof fetch = async () =>
      new Response(null, { status: 307, headers: { location: "http://169.254.169.254/latest/meta-data/" } });
    const result = await fetchTool({ url: "https://public.example/" }, { fetch: redirectToMetadata });
    expect(result.content).toContain("link-local address");
  });
});

describe("web_fetch with private addresses allowed", () => {
  const allowed = { allowPrivateFetch: true };

  it("reduces HTML to text", async () => {
    const result = await fetchTool({ url: `${origin}/page` }, allowed);
    expect(result.isError).toBeUndefined();
    expect(result.content).toBe(
      [
        `URL: ${origin}/page\nStatus: 200\nContent-Type: text/html\nTitle: Tide & Times`,
        "Harbour report\n\nHigh tide at 06:12, low tide at 12:30.\n\n- Wind: 5 < 10 knots\n- Swell — calm 🌊",
      ].join("\n\n"),
    );
    expect(result.content).not.toMatch(/alert|color: red|enable scripts|comment/u);
  });

  it("follows redirects, checking each hop, up to a limit", async () => {
    const result = await fetchTool({ url: `${origin}/redirect` }, allowed);
    expect(result.content).toContain(`URL: ${origin}/page`);
    expect(result.content).toContain("High tide");
    expect(requests).toEqual(["/redirect", "/page"]);

    requests = [];
    const loop = await fetchTool({ url: `${origin}/loop` }, allowed);
    expect(loop).toEqual({ content: "Stopped after 5 redirects; the last pointed to /loop.", isError: true });
    expect(requests).toHaveLength(6);
  });

  it("respects max_chars", async () => {
    const result = await fetchTool({ url: `${origin}/page`, max_chars: 7 }, allowed);
    expect(result.content).toContain("\n\nHarbour\n\n[output truncated to 7 of ");
  });

  it("stops reading the body at the byte cap", async () => {
    const capped = createWebFetchTool({ maxBodyBytes: 100_000 });
    const result = await fetchTool({ url: `${origin}/big`, max_chars: 100_000 }, allowed, capped);
    expect(result.content).toContain("[body cut at 100000 bytes; the rest was not downloaded]");
    const text = result.content.split("\n\n")[1] ?? "";
    expect(text).toBe("a".repeat(100_000));

    const defaultCap = await fetchTool({ url: `${origin}/big` }, allowed);
    expect(defaultCap.content).toContain(`[body cut at ${2 * 1024 * 1024} bytes`);
    expect(defaultCap.content).toContain("[output truncated to 20000 of 2097152 characters]");
  });

  it("decodes the declared charset, skips binary bodies and flags error statuses", async () => {
    expect((await fetchTool({ url: `${origin}/latin1` }, allowed)).content).toMatch(/\n\ncafé$/u);
    const image = await fetchTool({ url: `${origin}/image` }, allowed);
    expect(image).toMatchObject({ isError: true, content: expect.stringContaining("Not a text resource") });
    const missing = await fetchTool({ url: `${origin}/missing` }, allowed);
    expect(missing).toEqual({ content: `URL: ${origin}/missing\nStatus: 404\nContent-Type: text/plain\n\nno such page`, isError: true });
  });

  it("reports a connection failure readably", async () => {
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, "127.0.0.1", resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise((resolve) => closed.close(resolve));
    const result = await fetchTool({ url: `http://127.0.0.1:${port}/` }, allowed);
    expect(result.isError).toBe(true);
    expect(result.content).toMatch(new RegExp(`^Could not fetch http://127\\.0\\.0\\.1:${port}/: .*ECONNREFUSED`, "u"));
  });

  it("refuses non-http schemes and unparseable URLs", async () => {
    expect((await fetchTool({ url: "file:///etc/passwd" }, allowed)).content).toContain("only http and https");
    expect((await fetchTool({ url: "not a url" }, allowed)).content).toBe("Invalid URL: not a url");
  });
});

describe("htmlToText", () => {
  it("keeps a stray < as text and survives hostile markup in linear time", () => {
    expect(htmlToText("<p>a < b and c>d</p>").text).toBe("a < b and c>d");
    expect(htmlToText("<div>one\ntwo</div><pre>x\ny</pre><table><tr><td>1</td><td>2</td></tr></table>").text).toBe(
      "one two\n\nx\ny\n\n1 2",
    );
    const hostile = "<script".repeat(200_000) + "<".repeat(200_000) + "<!--".repeat(100_000) + "&amp".repeat(100_000);
    const started = Date.now();
    htmlToText(hostile);
    htmlToText("<a ".repeat(300_000));
    expect(Date.now() - started).toBeLessThan(2_000);
  });
});
