/// <reference types="node" />
// Provider chaos: three fake providers (two OpenAI-style, one Anthropic-style) in one fallback chain answer
// each request with a fault drawn from a seeded PRNG (429, 500, 503, 529, connection reset, a stream cut after
// partial text, a short hang, rarely a hang past the timeout) or an answer (text, tool calls). Over 100 turns on four sessions at once, JSON and
// SSE: every response is 200 or 502 (SSE: exactly one terminal event), every turn ends completed or failed with
// its attempts recorded, no partial text is journaled as an answer, and every journal stays consistent.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { TestApp } from "../support/app.ts";
import { startFakeAnthropic, startFakeOpenAI, type FakeProvider, type RecordedRequest, type ScriptStep } from "../support/fake-provider.ts";
import { buildAppOver, journalProblems, lastMessage } from "../support/reliability.ts";

/** mulberry32: a small seeded PRNG, so a failing run can be replayed with its seed. */
function prng(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const seed = Number(process.env.CHAOS_SEED ?? 20_260_501);
/** Turns per session: 25 in CI; `npm run test:chaos` runs more. */
const turnsPerSession = Number(process.env.CHAOS_TURNS ?? 25);
const random = prng(seed);
const reasons = new Set(["rate_limit", "billing", "auth", "overloaded", "server_error", "timeout", "transport", "context_overflow", "payload_too_large", "model_not_found", "format_error", "unknown"]);
const partialMarker = "PARTIAL-CUT-TEXT";

let callCounter = 0;
/** Provider answers drawn, by kind: the figures `npm run test:chaos` prints. */
const drawn = new Map<string, number>();
const count = (step: ScriptStep): ScriptStep => {
  const kind = step.type === "error" ? `http ${step.status}` : step.type === "hang" ? (step.ms >= 1000 ? "hang past timeout" : "short hang") : step.type;
  drawn.set(kind, (drawn.get(kind) ?? 0) + 1);
  return step;
};

/** One random step: faults and answers, weighted so that turns both complete and fail. */
function chaos(request: RecordedRequest): ScriptStep {
  return count(drawChaos(request));
}

function drawChaos(request: RecordedRequest): ScriptStep {
  const roll = random();
  const afterTool = lastMessage(request).role === "tool" || JSON.stringify(lastMessage(request).content ?? "").includes("tool_result");
  const answer: ScriptStep =
    !afterTool && random() < 0.35
      ? { type: "tool_calls", calls: [{ id: `call_chaos_${++callCounter}`, name: "todo", arguments: JSON.stringify(random() < 0.5 ? { action: "list" } : { action: "add", item: `item ${callCounter}` }) }] }
      : { type: "text", text: `answer ${++callCounter}` };
  if (roll < 0.08) return { type: "error", status: 429 };
  if (roll < 0.16) return { type: "error", status: 500 };
  if (roll < 0.24) return { type: "error", status: 503 };
  if (roll < 0.3) return { type: "error", status: 529 };
  if (roll < 0.37) return { type: "reset" };
  if (roll < 0.45) return { type: "stream_cut", text: `${partialMarker} ${callCounter}` };
  if (roll < 0.52) return { type: "hang", ms: 5 + Math.floor(random() * 40), then: answer };
  // Rarely, longer than the runtime's timeout_ms (1 s): a timeout.
  if (roll < 0.53) return { type: "hang", ms: 1500, then: answer };
  return answer;
}

describe(`provider chaos (seed ${seed}; replay with CHAOS_SEED=${seed})`, () => {
  let providers: FakeProvider[];
  let h: TestApp;

  beforeAll(async () => {
    providers = [await startFakeOpenAI({ apiKey: "sk-chaos" }), await startFakeOpenAI({ apiKey: "sk-chaos" }), await startFakeAnthropic({ apiKey: "ak-chaos" })];
    for (const provider of providers) provider.setFallback(chaos);
    h = await buildAppOver({ env: { OPENAI_API_KEY: "sk-chaos", ANTHROPIC_API_KEY: "ak-chaos", HERMES_LEASE_MS: "60000" } });
  });
  afterAll(async () => {
    await h?.close();
    await Promise.all(providers.map((provider) => provider.close()));
  });

  it("ends every turn completed or failed with its attempts, answers 200 or 502, and keeps every journal consistent", async () => {
    const runtime = {
      provider: "openai",
      model: "chaos-primary",
      base_url: providers[0]!.url,
      toolsets: ["todo"],
      max_iterations: 4,
      timeout_ms: 1000,
      retry: { max_retries: 2, time_scale: 0.001 },
      fallback: [
        { provider: "openai", model: "chaos-second", base_url: providers[1]!.url },
        { provider: "anthropic", model: "chaos-third", base_url: providers[2]!.url },
      ],
    };
    const sessions = ["chaos-0", "chaos-1", "chaos-2", "chaos-3"];
    for (const id of sessions.slice(0, 3)) expect((await h.call("POST", "/v1/sessions", { id, runtime })).status).toBe(201);
    // One session without a chain or retries: about half its turns fail, so both outcomes are exercised
    // whatever the draws (the chance that all 25 turns go one way is below 1e-6).
    const { fallback: _chain, ...alone } = runtime;
    expect((await h.call("POST", "/v1/sessions", { id: "chaos-3", runtime: { ...alone, retry: { max_retries: 0, time_scale: 0.001 } } })).status).toBe(201);

    const problems: string[] = [];
    const outcomes: { session: string; status: number; turnId: string | null; attempts: unknown }[] = [];
    await Promise.all(
      sessions.map(async (session, sessionIndex) => {
        for (let turn = 0; turn < turnsPerSession; turn++) {
          const stream = (turn + sessionIndex) % 2 === 1;
          const response = await h.call("POST", `/v1/sessions/${session}/messages`, { content: `turn ${turn} of ${session}`, ...(stream ? { stream: true } : {}) });
          const text = await response.text();
          const where = `${session} turn ${turn}${stream ? " (SSE)" : ""}`;
          if (!stream) {
            if (response.status !== 200 && response.status !== 502) problems.push(`${where}: status ${response.status} ${text.slice(0, 200)}`);
            const body = JSON.parse(text);
            if (response.status === 502 && body.error?.code !== "provider_error") problems.push(`${where}: 502 without provider_error`);
            outcomes.push({ session, status: response.status, turnId: body.turn?.id ?? null, attempts: body.turn?.attempts ?? body.error?.details?.attempts });
            continue;
          }
          if (response.status !== 200) {
            problems.push(`${where}: SSE status ${response.status} ${text.slice(0, 200)}`);
            continue;
          }
          const events = [...text.matchAll(/^event: (.+)$/gm)].map((match) => match[1]);
          const terminal = events.filter((event) => event === "turn-end" || event === "error");
          if (terminal.length !== 1 || events.at(-1) !== terminal[0]) problems.push(`${where}: events ${events.join(",")}`);
          if (events[0] !== "turn-start") problems.push(`${where}: first event ${events[0]}`);
          const last = text.trim().split("\n").at(-1) ?? "";
          const data = JSON.parse(last.replace(/^data: /, ""));
          if (terminal[0] === "error" && data.error?.code !== "provider_error") problems.push(`${where}: error event ${last.slice(0, 200)}`);
          outcomes.push({ session, status: terminal[0] === "turn-end" ? 200 : 502, turnId: data.turn?.id ?? null, attempts: data.turn?.attempts ?? data.error?.details?.attempts });
        }
      }),
    );
    expect(problems).toEqual([]);
    // Both outcomes happen: the chain rescues most turns and some fail outright.
    const statuses = outcomes.map((outcome) => outcome.status);
    expect(statuses).toContain(200);
    expect(statuses).toContain(502);

    for (const session of sessions) {
      const { turns } = await (await h.call("GET", `/v1/sessions/${session}/turns?limit=500`)).json();
      expect(turns).toHaveLength(turnsPerSession);
      for (const turn of turns as { id: string; status: string; attempts: { provider: string; model: string; outcome: string; reason?: string; status?: number }[]; ended_at: string | null }[]) {
        const context = `${session} ${turn.id} ${JSON.stringify(turn.attempts)}`;
        expect(["completed", "failed"], context).toContain(turn.status);
        expect(turn.ended_at, context).not.toBeNull();
        expect(turn.attempts.length, context).toBeGreaterThan(0);
        for (const attempt of turn.attempts) {
          expect(["openai", "anthropic"], context).toContain(attempt.provider);
          expect(["chaos-primary", "chaos-second", "chaos-third"], context).toContain(attempt.model);
          expect(["ok", "error"], context).toContain(attempt.outcome);
          if (attempt.outcome === "error") expect(reasons.has(attempt.reason ?? ""), context).toBe(true);
        }
        expect(turn.attempts.at(-1)!.outcome, context).toBe(turn.status === "completed" ? "ok" : "error");
      }
      const { messages } = await (await h.call("GET", `/v1/sessions/${session}/messages?limit=1000&archived=true`)).json();
      for (const message of messages as { role: string; content: string | null }[]) {
        // A stream cut after partial text is never journaled as an answer.
        if (message.role === "assistant") expect(message.content ?? "").not.toContain(partialMarker);
      }
      // Every user message is there, once each, in order.
      expect((messages as { role: string; content: string }[]).filter((message) => message.role === "user").map((message) => message.content)).toEqual(Array.from({ length: turnsPerSession }, (_, turn) => `turn ${turn} of ${session}`));
    }
    // What the API answered is what the turn records say.
    for (const outcome of outcomes.filter((entry) => entry.turnId !== null)) {
      const { turns } = await (await h.call("GET", `/v1/sessions/${outcome.session}/turns?limit=500`)).json();
      expect(turns.find((turn: { id: string }) => turn.id === outcome.turnId).attempts).toEqual(outcome.attempts);
    }
    expect(await journalProblems(h.database.client)).toEqual([]);
    for (const provider of providers) expect(provider.rejected).toEqual([]);
    console.log(`provider chaos: ${[...drawn].map(([kind, times]) => `${kind} ${times}`).join(", ")}`);
  }, 80_000 * Math.max(1, turnsPerSession / 25));
});
