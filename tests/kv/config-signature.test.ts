import { describe, expect, it } from "vitest";
import { canonicalJson, configSignature, type ConfigSignatureInput } from "../../src/kv/config-signature.ts";

const base: ConfigSignatureInput = {
  provider: "openai",
  model: "gpt-4o-mini",
  baseUrl: "https://api.openai.com/v1",
  apiMode: "chat_completions",
  apiKey: "sk-proj-AAAAAAAAAAAAAAAAAAAAAAAA-first",
  toolsets: ["web", "memory"],
  ephemeralPrompt: "Answer in French.",
  contextLength: 128_000,
  maxTokens: 4_096,
  compression: { enabled: true, threshold: 0.5, model: "gpt-4o-mini", contextLength: 128_000 },
};

describe("configSignature", () => {
  it("is a SHA-256 hex digest, the same for the same config", async () => {
    const signature = await configSignature(base);
    expect(signature).toMatch(/^[0-9a-f]{64}$/);
    expect(await configSignature({ ...base })).toBe(signature);
    // Field order in the caller's object does not matter.
    const reordered = Object.fromEntries(Object.entries(base).reverse()) as unknown as ConfigSignatureInput;
    expect(await configSignature(reordered)).toBe(signature);
  });

  it.each<[string, Partial<ConfigSignatureInput>]>([
    ["model", { model: "gpt-4o" }],
    ["provider", { provider: "openrouter" }],
    ["base URL", { baseUrl: "https://proxy.example.com/v1" }],
    ["API mode", { apiMode: "anthropic_messages" }],
    ["toolset added", { toolsets: ["web", "memory", "todo"] }],
    ["toolset removed", { toolsets: ["web"] }],
    ["no toolsets given (defaults) vs none", { toolsets: [] }],
    ["API key", { apiKey: "sk-other" }],
    ["no API key", { apiKey: undefined }],
    ["ephemeral prompt", { ephemeralPrompt: "Answer in German." }],
    ["context length", { contextLength: 200_000 }],
    ["max tokens", { maxTokens: 8_192 }],
    ["compression threshold", { compression: { ...base.compression, threshold: 0.7 } }],
    ["compression model", { compression: { ...base.compression, model: "gpt-4o" } }],
    ["compression off", { compression: { ...base.compression, enabled: false } }],
  ])("changes when the %s changes", async (_, change) => {
    expect(await configSignature({ ...base, ...change })).not.toBe(await configSignature(base));
  });

  it("tells apart two API keys that share their first 20 characters", async () => {
    const first = "sk-ant-api03-ABCDEFGHIJ-key-one";
    const second = "sk-ant-api03-ABCDEFGHIJ-key-two";
    expect(first.slice(0, 20)).toBe(second.slice(0, 20));
    expect(await configSignature({ ...base, apiKey: first })).not.toBe(await configSignature({ ...base, apiKey: second }));
  });

  it("never contains the API key or a plain prefix of it", async () => {
    const signature = await configSignature(base);
    expect(signature).not.toContain(base.apiKey!.slice(0, 8));
  });

  it("ignores reasoning settings carried on the caller's object", async () => {
    const withReasoning = { ...base, reasoning: { effort: "high", budget_tokens: 8_000 } };
    const otherReasoning = { ...base, reasoning: { effort: "low" } };
    const signature = await configSignature(base);
    expect(await configSignature(withReasoning)).toBe(signature);
    expect(await configSignature(otherReasoning)).toBe(signature);
  });

  it("treats toolsets as a set: order and repeats do not matter", async () => {
    const signature = await configSignature(base);
    expect(await configSignature({ ...base, toolsets: ["memory", "web"] })).toBe(signature);
    expect(await configSignature({ ...base, toolsets: ["memory", "web", "web"] })).toBe(signature);
  });

  it("treats an absent optional field like an undefined one, and a trailing slash as the same endpoint", async () => {
    const { ephemeralPrompt: _, ...withoutPrompt } = base;
    expect(await configSignature(withoutPrompt)).toBe(await configSignature({ ...base, ephemeralPrompt: undefined }));
    expect(await configSignature({ ...base, baseUrl: "https://api.openai.com/v1/" })).toBe(await configSignature(base));
  });
});

describe("canonicalJson", () => {
  it("sorts keys at every level and keeps array order", () => {
    expect(canonicalJson({ b: 1, a: { d: [3, 1], c: "x" } })).toBe('{"a":{"c":"x","d":[3,1]},"b":1}');
    expect(canonicalJson({ "é": "ü", z: null })).toBe('{"z":null,"é":"ü"}');
  });
});
