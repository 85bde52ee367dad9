// web_fetch: GET one http(s) URL and return its text. Every hop (the URL and each redirect target) passes the
// address guard before any request is sent, the body read stops at a byte cap, and HTML is reduced to text
// so the model's context is spent on content rather than markup.
import { checkUrl } from "./address-guard.ts";
import type { Tool, ToolContext, ToolOutput } from "./types.ts";

export interface WebFetchOptions {
  /** Bytes read from the body at most; the rest is never downloaded. */
  maxBodyBytes?: number;
  /** Redirects followed at most; each target is checked like the first URL. */
  maxRedirects?: number;
  timeoutMs?: number;
}

/** 2 MB of HTML is far more than the 100,000-character output ceiling needs once markup is stripped. */
const DEFAULT_MAX_BODY_BYTES = 2 * 1024 * 1024;
const DEFAULT_MAX_REDIRECTS = 5;
const DEFAULT_MAX_CHARS = 20_000;
const MAX_CHARS_CEILING = 100_000;
const REDIRECT_STATUSES = new Set([301, 302, 303, 307, 308]);

export function createWebFetchTool(options: WebFetchOptions = {}): Tool {
  const maxBodyBytes = options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES;
  const maxRedirects = options.maxRedirects ?? DEFAULT_MAX_REDIRECTS;
  return {
    name: "web_fetch",
    toolset: "web",
    description:
      "Fetch a public web page or text resource with HTTP GET and return its text (HTML is reduced to plain " +
      "text). Private, loopback and cloud-metadata addresses are refused.",
    parameters: {
      type: "object",
      properties: {
        url: { type: "string", minLength: 1, maxLength: 4096, description: "Absolute http:// or https:// URL." },
        max_chars: {
          type: "integer",
          minimum: 1,
          maximum: MAX_CHARS_CEILING,
          description: `Most characters of text to return (default ${DEFAULT_MAX_CHARS}).`,
        },
      },
      required: ["url"],
      additionalProperties: false,
    },
    parallelSafe: true,
    timeoutMs: options.timeoutMs ?? 30_000,
    async execute(args, context) {
      const maxChars = typeof args.max_chars === "number" ? args.max_chars : DEFAULT_MAX_CHARS;
      return fetchAsText(String(args.url), maxChars, maxBodyBytes, maxRedirects, context);
    },
  };
}

export const webFetchTool: Tool = createWebFetchTool();

async function fetchAsText(
  rawUrl: string,
  maxChars: number,
  maxBodyBytes: number,
  maxRedirects: number,
  context: ToolContext,
): Promise<ToolOutput> {
  let url: URL;
  try {
    url = new URL(rawUrl);
  } catch {
    return { content: `Invalid URL: ${rawUrl.slice(0, 200)}`, isError: true };
  }

  for (let hop = 0; ; hop++) {
    const check = await checkUrl(url, { allowPrivate: context.allowPrivateFetch, resolveHost: context.resolveHost });
    if (!check.allowed) {
      const where = hop === 0 ? "" : ` (reached by redirect ${hop})`;
      return { content: `Refused to fetch ${url.href}${where}: ${check.reason}.`, isError: true };
    }

    let response: Response;
    try {
      response = await context.fetch(url.href, {
        method: "GET",
        redirect: "manual",
        signal: context.signal,
        headers: {
          accept: "text/html, text/plain;q=0.9, application/json;q=0.8, */*;q=0.5",
          "user-agent": "hermes-edge web_fetch",
        },
      });
    } catch (error) {
      if (context.signal.aborted) throw error;
      return { content: `Could not fetch ${url.href}: ${describeFetchError(error)}.`, isError: true };
    }

    const location = response.headers.get("location");
    if (REDIRECT_STATUSES.has(response.status) && location !== null) {
      await response.body?.cancel().catch(() => undefined);
      if (hop >= maxRedirects) {
        return { content: `Stopped after ${maxRedirects} redirects; the last pointed to ${location}.`, isError: true };
      }
      try {
        url = new URL(location, url);
      } catch {
        return { content: `Redirect to an invalid URL: ${location.slice(0, 200)}`, isError: true };
      }
      continue;
    }

    return renderResponse(url, response, maxChars, maxBodyBytes);
  }
}

/** Node's fetch says only "fetch failed"; the useful part (ECONNREFUSED, ENOTFOUND, a TLS error) is the cause. */
function describeFetchError(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const cause = error.cause;
  const detail = cause instanceof Error ? cause.message : typeof cause === "string" ? cause : "";
  return detail === "" || detail === error.message ? error.message : `${error.message} (${detail})`;
}

