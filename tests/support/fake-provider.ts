// Entry point for tests: local HTTP servers speaking the OpenAI Chat Completions and Anthropic
// Messages wire formats, answering from a script so failover, streaming and crash paths are testable
// without the network.
export type {
  FakeProvider,
  FakeProviderOptions,
  RecordedRequest,
  ScriptEntry,
  ScriptStep,
} from "./fake-server.ts";
export { startFakeOpenAI } from "./fake-openai.ts";
export { startFakeAnthropic } from "./fake-anthropic.ts";
