/// <reference types="node" />
// Runs one fake provider in its own process, for crash tests and benchmarks that must kill or
// outlive the server:  npx tsx tests/support/fake-provider-main.ts openai|anthropic [flags]
//   --api-key KEY    require this key (env FAKE_PROVIDER_API_KEY)
//   --text TEXT      text of the fallback answer (default "ok")
//   --script FILE    JSON file (env FAKE_PROVIDER_SCRIPT): an array of steps queued in order, a single
//                    step used as the fallback for every request, or { "script": [...], "fallback": step }
//   --port N         listen on a fixed port so a restarted server keeps its URL
// Prints one line {"url": "..."} on stdout once listening, then serves until killed.
import { readFileSync } from "node:fs";
import { startFakeAnthropic, startFakeOpenAI } from "./fake-provider.ts";
import type { ScriptStep } from "./fake-provider.ts";

function flag(name: string): string | undefined {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : undefined;
}

function fail(message: string): never {
  process.stderr.write(`fake-provider-main: ${message}\n`);
  process.exit(2);
}

const kind = process.argv[2];
if (kind !== "openai" && kind !== "anthropic") fail("first argument must be 'openai' or 'anthropic'");

const apiKey = flag("api-key") ?? process.env.FAKE_PROVIDER_API_KEY;
const portText = flag("port");
const port = portText === undefined ? 0 : Number(portText);
if (!Number.isInteger(port) || port < 0) fail(`bad --port ${String(portText)}`);

const start = kind === "openai" ? startFakeOpenAI : startFakeAnthropic;
const fake = await start({ ...(apiKey ? { apiKey } : {}), port });
fake.setFallback({ type: "text", text: flag("text") ?? "ok" });

const scriptFile = flag("script") ?? process.env.FAKE_PROVIDER_SCRIPT;
if (scriptFile) {
  let loaded: unknown;
  try {
    loaded = JSON.parse(readFileSync(scriptFile, "utf8"));
  } catch (error) {
    fail(`cannot read script ${scriptFile}: ${String(error)}`);
  }
  if (Array.isArray(loaded)) {
    fake.script(...(loaded as ScriptStep[]));
  } else if (loaded && typeof loaded === "object" && "type" in loaded) {
    fake.setFallback(loaded as ScriptStep);
  } else if (loaded && typeof loaded === "object") {
    const { script, fallback } = loaded as { script?: ScriptStep[]; fallback?: ScriptStep };
    if (script) fake.script(...script);
    if (fallback) fake.setFallback(fallback);
  } else {
    fail(`script ${scriptFile} must hold an array, a step or { script, fallback }`);
  }
}

process.stdout.write(`${JSON.stringify({ url: fake.url })}\n`);

const stop = () => {
  fake.close().finally(() => process.exit(0));
};
process.on("SIGTERM", stop);
process.on("SIGINT", stop);