async function renderResponse(url: URL, response: Response, maxChars: number, maxBodyBytes: number): Promise<ToolOutput> {
  const contentType = response.headers.get("content-type") ?? "";
  const mediaType = (contentType.split(";")[0] ?? "").trim().toLowerCase();
  const header = [`URL: ${url.href}`, `Status: ${response.status}`];
  if (mediaType !== "") header.push(`Content-Type: ${mediaType}`);
  const isError = response.status >= 400;

  if (!isTextual(mediaType)) {
    await response.body?.cancel().catch(() => undefined);
    return { content: `${header.join("\n")}\n\nNot a text resource; the body was not read.`, isError: true };
  }

  const body = await readCapped(response, maxBodyBytes);
  let text = decode(body.bytes, contentType);
  if (mediaType === "text/html" || mediaType === "application/xhtml+xml" || (mediaType === "" && looksLikeHtml(text))) {
    const page = htmlToText(text);
    if (page.title !== "") header.push(`Title: ${page.title}`);
    text = page.text;
  }

  const notes: string[] = [];
  if (body.truncated) notes.push(`[body cut at ${maxBodyBytes} bytes; the rest was not downloaded]`);
  const characters = [...text];
  if (characters.length > maxChars) {
    text = characters.slice(0, maxChars).join("");
    notes.push(`[output truncated to ${maxChars} of ${characters.length} characters]`);
  }
  const parts = [header.join("\n"), text === "" ? "(empty body)" : text, ...notes];
  return isError ? { content: parts.join("\n\n"), isError } : { content: parts.join("\n\n") };
}

function isTextual(mediaType: string): boolean {
  return (
    mediaType === "" ||
    mediaType.startsWith("text/") ||
    mediaType.endsWith("+json") ||
    mediaType.endsWith("+xml") ||
    ["application/json", "application/xml", "application/javascript", "application/xhtml+xml"].includes(mediaType)
  );
}

/** Reads at most `maxBytes` and cancels the stream there, so a huge or endless body costs nothing more. */
async function readCapped(response: Response, maxBytes: number): Promise<{ bytes: Uint8Array; truncated: boolean }> {
  if (response.body === null) return { bytes: new Uint8Array(0), truncated: false };
  const reader = response.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  let truncated = false;
  try {
    while (true) {
      const { done, value } = await reader.read();
      if (done) break;
      const room = maxBytes - size;
      if (value.byteLength >= room) {
        chunks.push(value.subarray(0, room));
        size += room;
        // Exactly at the cap with nothing left is not a truncation; find out with one more read.
        truncated = value.byteLength > room || !(await reader.read()).done;
        break;
      }
      chunks.push(value);
      size += value.byteLength;
    }
  } finally {
    if (truncated) await reader.cancel().catch(() => undefined);
    reader.releaseLock();
  }
  const bytes = new Uint8Array(size);
  let offset = 0;
  for (const chunk of chunks) {
    bytes.set(chunk, offset);
    offset += chunk.byteLength;
  }
  return { bytes, truncated };
}

function decode(bytes: Uint8Array, contentType: string): string {
  const charset = /charset\s*=\s*"?([\w.:-]+)/iu.exec(contentType)?.[1];
  try {
    return new TextDecoder(charset ?? "utf-8").decode(bytes);
  } catch {
    // An unknown charset label: UTF-8 with replacement characters beats no text at all.
    return new TextDecoder("utf-8").decode(bytes);
  }
}

function looksLikeHtml(text: string): boolean {
  return /^\s*(<!doctype html|<html[\s>])/iu.test(text.slice(0, 1024));
}

/** Elements whose content is never readable text. */
const SKIPPED_ELEMENTS = new Set(["script", "style", "noscript", "template", "svg", "head", "title"]);
/** Elements that stand apart as paragraphs. */
const PARAGRAPH_ELEMENTS = new Set([
  "address", "article", "aside", "blockquote", "dl", "figure", "footer", "form", "h1", "h2", "h3", "h4", "h5",
  "h6", "header", "hr", "main", "nav", "ol", "p", "pre", "section", "table", "ul",
]);
/** Elements that start a new line. */
const LINE_ELEMENTS = new Set(["br", "dd", "div", "dt", "figcaption", "tr"]);

/**
 * Reduces HTML to readable text in one forward scan. Regular expressions over tags backtrack quadratically on
 * hostile input (thousands of unclosed `<script` or `<`), and this runs on up to 2 MB of untrusted bytes, so
 * every step here moves forward with indexOf.
 */
