// One provider per api mode; the turn engine only sees the Provider port.
import { createAnthropicProvider } from "./anthropic.ts";
import { createOpenAIProvider } from "./openai.ts";
import type { Provider, ProviderSettings } from "./types.ts";

export function createProvider(settings: ProviderSettings): Provider {
  switch (settings.apiMode) {
    case "chat_completions":
      return createOpenAIProvider(settings);
    case "anthropic_messages":
      return createAnthropicProvider(settings);
    default: {
      // Settings are parsed at the boundary, so this only fires on a stored snapshot from a newer build.
      const unknownMode: never = settings.apiMode;
      throw new Error(`apiMode must be "chat_completions" or "anthropic_messages", got ${JSON.stringify(unknownMode)}`);
    }
  }
}

export { classifyProviderError } from "./classify-provider-error.ts";
export type { ProviderErrorClass, ProviderErrorReason } from "./classify-provider-error.ts";
export { createAnthropicProvider } from "./anthropic.ts";
export { createOpenAIProvider } from "./openai.ts";
