// One provider per api mode; the turn engine only sees the Provider port. Each SDK is loaded on the first
// call that needs it, not at start-up: together they take a few hundred milliseconds to load, which a
// /health probe or a process that only serves OpenAI-style providers should not pay.
import type { GenerateRequest, Provider, ProviderSettings } from "./types.ts";

async function loadProvider(settings: ProviderSettings): Promise<Provider> {
  switch (settings.apiMode) {
    case "chat_completions":
      return (await import("./openai.ts")).createOpenAIProvider(settings);
    case "anthropic_messages":
      return (await import("./anthropic.ts")).createAnthropicProvider(settings);
    default: {
      // Settings are parsed at the boundary, so this only fires on a stored snapshot from a newer build.
      const unknownMode: never = settings.apiMode;
      throw new Error(`apiMode must be "chat_completions" or "anthropic_messages", got ${JSON.stringify(unknownMode)}`);
    }
  }
}

export function createProvider(settings: ProviderSettings): Provider {
  let loaded: Promise<Provider> | undefined;
  return {
    settings,
    async generate(request: GenerateRequest) {
      loaded ??= loadProvider(settings);
      return (await loaded).generate(request);
    },
  };
}

export { classifyProviderError } from "./classify-provider-error.ts";
export type { ProviderErrorClass, ProviderErrorReason } from "./classify-provider-error.ts";