export function htmlToText(html: string): { title: string; text: string } {
  const output: string[] = [];
  let position = 0;
  let preDepth = 0;
  // Source line breaks are insignificant in HTML (except inside <pre>); tags decide where lines break.
  const pushText = (text: string): void => {
    output.push(preDepth > 0 ? text : text.replace(/[\r\n]+/gu, " "));
  };

  while (position < html.length) {
    const open = html.indexOf("<", position);
    if (open === -1) {
      pushText(html.slice(position));
      break;
    }
    pushText(html.slice(position, open));

    if (html.startsWith("<!--", open)) {
      const end = html.indexOf("-->", open + 4);
      position = end === -1 ? html.length : end + 3;
      continue;
    }
    const name = /^<\/?([a-z][a-z0-9-]*)/iu.exec(html.slice(open, open + 64))?.[1]?.toLowerCase();
    const isDeclaration = html[open + 1] === "!" || html[open + 1] === "?";
    if (name === undefined && !isDeclaration) {
      output.push("<"); // "a < b" is text, not a tag
      position = open + 1;
      continue;
    }
    const close = html.indexOf(">", open + 1);
    if (close === -1) break; // an unterminated tag at the end hides nothing worth reading
    position = close + 1;
    if (name === undefined) continue;

    const isEndTag = html[open + 1] === "/";
    if (!isEndTag && SKIPPED_ELEMENTS.has(name)) {
      const end = findEndTag(html, name, position);
      position = end === null ? html.length : end.after;
      continue;
    }
    if (name === "pre") preDepth = Math.max(0, preDepth + (isEndTag ? -1 : 1));
    if (PARAGRAPH_ELEMENTS.has(name)) output.push("\n\n");
    else if (LINE_ELEMENTS.has(name)) output.push("\n");
    else if (name === "li" && !isEndTag) output.push("\n- ");
    else if (name === "td" || name === "th") output.push(" ");
  }

  return { title: findTitle(html), text: collapseWhitespace(decodeEntities(output.join(""))) };
}

/** Where `</name …>` starts and ends, searching from `from`; a fixed-string search, so linear. */
function findEndTag(html: string, name: string, from: number): { start: number; after: number } | null {
  const pattern = new RegExp(`</${name}`, "giu");
  pattern.lastIndex = from;
  const match = pattern.exec(html);
  if (match === null) return null;
  const close = html.indexOf(">", match.index);
  return { start: match.index, after: close === -1 ? html.length : close + 1 };
}

/** The document title lives in <head>, which the text scan skips. */
function findTitle(html: string): string {
  const start = /<title[\s>]/iu.exec(html.slice(0, 65_536));
  if (start === null) return "";
  const tagClose = html.indexOf(">", start.index);
  if (tagClose === -1) return "";
  const contentStart = tagClose + 1;
  const end = findEndTag(html, "title", contentStart);
  const raw = html.slice(contentStart, end === null ? Math.min(html.length, contentStart + 1000) : end.start);
  return collapseWhitespace(decodeEntities(raw)).slice(0, 300);
}

const NAMED_ENTITIES: Record<string, string> = {
  amp: "&", lt: "<", gt: ">", quot: '"', apos: "'", nbsp: " ", ndash: "–", mdash: "—", hellip: "…",
  lsquo: "‘", rsquo: "’", ldquo: "“", rdquo: "”", laquo: "«", raquo: "»", copy: "©", reg: "®", trade: "™",
  middot: "·", bull: "•", deg: "°", times: "×", euro: "€", pound: "£", yen: "¥", cent: "¢", sect: "§",
};

export function decodeEntities(text: string): string {
  return text.replace(/&(#x[0-9a-f]{1,6}|#[0-9]{1,7}|[a-z][a-z0-9]{1,31});/giu, (entity, body: string) => {
    if (body.startsWith("#")) {
      const code = body[1] === "x" || body[1] === "X" ? Number.parseInt(body.slice(2), 16) : Number(body.slice(1));
      return code > 0 && code <= 0x10ffff && !(code >= 0xd800 && code <= 0xdfff) ? String.fromCodePoint(code) : entity;
    }
    return NAMED_ENTITIES[body.toLowerCase()] ?? entity;
  });
}

function collapseWhitespace(text: string): string {
  return text
    .replace(/[^\S\n]+/gu, " ")
    .split("\n")
    .map((line) => line.trim())
    .join("\n")
    .replace(/\n{3,}/gu, "\n\n")
    .trim();
}
