// Request schemas: the same objects validate requests and generate /openapi.json.
import * as v from "valibot";
import { RuntimeInputSchema } from "../agent/runtime.ts";

const sessionId = v.pipe(v.string(), v.regex(/^[A-Za-z0-9:._-]{1,128}$/, "must match ^[A-Za-z0-9:._-]{1,128}$"));
const systemPrompt = v.pipe(v.string(), v.maxLength(100_000));
// valibot's record() accepts an array and turns it into an object with numeric keys; metadata is a JSON object.
const metadata = v.pipe(
  v.custom<Record<string, unknown>>((value) => typeof value === "object" && value !== null && !Array.isArray(value), "must be a JSON object"),
  v.check((value) => JSON.stringify(value).length <= 16_384, "must serialize to at most 16384 bytes"),
);

export const CreateSessionSchema = v.strictObject({
  id: v.optional(sessionId),
  runtime: v.optional(RuntimeInputSchema),
  system_prompt: v.optional(systemPrompt),
  metadata: v.optional(metadata),
});

export const PatchSessionSchema = v.strictObject({
  runtime: v.optional(v.partial(RuntimeInputSchema)),
  system_prompt: v.optional(systemPrompt),
  metadata: v.optional(metadata),
});

export const PostMessageSchema = v.strictObject({
  content: v.pipe(v.string(), v.minLength(1, "must not be empty"), v.maxLength(200_000)),
  reasoning: v.optional(v.strictObject({ effort: v.picklist(["low", "medium", "high"]) })),
  stream: v.optional(v.boolean()),
});
